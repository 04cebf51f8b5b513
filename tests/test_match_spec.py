"""Players, matches and the TEI engine take one ``SearchConfig`` and one ``MatchSpec`` (issue 57,
item 2): the search a player is given is the one it searches with (simulations, tree reuse,
tinuë checks included), a match's terms are one checked value, and the evaluation, the TEI match
runner and the TEI engine's network player are built from them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from takzero.game import Position
from takzero.matches.evaluation import evaluate, evaluate_model, model_search
from takzero.matches.spec import MatchSpec
from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
from takzero.players.network import DEFAULT_NETWORK_SIMULATIONS, NetworkPlayer, player_search
from takzero.players.registry import make_player
from takzero.protocols.tei.engine import TEIEngine
from takzero.protocols.tei.match import TimeControl, run_tei_match
from takzero.search import HashEvaluator, SearchConfig


@pytest.fixture
def tiny_model(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    path = tmp_path / "tiny.pt"
    torch.save(checkpoint_dict(TakNet(ModelConfig(size=3, channels=8, blocks=1))), path)
    return path


@pytest.mark.parametrize(
    ("field", "bad"),
    [("games", 0), ("games", 2.5), ("size", 2), ("size", 9), ("half_komi", 201), ("ply_limit", 0),
     ("opening_plies", -1), ("seed", -1), ("games", True)],
)
def test_match_spec_refuses_each_bad_field_naming_it(field: str, bad: object) -> None:
    fields = {"games": 2, field: bad}
    with pytest.raises(ValueError, match=rf"^match: {field} must be an integer") as info:
        MatchSpec(**fields)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)


def test_match_spec_pairs_and_komi() -> None:
    assert MatchSpec(games=5).pairs == 3 and MatchSpec(games=4).pairs == 2
    spec = MatchSpec.from_pairs(3, komi=2.5, seed=7)
    assert (spec.games, spec.half_komi, spec.seed) == (6, 5, 7)
    assert MatchSpec.from_pairs(1).half_komi is None
    with pytest.raises(ValueError, match="multiple of 0.5"):
        MatchSpec.from_pairs(1, komi=0.3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.games = 8  # type: ignore[misc]
    with pytest.raises(ValueError, match="no openings"):
        MatchSpec(games=2, openings=())


def test_player_searches_with_the_config_it_is_given() -> None:
    """Every search field of the config reaches the player: before, ``simulations`` fell back to
    400 and ``reuse_tree`` to True whatever the config said."""
    cfg = player_search(simulations=7, reuse_tree=False, tinue_nodes=0, c_init=2.0)
    p = NetworkPlayer(HashEvaluator(4, seed=1), config=cfg)
    assert (p.simulations, p.reuse_tree, p.tinue_nodes) == (7, False, 0)
    assert p.config.c_init == 2.0 and p.config.simulations == 7 and not p.config.root_noise
    assert NetworkPlayer(HashEvaluator(4)).simulations == DEFAULT_NETWORK_SIMULATIONS
    assert NetworkPlayer(HashEvaluator(4), config=cfg, simulations=9).simulations == 9  # explicit wins
    p.set_search(simulations=11, reuse_tree=True)
    assert (p.simulations, p.reuse_tree, p.config.simulations) == (11, True, 11)
    p.reset(4, 0)
    assert p.choose(Position.start(4)).nodes == 11  # the search ran the set count, not 7 or 400


def test_player_search_refuses_unknown_fields() -> None:
    with pytest.raises(ValueError, match="player_search"):
        player_search(simulatons=3)
    with pytest.raises(ValueError, match="simulations must be >= 1"):
        player_search(simulations=0)


def test_model_baseline_gets_its_count_through_the_config(tiny_model: Path) -> None:
    p = make_player(f"model:{tiny_model}:5")
    assert p.simulations == 5 and p.config.simulations == 5


def test_tei_engine_builds_its_network_from_its_search(tiny_model: Path) -> None:
    """The engine hands its ``SearchConfig`` (``--nodes`` over its simulations) to the loader."""
    got: list[SearchConfig] = []

    def loader(path: str, search: SearchConfig, seed: int, device: str):
        got.append(search)
        return NetworkPlayer.load(path, config=search, seed=seed, device=device, backend="torch")

    search = player_search(c_init=1.7)
    engine = TEIEngine(model=str(tiny_model), nodes=13, search=search, model_loader=loader,
                       out=lambda _line: None, backend="torch")
    assert got[0].simulations == 13 and got[0].c_init == 1.7
    assert engine.network.simulations == 13 and engine.network.config.c_init == 1.7
    TEIEngine(model=str(tiny_model), model_loader=loader, out=lambda _line: None, backend="torch")
    assert got[1] == player_search()


def test_evaluate_takes_a_match_spec_and_a_search(tiny_model: Path) -> None:
    lines: list[str] = []
    search = model_search(3, tinue_nodes=0, select_q_fraction=0.0)
    (r,) = evaluate(str(tiny_model), ["random"], MatchSpec(games=2, ply_limit=6, half_komi=2), search,
                    say=lines.append, backend="torch")
    assert json.loads(lines[-1])["simulations"] == 3
    assert (r["games"], r["pairs"], r["half_komi"], r["tinue_nodes"], r["select_q_fraction"]) == (2, 1, 2, 0, 0.0)
    (old,) = evaluate_model(str(tiny_model), ["random"], pairs=1, simulations=3, ply_limit=6, komi=1.0,
                            tinue_nodes=0, select_q_fraction=0.0, say=lambda _l: None, backend="torch")
    assert {k: v for k, v in old.items() if k != "seconds"} == {k: v for k, v in r.items() if k != "seconds"}
    with pytest.raises(ValueError, match="games must be even"):
        evaluate(str(tiny_model), ["random"], MatchSpec(games=3), search, say=lambda _l: None)
    with pytest.raises(ValueError, match="not the match's 4x4"):
        evaluate(str(tiny_model), ["random"], MatchSpec(games=2, size=4), search, say=lambda _l: None)


def test_tei_match_needs_size_and_komi(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="board size and the komi"):
        run_tei_match(["a", "b"], MatchSpec(games=2), TimeControl(nodes=1), printer=lambda _l: None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [({"threefold": "no"}, "threefold must be true or false"), ({"threefold": 0}, "threefold must be true or false"),
     ({"openings": "a1 b2"}, "openings must be a sequence of Opening, got a str"),
     ({"openings": 5}, "openings must be a sequence of Opening, got a int"),
     ({"openings": ["a1"]}, "openings must be Opening values .*got a str"),
     ({"openings": ["a1"], "size": 5}, "openings must be Opening values .*got a str")],
)
def test_match_spec_refuses_other_types_in_one_line(fields: dict, message: str) -> None:
    """A truthy non-bool ``threefold`` ('no') turned repetition draws on; openings that are not
    ``Opening`` values were taken as given (a string as its characters) and failed later with an
    AttributeError."""
    with pytest.raises(ValueError, match=rf"^match: {message}") as info:
        MatchSpec(games=2, **fields)
    assert "\n" not in str(info.value)


def test_match_spec_takes_openings_from_any_sequence() -> None:
    from takzero.matches.openings import Opening

    start = Position.start(4)
    opening = Opening(start, (int(start.legal_move_codes()[0]),))
    assert MatchSpec(games=2, openings=[opening]).openings == (opening,)
    assert MatchSpec(games=2, openings=(o for o in [opening]), size=4).openings == (opening,)
