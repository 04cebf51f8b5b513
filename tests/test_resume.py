"""Exact resume as a property: checkpoint files killed mid-write, TensorBoard steps across a kill,
replay counters and shard pruning, self-play streams and game ids, best.pt only from gated
weights, what the run prints, and the config checks of the run folder and batch size."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from smoke_config import smoke_raw

from takzero.config import ConfigError, ReplayConfig, load_config
from takzero.game import Position
from takzero.pipeline.checkpoints import (
    atomic_torch_save,
    load_checked,
    remove_stale_temp_files,
)
from takzero.pipeline.replay import Records, ReplayBuffer, pack_states

ROOT = Path(__file__).resolve().parent.parent


_raw = smoke_raw


# -- a checkpoint and its checksum are one unit ---------------------------------------------------

def _save_and_die_at(path: Path, kill_at: int) -> int:
    """In a forked child: ``atomic_torch_save`` a new version of ``path`` and SIGKILL the child
    just before its ``kill_at``-th ``os.replace``; returns the child's exit status."""
    import signal

    from takzero.pipeline import checkpoints as ck

    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            calls = [0]
            real = os.replace

            def replace(a, b):
                calls[0] += 1
                if calls[0] == kill_at:
                    os.kill(os.getpid(), signal.SIGKILL)
                real(a, b)

            ck.os.replace = replace
            ck.atomic_torch_save({"version": 2, "pad": bytes(100_000)}, path)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return status


def test_checkpoint_killed_at_every_rename_loads_old_or_new(tmp_path: Path) -> None:
    """kill -9 inside ``atomic_torch_save`` before each of its renames (sidecar with both digests,
    the file, the sidecar with the new digest) and after all of them: the file always verifies,
    as the old version or the new, never a mismatch; the temp files left are removed at start."""
    import signal

    seen = set()
    for kill_at in (1, 2, 3, 99):
        path = tmp_path / f"best{kill_at}.pt"
        atomic_torch_save({"version": 1}, path)
        status = _save_and_die_at(path, kill_at)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        assert killed == (kill_at != 99), status
        version = load_checked(path, require_checksum=True)["version"]
        seen.add((kill_at, version))
        remove_stale_temp_files(tmp_path)
        assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]
    # Killed before the file's rename: the old file; after it: the new one.
    assert seen == {(1, 1), (2, 1), (3, 2), (99, 2)}


# -- TensorBoard steps across a kill ---------------------------------------------------------------


def test_tensorboard_steps_continue_across_a_kill(tmp_path: Path) -> None:
    """Session 1 writes steps 0..27 (several values per step, a checkpoint flush at 10 and 20)
    and is killed; session 2 resumes from step 20 (purge_step 21, floor 20) and stalls at step
    20 before going on. Every tag then has strictly increasing steps, the checkpoint step's point
    from session 1, no point of session 1 after it, and nothing lost at the checkpoint step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    from takzero.pipeline.scalars import ScalarLog

    tb = tmp_path / "tb"
    w1 = SummaryWriter(str(tb))
    log1 = ScalarLog(w1)
    for step in range(28):
        for rep in range(3):  # training stalls: several reports per step
            log1.add("a", 1000 + step + rep / 10, step)
        if step in (10, 20):
            log1.flush()  # the checkpoint
    w1.flush()  # what the periodic flush wrote before the kill (no close)
    time.sleep(1.1)
    w2 = SummaryWriter(str(tb), purge_step=21)
    log2 = ScalarLog(w2, floor=20)
    log2.add("a", 2020.0, 20)  # the resumed run drains statistics before its first step
    for step in range(21, 31):
        log2.add("a", 2000 + step, step)
    log2.add("b", 5.0, 30)
    log2.flush()
    w2.close()
    acc = EventAccumulator(str(tb))
    acc.Reload()
    events = acc.Scalars("a")
    steps = [e.step for e in events]
    assert steps == sorted(set(steps)), steps  # strictly increasing: one point per step
    assert steps == list(range(0, 31)), steps  # no gap, nothing of session 1 after step 20
    values = {e.step: e.value for e in events}
    assert values[20] == pytest.approx(1020.2)  # the checkpoint step's point survived the resume
    assert values[21] == pytest.approx(2021.0)
    assert values[10] == pytest.approx(1010.2)


def test_points_written_past_the_final_checkpoint_step_survive_a_continuation(tmp_path: Path) -> None:
    """A finished run's final checkpoint drains statistics at its last step (40) after that step
    already has a point, so they land at 41, before the checkpoint is saved. Continuing the run
    (purge and floor from the checkpoint's recorded ``last_step``) keeps them: a user's report
    found the 16 final self-play scalars lost when the purge started at step + 1."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from torch.utils.tensorboard import SummaryWriter

    from takzero.pipeline.scalars import ScalarLog

    tb = tmp_path / "tb"
    w1 = SummaryWriter(str(tb))
    log1 = ScalarLog(w1)
    for step in range(41):
        log1.add("selfplay/games_total", float(step), step)
    log1.flush()  # the checkpoint of step 40
    log1.add("selfplay/games_total", 99.0, 40)  # the final drain at step 40: moves to 41
    log1.flush()  # the final checkpoint, still at trainer step 40
    tb_step = log1.last_step()
    assert tb_step == 41
    w1.close()
    time.sleep(1.1)
    w2 = SummaryWriter(str(tb), purge_step=tb_step + 1)
    log2 = ScalarLog(w2, floor=tb_step)
    log2.add("selfplay/games_total", 100.0, 40)  # the continued run's first drain
    log2.add("selfplay/games_total", 101.0, 45)
    log2.flush()
    w2.close()
    acc = EventAccumulator(str(tb))
    acc.Reload()
    events = acc.Scalars("selfplay/games_total")
    steps = [e.step for e in events]
    assert steps == [*range(0, 43), 45], steps
    values = {e.step: e.value for e in events}
    assert values[41] == pytest.approx(99.0) and values[42] == pytest.approx(100.0)


# -- replay counters and shards -------------------------------------------------------------------


def _records(n: int, start: int) -> Records:
    states = np.repeat(Position.start(3).state[None], n, axis=0)
    idx = np.full((n, 4), -1, np.int32)
    idx[:, 0] = 0
    prob = np.zeros((n, 4), np.float16)
    prob[:, 0] = 1
    return Records(board=pack_states(states, 3), policy_index=idx, policy_prob=prob,
                   value=np.ones(n, np.int8), flat_diff=np.zeros(n, np.int8),
                   game_id=np.full(n, start, np.int64), generation=np.zeros(n, np.int32),
                   ply=np.zeros(n, np.int16))


def test_replay_counters_never_go_back_and_shards_are_pruned(tmp_path: Path) -> None:
    """Ten games of 10 positions with a 30-position window: at most window + one shard of
    positions stay on disk; a reload after a kill (with no checkpoint, or from a checkpoint taken
    after five games) counts every game and position played, keeps the checkpoint's sampling
    state, and holds exactly the window."""
    rcfg = ReplayConfig(top_k=4, window_max=30, shard_positions=10, min_positions=1)
    buf = ReplayBuffer(rcfg, 3, shard_dir=tmp_path)
    state = None
    for g in range(10):
        assert buf.add(_records(10, g), games=1)
        if g == 4:
            buf.sample(7)
            state = buf.state_dict()
    assert buf.stats()["replay/games"] == 10
    shards = sorted(tmp_path.glob("shard_*.npz"))
    assert sum(len(np.load(p)["value"]) for p in shards) <= 30 + 10
    for st in (None, state):
        fresh = ReplayBuffer(rcfg, 3, shard_dir=tmp_path)
        assert fresh.load(st) == 30
        assert fresh.total_added == 100 and fresh.games_added == 10
        assert sorted(set(fresh.data.game_id.tolist())) == [7, 8, 9]
    assert fresh.total_sampled == 7


# -- self-play streams -----------------------------------------------------------------------------


def test_selfplay_streams_give_new_games_and_ids() -> None:
    """Two starts of worker 0 (a resume, or a Ray restart) get different streams from the
    coordinator and play different games with disjoint ids; the run's stream count starts at
    ``launch << 16``, so a resumed run never reuses a stream of an earlier start."""
    from takzero.pipeline.actors import Coordinator
    from takzero.pipeline.resume import STREAMS_PER_LAUNCH
    from takzero.pipeline.selfplay import SelfPlayWorker

    cfg = load_config(_raw(Path("/nonexistent"), **{"board.size": 3, "selfplay.games_per_worker": 2,
                                                    "mcts.simulations": 2}))
    coord = Coordinator(first_stream=3 * STREAMS_PER_LAUNCH)
    streams = [coord.new_stream(0), coord.new_stream(0)]
    assert streams == [3 * STREAMS_PER_LAUNCH, 3 * STREAMS_PER_LAUNCH + 1]
    games: list[dict[int, bytes]] = []
    for stream in streams:
        worker = SelfPlayWorker.from_run(cfg, 0, device="cpu", stream=stream)
        got: dict[int, bytes] = {}
        while len(got) < 2:
            recs, _, _ = worker.play_step()
            if recs is None:
                continue
            for gid in np.unique(recs.game_id):
                rows = recs.game_id == gid
                got[int(gid)] = recs.board[rows].tobytes() + recs.policy_prob[rows].tobytes()
        assert all(gid >> 32 == stream for gid in got)
        games.append(got)
    assert not set(games[0]) & set(games[1])
    assert not set(games[0].values()) & set(games[1].values())


def test_launch_count_survives_kills(tmp_path: Path) -> None:
    assert [next_launch_of(tmp_path) for _ in range(3)] == [0, 1, 2]
    assert not list(tmp_path.glob("*.tmp"))


def next_launch_of(folder: Path) -> int:
    from takzero.pipeline.resume import next_launch

    return next_launch(folder)


# -- best.pt only ever gated ------------------------------------------------------------------------


def test_damaged_best_is_rebuilt_from_gated_weights_never_the_trainers(tmp_path: Path) -> None:
    """best.pt damaged (a kill, a disk error): the resumed run rebuilds it from the promoted
    weights its checkpoint carries, or from a kept checkpoint of the promoted generation, and
    refuses to start when neither exists, instead of promoting the trainer's ungated weights."""
    from takzero.pipeline.run import Run, RunDirError
    from takzero.pipeline.trainer import Trainer

    cfg = load_config(_raw(tmp_path))
    run = Run(cfg, command="x")
    trainer = Trainer(cfg.train, cfg.model_config(), device="cpu", seed=1)
    trainer.generation = 5
    gated = {k: torch.full_like(v, 0.5) if v.is_floating_point() else v
             for k, v in trainer.model.state_dict().items()}
    best = run.run_dir / "best.pt"
    # New run: generation 0, the initial weights, is the first incumbent.
    gen, _ = run._load_best(trainer, 0, None)
    assert gen == 5 and load_checked(best)["generation"] == 5
    best.write_bytes(b"damaged")
    state = {"promoted": (3, gated), "run": {"promoted_generation": 3}}
    gen, weights = run._load_best(trainer, 3, state)
    assert gen == 3 and all(torch.equal(weights[k], v) for k, v in gated.items())
    saved = load_checked(best, require_checksum=True)
    assert saved["generation"] == 3
    for k, v in saved["model_state"].items():
        assert torch.equal(v, gated[k])
    # An old checkpoint without the promoted weights: a kept checkpoint of generation 3 serves.
    best.unlink()
    atomic_torch_save({"generation": 3, "model_state": gated}, run.run_dir / "ckpt_000000030.pt")
    gen, _ = run._load_best(trainer, 3, {"run": {}})
    assert gen == 3
    best.unlink()
    with pytest.raises(RunDirError, match="not promoting ungated weights"):
        run._load_best(trainer, 4, {"run": {}})
    assert not best.exists()


# -- what the run tells its user ---------------------------------------------------------------------


def test_rates_after_resume_count_this_session_only(tmp_path: Path) -> None:
    from takzero.pipeline.progress import RunReporter, Snapshot, StopRule, summary_lines

    start = Snapshot(step=1000, generation=4, games=500, positions=100_000, minutes=60.0)
    rep = RunReporter(tmp_path, StopRule(2000, max_minutes=90), start, bar=False,
                      console=open(os.devnull, "w"))
    time.sleep(0.5)
    now = Snapshot(step=1010, generation=4, games=502, positions=100_050, minutes=60.01)
    rates = rep.rates(now)
    assert rates["positions_per_s"] <= 50 / 0.5 + 1e-6
    # (restored positions / new elapsed time would be over 200,000/s)
    frac, left, unit = rep.fraction_and_eta(now)
    assert unit in ("steps", "minutes") and left > 0 and 0 < frac < 1
    text = rep.progress_text(now)
    rep.update(now)
    assert "ETA" in text and "playing" in text and "in flight" in text
    rep.close()
    assert "ETA" in (tmp_path / "train.log").read_text()
    lines = "\n".join(summary_lines(reason="reached train.total_steps=2000", run_dir=tmp_path,
                                    snap=now, best_generation=3, best_scores={"uct": 0.75},
                                    resume_cmd="python -m takzero.train run_name=r", finished=True))
    for want in ("reached train.total_steps", "generation 3", "uct 0.75", str(tmp_path / "best.pt"),
                 "run_name=r", "tensorboard --logdir"):
        assert want in lines


def test_rates_count_from_when_each_counter_first_moved(tmp_path: Path) -> None:
    """The trainer waits for replay.min_positions: its step rate counts from the last report
    before the first step, not from the start of the session; the ETA also leaves out the
    interval of the first steps (the trainer's start-up) and reads "?" until it can."""
    from takzero.pipeline.progress import RunReporter, Snapshot, StopRule

    start = Snapshot(step=0, generation=0, games=0, positions=0, minutes=0.0)
    rep = RunReporter(tmp_path, StopRule(1000), start, bar=False, console=open(os.devnull, "w"))
    now = time.monotonic()
    rep.t0 = now - 100.0
    for k in range(9):  # self-play moves from the start, the trainer waits 90 s
        rep.history.append((now - 90.0 + 10 * k, Snapshot(step=0, generation=0, games=k,
                                                            positions=100 * k, minutes=0.0)))
    snap = Snapshot(step=100, generation=1, games=9, positions=900, minutes=1.6)
    r = rep.rates(snap)
    assert r["steps_per_s"] == pytest.approx(100 / 10.0, rel=0.05)  # not 100 / 100 s
    # positions first moved after the report at -90 s (still 0 there)
    assert r["positions_per_s"] == pytest.approx(900 / 90.0, rel=0.05)
    assert rep.rates(Snapshot(step=0, generation=0, games=9, positions=900, minutes=1.6))["steps_per_s"] == 0
    # the first steps' interval holds the trainer's start-up: no ETA from it alone
    assert rep.rates(snap, settled=True)["steps_per_s"] == 0
    frac, left, unit = rep.fraction_and_eta(snap)
    assert unit == "steps" and frac == pytest.approx(0.1) and left == float("inf")
    assert "ETA ?" in rep.progress_text(snap)
    rep.close()
    # a report later the ETA counts from the report after the first steps: 10 steps while
    # the trainer started (-20 s to -10 s), then 100 in 10 s
    rep = RunReporter(tmp_path, StopRule(1000), start, bar=False, console=open(os.devnull, "w"))
    rep.t0 = now - 100.0
    for k in range(9):
        rep.history.append((now - 90.0 + 10 * k, Snapshot(step=0 if k < 8 else 10, generation=0,
                                                            games=k, positions=100 * k, minutes=0.0)))
    snap = Snapshot(step=110, generation=1, games=9, positions=900, minutes=1.6)
    assert rep.rates(snap)["steps_per_s"] == pytest.approx(110 / 20.0, rel=0.05)
    assert rep.rates(snap, settled=True)["steps_per_s"] == pytest.approx(100 / 10.0, rel=0.05)
    frac, left, unit = rep.fraction_and_eta(snap)
    assert unit == "steps" and frac == pytest.approx(0.11) and left == pytest.approx(89.0, rel=0.05)
    rep.close()


def test_summary_says_which_generations_were_not_promoted(tmp_path: Path) -> None:
    from takzero.pipeline.progress import Snapshot, summary_lines

    def text(best: int, last: int) -> str:
        snap = Snapshot(step=80, generation=last, games=10, positions=500, minutes=1.0)
        return "\n".join(summary_lines(reason="reached train.total_steps=80", run_dir=tmp_path,
                                       snap=snap, best_generation=best, best_scores={},
                                       resume_cmd="r", finished=True))

    assert "generation 2 was not promoted" in text(1, 2)
    assert "generations 2-4 were not promoted" in text(1, 4)
    assert "not promoted" not in text(3, 3)


# -- config checks ---------------------------------------------------------------------------------


def test_batch_size_larger_than_the_window_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"train.batch_size.*replay.window_max=1000"):
        load_config(_raw(tmp_path, **{"train.batch_size": 4096, "replay.window_max": 1000}))
    with pytest.raises(ConfigError, match=r"train.batch_size.*replay.fixed_window=100"):
        load_config(_raw(tmp_path, **{"train.batch_size": 128, "replay.fixed_window": 100}))


@pytest.mark.slow  # command-line processes or whole games: ~3-20 s, run by .ci/run's slow pass
def test_run_folder_keys_are_checked_before_anything_is_made(tmp_path: Path) -> None:
    """A ``checkpoint_root`` that is a file and a ``run_name`` with a slash are refused naming the
    key, from the command line before Hydra creates a folder; an unknown key gets the closest
    real key."""
    from takzero.train import precheck

    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(ConfigError, match="checkpoint_root: must be a folder"):
        load_config(_raw(a_file))
    assert precheck([f"checkpoint_root={a_file}/sub"])[0].startswith("checkpoint_root:")
    assert precheck(["run_name=a/b"])[0].startswith("run_name:")
    assert "did you mean mcts.simulations" in precheck(["mcts.simulatons=10"])[0]
    assert "did you mean mcts.simulations" in precheck(["simulations=10"])[0]
    with pytest.raises(ConfigError, match=r"mcts.simulatons: .*\(did you mean mcts.simulations"):
        load_config(_raw(tmp_path, **{"mcts.simulatons": 10}))
    assert precheck(["+config=smoke", "mcts.simulations=8", "evaluator.baselines=[random]"]) == []
    proc = subprocess.run([sys.executable, "-m", "takzero.train", "+config=smoke", "run_name=a/b",
                           f"checkpoint_root={tmp_path}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "run_name" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # no a/ left behind
    assert precheck(["run_name="])[0].startswith("run_name: must be a plain folder name")
    assert "at most 255 bytes" in precheck(["run_name=" + "a" * 300])[0]
    assert precheck(["run_name=" + "a" * 255]) == []
    # A name that resolves to two folders only after Hydra has made them: both are removed.
    root = tmp_path / "root"
    proc = subprocess.run([sys.executable, "-m", "takzero.train", "+config=smoke", "run_name=${now:%H/%M}",
                           f"checkpoint_root={root}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "run_name" in proc.stderr
    assert not root.exists() or not any(root.iterdir()), sorted(map(str, root.rglob("*")))


@pytest.mark.slow  # command-line processes or whole games: ~3-20 s, run by .ci/run's slow pass
def test_help_shows_the_preset_form() -> None:
    proc = subprocess.run([sys.executable, "-m", "takzero.train", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    assert "+config=NAME" in proc.stdout and "6x6" in proc.stdout and "smoke" in proc.stdout


# -- the run's counters and scalars ----------------------------------------------------------------


def test_run_counters_round_trip_through_a_checkpoint(tmp_path: Path) -> None:
    """Every counter the run carries is written to a checkpoint and read back unchanged; an old
    or missing ``run`` entry reads as a new run's zeros."""
    from takzero.pipeline.resume import RunCounters

    c = RunCounters(games=7, positions=311, counters={"count/games": 7.0, "count/draw": 1.0},
                    gating_decisions=3, minutes=12.5, last_gating="gen 3 promote (0.62)",
                    best_scores={"uct": 0.75}, promoted_generation=3, launch=2)
    atomic_torch_save({"step": 30, "run": c.to_checkpoint()}, tmp_path / "ckpt_000000030.pt")
    back = RunCounters.from_checkpoint(load_checked(tmp_path / "ckpt_000000030.pt"))
    assert back == c
    assert RunCounters.from_checkpoint(None) == RunCounters()
    assert RunCounters.from_checkpoint({"step": 5}) == RunCounters()


def test_selfplay_scalars_from_summed_counters() -> None:
    """Shares of each result kind sum to 1 over the games counted; White's win rate counts road
    and flat wins; the false-resignation rate appears only once resignations were checked."""
    from takzero.pipeline.scalars import RESULT_KINDS, selfplay_scalars, summarise_worker_stats

    reports = [{"count/games": 3, "count/road_white": 2, "count/draw": 1, "speed": 10.0},
               {"count/games": 5, "count/flat_black": 4, "count/road_black": 1, "speed": 20.0}]
    summed = summarise_worker_stats(reports)
    assert summed["count/games"] == 8 and summed["speed"] == 15.0
    out = selfplay_scalars(summed, games=8, positions=400)
    assert sum(out[f"selfplay/share_{k}"] for k in RESULT_KINDS) == pytest.approx(1.0)
    assert out["selfplay/white_win_rate"] == pytest.approx(2 / 8)
    assert "selfplay/false_resign_rate" not in out
    summed.update({"count/resign_checks": 4.0, "count/false_resign": 1.0})
    assert selfplay_scalars(summed, 8, 400)["selfplay/false_resign_rate"] == 0.25
    assert selfplay_scalars({}, 0, 0)["selfplay/white_win_rate"] == 0.0  # no games yet: no 0/0


def test_stop_rule_describes_one_or_several_conditions() -> None:
    from takzero.pipeline.progress import StopRule

    assert StopRule(40).describe() == "stops at 40 steps"
    assert StopRule(40, 5.0).describe() == "stops at 40 steps or 5 min, whichever comes first"
    assert StopRule(40, 0.0, 7).describe() == "stops at 40 steps or 7 games, whichever comes first"


def test_an_unknown_run_config_is_one_line_naming_the_configs_and_a_network_preset() -> None:
    """``+config=b4c32`` (a network preset taken for a run config) got Hydra's many-line
    MissingConfigException; now one line naming the run configs and, for a network preset's
    name, the key that takes it."""
    from takzero.train import precheck

    (line,) = precheck(["+config=b4c32"])
    assert line.startswith("config=b4c32: no such run config (configs/config/: 3x3, ") and "6x6" in line
    assert line.endswith("; b4c32 is a network preset: model.preset=b4c32") and "\n" not in line
    (line,) = precheck(["+config=6x7"])
    assert line.startswith("config=6x7: no such run config") and "network preset" not in line
    assert precheck(["+config=6x6"]) == [] and precheck(["+config=5x5_cpu_gumbel"]) == []
