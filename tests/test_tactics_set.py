"""The tactics set and its solve rates (``takzero.matches.tactics_set``), the one rule that
``scripts/bench_tactics.py`` and the training run's tactics curve share, and the curve itself:
the evaluator's batched search of every position, its ``tactics/<kind>`` points at the step of
the generation measured, its line, and its place in the evaluation schedule."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from takzero.config import compose_preset
from takzero.matches.games import NetSide
from takzero.matches.tactics_set import (
    TACTICS_FILE,
    load_entries,
    network_moves,
    solve_rates,
    solves,
)
from takzero.nn.inference import Evaluator
from takzero.nn.model import ModelConfig, TakNet
from takzero.pipeline.gating import GatingEvaluator, tactics_plan
from takzero.pipeline.progress import RunReporter, Snapshot, StopRule
from takzero.pipeline.scalars import ScalarLog
from takzero.pipeline.schedule import Check, EvaluationSchedule, owed_kinds
from takzero.players import GreedyPlayer
from takzero.search import SearchConfig

ROOT = Path(__file__).resolve().parent.parent


def _not_winning(pos) -> int:
    """A legal move of ``pos`` that does not end the game."""
    return next(int(c) for c in pos.legal_move_codes() if not pos.play(int(c)).is_over)


def test_solve_rates_of_a_greedy_oracle_on_a_tiny_set() -> None:
    """4x4: the 11 win_in_1 positions, which the greedy player (win in one first) solves, and the
    3 avoid_loss ones. Answers: greedy's on the wins but one, where a move that does not end the
    game is given; on avoid_loss an expected move twice and a move outside ``expected`` once."""
    entries = [e for e in load_entries([TACTICS_FILE], size=4) if e["kind"] in ("win_in_1", "avoid_loss")]
    wins = [e for e in entries if e["kind"] == "win_in_1"]
    defences = [e for e in entries if e["kind"] == "avoid_loss"]
    assert len(wins) == 11 and len(defences) == 3
    greedy = GreedyPlayer(0)
    answers = []
    for e in wins:
        greedy.reset(4, 0)
        answers.append(greedy.choose(e["position"]))
    assert solve_rates(wins, answers).rates == {"win_in_1": 1.0, "all": 1.0}  # the oracle
    answers[0] = _not_winning(wins[0]["position"])
    for i, e in enumerate(defences):
        pos = e["position"]
        safe = [int(c) for c in pos.legal_move_codes() if pos.ptn(int(c)) in e["expected"]]
        unsafe = [int(c) for c in pos.legal_move_codes() if pos.ptn(int(c)) not in e["expected"]]
        answers.append(safe[0] if i < 2 else unsafe[0])
    score = solve_rates(wins + defences, answers)
    assert score.solved == {"win_in_1": 10, "avoid_loss": 2, "all": 12}
    assert score.positions == {"win_in_1": 11, "avoid_loss": 3, "all": 14}
    assert score.rates == pytest.approx({"win_in_1": 10 / 11, "avoid_loss": 2 / 3, "all": 12 / 14})
    assert score.unverified == []
    with pytest.raises(ValueError, match="answers for"):
        solve_rates(wins, answers)


def test_a_longer_win_counts_and_a_non_win_does_not() -> None:
    """A win_in_3 is solved by any move after which the exhaustive search proves the win: each
    listed (road-forcing) move is; a move that lets the defender out is not."""
    entry = next(e for e in load_entries([TACTICS_FILE], size=4) if e["kind"] == "win_in_3")
    pos = entry["position"]
    listed = [int(c) for c in pos.legal_move_codes() if pos.ptn(int(c)) in entry["expected"]]
    assert listed and all(solves(entry, c) for c in listed)
    others = [int(c) for c in pos.legal_move_codes() if pos.ptn(int(c)) not in entry["expected"]]
    assert any(solves(entry, c) is False for c in others)


def test_the_benchmark_uses_the_librarys_rule() -> None:
    spec = importlib.util.spec_from_file_location("bench_tactics", ROOT / "scripts" / "bench_tactics.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.solves is solves and bench.load_entries is load_entries
    assert TACTICS_FILE in bench.DEFAULT_FILES


def _side(size: int) -> NetSide:
    torch.manual_seed(0)
    net = Evaluator(TakNet(ModelConfig(size=size, channels=8, blocks=1)), device="cpu")
    return NetSide("net", net, SearchConfig(simulations=4, tinue_nodes=0).evaluation(), simulations=4)


def test_network_moves_search_all_positions_at_once() -> None:
    entries = load_entries([TACTICS_FILE], size=4)
    side = _side(4)
    calls = []
    batched = side.batched

    def counted(num_games: int, seed: int = 0, sampling_plies: int | None = None):
        calls.append(num_games)
        return batched(num_games, seed, sampling_plies)

    side.batched = counted  # type: ignore[method-assign]
    moves = network_moves(side, [e["position"] for e in entries])
    assert calls == [len(entries)]  # one batched search of every position
    for e, m in zip(entries, moves, strict=True):
        assert m.code in set(e["position"].legal_move_codes().tolist()) and m.nodes == 4
    five = load_entries([TACTICS_FILE], size=5)[0]["position"]
    with pytest.raises(ValueError, match="one board size"):
        network_moves(side, [entries[0]["position"], five])


def _cfg(tmp_path: Path, **overrides):
    """The smoke preset as the training command composes it, in ``tmp_path``, with overrides."""
    keys = [f"checkpoint_root={tmp_path}", *(f"{k}={v}" for k, v in overrides.items())]
    return compose_preset("smoke", keys, run_name="r")


def test_the_tactics_plan_per_size(tmp_path: Path) -> None:
    every, line = tactics_plan(_cfg(tmp_path, **{"evaluator.tactics_every": 2}))  # smoke: 4x4
    assert every == 2 and line.startswith("tactics curve: every 2 generation(s), 30 4x4 positions")
    assert "win_in_1 11" in line
    every, line = tactics_plan(_cfg(tmp_path, **{"evaluator.tactics_every": 2, "board.size": 7}))
    assert every == 0 and line.startswith("tactics curve: off") and "no 7x7 positions" in line
    assert tactics_plan(_cfg(tmp_path, **{"evaluator.tactics_every": 0})) == (0, "")
    # a run of a size without positions says so at start-up and owes no tactics check
    from takzero.pipeline.run import Run

    run = Run(_cfg(tmp_path, **{"evaluator.tactics_every": 1, "board.size": 3}), command="python -m takzero.train")
    console = io.StringIO()
    reporter = RunReporter(run.run_dir, StopRule(1000), Snapshot(0, 0, 0, 0, 0.0), console=console, bar=False)
    run._start_lines(reporter, resumed=False)
    reporter.close()
    assert "  tactics curve: off (the tactics set tactics_mined.json has no 3x3 positions; it has 4x4 to 6x6)" in (
        console.getvalue().splitlines())
    check = run.schedule.owe(1, 10)  # the smoke preset gates and plays baselines every generation
    assert check is not None and check.kinds == ("gating", "baselines")


def test_the_schedule_owes_tactics_and_carries_an_older_one() -> None:
    assert owed_kinds(6, False, 4, 3) == ("tactics",)
    assert owed_kinds(12, True, 4, 3) == ("gating", "baselines", "tactics")
    s = EvaluationSchedule(False, 0, tactics_every=1)
    s.owe(1, 10)
    s.owe(2, 20)
    check = s.next()
    assert check is not None and check.generation == 2 and check.tactics and check.kinds == ("tactics",)
    assert s.skipped == ["gen 1 tactics: measured at gen 2 instead (owed too when the evaluator was free)"]


class FakeWriter:
    def __init__(self) -> None:
        self.scalars: list[tuple[str, float, int]] = []

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars.append((tag, value, step))

    def add_text(self, tag: str, text: str, step: int) -> None:
        pass

    def flush(self) -> None:
        pass


def test_the_evaluators_tactics_point_lands_at_its_generations_step(tmp_path: Path) -> None:
    """The evaluator plays the network alone on the 30 4x4 positions (gating off, no baselines);
    the run writes ``tactics/<kind>`` and ``tactics/all`` in [0, 1] at the step where the
    generation was made (320), not the step the result arrived at (500), and one line."""
    from takzero.pipeline.run import Run

    cfg = _cfg(tmp_path, **{"evaluator.tactics_every": 1, "evaluator.gating": "off",
                            "mcts.simulations": 4, "evaluator.simulations": 4})
    ev = GatingEvaluator(cfg)
    torch.manual_seed(0)
    weights = TakNet(cfg.model_config()).state_dict()
    out = ev.evaluate((8, weights), (7, weights), play_baselines=False, tactics=True)
    point = out["tactics"]
    assert point["positions"] == {"win_in_1": 11, "win_in_3": 12, "win_in_5": 4, "avoid_loss": 3, "all": 30}
    assert set(out["scalars"]) == {f"tactics/{k}" for k in point["positions"]}
    console = io.StringIO()
    run = Run(cfg, command="python -m takzero.train run_name=r")
    run.reporter = RunReporter(run.run_dir, StopRule(1000), Snapshot(0, 0, 0, 0, 0.0), console=console, bar=False)
    writer = FakeWriter()
    run.scalars = ScalarLog(writer)
    run.promoted = (8, {})
    run._gating({**out, "candidate_weights": {}}, SimpleNamespace(step=500, generation=9),
                Check(8, 320, ("tactics",), weights={}))
    run.scalars.flush()
    points = {tag: (value, step) for tag, value, step in writer.scalars if tag.startswith("tactics/")}
    assert set(points) == {"tactics/win_in_1", "tactics/win_in_3", "tactics/win_in_5", "tactics/avoid_loss",
                           "tactics/all"}
    for value, step in points.values():
        assert step == 320 and 0.0 <= value <= 1.0
    assert points["tactics/all"][0] == pytest.approx(point["solved"]["all"] / 30)
    run.reporter.close()
    line = next(x for x in console.getvalue().splitlines() if x.startswith("tactics: gen 8 solved "))
    assert f"solved {point['solved']['all']}/30" in line and "win_in_5 " in line
    assert line in (tmp_path / "r" / "train.log").read_text()


def test_a_failed_engine_is_a_line_and_a_check_not_run(tmp_path: Path) -> None:
    from takzero.pipeline.gating import failed_record
    from takzero.pipeline.run import Run

    run = Run(_cfg(tmp_path), command="python -m takzero.train run_name=r")
    console = io.StringIO()
    run.reporter = RunReporter(run.run_dir, StopRule(1000), Snapshot(0, 0, 0, 0, 0.0), console=console, bar=False)
    run.scalars = ScalarLog(FakeWriter())
    run.promoted = (4, {})
    result = {"candidate_generation": 4, "decision": None, "scalars": {}, "ptn": {},
              "matches": [failed_record("tiltak", "engine tiltak (tiltak): did not start: no such file", 0.4)]}
    run._gating({**result, "candidate_weights": {}}, SimpleNamespace(step=90, generation=4),
                Check(4, 80, ("baselines",), weights={}))
    run.reporter.close()
    want = "evaluation: gen 4 vs tiltak: FAILED after 0 s: engine tiltak (tiltak): did not start: no such file"
    assert want in console.getvalue().splitlines() and want in (tmp_path / "r" / "train.log").read_text()
    assert run.c.skipped_checks[-1] == ("gen 4 baseline tiltak: failed (engine tiltak (tiltak): did not start: "
                                        "no such file)")


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", r"t\.json: not JSON"),
        ('{"a": 1}', r"t\.json: expected a JSON list"),
        ("[1, 2]", r"t\.json: entry 0: expected an object"),
        ('[{"size": 4, "kind": "win_in_1", "id": "x"}]', r"t\.json: entry 0 \(x\): missing key 'tps'"),
        ('[{"size": 4, "tps": "garbage", "kind": "win_in_1", "id": "x"}]', r"t\.json: entry 0 \(x\): TPS"),
        ('[{"size": 4, "tps": "x4/x4/x4/x4 1 1", "kind": "mate", "id": "x"}]', r"entry 0 \(x\): unknown kind"),
    ],
)
def test_malformed_tactics_files_are_refused_naming_file_and_entry(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_entries([path])


def test_the_benchmark_searches_with_the_gumbel_root_when_asked(tmp_path: Path, monkeypatch, capsys) -> None:
    """``--gumbel M``: the network players search with the Gumbel root over M moves; without it,
    with PUCT and the move choice of ``--select-q F`` (default the players'); the JSON lines say
    which; bad values are refused."""
    import json

    from takzero.nn.model import checkpoint_dict
    from takzero.players.network import DEFAULT_SELECT_Q_FRACTION, NetworkPlayer

    spec = importlib.util.spec_from_file_location("bench_tactics", ROOT / "scripts" / "bench_tactics.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    torch.manual_seed(0)
    model = tmp_path / "tiny4.pt"
    torch.save(checkpoint_dict(TakNet(ModelConfig(size=4, channels=8, blocks=1))), model)
    configs = []
    real = NetworkPlayer.load.__func__

    def spy(cls, source, *args, **kwargs):
        player = real(cls, source, *args, **kwargs)
        configs.append(player.config)
        return player

    monkeypatch.setattr(NetworkPlayer, "load", classmethod(spy))
    common = ["--solvers", "net200", "--model", str(model), "--sizes", "4", "--limit", "1",
              "--kinds", "win_in_1", "--tinue-nodes", "0", "--files", str(TACTICS_FILE)]
    for extra, expected in (
        (["--gumbel", "8"], (True, 8, 0.0)),
        ([], (False, 0, DEFAULT_SELECT_Q_FRACTION)),
        (["--select-q", "0"], (False, 0, 0.0)),
        (["--select-q", "0.3"], (False, 0, 0.3)),
    ):
        assert bench.main(common + extra) == 0
        c = configs[-1]
        assert (c.gumbel, c.gumbel_m if c.gumbel else 0, 0.0 if c.gumbel else c.select_q_fraction) == expected
        lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
        tactics = [x for x in lines if x.get("solver") == "net200"]
        assert tactics and all((x["gumbel_m"], x["select_q_fraction"]) == expected[1:] for x in tactics)
    for bad, message in ((["--gumbel", "-1"], "--gumbel must be in 0..100000"),
                         (["--gumbel", str(10**20)], "--gumbel must be in"),
                         (["--select-q", "1.5"], "--select-q must be in [0, 1]"),
                         (["--limit", "-1"], "--limit must be >= 1")):
        with pytest.raises(SystemExit):
            bench.main(common + bad)
        assert message in capsys.readouterr().err


def test_the_benchmarks_6x6_network_is_the_6x6_runs() -> None:
    """``root_cost``'s untrained 6x6 network has the size a ``+config=6x6`` run builds, whether
    the config file names a network preset (``model.preset``) or gives the sizes (it read
    ``model.channels`` from the file, a KeyError once the file named a preset)."""
    from takzero.config import compose_preset

    spec = importlib.util.spec_from_file_location("bench_tactics", ROOT / "scripts" / "bench_tactics.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    ev, sizes = bench.six_by_six_evaluator()
    run = compose_preset("6x6", run_name="t").model
    assert sizes == {"channels": run.channels, "blocks": run.blocks}
    assert ev.model.config.channels == run.channels and ev.model.config.blocks == run.blocks
