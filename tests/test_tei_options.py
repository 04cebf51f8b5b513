"""The TEI option table (``takzero.protocols.tei.options.OPTIONS``): each option is one row, and the
``option`` lines of ``tei``, the checks of ``setoption`` and the engine's start values all come
from it. The golden transcripts of ``tests/test_tei.py`` pin today's lines; these tests pin the
table's own rules, including the types no option uses yet (check, combo, button)."""

from __future__ import annotations

import io

import pytest

from takzero.protocols.tei import options as tei_options
from takzero.protocols.tei.engine import TEIEngine
from takzero.protocols.tei.options import OPTIONS, Option


def _session(script: str, **kwargs) -> list[str]:
    lines: list[str] = []
    engine = TEIEngine(out=lines.append, player="random", **kwargs)
    engine.run(io.StringIO(script))
    return lines


def _option_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("option name ")]


def test_tei_announces_one_line_per_row_in_table_order() -> None:
    lines = _option_lines(_session("tei\nquit\n"))
    assert [line.split(" type ")[0].removeprefix("option name ") for line in lines] == [
        o.name for o in OPTIONS.values()
    ]
    spins = [o for o in OPTIONS.values() if o.type == "spin"]
    for o in spins:  # each spin's range is the row's
        (line,) = [line for line in lines if line.startswith(f"option name {o.name} type spin")]
        assert line.endswith(f" min {o.min} max {o.max}")


def test_start_values_come_from_the_rows() -> None:
    engine = TEIEngine(out=lambda _line: None, player="random")
    for o in OPTIONS.values():
        if o.default is not None:
            assert getattr(engine, o.attr) == o.default, o.name


def test_a_new_row_is_announced_set_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    # One row per type the table knows, added without touching the engine.
    rows = [
        Option("Ponder", "check", "ponder_flag", default=False),
        Option("Style", "combo", "style", default="solid", var=("solid", "sharp")),
        Option("Label", "string", "label", default="x"),
        Option("Depth", "spin", "depth_cap", default=3, min=1, max=9),
    ]
    for row in rows:
        monkeypatch.setitem(OPTIONS, row.name.lower(), row)
    lines = _session(
        "tei\n"
        "setoption name Ponder value true\n"
        "setoption name style value SHARP\n"
        "setoption name Label value a b\n"
        "setoption name Depth value 12\n"
        "setoption name Ponder value maybe\n"
        "setoption name Style value wild\n"
        "tei\nquit\n"
    )
    options = _option_lines(lines)
    first, second = options[: len(OPTIONS)], options[len(OPTIONS) :]
    assert "option name Ponder type check default false" in first
    assert "option name Style type combo default solid var solid var sharp" in first
    assert "option name Label type string default x" in first
    assert "option name Depth type spin default 3 min 1 max 9" in first
    # After the setoptions: the accepted values, the refused ones kept with a message.
    assert "option name Ponder type check default true" in second
    assert "option name Style type combo default sharp var solid var sharp" in second
    assert "option name Label type string default a b" in second
    assert "option name Depth type spin default 3 min 1 max 9" in second
    said = [line for line in lines if line.startswith("info string")]
    assert said == [
        "info string setoption: Depth must be an integer in 1..9, got '12'; keeping 3",
        "info string setoption: Ponder must be true or false, got 'maybe'; keeping true",
        "info string setoption: Style must be one of solid, sharp, got 'wild'; keeping sharp",
    ]


def test_a_button_calls_its_setter(monkeypatch: pytest.MonkeyPatch) -> None:
    pressed: list[object] = []
    row = Option("Clear Hash", "button", "clear_hash", setter=lambda e, v: pressed.append(v))
    monkeypatch.setitem(OPTIONS, "clear hash", row)
    lines = _session("tei\nsetoption name Clear Hash\nquit\n")
    assert "option name Clear Hash type button" in lines
    assert pressed == [None]


def test_a_setter_replaces_the_plain_attribute(monkeypatch: pytest.MonkeyPatch) -> None:
    # TreeNodes passes the value on to the players; a plain row only sets the attribute.
    lines: list[str] = []
    engine = TEIEngine(out=lines.append, player="uct:20")
    engine.handle("setoption name TreeNodes value 123456")
    assert engine.tree_nodes == 123456
    assert engine._player.tree_nodes == 123456
    engine.handle("setoption name MultiPV value 3")
    assert engine.multipv == 3
    assert lines == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(type="slider"), "type must be one of"),
        (dict(type="spin"), "a spin needs min and max"),
        (dict(type="spin", min=1), "a spin needs min and max"),
        (dict(type="combo"), "a combo needs its choices"),
        (dict(type="check", default=True, search="c_puct"), "search must name a field of SearchConfig"),
        (dict(type="check", search="road_check"), "an option with search needs its default"),
    ],
)
def test_a_malformed_row_is_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Option("Bad", attr="bad", **kwargs)


def test_the_seed_bound_of_the_command_line_is_the_rows() -> None:
    assert OPTIONS["seed"].max == tei_options.MAX_SEED
    assert OPTIONS["threads"].max == tei_options.MAX_THREADS


def test_backend_runs_the_network_in_int8_and_back(tmp_path) -> None:
    """``setoption name Backend value int8`` (or ``--backend int8``) quantizes the model's network;
    ``onnx`` runs it in float32 again; an unknown runtime is refused naming the choices."""
    pytest.importorskip("onnxruntime")
    import torch

    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict

    torch.manual_seed(0)
    path = tmp_path / "m.pt"
    torch.save(checkpoint_dict(TakNet(ModelConfig(size=4, channels=8, blocks=1)), half_komi=0), path)
    lines: list[str] = []
    engine = TEIEngine(out=lines.append, model=str(path), backend="int8")
    script = "isready\nteinewgame 4\nposition startpos\ngo nodes 32\n"
    engine.run(io.StringIO(script + "quit\n"))
    assert engine.network.backend == "int8"
    assert engine.network.evaluator.metadata["precision"] == "int8"
    assert any(line.startswith("bestmove ") for line in lines)
    engine = TEIEngine(out=lines.append, model=str(path))
    engine.run(io.StringIO("setoption name Backend value onnx\n" + script
                           + "setoption name Backend value fp16\nquit\n"))
    assert engine.network.backend == "onnx"
    assert engine.network.evaluator.metadata.get("precision") != "int8"
    assert any("Backend must be one of auto, int8, onnx, torch" in line for line in lines)


def test_an_option_naming_a_search_field_reaches_the_players_as_one_row(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """The walk of "a TEI option that reaches the players" (issue 57): one row with ``search=``
    and nothing else (no engine attribute declared, no setter, no probe of the player): the
    option is announced, checked by its range and by SearchConfig's own checks (refused in one
    line, the old value kept), applied to the network player whether it is loaded before or after
    the setoption, and reaches its search; a player without a SearchConfig ignores it."""
    import torch

    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
    from takzero.search.config import MAX_TINUE_NODES

    rows = [
        Option("ToyTinue", "spin", "toy_tinue", default=1000, min=0, max=2 * MAX_TINUE_NODES, search="tinue_nodes"),
        Option("ToyRoadCheck", "check", "toy_road_check", default=True, search="road_check"),
    ]
    for row in rows:
        monkeypatch.setitem(OPTIONS, row.name.lower(), row)
    torch.manual_seed(0)
    path = tmp_path / "m.pt"
    torch.save(checkpoint_dict(TakNet(ModelConfig(size=4, channels=8, blocks=1)), half_komi=0), path)
    game = "isready\nteinewgame 4\nposition startpos\ngo nodes 16\n"
    for before in (True, False):  # setoption before the model is loaded, and after
        lines: list[str] = []
        engine = TEIEngine(out=lines.append, model=None if before else str(path), backend="torch")
        script = ("tei\nsetoption name ToyTinue value 7\nsetoption name ToyRoadCheck value false\n"
                  f"setoption name ToyTinue value {MAX_TINUE_NODES + 1}\n")
        if before:
            script += f"setoption name Model value {path}\n"
        engine.run(io.StringIO(script + game + "quit\n"))
        assert "option name ToyRoadCheck type check default true" in lines
        assert f"option name ToyTinue type spin default 1000 min 0 max {2 * MAX_TINUE_NODES}" in lines
        (refused,) = [line for line in lines if "ToyTinue" in line and line.startswith("info string")]
        assert refused.startswith("info string setoption: ToyTinue: tinue_nodes must be in 0..")
        assert refused.endswith("; keeping 7")
        net = engine.network
        assert net.config.tinue_nodes == 7 and net.tinue_nodes == 7 and net.config.road_check is False
        assert net._one().config.road_check is False and net._one().tinue_nodes == 7  # what it searches with
        assert any(line.startswith("bestmove ") for line in lines)
    engine = TEIEngine(out=lambda _line: None, player="random")
    engine.handle("setoption name ToyTinue value 5")  # no SearchConfig: nothing to apply
    assert engine.toy_tinue == 5
