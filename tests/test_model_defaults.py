"""One default per setting: a model's own komi (its ``half_komi``) is the default of every tool
that plays it (``takzero.match`` from the engines' model files, ``takzero.evaluate``,
``takzero.playtak``'s seek), with one warning line when a command gives another komi; one ply
limit (``takzero.matches.games.DEFAULT_PLY_LIMIT``) for ``match``, ``evaluate`` and the match
loops. The shipped networks: 5x5 at komi 0, 6x6 at komi 2 (half-komi 4)."""

from __future__ import annotations

import inspect
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from takzero.matches.games import DEFAULT_PLY_LIMIT
from takzero.matches.spec import MatchSpec

ROOT = Path(__file__).resolve().parent.parent
SIX = str(ROOT / "checkpoints" / "pretrained" / "6x6.pt")
FIVE = str(ROOT / "checkpoints" / "pretrained" / "5x5.pt")
TEI = f"{sys.executable} -m takzero.tei"


def test_the_engines_model_file_is_found_in_its_command_line() -> None:
    from takzero.match import engine_model

    assert engine_model(f"{TEI} --model {SIX}") == SIX
    assert engine_model(f"{TEI} --threads 2 --model={FIVE} --nodes 10") == FIVE
    assert engine_model(f"{TEI} --player model:{FIVE}:100") == FIVE
    assert engine_model(f"{TEI} --player uct:1000") is None
    assert engine_model("tiltak --tei") is None
    assert engine_model("unbalanced 'quote") is None


def _match_main(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> dict[str, Any]:
    """``takzero.match.main`` with the match itself replaced: what it would be played with."""
    import takzero.match as match_cli

    seen: dict[str, Any] = {}

    def fake(engines: list[str], match: MatchSpec, tc: Any, **kw: Any) -> None:
        seen.update(kw, size=match.size, half_komi=match.half_komi, ply_limit=match.ply_limit)

    monkeypatch.setattr(match_cli, "run_tei_match", fake)
    assert match_cli.main([*args, "--out", str(tmp_path / "m")]) == 0
    return seen


@pytest.mark.parametrize(
    ("engines", "size", "half_komi"),
    [
        ([f"{TEI} --model {SIX}", f"{TEI} --player uct:1000"], 6, 4),
        ([f"{TEI} --player uct:1000", f"{TEI} --model {FIVE}"], 5, 0),  # engine 2's model
        ([f"{TEI} --player model:{SIX}", f"{TEI} --model {FIVE}"], 6, 4),  # engine 1 first
        ([f"{TEI} --player uct:1000", f"{TEI} --player random"], 6, 0),  # no model: 6x6, komi 0
    ],
)
def test_match_plays_at_the_models_size_and_komi_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    engines: list[str], size: int, half_komi: int,
) -> None:
    seen = _match_main(monkeypatch, tmp_path, "--engine", engines[0], "--engine", engines[1])
    assert (seen["size"], seen["half_komi"]) == (size, half_komi)
    assert seen["ply_limit"] == DEFAULT_PLY_LIMIT
    err = capsys.readouterr().err
    assert "warning" not in err  # (row 3: engine 2's 5x5 model plays a fallback, at no komi of its own)
    if "model" in engines[0] or "model" in engines[1]:
        assert f"{size}x{size}" in err and "--size and --komi change it" in err


def test_match_warns_once_when_komi_is_not_the_models(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen = _match_main(monkeypatch, tmp_path, "--engine", f"{TEI} --model {SIX}",
                       "--engine", f"{TEI} --player uct:1000", "--komi", "0")
    assert (seen["size"], seen["half_komi"]) == (6, 0)
    warned = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning")]
    assert warned == [f"warning: komi 0 (--komi) is not the komi 2 that engine 1's model {SIX} was trained "
                      "for; its values may be off near the end of the game"]
    _match_main(monkeypatch, tmp_path, "--engine", f"{TEI} --model {SIX}",
                "--engine", f"{TEI} --player uct:1000", "--komi", "2", "--size", "6")
    assert "warning" not in capsys.readouterr().err


def _evaluate_main(monkeypatch: pytest.MonkeyPatch, *args: str) -> dict[str, Any]:
    import takzero.evaluate as evaluate_cli

    seen: dict[str, Any] = {}

    def fake(model: str, baselines: list[str], match: MatchSpec, search: Any, **kw: Any) -> list:
        seen.update(kw, ply_limit=match.ply_limit, komi=None if match.half_komi is None else match.half_komi / 2)
        return []

    monkeypatch.setattr(evaluate_cli, "evaluate", fake)
    assert evaluate_cli.main(list(args)) == 0
    return seen


def test_one_ply_limit_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """evaluate (150 before) and match (300) and the match loops share one default."""
    from takzero.matches.games import run_match
    from takzero.protocols.tei.match import play_tei_game, run_tei_match

    assert _evaluate_main(monkeypatch, SIX)["ply_limit"] == DEFAULT_PLY_LIMIT
    assert _evaluate_main(monkeypatch, SIX)["komi"] is None  # the model's own, read with the model
    for fn in (run_match, play_tei_game, MatchSpec):  # run_tei_match: its MatchSpec's
        assert inspect.signature(fn).parameters["ply_limit"].default == DEFAULT_PLY_LIMIT, fn
    assert "ply_limit" not in inspect.signature(run_tei_match).parameters


@pytest.mark.timeout(300)
def test_evaluate_plays_the_models_komi_and_warns_once_for_another() -> None:
    from takzero.matches.evaluation import evaluate_model

    for komi, half_komi, warned in ((None, 4, 0), (2.0, 4, 0), (0.0, 0, 1)):
        lines: list[str] = []
        (res,) = evaluate_model(SIX, ["random"], pairs=1, simulations=2, ply_limit=20, komi=komi,
                                tinue_nodes=0, progress=lines.append, say=lambda _: None)
        assert res["half_komi"] == half_komi
        warnings_said = [ln for ln in lines if ln.startswith("warning")]
        assert len(warnings_said) == warned
        if warned:
            assert lines[0] == (f"warning: komi 0 (--komi) is not the komi 2 that {SIX} was trained for; "
                                "its values may be off near the end of the game")


def test_playtak_seeks_at_the_models_komi(capsys: pytest.CaptureFixture[str]) -> None:
    from takzero.players.network import KomiMismatchWarning
    from takzero.players.registry import make_player
    from takzero.playtak import _parse_args, seek_komi

    player = make_player(f"model:{SIX}")
    args, seek, _ = _parse_args(["--model", SIX, "--guest", "--seek", "6", "600", "20"])
    assert args.komi is None and seek is not None
    assert seek_komi(seek, args.komi, player, f"model:{SIX}").half_komi == 4
    assert "seek komi 2, as the network was trained" in capsys.readouterr().err
    uct = make_player("uct:10")
    assert seek_komi(seek, None, uct, "uct:10").half_komi == 0  # no network: komi 0
    assert capsys.readouterr().err == ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        zero = seek_komi(seek, 0.0, player, f"model:{SIX}")
        assert zero.half_komi == 0
        player.reset(6, 0)  # the game at the seek's komi: the warning is not said again
        player.reset(6, 2)  # another komi (an accepted seek): the player's own warning
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"takzero.playtak: warning: komi 0 (--komi) is not the komi 2 that model:{SIX} was "
                   "trained for; its values may be off near the end of the game"]
    said = [str(w.message) for w in caught if issubclass(w.category, KomiMismatchWarning)]
    assert len(said) == 1 and "plays a game with komi 1" in said[0]
    # a 5x5 network (komi 0) and --komi 0: nothing to say
    assert seek_komi(seek, 0.0, make_player(f"model:{FIVE}"), f"model:{FIVE}").half_komi == 0
    assert capsys.readouterr().err == ""
