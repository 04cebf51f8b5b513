"""The training loop end to end (smoke config on CPU), kill -9 and resume, bad configs, value
targets, evaluation games kept out of the replay buffer, and backpressure with a paused trainer."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from smoke_config import smoke_raw

from takzero.config import ConfigError, ReplayConfig, load_config
from takzero.game import Position
from takzero.pipeline.checkpoints import list_checkpoints, load_checked
from takzero.pipeline.replay import ReplayBuffer, unpack_states
from tests.processes import kill_session, wait_for

ROOT = Path(__file__).resolve().parent.parent


_cfg = functools.partial(smoke_raw, run_name="test")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("board.size", 9),
        ("board.caps", 3),
        ("board.komi", 0.3),
        ("mcts.simulations", -1),
        ("mcts.no_such_knob", 1),
        ("selfplay.workers", 0),
        ("train.optimizer", "rmsprop"),
        ("evaluator.gating", "maybe"),
        ("ray.worker_niceness", -1),
        ("ray.worker_niceness", 20),
        ("nonsense", 1),
        ("train.lr", "fast"),
    ],
)
def test_bad_config_values_name_their_key(key: str, value: object) -> None:
    with pytest.raises(ConfigError, match=key.split(".")[-1] if key != "nonsense" else "nonsense"):
        load_config(_cfg(**{key: value}))


def test_local_ray_workers_get_the_configured_niceness(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ray.worker_niceness`` (default 0: the trainer's) reaches the local Ray instance, which
    would otherwise start self-play and the evaluator at its own default of 15."""
    import ray

    from takzero.pipeline.placement import init_ray

    calls: list[dict] = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw))
    init_ray(load_config(_cfg()))
    init_ray(load_config(_cfg(**{"ray.worker_niceness": 7})))
    assert [c["_system_config"]["worker_niceness"] for c in calls] == [0, 7]
    assert (ROOT / "configs/train.yaml").read_text().count("worker_niceness: 0 ") == 1


def test_good_configs_load() -> None:
    names = sorted(p.stem for p in (ROOT / "configs/config").glob("*.yaml"))
    assert {"3x3", "4x4", "5x5", "5x5_cpu", "6x6", "7x7", "8x8", "smoke"} <= set(names)
    from takzero.config import compose_preset

    # Composed as the command line does (a preset may build on another through its defaults list,
    # as 5x5_cpu_gumbel does on 5x5_cpu).
    for name in names:
        cfg = compose_preset(name, run_name=name)
        assert cfg.board.size == (4 if name == "smoke" else int(name[0])), name
        if name == "5x5_cpu_gumbel":
            assert cfg.mcts.gumbel and cfg.mcts.simulations == 24 and cfg.replay.window_c == 20000
    cfg = compose_preset("5x5_cpu_gumbel", ["mcts.simulations=32"])
    assert cfg.mcts.simulations == 32 and cfg.board.size == 5
    with pytest.raises(ConfigError, match="mcts"):
        compose_preset("5x5_cpu_gumbel", ["mcts.simulations=-1"])


@pytest.mark.slow  # the command line as a process
def test_cli_rejects_bad_value_at_startup(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "takzero.train", "+config=smoke", "board.size=9",
         f"checkpoint_root={tmp_path}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2
    assert "board.size" in proc.stderr
    assert not list(tmp_path.iterdir()), "a rejected config left a run folder"


def test_selfplay_value_targets_have_the_right_sign() -> None:
    from takzero.pipeline.selfplay import SelfPlayWorker

    cfg = load_config(_cfg(**{"board.size": 3, "selfplay.games_per_worker": 8, "mcts.simulations": 8,
                              "selfplay.resign_threshold": -1.0}))
    worker = SelfPlayWorker.from_run(cfg, 0, device="cpu")
    seen = 0
    results = {"win": 0, "draw": 0}
    for _ in range(200):
        recs, stats, _ = worker.play_step()
        if recs is None:
            continue
        states = unpack_states(recs.board, 3)
        for gid in np.unique(recs.game_id):
            rows = np.flatnonzero(recs.game_id == gid)
            values = recs.value[rows]
            movers = states[rows, 1] & 1
            if (values == 0).all():
                results["draw"] += 1
                continue
            # Every record of a game knows the ply the game ended at, after its last recorded ply.
            ends = set(recs.end_ply[rows].tolist())
            assert len(ends) == 1 and min(ends) > recs.ply[rows].max()
            # Exactly one colour gets +1 everywhere, the other -1 everywhere.
            white = set(values[movers == 0].tolist())
            black = set(values[movers == 1].tolist())
            assert len(white) <= 1 and len(black) <= 1
            assert white != black
            assert white | black == {-1, 1} or len(white | black) == 1
            results["win"] += 1
            seen += 1
        if seen >= 6:
            break
    assert seen >= 6


def _tb_scalars(tb: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def _games_on_disk(run: Path) -> dict[int, bytes]:
    """Game id -> its records' bytes (positions, policy targets) over every replay shard."""
    games: dict[int, bytes] = {}
    for path in sorted((run / "replay").glob("shard_*.npz")):
        with np.load(path) as z:
            ids, boards, probs = z["game_id"], z["board"], z["policy_prob"]
        for gid in np.unique(ids):
            rows = ids == gid
            assert int(gid) not in games, f"game id {gid} stored twice"
            games[int(gid)] = boards[rows].tobytes() + probs[rows].tobytes()
    return games


@pytest.mark.slow
def test_ctrl_c_in_start_up_and_mid_run_stops_cleanly(tmp_path: Path) -> None:
    """A real SIGINT to the run's process group (what a terminal's Ctrl-C sends), once while Ray
    starts and once mid-run: no traceback, exit 0, the start-up one says nothing was trained and
    how to start again, the mid-run one writes a final checkpoint and the summary."""
    import signal

    run = tmp_path / "c"
    args = [sys.executable, "-m", "takzero.train", "+config=smoke", "run_name=c",
            f"checkpoint_root={tmp_path}", "train.total_steps=100000", "train.checkpoint_every=10",
            "evaluator.baseline_every=0", "log_every_s=1"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def interrupted_when(ready) -> subprocess.CompletedProcess:
        proc = subprocess.Popen(args, cwd=ROOT, env=env, start_new_session=True, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert wait_for(lambda: ready() or proc.poll() is not None, 600), "the run never got there"
            assert proc.poll() is None, "the run exited before the Ctrl-C"
            os.killpg(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=300)
        finally:
            kill_session(proc.pid)
        return subprocess.CompletedProcess(args, proc.returncode, out, err)

    log = run / "train.log"
    early = interrupted_when(lambda: log.exists() and "to resume after a crash" in log.read_text())
    assert early.returncode == 0, early.stderr[-3000:]
    assert "Traceback" not in early.stderr + early.stdout, early.stderr[-3000:]
    assert "run stopped during start-up (Ctrl-C): nothing trained this session" in early.stdout
    assert "to start it again: " in early.stdout and "run_name=c" in early.stdout
    assert not list_checkpoints(run)

    mid = interrupted_when(lambda: len(list_checkpoints(run)) >= 1)
    assert mid.returncode == 0, mid.stderr[-3000:]
    assert "Traceback" not in mid.stderr + mid.stdout, mid.stderr[-3000:]
    assert "run stopped: interrupted (Ctrl-C)" in mid.stdout
    assert "to continue: " in mid.stdout
    # Its first session with training: the run's training time and this session's are one figure.
    times = re.search(r"training time ([\d.]+) min \(this session ([\d.]+) min\)", mid.stdout)
    assert times is not None and times.group(1) == times.group(2), mid.stdout[-2000:]
    final = load_checked(list_checkpoints(run)[-1], require_checksum=True)
    assert final["step"] >= 10 and final["run"]["launch"] == 1


@pytest.mark.slow
def test_smoke_run_kill_and_resume(tmp_path: Path) -> None:
    """kill -9 the smoke run at random moments -- before its first checkpoint, then mid-run after
    a checkpoint -- and resume each time, then once more to completion and again after it: the
    TensorBoard steps of every tag strictly increase with the checkpoint steps' points kept, no
    stored game equals another (each start plays new random streams), counters never go back,
    best.pt is always a gated generation, and a finished run started again says so with its
    summary. Also: steps, generations, replay and the optimizer state continue, and the run
    leaves checkpoints, PTN games and a gating decision."""
    import random

    rng = random.Random()
    run = tmp_path / "smoke"
    args = [sys.executable, "-m", "takzero.train", "+config=smoke", "run_name=smoke",
            f"checkpoint_root={tmp_path}", "train.total_steps=80", "train.checkpoint_every=10",
            "evaluator.baseline_every=0", "evaluator.games=2", "log_every_s=1",
            "replay.shard_positions=50"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    history: list[dict] = []  # the run counters of the newest checkpoint after each session

    def kill_when(ready, extra_s: float, extra_args: tuple[str, ...] = ()) -> None:
        err = tmp_path / f"session{len(history)}.err"
        with open(err, "w") as f:
            proc = subprocess.Popen([*args, *extra_args], cwd=ROOT, env=env, start_new_session=True,
                                    stdout=subprocess.DEVNULL, stderr=f)
        try:
            assert wait_for(lambda: ready() or proc.poll() is not None, 600), "the run never got there"
            assert proc.poll() is None, f"the run exited ({proc.returncode}): {err.read_text()[-2000:]}"
            time.sleep(extra_s)
        finally:
            kill_session(proc.pid)
            proc.wait(timeout=60)

    def record() -> None:
        if list_checkpoints(run):
            d = load_checked(list_checkpoints(run)[-1], require_checksum=True)
            history.append({**d["run"], "step": d["step"], "total_added": d["replay"]["total_added"]})
        best = run / "best.pt"
        if best.exists():
            gen = load_checked(best, require_checksum=True)["generation"]
            log = (run / "train.log").read_text()
            assert gen == 0 or f"gating: gen {gen} promote" in log, f"best.pt holds ungated gen {gen}"

    # 1: killed before the first checkpoint, once self-play has written a replay shard (50
    # positions). This session never trains (replay.min_positions out of reach), so however fast
    # the machine is, the kill comes before the first checkpoint (which needs 10 steps); the
    # next sessions start training from the shards it left.
    delay = rng.uniform(0, 1)
    kill_when(lambda: any((run / "replay").glob("shard_*.npz")), delay, ("replay.min_positions=1000000",))
    assert not list_checkpoints(run), f"checkpoint before the kill (delay {delay:.1f} s)"
    record()
    # 2: resumed, killed mid-run a random time after its first checkpoint (80 steps leave a
    # fast machine far from the end: 70 more steps need ~2,200 more self-play positions).
    delay = rng.uniform(0, 1)
    kill_when(lambda: len(list_checkpoints(run)) >= 1, delay)
    record()
    first = load_checked(list_checkpoints(run)[-1])
    assert first["step"] < 80, f"the run reached its end before the mid-run kill (delay {delay:.1f} s)"
    step0, gen0, added0 = first["step"], first["generation"], first["replay"]["total_added"]
    assert step0 >= 10 and gen0 >= 1 and added0 > 0
    assert first["optimizer"]["state"], "optimizer state was not saved"
    # 3: resumed to the end.
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
                          start_new_session=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resumed from ckpt_{step0:09d}.pt" in done.stdout or "resumed from" in done.stdout
    assert "to resume after a crash or Ctrl-C:" in done.stdout and "run_name=smoke" in done.stdout
    assert "run finished: reached train.total_steps=80" in done.stdout
    record()
    # 4: started again: says it is finished, with the summary, and changes nothing.
    again = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already finished" in again.stdout and str(run / "best.pt") in again.stdout
    for a, b in zip(history, history[1:], strict=False):
        for key in ("games", "positions", "step", "total_added", "gating_decisions"):
            assert b[key] >= a[key], (key, history)

    last = load_checked(list_checkpoints(run)[-1])
    assert last["step"] == 80
    assert last["generation"] >= gen0 + 1
    assert last["replay"]["total_added"] >= added0
    k = next(iter(last["optimizer"]["state"]))
    assert not torch.equal(
        last["optimizer"]["state"][k]["momentum_buffer"], first["optimizer"]["state"][k]["momentum_buffer"]
    )
    # TensorBoard: one point per step, strictly increasing, the checkpoint steps kept.
    scalars = _tb_scalars(run / "tb")
    for tag, points in scalars.items():
        steps = [s for s, _ in points]
        assert steps == sorted(set(steps)), (tag, steps)
    assert [s for s, _ in scalars["loss/total"]] == list(range(10, 81, 10))
    games_total = [v for _, v in scalars["selfplay/games_total"]]
    assert games_total == sorted(games_total)  # the counter never goes back
    # No stored game equals another: ids unique, contents unique (three starts, three streams).
    games = _games_on_disk(run)
    assert len(set(games.values())) == len(games)
    assert len({gid >> 32 for gid in games}) >= 2
    assert (run / "best.pt").exists() and (run / "config.yaml").exists()
    from takzero.game.core import STATE_LEN
    from takzero.nn.quantize import CALIBRATION_KEY

    best_file = load_checked(run / "best.pt", require_checksum=True)
    if best_file["generation"] > 0:  # a promotion made with the replay buffer up
        calibration = best_file[CALIBRATION_KEY]  # the int8 copy's positions travel with it
        assert calibration.shape[1] == STATE_LEN and 64 <= len(calibration) <= 512
    ptn = list((run / "games").glob("*.ptn"))
    assert any(p.name.startswith("gating_") for p in ptn), [p.name for p in ptn]
    assert (run / "games" / "selfplay.ptn").stat().st_size > 0
    assert "ETA" in (run / "train.log").read_text()
    # Evaluation games never enter the buffer: the buffer holds exactly what self-play added.
    buf = ReplayBuffer(ReplayConfig(), 4, shard_dir=run / "replay")
    buf.load(last["replay"])
    assert buf.total_added == last["replay"]["total_added"]
    from takzero.game.ptn import read_ptn_file

    for path in ptn:
        for game in read_ptn_file(path):
            game.replay()
    assert Position.start(4).size == 4


@pytest.mark.slow
def test_workers_block_when_the_trainer_is_paused() -> None:
    """With no trainer consuming samples, a self-play actor stops at the buffer's max_ahead limit
    (plus at most the one batch it holds) instead of filling memory, and stays alive; killed, it is
    restarted by Ray."""
    import ray

    from takzero.pipeline.actors import Coordinator, ReplayActor, SelfPlayActor
    from takzero.pipeline.placement import selfplay_options

    cfg = load_config(_cfg(**{"replay.min_positions": 50, "replay.max_ahead": 100,
                              "selfplay.games_per_worker": 8, "mcts.simulations": 4}))
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        coordinator = ray.remote(Coordinator).remote()
        from takzero.nn.model import TakNet

        weights = ray.put(TakNet(cfg.model_config()).state_dict())  # a worker plays once published
        for kind in ("promoted", "latest"):
            ray.get(coordinator.publish.remote(kind, 0, [weights]))
        replay = ray.remote(ReplayActor).remote(
            ReplayConfig(top_k=64, min_positions=50, max_ahead=100, samples_per_position=1.0), 4
        )
        actor = ray.remote(SelfPlayActor).options(**selfplay_options({}, 0.0)).remote(cfg, 0)
        task = actor.run.remote(coordinator, replay)
        assert wait_for(lambda: ray.get(replay.stats.remote())["replay/total_added"] > 100, 240)
        time.sleep(15)  # keep playing with nobody sampling
        added = ray.get(replay.stats.remote())["replay/total_added"]
        # max_ahead positions, plus one add call of at most 8 games (<= 8 * 60 plies)
        assert added <= 100 + 8 * 60
        time.sleep(5)
        assert ray.get(replay.stats.remote())["replay/total_added"] == added
        ready, _ = ray.wait([task], timeout=0)
        assert not ready, "the worker died instead of waiting"
        # A worker that dies is restarted by Ray and its run task retried: kill it, then ask it to
        # stop; the retried task on the restarted actor answers.
        ray.kill(actor, no_restart=False)
        time.sleep(5)
        ray.get(coordinator.stop.remote())
        assert ray.get(task, timeout=240)["games"] >= 0
    finally:
        ray.shutdown()


def test_selfplay_proven_value_targets() -> None:
    """With ``selfplay.proven_value_targets`` (and the tinue prover at the recorded roots), every
    recorded position where the mover forces a road within 3 plies -- by the plain exhaustive
    search over all moves, independent of the prover -- has value target +1, whatever the outcome
    of the game: every move is sampled with temperature 1, so many of those games are lost or
    drawn (with the switch off this test fails)."""
    from takzero.game.exhaustive import forced_win
    from takzero.game.position import Position
    from takzero.pipeline.selfplay import SelfPlayWorker

    cfg = load_config(_cfg(**{"board.size": 3, "selfplay.games_per_worker": 8, "mcts.simulations": 8,
                              "selfplay.resign_threshold": -1.0, "selfplay.proven_value_targets": True,
                              "selfplay.tinue_nodes": 5000, "mcts.temperature_plies": 100}))
    worker = SelfPlayWorker.from_run(cfg, 0, device="cpu")
    checked = 0
    for _ in range(300):
        recs, _, _ = worker.play_step()
        if recs is None:
            continue
        for r, state in enumerate(unpack_states(recs.board, 3)):
            if forced_win(Position(state.copy()), 3, roads_only=True):
                assert recs.value[r] == 1
                checked += 1
        if checked >= 20:
            break
    assert checked >= 20


def _tinue_policy_records(switch: bool, wanted: int = 12) -> tuple[int, int]:
    """Self-play on 3x3 at 2 simulations with the prover at the recorded roots and
    ``selfplay.tinue_policy_targets`` = ``switch``; of the recorded positions where the mover
    forces a road in 3 plies but not in 1 (the plain exhaustive search, independent of the prover;
    the search's root check proves the wins in 1 itself), returns (how many were seen, how many
    have a one-hot policy target on a move that forces a road: within 7 plies, since the
    prover's first move may be a slower forced road than the fastest)."""
    from takzero.game.exhaustive import winning_moves
    from takzero.nn.actions import move_to_action
    from takzero.pipeline.selfplay import SelfPlayWorker

    cfg = load_config(_cfg(**{"board.size": 3, "selfplay.games_per_worker": 8, "mcts.simulations": 2,
                              "mcts.gumbel": False, "selfplay.resign_threshold": -1.0,
                              "selfplay.tinue_nodes": 5000, "selfplay.tinue_policy_targets": switch,
                              "mcts.temperature_plies": 100}))
    worker = SelfPlayWorker.from_run(cfg, 0, device="cpu")
    seen = one_hot_wins = 0
    for _ in range(400):
        recs, _, _ = worker.play_step()
        if recs is None:
            continue
        for r, state in enumerate(unpack_states(recs.board, 3)):
            pos = Position(state.copy())
            if winning_moves(pos, 1, roads_only=True) or not winning_moves(pos, 3, roads_only=True):
                continue
            seen += 1
            winning = {move_to_action(m, 3) for m in winning_moves(pos, 7, roads_only=True)}
            used = recs.policy_index[r] >= 0
            actions, probs = recs.policy_index[r][used], recs.policy_prob[r][used]
            one_hot_wins += actions.size == 1 and float(probs[0]) == 1.0 and int(actions[0]) in winning
        if seen >= wanted:
            break
    return seen, one_hot_wins


def test_selfplay_tinue_policy_targets() -> None:
    """With ``selfplay.tinue_policy_targets`` every recorded position where the mover forces a
    road in 3 plies (by the exhaustive search; not in 1, which the search proves itself) has the
    prover's winning move as its whole policy target; with the switch off, the search's own
    2-simulation target is one-hot on a winning move in almost none of them."""
    seen, hits = _tinue_policy_records(True)
    assert seen >= 12 and hits == seen
    seen_off, hits_off = _tinue_policy_records(False)
    assert seen_off >= 12 and hits_off < seen_off / 2


def test_tinue_policy_targets_need_the_prover() -> None:
    """The switch without prover nodes is refused at start-up, naming the key."""
    with pytest.raises(ConfigError, match="selfplay.tinue_policy_targets.*tinue_nodes"):
        load_config(_cfg(**{"selfplay.tinue_policy_targets": True, "selfplay.tinue_nodes": 0}))


def test_run_refuses_to_start_over_on_unused_checkpoints(tmp_path: Path) -> None:
    from takzero.pipeline.checkpoints import atomic_torch_save
    from takzero.pipeline.run import Run, RunDirError
    from takzero.pipeline.trainer import Trainer

    raw = smoke_raw(tmp_path)
    cfg = load_config(raw)
    run = Run(cfg)
    run._check_run_dir()  # empty folder: a new run
    assert run.resume_from is None
    state = {**Trainer(cfg.train, cfg.model_config(), device="cpu").state_dict(), "step": 7}
    atomic_torch_save(state, tmp_path / "r" / "ckpt_000000007.pt")
    run._check_run_dir()
    assert run.resume_from[1]["step"] == 7
    (tmp_path / "r" / "ckpt_000000007.pt.sha256").unlink()  # copied without its sidecar
    with pytest.raises(RunDirError, match="none of the 1 checkpoints .* could be verified"):
        run._check_run_dir()
    raw.resume = False
    with pytest.raises(RunDirError, match="already has checkpoints .*resume=false"):
        Run(load_config(raw))._check_run_dir()
    assert (tmp_path / "r" / "ckpt_000000007.pt").exists()  # nothing deleted


def test_resume_with_another_network_is_refused_naming_the_keys(tmp_path: Path) -> None:
    """A run folder whose checkpoint was built with other model settings (here: the input feature
    version of an old run) is refused before Ray starts, naming each key and both values."""
    from takzero.pipeline.checkpoints import atomic_torch_save
    from takzero.pipeline.run import Run, RunDirError

    raw = smoke_raw(tmp_path)
    cfg = load_config(raw)
    old = {**cfg.model_config().to_dict(), "feature_version": 1, "channels": 8}
    atomic_torch_save({"step": 7, "model_config": old}, tmp_path / "r" / "ckpt_000000007.pt")
    both = r"model.channels: checkpoint 8.*model.feature_version: checkpoint 1, config 2"
    with pytest.raises(RunDirError, match=both):
        Run(cfg)._check_run_dir()
    raw.model.feature_version = 1
    raw.model.channels = 8
    same = load_config(raw)
    from takzero.pipeline.trainer import Trainer

    state = {**Trainer(same.train, same.model_config(), device="cpu").state_dict(), "step": 7}
    atomic_torch_save(state, tmp_path / "r" / "ckpt_000000007.pt")
    run = Run(same)
    run._check_run_dir()  # the same network: resumes
    assert run.resume_from is not None


def test_run_name_pinned_to_hydras_folder(tmp_path: Path) -> None:
    """A time-stamped run_name is resolved by Hydra and by the run separately: the run takes the
    folder Hydra already made (its hydra/ files and the run's files stay together)."""
    from takzero.train import pin_run_name

    dcfg = OmegaConf.create({"checkpoint_root": str(tmp_path), "run_name": "smoke-20261129-224007"})
    pin_run_name(dcfg, tmp_path / "smoke-20261129-224006" / "hydra")
    assert dcfg.run_name == "smoke-20261129-224006"
    pin_run_name(dcfg, tmp_path / "elsewhere" / "out")  # hydra.run.dir overridden: left alone
    pin_run_name(dcfg, Path("/other/root/x/hydra"))
    pin_run_name(dcfg, None)
    assert dcfg.run_name == "smoke-20261129-224006"
