"""What a run shows of its strength, without Ray: the evaluation lines (console and train.log)
fed with a made-up evaluation result, the progress line's Elo, the evaluation schedule under a
slow evaluator, the points at their generation's step, the bar at 80 and 120 columns, and the
end summary."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from smoke_config import smoke_config

from takzero.pipeline.progress import RunReporter, Snapshot, StopRule, fit_fields, summary_lines
from takzero.pipeline.scalars import ScalarLog
from takzero.pipeline.schedule import Check, EvaluationSchedule, owed_kinds

_cfg = smoke_config


class FakeWriter:
    """The SummaryWriter calls a run makes, recorded."""

    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []
        self.texts: list[tuple[str, str, int]] = []

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars.append((tag, value, step))

    def add_text(self, tag: str, text: str, step: int) -> None:
        self.texts.append((tag, text, step))

    def flush(self) -> None:
        pass


def _record(kind: str, opponent: str, w: int, d: int, lost: int, elo: float, lo: float, hi: float) -> dict:
    games = w + d + lost
    return {"kind": kind, "opponent": opponent, "wins": w, "draws": d, "losses": lost, "games": games,
            "score": (w + d / 2) / games, "elo": elo, "elo_lower": lo, "elo_upper": hi,
            "elo_model": "pentanomial", "seconds": 35.2,
            "elo_text": f"{elo:+.1f} [{lo:+.1f}, {hi:+.1f}] (95%, pentanomial score-test interval, "
                        f"{games // 2} game pairs)"}


def _result(gen: int, decision: str | None) -> dict:
    uct = _record("baseline", "uct", 12, 2, 6, 107.5, -20.3, 250.1)
    matches = [_record("baseline", "random", 20, 0, 0, float("inf"), 566.0, float("inf")), uct]
    if decision is not None:
        matches.insert(0, _record("gating", f"gen {gen - 1}", 3, 0, 1, 190.8, -100.0, 500.0))
    return {"candidate_generation": gen, "decision": decision, "summary": "score 0.750 vs gen 7",
            "scalars": {"elo/vs_uct": 107.5, "score/vs_uct": 0.65, "score/vs_random": 1.0},
            "ptn": {}, "matches": matches}


def _run(tmp_path: Path, console: io.StringIO, **overrides):
    from takzero.pipeline.run import Run

    run = Run(_cfg(tmp_path, **overrides), command="python -m takzero.train run_name=r")
    start = Snapshot(step=0, generation=0, games=0, positions=0, minutes=0.0)
    run.reporter = RunReporter(run.run_dir, StopRule(1000), start, console=console, bar=False)
    writer = FakeWriter()
    run.scalars = ScalarLog(writer)
    return run, writer


def test_each_evaluation_prints_a_line_and_lands_at_its_generations_step(tmp_path: Path) -> None:
    """A made-up result of generation 8 (made at step 320) arriving at step 500: one line per
    match on the console and in train.log (generation, opponent, W-D-L, score, Elo with its
    interval and model, games, seconds), the TensorBoard points at step 320, the progress line's
    Elo against the strongest (last) baseline, the gating decision."""
    console = io.StringIO()
    run, writer = _run(tmp_path, console)
    run.promoted = (7, {})
    trainer = SimpleNamespace(step=500, generation=9)
    check = Check(8, 320, ("gating", "baselines"), weights={})
    run._gating({**_result(8, "reject"), "candidate_weights": {}}, trainer, check)
    run.scalars.flush()
    out = console.getvalue().splitlines()
    want = ("evaluation: gen 8 vs uct: 12-2-6 (W-D-L), score 0.650, Elo +107.5 [-20.3, +250.1] "
            "(95%, pentanomial score-test interval, 10 game pairs), 20 games, 35 s")
    assert want in out
    assert any(ln.startswith("evaluation: gen 8 vs gen 7 (gating): 3-0-1 (W-D-L), score 0.750, Elo +190.8")
               and ln.endswith(": reject") for ln in out), out
    assert any(ln.startswith("evaluation: gen 8 vs random: 20-0-0 (W-D-L), score 1.000, Elo +inf") for ln in out)
    assert "gating: gen 8 reject (score 0.750 vs gen 7)" in out
    run.reporter.close()
    log = (tmp_path / "r" / "train.log").read_text()
    assert want in log
    # every point of the check at the step of generation 8, not the step it arrived at
    steps = {tag: step for tag, _, step in writer.scalars}
    assert steps["elo/vs_uct"] == steps["score/vs_random"] == steps["gating/promoted_generation"] == 320
    assert [t[2] for t in writer.texts if t[0] == "gating"] == [320]
    # the progress line: the latest Elo against uct (the last of evaluator.baselines)
    assert run._snapshot(trainer).strength == "Elo vs uct +108 [-20, +250] (gen 8)"
    rep = RunReporter(tmp_path, StopRule(1000), Snapshot(0, 0, 0, 0, 0.0), bar=False, console=io.StringIO())
    assert "| Elo vs uct +108 [-20, +250] (gen 8) |" in rep.progress_text(run._snapshot(trainer))
    rep.close()


def test_summary_gives_the_best_generations_scores_the_curve_and_the_skipped(tmp_path: Path) -> None:
    """Gating off: generation 8's baseline lines become the best's last scores; the end summary
    gives them, the last three Elo points against uct, and the checks not run with why."""
    console = io.StringIO()
    run, _ = _run(tmp_path, console, **{"evaluator.gating": "off", "evaluator.baseline_every": 4})
    trainer = SimpleNamespace(step=600, generation=12)
    for gen in (4, 8):
        run.promoted = (gen, {})
        run._gating({**_result(gen, None), "candidate_weights": {}}, trainer, Check(gen, 40 * gen, ("baselines",)))
    run.schedule.owe(12, 480)
    run.schedule.abandon("the run stopped (Ctrl-C)")
    run.promoted = (8, {})
    snap = run._snapshot(trainer)
    run._print_summary(run.reporter, None, snap, 8, finished=False, session=False)
    text = console.getvalue()
    assert "its last scores against the baselines:\n    evaluation: gen 8 vs random: 20-0-0 (W-D-L)" in text
    assert "    evaluation: gen 8 vs uct: 12-2-6 (W-D-L), score 0.650" in text
    assert "Elo vs uct, last points: gen 4 +108 [-20, +250], gen 8 +108 [-20, +250]" in text
    assert ("evaluations not run: 1\n    gen 12 baselines: the run stopped (Ctrl-C) before the "
            "evaluator was free") in text
    # best generation 12 (gating off) unmeasured: the summary says why, with gen 8's lines
    console.truncate(0)
    run.promoted = (12, {})
    run._print_summary(run.reporter, None, snap, 12, finished=False, session=False)
    text = console.getvalue()
    assert ("generation 12 not measured against the baselines (its check was not run: gen 12 "
            "baselines: the run stopped (Ctrl-C) before the evaluator was free)") in text
    assert "    evaluation: gen 8 vs uct: 12-2-6" in text
    run.reporter.close()
    # why a best generation has no scores of its own
    run.c.skipped_checks[:] = ["gen 16, 20 baselines: measured at gen 21 instead "
                               "(owed too when the evaluator was free)",
                               "gen 24 gating and baselines: the run stopped (Ctrl-C) while it ran"]
    assert run._not_measured(20).startswith("its check was not run: gen 16, 20 baselines")
    assert run._not_measured(24).endswith("gen 24 gating and baselines: the run stopped (Ctrl-C) while it ran")
    assert run._not_measured(13) == "evaluator.baseline_every=4: generation 13 owed no check"
    assert run._not_measured(28) == "its check had not landed when the run stopped"
    assert run._not_measured(0) == "the initial weights are not measured"


def test_a_slow_evaluator_loses_no_owed_check() -> None:
    """Generations every 10 s, an evaluation takes 25 s, baselines every 2 generations, gating
    on: each generation that owed a baseline check is measured or carried into a later one
    that is, every skipped gating is named with the generation gated instead, and each
    check keeps its generation's step."""
    schedule = EvaluationSchedule(gating=True, baseline_every=2)
    now, busy_until, measured, gated = 0.0, 0.0, {}, []
    step_of = {g: 100 * g for g in range(1, 31)}
    for gen in range(1, 31):
        now = 10.0 * gen
        if schedule.running is not None and now >= busy_until:
            done = schedule.finished()
            gated.append(done.generation)
            if done.baselines:
                for g in (*done.carried, done.generation):
                    measured[g] = (done.generation, done.step)
        schedule.owe(gen, step_of[gen], weights=f"w{gen}")
        check = schedule.next()
        if check is not None:
            assert check.weights == f"w{check.generation}" and check.step == step_of[check.generation]
            busy_until = now + 25.0
    running = schedule.running
    while running is not None:  # the end of the run waits for the running and the owed checks
        done = schedule.finished()
        gated.append(done.generation)
        for g in (*done.carried, done.generation) if done.baselines else ():
            measured[g] = (done.generation, done.step)
        running = schedule.next()
    assert gated[-1] == 30 and len(gated) < 30  # the evaluator could not keep up
    for g in range(2, 31, 2):  # every owed baseline check measured, at its generation or later
        at, step = measured[g]
        assert at >= g and step == step_of[at]
    assert any(at % 2 for at, _ in measured.values())  # some carried into an odd generation
    carried = [s for s in schedule.skipped if " baselines: " in s]
    carried_re = r"gen [\d, ]+ baselines: measured at gen \d+ instead \(owed too when the evaluator was free\)"
    assert carried and all(re.fullmatch(carried_re, s) for s in carried)
    gating = [s for s in schedule.skipped if " gating: " in s]
    gating_re = r"gen \d+ gating: gen \d+ was owed too when the evaluator was free, and gated instead"
    assert all(re.fullmatch(gating_re, s) for s in gating)
    # every generation was gated or named as skipped, none twice
    skipped_gens = [int(s.split()[1]) for s in gating]
    assert sorted(skipped_gens + gated) == list(range(1, 31))
    schedule.owe(31, 3100)
    schedule.next()
    schedule.owe(32, 3200)
    schedule.abandon("the run ended")
    assert schedule.running is None and schedule.owed == {}
    assert schedule.skipped[-2:] == ["gen 31 gating: the run ended while it ran",
                                     "gen 32 gating and baselines: the run ended before the evaluator was free"]


def test_nothing_owed_with_gating_off_and_no_baselines_and_bad_counts_refused() -> None:
    assert owed_kinds(4, gating=False, baseline_every=0) == ()
    assert owed_kinds(4, gating=False, baseline_every=4) == ("baselines",)
    assert owed_kinds(5, gating=True, baseline_every=4) == ("gating",)
    schedule = EvaluationSchedule(gating=False, baseline_every=4)
    assert schedule.owe(3, 30) is None and schedule.next() is None
    with pytest.raises(ValueError, match="baseline_every"):
        EvaluationSchedule(gating=True, baseline_every=-1)
    schedule.owe(4, 40)
    with pytest.raises(ValueError, match="not newer"):
        schedule.owe(4, 41)


# -- the bar ---------------------------------------------------------------------------------------


def _bar_output(tmp_path: Path, columns: int) -> tuple[str, RunReporter]:
    console = io.StringIO()
    start = Snapshot(step=0, generation=0, games=0, positions=0, minutes=0.0)
    rep = RunReporter(tmp_path, StopRule(100_000, max_minutes=90), start, console=console, bar=True,
                      columns=columns)
    rep.t0 = time.monotonic() - 354.0
    snap = Snapshot(step=681, generation=3, games=211, positions=51_630, minutes=5.9,
                    games_in_flight=64, positions_in_flight=5163, replay_positions=48_000,
                    gating="gen 3 promoted (gating off)", strength="Elo vs uct +108 [-20, +250] (gen 2)")
    rep.history.append((time.monotonic() - 10.0, Snapshot(600, 3, 200, 50_000, 5.7)))
    rep.update(snap)
    return console.getvalue(), rep


@pytest.mark.parametrize("columns", [80, 120])
def test_the_bar_keeps_the_stop_condition_and_eta(tmp_path: Path, columns: int) -> None:
    """The bar's text is shortened field by field to the console's width: the stop condition
    with its ETA always, the other fields as they fit; the full line goes to train.log."""
    out, rep = _bar_output(tmp_path, columns)
    drawn = [x for x in re.split(r"[\r\n]", out) if "%|" in x]
    assert drawn, out
    last = drawn[-1].rstrip()
    assert len(last) <= columns, (len(last), last)
    assert "5.9/90 min (7%, ETA 1h24m)" in last
    assert ", 5.9" not in last  # no tqdm postfix comma
    if columns == 120:
        assert "gen 3" in last and "Elo vs uct +108" in last
    rep.close()
    log = (tmp_path / "train.log").read_text()
    assert "gating: gen 3 promoted (gating off)" in log and "Elo vs uct +108 [-20, +250] (gen 2)" in log


def test_no_bar_before_the_first_update(tmp_path: Path) -> None:
    """Start-up lines (and what Ray prints while it starts) come before the bar is drawn."""
    console = io.StringIO()
    rep = RunReporter(tmp_path, StopRule(100), Snapshot(0, 0, 0, 0, 0.0), console=console, bar=True, columns=80)
    rep.line("takzero run r (new, start 1)")
    assert console.getvalue() == "takzero run r (new, start 1)\n"
    rep.update(Snapshot(1, 0, 0, 0, 0.1))
    assert "%|" in console.getvalue()
    rep.close()


def test_nothing_is_drawn_after_the_summary(tmp_path: Path) -> None:
    out, rep = _bar_output(tmp_path, 80)
    rep.end_bar()
    for line in summary_lines(reason="interrupted", run_dir=tmp_path, snap=rep.last, best_generation=3,
                              best_scores={}, resume_cmd="r", finished=False):
        rep.line(line)
    rep.close()
    text = rep.console.getvalue()
    after = text[text.rindex("=" * 72) + 72:]
    assert after.strip() == "" and "%|" not in text[text.index("=" * 72):]
    assert rep.bar is None and not rep.use_bar  # no bar is drawn again


def test_fit_fields_shortens_in_order_and_keeps_the_first() -> None:
    fields = [["stop (ETA 1m)"], ["step 5 gen 1", "gen 1", ""], ["gating: long text", ""]]
    assert fit_fields(fields, [2, 1], 100) == "stop (ETA 1m) | step 5 gen 1 | gating: long text"
    assert fit_fields(fields, [2, 1], 30) == "stop (ETA 1m) | step 5 gen 1"
    assert fit_fields(fields, [2, 1], 22) == "stop (ETA 1m) | gen 1"
    assert fit_fields(fields, [2, 1], 14) == "stop (ETA 1m)"
    assert fit_fields(fields, [2, 1], 5) == "stop "


def test_a_check_cut_by_ctrl_c_is_owed_again_after_the_resume(tmp_path: Path) -> None:
    """Ctrl-C keeps the running and owed checks (take_pending); the next session owes them
    again with the weights of their generation's checkpoint, and their points land at that
    generation's step although it is below the resumed run's TensorBoard floor; one whose
    checkpoint is gone is named as skipped."""
    import torch

    from takzero.pipeline.checkpoints import atomic_torch_save

    schedule = EvaluationSchedule(gating=False, baseline_every=4)
    schedule.owe(12, 480)
    schedule.next()
    schedule.owe(16, 640)
    kept = schedule.take_pending()
    assert [(c.generation, c.step) for c in kept] == [(12, 480), (16, 640)]
    assert schedule.running is None and schedule.owed == {} and schedule.skipped == []
    text = "\n".join(summary_lines(reason="interrupted", run_dir=tmp_path, snap=Snapshot(700, 16, 0, 0, 1.0),
                                     best_generation=16, best_scores={}, resume_cmd="r", finished=False,
                                     owed_again=[c.describe() for c in kept]))
    assert "evaluations cut by the stop, run again when the run goes on: gen 12 baselines, gen 16 baselines" in text

    console = io.StringIO()
    run, writer = _run(tmp_path, console, **{"evaluator.gating": "off", "evaluator.baseline_every": 4})
    run.scalars = ScalarLog(writer, floor=700)  # the resumed run's checkpoint step
    weights = {"w": torch.ones(2)}
    atomic_torch_save({"generation": 12, "model_state": weights}, run.run_dir / "ckpt_000000480.pt")
    run.c.owed_checks = [[c.generation, c.step, list(c.kinds)] for c in kept]
    run._restore_owed()
    assert run.c.owed_checks == []
    (owed,) = run.schedule.resumed  # it runs first after the resume, before any newer generation's
    assert owed.generation == 12 and torch.equal(owed.weights["w"], weights["w"])
    assert run.c.skipped_checks[-1].startswith("gen 16 baselines: cut by the last stop, and its weights are gone")
    said = console.getvalue()
    assert "evaluation: gen 12 baselines (owed at the last stop) runs, before any newer generation's" in said
    assert "evaluation not run: gen 16 baselines: cut by the last stop, and its weights are gone" in console.getvalue()
    check = run.schedule.next()
    run.promoted = (20, {})
    run._gating({**_result(12, None), "candidate_weights": {}}, SimpleNamespace(step=760, generation=20), check)
    run.scalars.add("loss/total", 1.0, 600)
    run.scalars.flush()
    steps = {tag: step for tag, _, step in writer.scalars}
    assert steps["elo/vs_uct"] == 480 and steps["loss/total"] == 701  # the floor holds for the rest
    run.reporter.close()


def test_rays_start_up_warnings_go_to_train_log(tmp_path: Path) -> None:
    import logging

    rep = RunReporter(tmp_path, StopRule(100), Snapshot(0, 0, 0, 0, 0.0), console=io.StringIO(), bar=False)
    handler = rep.log_handler("ray")
    logging.getLogger("ray").addHandler(handler)
    try:
        logging.getLogger("ray._private.some_module").warning("Token authentication is enabled")
        logging.getLogger("ray._private.some_module").info("not this one")
    finally:
        logging.getLogger("ray").removeHandler(handler)
    rep.close()
    log = (tmp_path / "train.log").read_text()
    assert "ray: Token authentication is enabled" in log and "not this one" not in log
    assert rep.console.getvalue() == ""  # the console has Ray's own line; none of ours
