"""A check (a generation's evaluation) is never lost: cut by kill -9 or Ctrl-C it keeps its
finished games (``evaluation_games.json``) and completes after the resume, playing only the rest;
every checkpoint owes the checks still running or owed; the progress line says which check runs
or waits; the start-up lines say when generations come. The whole-run tests are slow."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from smoke_config import smoke_config

from takzero.io.version import program_version
from takzero.pipeline.checkpoints import atomic_torch_save, list_checkpoints, load_checked
from takzero.pipeline.progress import RunReporter, Snapshot, StopRule
from takzero.pipeline.scalars import ScalarLog
from takzero.pipeline.schedule import Check, EvaluationSchedule
from tests.processes import kill_session

ROOT = Path(__file__).resolve().parents[1]


class _Writer:
    def add_scalar(self, *a) -> None:
        pass

    def add_text(self, *a) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def _run(tmp_path: Path, console: io.StringIO, **overrides):
    from takzero.pipeline.run import Run

    run = Run(smoke_config(tmp_path, **overrides), command="python -m takzero.train run_name=r")
    run.reporter = RunReporter(run.run_dir, StopRule(1000), Snapshot(0, 0, 0, 0, 0.0), console=console, bar=False)
    run.scalars = ScalarLog(_Writer())
    return run


# -- the evaluator plays only what a cut check had not finished ------------------------------------


def test_a_check_with_kept_games_plays_only_the_rest(one_torch_thread) -> None:
    from takzero.nn.model import TakNet
    from takzero.pipeline.gating import GatingEvaluator, kept_count, match_key

    cfg = smoke_config(None, **{"board.size": 3, "mcts.simulations": 2, "evaluator.gating": "threshold",
                                "evaluator.games": 4, "evaluator.baseline_games": 4,
                                "evaluator.baselines": ["random"], "selfplay.ply_limit": 20})
    torch.manual_seed(0)
    weights = TakNet(cfg.model_config()).state_dict()
    ev = GatingEvaluator(cfg)
    heard: list[tuple[str, int, float, str]] = []
    whole = ev.evaluate((1, weights), (0, weights), True, seed=5, on_game=lambda *g: heard.append(g))
    assert sorted((k, i) for k, i, _, _ in heard) == sorted(
        [(match_key("gating", "gen 0"), i) for i in range(4)]
        + [(match_key("baseline", "random"), i) for i in range(4)])
    # cut after three games of each match: kept, and only the fourth is played again
    kept = {}
    for key, index, score, ptn in heard:
        if index < 3:
            kept.setdefault(key, {"games": 4, "done": {}})["done"][str(index)] = [score, ptn]
    assert kept_count(kept) == 6
    again: list[tuple[str, int, float, str]] = []
    out = ev.evaluate((1, weights), (0, weights), True, seed=5, kept=kept, on_game=lambda *g: again.append(g))
    assert sorted((k, i) for k, i, _, _ in again) == [(match_key("baseline", "random"), 3),
                                                      (match_key("gating", "gen 0"), 3)]
    assert [m["games"] for m in out["matches"]] == [4, 4]
    for rec in out["matches"]:
        key = match_key("gating" if rec["kind"] == "gating" else "baseline", rec["opponent"])
        scores = [float(kept[key]["done"][str(i)][0]) for i in range(3)] + [s for k, i, s, _ in again if k == key]
        assert rec["wins"] == scores.count(1.0) and rec["losses"] == scores.count(0.0)
    name = "baseline_gen00001_vs_random.ptn"
    for i in range(3):  # the kept games' PTN is in the match's games file, in game order
        assert kept[match_key("baseline", "random")]["done"][str(i)][1] in out["ptn"][name]
    assert whole["matches"][0]["games"] == 4
    # kept games of a match of another size are not used: it is played whole
    other = {match_key("baseline", "random"): {"games": 6, "done": {"0": [1.0, "x"]}}}
    again.clear()
    ev.evaluate((1, weights), (0, weights), True, seed=5, kept=other, on_game=lambda *g: again.append(g))
    assert len([g for g in again if g[0] == match_key("baseline", "random")]) == 4


# -- every checkpoint owes the pending checks; the rerun keeps the games ------------------------------


def test_every_checkpoint_owes_the_checks_running_or_owed_and_the_resume_keeps_their_games(tmp_path: Path) -> None:
    """The checkpoint of generation 1 already owes its check (a kill -9 during it loses
    nothing); the games heard so far are in evaluation_games.json; after the resume the check
    is owed again with the same seed and its games, and said so."""
    from takzero.pipeline.run import EVALUATION_GAMES

    console = io.StringIO()
    run = _run(tmp_path, console, **{"evaluator.gating": "off", "evaluator.baseline_every": 1,
                                      "evaluator.baselines": ["uct"], "evaluator.baseline_games": 4})
    from takzero.pipeline.trainer import Trainer

    cfg = run.cfg
    trainer = Trainer(cfg.train, cfg.model_config(), device="cpu")
    trainer.step = 20
    run.loop_started = True
    run.promoted = (0, {k: v.clone() for k, v in trainer.model.state_dict().items()})
    games = [(1, "baseline uct", 2, 1.0, "[Site \"g2\"]\n1. a1 d4"), (1, "baseline uct", 0, 0.5, "[Site \"g0\"]")]

    class Remote:
        def __init__(self, fn):
            self.remote = fn

    run.coordinator = SimpleNamespace(take_eval_games=Remote(lambda: list(games)),
                                      publish=Remote(lambda *a: None))
    run.replay = SimpleNamespace(drain_with_state=Remote(lambda: ([], [], {"total_added": 0})))
    import ray

    real_get, real_put = ray.get, ray.put
    ray.get = lambda x, timeout=None: x
    ray.put = lambda x: x  # the weights' publication: a real ray.put would start a local Ray and leave it up
    try:
        run._new_generation(trainer)  # gen 1 owes a baseline check; the evaluator is not there yet
        state = load_checked(run.run_dir / "ckpt_000000020.pt", require_checksum=True)
        (owed,) = state["run"]["owed_checks"]
        assert owed[:4] == [1, 20, ["baselines"], 0] and isinstance(owed[4], int)
        assert run._evaluation_text() == "eval gen 1: waiting for the evaluator"
        run.schedule.next()  # it starts
        run.schedule.running.seed = owed[4]
        assert run._evaluation_text() == "eval gen 1: 0/4 games"
        run._take_eval_games()
        assert run._evaluation_text() == "eval gen 1: 2/4 games"
        saved = json.loads((run.run_dir / EVALUATION_GAMES).read_text())
        assert saved["1"]["seed"] == owed[4] and set(saved["1"]["matches"]["baseline uct"]["done"]) == {"0", "2"}
    finally:
        ray.get, ray.put = real_get, real_put
    run.reporter.close()

    # the resume (a kill -9: the checkpoint's owed list and the file are all there is)
    console2 = io.StringIO()
    again = _run(tmp_path, console2, **{"evaluator.gating": "off", "evaluator.baseline_every": 1,
                                         "evaluator.baselines": ["uct"], "evaluator.baseline_games": 4})
    from takzero.pipeline.resume import RunCounters

    again.c = RunCounters.from_checkpoint(state)
    again.schedule.skipped = again.c.skipped_checks
    again.promoted = run.promoted
    again._restore_owed()
    (check,) = again.schedule.resumed  # it had finished games: it ran when cut, and runs first
    assert check.seed == owed[4] and set(check.kept["baseline uct"]["done"]) == {"0", "2"}
    assert ("evaluation: gen 1 baselines (cut by the last stop) runs again, keeping the 2 game(s) it had finished"
            in console2.getvalue())
    assert again._evaluation_text() == "eval gen 1: waiting for the evaluator"
    again.reporter.close()


def test_the_progress_line_says_which_check_runs_or_waits(tmp_path: Path) -> None:
    rep = RunReporter(tmp_path, StopRule(1000), Snapshot(0, 0, 0, 0, 0.0), bar=False, console=io.StringIO())
    snap = Snapshot(50, 2, 10, 500, 1.0, evaluation="eval gen 1: 6/8 games (1 more owed)")
    assert "| eval gen 1: 6/8 games (1 more owed) |" in rep.progress_text(snap)
    short = rep.progress_text(snap, 60)
    assert "ETA" in short and len(short) <= 60
    assert "eval gen 1" not in rep.progress_text(Snapshot(50, 2, 10, 500, 1.0))
    rep.close()
    schedule = EvaluationSchedule(gating=True, baseline_every=1)
    schedule.owe(1, 10)
    schedule.next()
    schedule.owe(2, 20)
    assert [c.generation for c in schedule.pending()] == [1, 2]
    assert schedule.running is not None and list(schedule.owed) == [2]  # pending() takes nothing


def test_the_start_up_lines_say_when_generations_come(tmp_path: Path) -> None:
    console = io.StringIO()
    run = _run(tmp_path, console, **{"train.checkpoint_every": 200, "evaluator.baseline_every": 4,
                                      "evaluator.early_baseline_generation": 1, "evaluator.early_baseline_games": 4,
                                      "evaluator.baselines": ["uct"]})
    run.trainer = SimpleNamespace(step=0, generation=0)
    run._start_lines(run.reporter, False)
    text = console.getvalue()
    assert f"(new, start 1, code {program_version()})" in text.splitlines()[0]  # which code ran
    assert ("generations: one at each checkpoint (every 200 steps, train.checkpoint_every), the next (gen 1) "
            "at step 200; Elo against the baselines (uct) at gen 1 (4 games each) and every 4 generation(s)") in text
    assert "gating (4 games against the promoted generation) every generation" in text
    run.trainer = SimpleNamespace(step=450, generation=2)
    assert "the next (gen 3) at step 600" in run._generation_plan(450)
    run.reporter.close()


def test_a_gating_already_decided_before_the_stop_is_not_played_again(tmp_path: Path) -> None:
    """best.pt (newer than the checkpoint) holds generation 3: the owed gating of generation 3
    is not replayed against itself; its baseline check still runs."""
    console = io.StringIO()
    run = _run(tmp_path, console)
    weights = {"w": torch.ones(2)}
    atomic_torch_save({"generation": 3, "model_state": weights}, run.run_dir / "ckpt_000000060.pt")
    run.c.owed_checks = [[3, 60, ["gating", "baselines"], 0, 11]]
    run.promoted = (3, weights)
    run._restore_owed()
    (check,) = run.schedule.resumed
    assert check.generation == 3 and check.kinds == ("baselines",) and check.seed == 11
    assert any("gen 3 gating: already decided" in s for s in run.c.skipped_checks)
    run.reporter.close()


# -- whole runs: kill -9 and Ctrl-C during a check --------------------------------------------------


def _kept(run: Path) -> dict[str, list]:
    try:
        data = json.loads((run / "evaluation_games.json").read_text())
    except (OSError, ValueError):
        return {}
    return data.get("1", {}).get("matches", {}).get("baseline uct", {}).get("done", {})


def _cut_check_then_resume(tmp_path: Path, how: str) -> None:
    run = tmp_path / "k"
    args = [sys.executable, "-m", "takzero.train", "+config=smoke", "run_name=k", f"checkpoint_root={tmp_path}",
            "train.checkpoint_every=10", "evaluator.gating=off", "evaluator.baseline_every=1000",
            "evaluator.early_baseline_generation=1", "evaluator.early_baseline_games=8",
            "evaluator.baselines=[uct]", "evaluator.uct_simulations=1500", "log_every_s=1",
            "selfplay.workers=1"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    err = tmp_path / "first.err"
    with open(err, "w") as f:
        proc = subprocess.Popen([*args, "train.total_steps=100000"], cwd=ROOT, env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=f)
    try:
        end = time.monotonic() + 600
        while time.monotonic() < end and proc.poll() is None and not _kept(run):
            time.sleep(0.2)
        assert proc.poll() is None, err.read_text()[-3000:]
        kept = _kept(run)
        assert 0 < len(kept) < 8, f"no check cut half way ({len(kept)} games kept)"
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=300)
            assert proc.returncode == 0, err.read_text()[-3000:]
        else:
            kill_session(proc.pid)
            proc.wait(timeout=60)
    finally:
        kill_session(proc.pid)
    kept = _kept(run)
    log1 = (run / "train.log").read_text()
    assert "evaluation: gen 1 vs uct" not in log1  # the check had not landed
    if how == "ctrl-c":
        assert "evaluations cut by the stop, run again when the run goes on: gen 1 baselines" in log1
    step = load_checked(list_checkpoints(run)[-1])["step"]
    # enough steps for the cut check's other games to land before the run ends, even on a loaded
    # machine (with 5 the run reached its steps first at load 10-26: "evaluations not run: 1")
    done = subprocess.run([*args, f"train.total_steps={step + 300}"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900, start_new_session=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert f"evaluation: gen 1 baselines (cut by the last stop) runs again, keeping the {len(kept)} game(s)" in out, out
    assert "evaluation: gen 1 vs uct: " in out and ", 8 games, " in out, out[-3000:]
    assert "evaluations not run" not in out, out[-3000:]
    ptn = (run / "games" / "baseline_gen00001_vs_uct.ptn").read_text()
    assert all(text in ptn for _, text in kept.values())  # the kept games are the check's own


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_check_cut_by_kill_9_completes_after_the_resume_with_its_games(tmp_path: Path) -> None:
    _cut_check_then_resume(tmp_path, "kill -9")


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_check_cut_by_ctrl_c_completes_after_the_resume_with_its_games(tmp_path: Path) -> None:
    _cut_check_then_resume(tmp_path, "ctrl-c")


def test_the_weights_of_a_cut_check_are_not_pruned_and_it_runs_first_after_the_resume(tmp_path: Path) -> None:
    """Generation 1's check was running while generations 2-5 were made (keep_checkpoints=2):
    its checkpoint is kept; after the resume it runs first, with its kept games; generation 3,
    owed and older than the newest owed (whose weights were pruned), is carried into gen 5."""
    from takzero.pipeline.checkpoints import prune_checkpoints

    for step in (10, 20, 30, 40, 50):
        atomic_torch_save({"generation": step // 10, "model_state": {"w": torch.ones(1)}},
                          tmp_path / f"ckpt_{step:09d}.pt")
    prune_checkpoints(tmp_path, 2, protect={"ckpt_000000010.pt"})
    assert [p.name for p in list_checkpoints(tmp_path)] == ["ckpt_000000010.pt", "ckpt_000000040.pt",
                                                            "ckpt_000000050.pt"]
    console = io.StringIO()
    run = _run(tmp_path, console, **{"evaluator.gating": "off", "evaluator.baseline_every": 1})
    for step in (10, 50):
        atomic_torch_save({"generation": step // 10, "model_state": {"w": torch.ones(1)}},
                          run.run_dir / f"ckpt_{step:09d}.pt")
    run.c.owed_checks = [[1, 10, ["baselines"], 0, 7, True], [3, 30, ["baselines"], 0, 8, False],
                         [5, 50, ["baselines"], 0, 9, False]]
    (run.run_dir / "evaluation_games.json").write_text(json.dumps(
        {"1": {"step": 10, "seed": 7, "matches": {"baseline uct": {"games": 2, "done": {"0": [1.0, "p"]}}}}}))
    run.promoted = (0, {})
    run._restore_owed()
    assert run.c.skipped_checks == ["gen 3 baselines: measured at gen 5 instead (owed too when the evaluator was free)"]
    first = run.schedule.next()
    assert first is not None and first.generation == 1 and kept_games(first) == 1 and first.seed == 7
    run.schedule.finished()
    second = run.schedule.next()
    assert second is not None and second.generation == 5 and second.carried == [3] and second.weights is not None
    run.reporter.close()


def kept_games(check: Check) -> int:
    from takzero.pipeline.gating import kept_count

    return kept_count(check.kept)


# -- every check the resume says will run does run; the others are said as not run ---------------


def _restored_run(tmp_path: Path, console: io.StringIO, owed: list[list], games: dict | None = None, **overrides):
    """A run whose last checkpoint owed ``owed`` (each generation's checkpoint on disk), with
    ``games`` as its evaluation_games.json, restored as a resume does."""
    run = _run(tmp_path, console, **overrides)
    for entry in owed:
        atomic_torch_save({"generation": entry[0], "model_state": {"w": torch.full((1,), float(entry[0]))}},
                          run.run_dir / f"ckpt_{entry[1]:09d}.pt")
    if games is not None:
        (run.run_dir / "evaluation_games.json").write_text(json.dumps(games))
    run.c.owed_checks = [list(e) for e in owed]
    run.promoted = (0, {})
    run._restore_owed()
    return run


def _promised(console: io.StringIO) -> list[int]:
    import re

    return [int(m) for m in re.findall(r"^evaluation: gen (\d+) .* runs", console.getvalue(), re.M)]


def _handed_out(run, newer: list[int]) -> list[Check]:
    """The checks the evaluator gets, one at a time, while ``newer`` generations are made
    before it is free (the resumed run goes on training meanwhile)."""
    for g in newer:
        run.schedule.owe(g, 10 * g)
    out = []
    while (check := run.schedule.next()) is not None:
        out.append(check)
        run.schedule.finished()
    return out


def test_a_check_cut_before_its_checkpoint_said_it_ran_completes_first_with_its_games(tmp_path: Path) -> None:
    """kill -9 while generation 1's check ran, before a checkpoint marked it as running (the
    checkpoint of generation 1 is written before its check starts): its kept games say it ran.
    It completes first with them, even when newer generations are owed too (it was merged into
    the newest one, and its kept games dropped, though the start-up line said it ran again)."""
    console = io.StringIO()
    games = {"1": {"step": 10, "seed": 7, "matches": {"gating gen 0": {"games": 4, "done": {"0": [1.0, "p"]}}}}}
    run = _restored_run(tmp_path, console, [[1, 10, ["gating"], 0, 7, False], [2, 20, ["gating"], 0, 8, False]],
                        games)
    assert "evaluation: gen 1 gating (cut by the last stop) runs again, keeping the 1 game(s)" in console.getvalue()
    checks = _handed_out(run, [3])
    assert [c.generation for c in checks][:2] == [1, 2]
    assert kept_games(checks[0]) == 1 and checks[0].seed == 7
    assert sorted(_promised(console)) == [1, 2]
    assert not run.c.skipped_checks, run.c.skipped_checks
    run.reporter.close()


def test_every_check_a_resume_says_runs_is_handed_out_and_the_rest_are_said_as_not_run(tmp_path: Path) -> None:
    """The cut check (gen 1) and the owed ones (gens 2 and 3: gen 2's baselines carried into
    gen 3, its gating superseded): each start-up line promises a check that the evaluator then
    gets before any newer generation's (4, 5 made meanwhile), and what will not run (gen 2's
    gating) is said at once and recorded for the summary."""
    console = io.StringIO()
    owed = [[1, 10, ["gating", "baselines"], 0, 5, True], [2, 20, ["gating", "baselines"], 0, 6, False],
            [3, 30, ["gating"], 0, 7, False]]
    run = _restored_run(tmp_path, console, owed, **{"evaluator.baseline_every": 1})
    promised = _promised(console)
    assert promised == [1, 3], console.getvalue()
    assert "evaluation: gen 3 gating and baselines (with the baselines of gen 2) (owed at the last stop) runs" \
        in console.getvalue()
    assert "evaluation not run: gen 2 gating: gen 3 was owed too" in console.getvalue()
    assert run._evaluation_text() == "eval gen 1: waiting for the evaluator (+1 owed)"
    checks = _handed_out(run, [4, 5])
    assert [c.generation for c in checks][:2] == promised
    assert checks[1].carried == [2] and checks[1].weights is not None
    assert [c.generation for c in checks][2:] == [5]  # the newer ones as usual (4 carried into 5)
    # a kill -9 before they ran: the next checkpoint owes them again, as ones that run first
    run2 = _run(tmp_path, io.StringIO())
    run2.schedule.restore_all([Check.from_list(c.to_list()) for c in checks[:2]])
    assert [c.generation for c in run2.schedule.resumed] == [1, 3]
    run.reporter.close()
    run2.reporter.close()


def test_a_stop_that_writes_no_final_checkpoint_promises_only_what_the_last_one_owes(tmp_path: Path) -> None:
    """A full disk (or non-finite training) stops the run without a final checkpoint: the
    summary's 'run again when the run goes on' names only the checks the checkpoint on disk owes;
    a check owed since then is listed as not run (it said it would run again, and never did)."""
    import errno

    console = io.StringIO()
    run = _run(tmp_path, console, **{"evaluator.gating": "off", "evaluator.baseline_every": 1})
    run.loop_started = True
    run.stop_requested = True
    run.write_error = OSError(errno.ENOSPC, "No space left on device")
    run.stop_reason = "the disk is full"
    run.promoted = (0, {})
    run.schedule.owe(2, 20)
    run.schedule.next()  # gen 2 runs (the checkpoint of gen 2 on disk owes it)
    run.schedule.owe(3, 30)  # gen 3's checkpoint failed: no file owes it
    run.saved_owed = [[2, 20, ["baselines"], 0, 1, False]]
    trainer = SimpleNamespace(step=30, generation=3)
    run._shutdown(trainer)
    text = console.getvalue()
    assert "evaluations cut by the stop, run again when the run goes on: gen 2 baselines" in text, text
    assert "gen 3 baselines" not in text.split("run again when the run goes on:")[1].splitlines()[0]
    assert "gen 3 baselines: the run stopped (the disk is full) and no checkpoint keeps it" in text, text
