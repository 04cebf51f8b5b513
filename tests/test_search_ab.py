"""``scripts/search_ab.py``: one network, two search settings, paired openings."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
from takzero.players.network import DEFAULT_SELECT_Q_FRACTION

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("search_ab", ROOT / "scripts" / "search_ab.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    path = tmp_path / "tiny.pt"
    torch.save(checkpoint_dict(TakNet(ModelConfig(size=3, channels=8, blocks=1))), path)
    return path


def test_values_are_read_by_their_settings_type() -> None:
    ab = _script()
    over = ab.parse_overrides(["gumbel_m=1e1", "select_q_fraction=1e-1", "fpu_value=null", "c_init=2"])
    assert over == {"gumbel_m": 10, "select_q_fraction": 0.1, "fpu_value": None, "c_init": 2.0}
    assert type(over["gumbel_m"]) is int and type(over["c_init"]) is float


def test_each_side_searches_with_its_own_settings(tiny_model: Path, monkeypatch, capsys) -> None:
    ab = _script()
    import takzero.matches.games as games

    seen = []
    real = games.play_match

    def spy(a, b, *args, **kwargs):
        seen.append((a.config, b.config))
        return real(a, b, *args, **kwargs)

    monkeypatch.setattr(games, "play_match", spy)
    argv = [str(tiny_model), "--a", "select_q_fraction=0", "tinue_nodes=0", "--b", "gumbel=true", "gumbel_m=4",
            "--pairs", "2", "--simulations", "8", "--ply-limit", "30"]
    assert ab.main(argv) == 0
    (line,) = capsys.readouterr().out.splitlines()
    r = json.loads(line)
    assert r["games"] == 4 and r["wins"] + r["draws"] + r["losses"] == 4 and sum(r["pentanomial"]) == 2
    assert r["a"] == {"select_q_fraction": 0, "tinue_nodes": 0} and r["b"] == {"gumbel": True, "gumbel_m": 4}
    ((a, b),) = seen
    assert (a.select_q_fraction, a.tinue_nodes, a.gumbel, a.simulations, a.max_plies) == (0.0, 0, False, 8, 30)
    assert (b.gumbel, b.gumbel_m, b.select_q_fraction) == (True, 4, DEFAULT_SELECT_Q_FRACTION)
    assert not a.root_noise and not b.root_noise  # the evaluation copies


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--a", "c_puct=2"], "'c_puct' is not a search setting"),
        (["--a", "gumbel_m"], "expected KEY=VALUE"),
        (["--b", "gumbel_m=2", "gumbel_m=3"], "'gumbel_m' is given twice"),
        (["--b", "select_q_fraction=3"], "select_q_fraction must be in [0, 1]"),
        (["--pairs", "0"], "must be >= 1"),
        (["--ply-limit", "2"], "--ply-limit must be >= 3"),
        (["--a", "gumbel=null"], "--a: gumbel: a value is needed (bool)"),
        (["--a", "gumbel='false'"], "--a: gumbel: expected true or false, got 'false'"),
        (["--a", "gumbel=2"], "--a: gumbel: expected true or false, got 2"),
        (["--b", "gumbel_m=1.5"], "--b: gumbel_m: expected a whole number"),
        (["--b", "gumbel_m=true"], "--b: gumbel_m: expected a number, got True"),
        (["--b", "gumbel_m=99999999999999999999"], "--b: gumbel_m: expected a whole number"),
        (["--b", "gumbel_m=.inf"], "--b: gumbel_m: expected a finite number"),
        (["--a", "c_init=null"], "--a: c_init: a value is needed (float)"),
        (["--a", "fpu_value=[1]"], "--a: fpu_value: expected a number, got [1]"),
        (["--a", "select_q_fraction=abc"], "--a: select_q_fraction: expected a number, got 'abc'"),
        (["--a", "select_q_fraction=true"], "--a: select_q_fraction: expected a number, got True"),
        (["--a", "simulations=1000"], "'simulations' cannot be set per side: set by --simulations"),
        (["--a", "max_plies=2"], "'max_plies' cannot be set per side"),
        (["--b", "root_noise=true"], "'root_noise' cannot be set per side: off in play"),
        (["--b", "temperature_plies=10"], "'temperature_plies' cannot be set per side"),
        (["--a", "node_budget=2"], "the search cannot run with these settings: node_budget 2 is below"),
    ],
)
def test_bad_settings_are_refused_before_any_game(tiny_model: Path, argv: list[str], message: str, capsys) -> None:
    ab = _script()
    with pytest.raises(SystemExit) as exc:
        ab.main([str(tiny_model), *argv])
    assert exc.value.code == 2 and message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ab.main(["missing.pt"])
    assert "model file not found: missing.pt" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ab.main([str(tiny_model.parent)])
    assert "not a model file" in capsys.readouterr().err
