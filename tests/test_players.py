"""Baseline players: legality, tactics (greedy and UCT), strength against random, determinism."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from takzero.game import Position
from takzero.game.core import has_winning_move
from takzero.matches.games import run_match
from takzero.players import (
    GreedyPlayer,
    Player,
    PlayerMove,
    RandomPlayer,
    UCTPlayer,
    as_player_move,
    check_spec,
    greedy_move,
    make_player,
)
from takzero.search.limit import Limit

DATA = Path(__file__).parent / "data"


def random_positions(size: int, count: int, seed: int) -> list[Position]:
    """Positions reached by uniformly random play from the start (0..60 plies), not over."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        pos = Position.start(size, half_komi=int(rng.integers(0, 5)))
        for _ in range(int(rng.integers(0, 60))):
            codes = pos.legal_move_codes()
            nxt = pos.copy()
            nxt.make(int(codes[rng.integers(len(codes))]))
            if nxt.is_over:
                break
            pos = nxt
        out.append(pos)
    return out


def all_players(seed: int = 0) -> list:
    return [
        RandomPlayer(seed),
        GreedyPlayer(seed),
        UCTPlayer(simulations=30, seed=seed),
        UCTPlayer(simulations=30, win_check=False, seed=seed),
    ]


@pytest.mark.parametrize("size", [3, 4, 5, 6])
def test_players_return_legal_moves(size: int) -> None:
    players = all_players(seed=size)
    for p in players:
        assert isinstance(p, Player)
        p.reset(size, 0, seed=7)
    for pos in random_positions(size, 12, seed=100 + size):
        legal = set(pos.legal_move_codes().tolist())
        before = pos.copy()
        for p in players:
            answer = p.choose(pos)
            assert isinstance(answer, PlayerMove)
            assert answer.code in legal, (p.name, pos.to_tps())
            assert pos == before, f"{p.name} changed the position"
            if answer.value is not None:
                assert -1.0 <= answer.value <= 1.0
            if answer.pv:
                assert answer.pv[0] == answer.code


def test_finished_position_raises() -> None:
    pos = Position.from_tps("1,1,1/x3/2,2,x 2 3")  # white road on rank 3
    assert pos.is_over
    for p in all_players():
        with pytest.raises(ValueError):
            p.choose(pos)


def _tactics() -> list[dict]:
    return json.loads((DATA / "tactics.json").read_text())


@pytest.mark.parametrize("case", _tactics(), ids=lambda c: c["id"])
def test_greedy_and_uct_take_a_road_in_one(case: dict) -> None:
    pos = Position.from_tps(case["tps"], komi=case["komi"])
    winning = {pos.check_move(m) for m in case["winning_moves"]}
    greedy = GreedyPlayer(seed=1).choose(pos)
    assert greedy.code in winning
    assert greedy.info["kind"] == "win" and greedy.value == 1.0
    uct = UCTPlayer(simulations=50, seed=1).choose(pos)
    assert uct.code in winning and uct.value == 1.0 and uct.nodes == 0


def test_plain_uct_finds_a_road_in_one_with_enough_simulations() -> None:
    # Without the expansion win check a road in one is found by the rollouts alone.
    pos = Position.from_tps("x5/x,2,2,2,x/x2,2,x2/x,1,1,1,1/x5 1 5")
    winning = {pos.check_move("a2"), pos.check_move("Ca2")}
    uct = UCTPlayer(simulations=2000, win_check=False, seed=3).choose(pos)
    assert uct.code in winning


# White threatens e3 (a3-d3 are white flats); black can only stop it by placing on e3, and a flat
# there is the best flat difference.
THREAT_TPS = "x5/x5/1,1,1,1,x/x5/2,2,2,x2 2 5"


def test_greedy_blocks_a_one_move_road_threat() -> None:
    pos = Position.from_tps(THREAT_TPS)
    white_to_move = Position.from_tps(THREAT_TPS.replace(" 2 5", " 1 6"))
    assert white_to_move.play("e3").result.reason == "road"  # the threat is real
    for seed in range(5):
        move = GreedyPlayer(seed=seed).choose(pos)
        assert pos.ptn(move.code) == "e3", pos.ptn(move.code)
        assert move.info["kind"] == "safe"
        after = pos.play(move.code)
        buf = np.empty(4096, dtype=np.int64)
        assert not has_winning_move(after.state.copy(), buf)


def test_uct_blocks_a_one_move_road_threat() -> None:
    pos = Position.from_tps(THREAT_TPS)
    blocks = {pos.check_move(m) for m in ("e3", "Se3", "Ce3")}
    for seed in range(3):
        assert UCTPlayer(simulations=1000, seed=seed).choose(pos).code in blocks


def test_greedy_with_no_defence_reports_lost() -> None:
    # White has two separate road threats (rank 3 at e3 and file a at a5): black cannot stop both.
    tps = "x5/1,x4/1,1,1,1,x/1,x4/1,2,2,2S,x 2 6"
    pos = Position.from_tps(tps)
    code, kind, _ = greedy_move(pos.state.copy(), 0)
    assert kind == 2
    assert code in set(pos.legal_move_codes().tolist())


def test_uct_beats_random_clearly() -> None:
    m = run_match(UCTPlayer(simulations=200, seed=1), RandomPlayer(2), 3, 0, 5, 100, seed=11)
    assert m.num_games == 10
    assert m.score >= 0.8, m.summary()
    m4 = run_match(UCTPlayer(simulations=200, seed=1), RandomPlayer(2), 4, 0, 5, 200, seed=12)
    assert m4.score >= 0.8, m4.summary()


def test_greedy_beats_random_clearly() -> None:
    m = run_match(GreedyPlayer(1), RandomPlayer(2), 5, 0, 5, 200, seed=13)
    assert m.score >= 0.8, m.summary()


def _game_moves(white, black, seed: int, size: int = 4, plies: int = 16) -> list[int]:
    pos = Position.start(size)
    white.reset(size, 0, seed)
    black.reset(size, 0, seed + 1)
    moves = []
    for _ in range(plies):
        if pos.is_over:
            break
        p = white if pos.side_to_move == 0 else black
        code = p.choose(pos).code
        moves.append(code)
        pos.make(code)
    return moves


@pytest.mark.parametrize("kind", ["random", "greedy", "uct:40"])
def test_players_are_deterministic_for_a_seed(kind: str) -> None:
    a = _game_moves(make_player(kind, 5), make_player(kind, 6), seed=21)
    b = _game_moves(make_player(kind, 99), make_player(kind, 98), seed=21)  # reset seeds win
    assert a == b
    c = _game_moves(make_player(kind, 5), make_player(kind, 6), seed=22)
    if kind == "random":
        assert a != c
    # The constructor seed alone also fixes the stream.
    p1, p2 = make_player(kind, 3), make_player(kind, 3)
    pos = Position.start(5).play("a1").play("e5")
    assert [p1.choose(pos).code for _ in range(3)] == [p2.choose(pos).code for _ in range(3)]


def test_uct_move_info() -> None:
    pos = Position.start(4).play("a1").play("d4")
    m = UCTPlayer(simulations=300, seed=0).choose(pos)
    assert m.nodes == 300
    assert m.info["visits"] in range(1, 301)
    assert m.info["tree_nodes"] in range(1, 302)
    assert len(m.pv) >= 1 and m.pv[0] == m.code
    replay = pos.copy()
    for code in m.pv:  # the PV is a legal line
        replay = replay.play(code)
        if replay.is_over:
            break


def test_make_player_and_validation() -> None:
    assert isinstance(make_player("random"), RandomPlayer)
    assert isinstance(make_player("greedy"), GreedyPlayer)
    p = make_player("uct:123")
    assert isinstance(p, UCTPlayer) and p.simulations == 123 and p.name == "uct123"
    for bad in ("minimax", "uct:x", "random:3", "uct:", "random:", "greedy:"):
        with pytest.raises(ValueError):
            make_player(bad)
    with pytest.raises(ValueError):
        UCTPlayer(simulations=0)
    with pytest.raises(ValueError):
        UCTPlayer(exploration=-1)
    with pytest.raises(ValueError):
        UCTPlayer(rollout_plies=-1)
    assert as_player_move(17) == PlayerMove(17)
    assert as_player_move(PlayerMove(3, value=0.5)).value == 0.5


# -- the player table (takzero.players.registry) ------------------------------------------------

SHIPPED_5X5 = Path(__file__).resolve().parents[1] / "checkpoints" / "pretrained" / "5x5.pt"


def test_every_kind_builds_and_plays_a_legal_move() -> None:
    from takzero.players import KINDS

    examples = {
        "random": "random", "greedy": "greedy", "uct": "uct:20",
        "model": f"model:{SHIPPED_5X5}:8",
    }
    # a new kind needs an example here; engine kinds (tei:, a process the match layer starts)
    # are built and played in tests/test_tei_baselines.py
    assert {k.name for k in KINDS if not k.engine} == set(examples)
    pos = Position.start(5).play("a1").play("e5")
    for kind in (k for k in KINDS if not k.engine):
        spec = examples[kind.name]
        assert check_spec(spec) == kind.name
        p = make_player(spec, seed=1)
        assert isinstance(p, Player)
        p.reset(5, 0, seed=2)
        assert p.choose(pos).code in set(pos.legal_move_codes().tolist()), spec


def test_help_text_lists_every_kind() -> None:
    from takzero.players import KINDS, help_text, spec_syntax

    text = help_text(engines=True)
    for kind in KINDS:
        assert kind.syntax in text and kind.help in text and kind.syntax in spec_syntax(engines=True)
        # where engines do not play (the TEI engine, play, playtak) their kinds are not offered
        assert (kind.syntax in help_text()) == (kind.syntax in spec_syntax()) == (not kind.engine)


@pytest.mark.parametrize(
    "bad", ["minimax", "uct:x", "uct:0", "uct:", "random:3", "greedy:", "model:", "model:nope.pt"]
)
def test_bad_specs_name_the_known_kinds(bad: str) -> None:
    from takzero.players import KINDS

    for fn in (check_spec, make_player):
        with pytest.raises(ValueError, match="unknown player") as err:
            fn(bad)
        assert all(kind.syntax in str(err.value) for kind in KINDS if not kind.engine)
    with pytest.raises(ValueError, match="unknown player") as err:
        check_spec(bad, engines=True)  # the evaluator's baselines: tei: engines named too
    assert all(kind.syntax in str(err.value) for kind in KINDS)


def test_model_spec_loads_the_shipped_network() -> None:
    from takzero.players import DEFAULT_NETWORK_SIMULATIONS, NetworkPlayer, spec_label

    p = make_player(f"model:{SHIPPED_5X5}:12", seed=3)
    assert isinstance(p, NetworkPlayer) and p.simulations == 12 and p.model_size == 5
    assert p.name == "model-5x5"  # the shipped file has no run name
    assert make_player(f"model:{SHIPPED_5X5}").simulations == DEFAULT_NETWORK_SIMULATIONS
    assert make_player(f"model:{SHIPPED_5X5}", simulations=9).simulations == 9  # no count given
    pos = Position.start(5).play("a1").play("e5").play("c3")
    p.reset(5, 0, seed=0)
    answer = p.choose(pos)
    assert answer.code in set(pos.legal_move_codes().tolist()) and answer.nodes == 12
    assert spec_label(f"model:{SHIPPED_5X5}:12") == "model-5x5-12"
    assert spec_label("uct:200") == "uct200" and spec_label("random") == "random"
    with pytest.raises(ValueError, match="cannot load model"):
        make_player(f"model:{Path(__file__)}")  # a file that is not a model


def test_simulations_apply_only_when_the_spec_gives_none() -> None:
    assert make_player("uct", simulations=33).simulations == 33
    assert make_player("uct:44", simulations=33).simulations == 44
    assert make_player("uct").simulations == 1000
    assert isinstance(make_player("greedy", simulations=33), GreedyPlayer)


# -- players keep their own clock (think) --------------------------------------------------------


def test_think_of_a_non_searching_player_is_one_choose() -> None:
    pos = Position.start(4).play("a1").play("d4")
    assert GreedyPlayer(4).think(pos, Limit(nodes=10, seconds=0.01)) == GreedyPlayer(4).choose(pos)


def test_uct_think_under_a_node_limit_is_one_search() -> None:
    pos = Position.start(4).play("a1").play("d4")
    seen: list[int] = []
    player = UCTPlayer(simulations=500, seed=2)
    a = player.think(pos, Limit(nodes=60), on_progress=lambda m, n: seen.append(n))
    b = UCTPlayer(simulations=60, seed=2).choose(pos)
    assert a == b and a.nodes == 60 and seen == [60]


def test_uct_think_on_time_grows_its_searches_and_counts_them_all() -> None:
    pos = Position.start(4).play("a1").play("d4")
    UCTPlayer(simulations=8).choose(pos)  # compiled before the clock starts
    seen: list[int] = []
    pm = UCTPlayer(seed=1).think(pos, Limit(seconds=0.3), on_progress=lambda m, n: seen.append(n))
    assert seen[:2] == [64, 64 + 128] and pm.nodes == seen[-1]
    stop = threading.Event()
    stop.set()  # already stopped: the compiled search polls the flag and ends after one simulation
    assert UCTPlayer(seed=1).think(pos, Limit(stop=stop)).nodes == 1


def test_uct_think_on_time_stops_at_a_win_in_one() -> None:
    # Before: a win in one (played unsearched) kept doubling the "search" until the time was
    # spent, allocating trees of millions of nodes.
    case = _tactics()[0]
    pos = Position.from_tps(case["tps"], komi=case["komi"])
    UCTPlayer(simulations=8).choose(pos)  # compiled before the clock starts
    seen: list[int] = []
    t0 = time.perf_counter()
    pm = UCTPlayer(seed=1).think(pos, Limit(seconds=5.0), on_progress=lambda m, n: seen.append(n))
    assert time.perf_counter() - t0 < 2.0
    assert pm.code in {pos.check_move(m) for m in case["winning_moves"]}
    assert seen == [0] and pm.nodes == 0


@pytest.mark.parametrize("count", ["abc", "-3", "", "1.5", "²", "0"])
def test_a_bad_count_after_an_existing_model_file_is_called_a_bad_count(count: str, tmp_path: Path) -> None:
    """``model:PATH:X`` with PATH a file and X no count: the count is wrong, not the file missing
    (for every kind that takes a count: ``uct:X`` says the same)."""
    model = tmp_path / "net.pt"
    model.write_bytes(b"not loaded by check_spec")
    for spec in (f"model:{model}:{count}", f"uct:{count}"):
        with pytest.raises(ValueError, match="simulation count must be a whole number >= 1"):
            check_spec(spec)
    if not count.isdigit():  # not a count and no file before it: the whole text is the path
        with pytest.raises(ValueError, match="model file not found"):
            check_spec(f"model:{tmp_path / 'missing.pt'}:{count}")
    assert check_spec(f"model:{model}:7") == "model"
    odd = tmp_path / "net.pt:abc"  # a file whose own name has the colon is still that file
    odd.write_bytes(b"x")
    assert check_spec(f"model:{odd}") == "model"
