"""The exact flat-endgame search at a player's root (takzero.players.tactics: flat_endgame_root,
flat_endgame_win, avoid_flat_loss) in the network player and the batched match sides, and the
flat-endgame tactics set (takzero/data/tactics_flat.json, scripts/mine_flat_endgames.py).

Every claim is checked independently of ``takzero.search.flat_endgame`` with the plain
exhaustive search of ``takzero.game.exhaustive`` (all moves of both sides) and, on positions of
few moves, a plain minimax of intervals written here.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from takzero.game import Position, core
from takzero.game.exhaustive import forced_win, winning_moves
from takzero.matches.evaluation import model_search
from takzero.matches.games import NetSide
from takzero.matches.tactics_set import FLAT_TACTICS_FILE, load_entries, network_moves, solves
from takzero.nn.actions import legal_mask, move_to_action
from takzero.players import NetworkPlayer, PlayerMove
from takzero.players.tactics import (
    FLAT_ENDGAME_PLIES,
    avoid_flat_loss,
    check_flat_endgame_nodes,
    flat_endgame_root,
    flat_endgame_win,
)
from takzero.search import SearchConfig
from takzero.search.flat_endgame import is_flat_endgame, solve
from tests.flat_minimax import reference_bounds

ENTRIES = load_entries([FLAT_TACTICS_FILE])
RAW = json.loads(FLAT_TACTICS_FILE.read_text())
NODES = 300_000


class FavourEvaluator:
    """Value 0 everywhere; the priors are uniform over the legal moves but for the move
    ``code``, which gets nearly all of it where it is legal: a short search plays it."""

    def __init__(self, size: int, code: int) -> None:
        self.size = size
        self.action = move_to_action(int(code), size)
        self.num_actions = core.num_actions(size)

    def evaluate(self, states: np.ndarray):
        b = states.shape[0]
        mask = legal_mask(states, np.zeros((b, self.num_actions), dtype=np.bool_))
        priors = mask.astype(np.float32) * 1e-3
        priors[mask[:, self.action], self.action] = 1.0
        priors /= np.maximum(priors.sum(axis=1, keepdims=True), 1e-9)
        values = np.zeros(b, dtype=np.float32)
        wdl = np.tile(np.array([0.0, 1.0, 0.0], dtype=np.float32), (b, 1))
        return priors, values, wdl


def _value(pos: Position, code: int) -> int | None:
    """The result of a move that ends the game for the mover, else None."""
    after = pos.play(code)
    if not after.is_over:
        return None
    w = after.result.winner
    return 0 if w is None else (1 if w == pos.side_to_move else -1)




# -- the set ------------------------------------------------------------------------------------


def test_the_set_covers_the_sizes_and_both_answers() -> None:
    sizes = {e["size"] for e in ENTRIES}
    kinds = {e["kind"] for e in ENTRIES}
    assert {4, 5, 6} <= sizes
    assert "avoid_loss" in kinds and kinds & {"win_in_1", "win_in_3", "win_in_5"}
    assert 20 <= len(ENTRIES) <= 120
    assert all(e["theme"] == "flat_endgame" for e in RAW)
    ids = [e["id"] for e in RAW]
    assert len(set(ids)) == len(ids)


def _small(e: dict) -> bool:
    """Entries whose proofs the exhaustive search re-checks quickly here: 4x4, or at most 3
    plies deep."""
    return e["size"] <= 4 or e["plies"] <= 3


@pytest.mark.parametrize("entry", [e for e in ENTRIES if _small(e)], ids=lambda e: e["id"])
def test_small_entries_proofs_by_exhaustive_search(entry: dict) -> None:
    """Each entry's answer, independently: a win kind's expected moves are exactly the moves
    that force a win within the kind's plies (the game must end by the count: no forced road
    within them); an avoid_loss entry's expected moves are the ones after which the opponent
    has no forced win within the proof's depth less one, and each of them holds at least the
    draw in every line (plain minimax where the position has few moves)."""
    pos: Position = entry["position"]
    me = pos.side_to_move
    assert is_flat_endgame(pos, FLAT_ENDGAME_PLIES)
    legal = [int(c) for c in pos.legal_move_codes()]
    expected = {c for c in legal if pos.ptn(c) in entry["expected"]}
    assert len(expected) == len(entry["expected"]) and 0 < len(expected) < len(legal)
    plies = entry["plies"]
    if entry["kind"] != "avoid_loss":
        assert forced_win(pos, plies, attacker=me)
        assert forced_win(pos, plies, roads_only=True) is False
        assert set(winning_moves(pos, plies)) == expected
        for code in legal:
            assert bool(solves(entry, code)) == (code in expected)
        return
    assert not forced_win(pos, plies, attacker=me)  # a draw at best
    for code in legal:
        after = pos.play(code)
        lost = (after.is_over and after.result.winner == 1 - me) or (
            not after.is_over and plies > 1 and forced_win(after, plies - 1, attacker=1 - me)
        )
        assert lost == (code not in expected), pos.ptn(code)
        if code in expected and not after.is_over and len(legal) <= 40 and plies <= 3:
            lo, hi = reference_bounds(after.state.copy(), plies - 1)
            assert hi <= 0, pos.ptn(code)  # the opponent cannot get more than a draw: it is held


@pytest.mark.slow
@pytest.mark.parametrize("entry", [e for e in ENTRIES if not _small(e)], ids=lambda e: e["id"])
def test_large_entries_proofs_by_exhaustive_search(entry: dict) -> None:
    test_small_entries_proofs_by_exhaustive_search(entry)


# -- the checks -----------------------------------------------------------------------------------


def test_check_flat_endgame_nodes_and_bad_input() -> None:
    assert check_flat_endgame_nodes(0) == 0 and check_flat_endgame_nodes(5) == 5
    for bad in (-1, 1.5, "10", True, 10**13):
        with pytest.raises(ValueError, match="flat_endgame_nodes"):
            check_flat_endgame_nodes(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="flat_endgame_nodes"):
        SearchConfig(flat_endgame_nodes=-1)
    with pytest.raises(ValueError, match="flat_endgame_nodes"):
        NetworkPlayer(FavourEvaluator(5, 0), simulations=2, flat_endgame_nodes=-3)
    with pytest.raises(ValueError, match="flat_endgame_nodes"):
        model_search(10, flat_endgame_nodes=-1)
    pos = ENTRIES[0]["position"]
    with pytest.raises(ValueError, match="flat_endgame_nodes"):
        flat_endgame_root(pos, -1)


def test_root_search_only_in_a_flat_endgame() -> None:
    assert flat_endgame_root(Position.start(6).play("a1").play("f6"), 100_000) is None  # not one
    pos = ENTRIES[0]["position"]
    assert flat_endgame_root(pos, 0) is None  # off
    res = flat_endgame_root(pos, NODES)
    assert res is not None and res.nodes <= NODES
    assert flat_endgame_win(None) is None


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["kind"] != "avoid_loss"][::4], ids=lambda e: e["id"])
def test_flat_endgame_win_is_a_forced_win(entry: dict) -> None:
    pos = entry["position"]
    win = flat_endgame_win(flat_endgame_root(pos, NODES))
    assert win is not None and win.value == 1.0 and win.nodes == 0 and win.info["flat_endgame"] == "win"
    assert solves(entry, win.code)


def _losing_non_final(entry: dict) -> int | None:
    """A move of ``entry`` that does not end the game and does not solve it, if any."""
    pos = entry["position"]
    for code in pos.legal_move_codes():
        code = int(code)
        if _value(pos, code) is None and not solves(entry, code):
            return code
    return None


AVOIDS = [e for e in ENTRIES if e["kind"] == "avoid_loss" and _losing_non_final(e) is not None]
# a win in one ply the search itself sees (its root marks the moves that end the game)
WINS = [e for e in ENTRIES if e["kind"] in ("win_in_3", "win_in_5") and _losing_non_final(e) is not None]


def test_the_set_has_positions_for_the_player_tests() -> None:
    assert AVOIDS and WINS


@pytest.mark.parametrize("entry", AVOIDS[:4], ids=lambda e: e["id"])
def test_avoid_flat_loss_replaces_a_lost_move(entry: dict) -> None:
    pos = entry["position"]
    bad = _losing_non_final(entry)
    assert bad is not None
    root = flat_endgame_root(pos, NODES)
    assert root is not None and root.lower == 0
    answer = PlayerMove(bad, value=0.3, nodes=7, info={"visits": 5})
    out = avoid_flat_loss(pos, answer, [bad], root, NODES)
    assert out.code != bad and solves(entry, out.code)
    assert out.info["flat_endgame_avoided"] == (bad,) and out.info["flat_endgame"] == "draw"
    assert out.info["visits"] == 5 and out.nodes == 7
    good = next(int(c) for c in pos.legal_move_codes() if solves(entry, int(c)))
    kept = avoid_flat_loss(pos, replace(answer, code=good), [good], root, NODES)
    assert kept.code == good and "flat_endgame_avoided" not in kept.info
    assert avoid_flat_loss(pos, answer, [bad], None, NODES) is answer  # no root answer: as it is


def test_avoid_flat_loss_takes_a_move_not_proved_lost_when_nothing_is_forced() -> None:
    """Where the root proves nothing (lower -1, upper above it), a move proved lost gives way to
    the first move of the ranking not proved lost: small 3x3 endings from random games, each
    checked with the plain minimax."""
    rng = np.random.default_rng(11)
    seen = 0
    for _ in range(400):
        pos = Position.start(3, flats=5, caps=0)
        while not pos.is_over and not (pos.ply >= 4 and is_flat_endgame(pos, 4) and rng.random() < 0.5):
            codes = pos.legal_move_codes()
            pos = pos.play(int(codes[rng.integers(len(codes))]))
        if pos.is_over:
            continue
        root = solve(pos, 2, max_nodes=None)  # shallow: often open at the root
        if root.lower != -1 or root.upper == -1:
            continue
        me = pos.side_to_move
        legal = [int(c) for c in pos.legal_move_codes()]
        lost = [c for c in legal if _value(pos, c) is None
                and forced_win(pos.play(c), FLAT_ENDGAME_PLIES - 1, attacker=1 - me)]
        if not lost or len(lost) == len(legal):
            continue
        out = avoid_flat_loss(pos, PlayerMove(lost[0], value=0.0), [lost[0]], root, NODES)
        assert out.code != lost[0] and lost[0] in out.info["flat_endgame_avoided"]
        after = pos.play(out.code)
        assert (after.is_over and after.result.winner != 1 - me) or not forced_win(
            after, FLAT_ENDGAME_PLIES - 1, attacker=1 - me
        )
        seen += 1
        if seen >= 3:
            break
    assert seen >= 1


def _player(entry: dict, code: int, flat_nodes: int) -> NetworkPlayer:
    pos = entry["position"]
    player = NetworkPlayer(FavourEvaluator(pos.size, code), simulations=2, tinue_nodes=0,
                           flat_endgame_nodes=flat_nodes)
    player.reset(pos.size, pos.half_komi, seed=0)
    return player


def _misled(entry: dict) -> int | None:
    """A move that does not solve ``entry`` and that the network alone, its priors on that
    move, plays (the search's own checks, e.g. a reply that ends the game at once, can see
    through some)."""
    pos = entry["position"]
    for code in pos.legal_move_codes():
        code = int(code)
        if _value(pos, code) is None and not solves(entry, code) and _player(entry, code, 0).choose(pos).code == code:
            return code
    return None


@pytest.mark.parametrize("entry", AVOIDS[:2] + WINS[:2], ids=lambda e: e["id"])
def test_network_player_plays_the_proved_move_where_the_network_alone_does_not(entry: dict) -> None:
    pos = entry["position"]
    bad = _misled(entry)
    assert bad is not None
    alone = _player(entry, bad, 0).choose(pos)
    assert alone.code == bad and not solves(entry, alone.code) and "flat_endgame" not in alone.info
    player = _player(entry, bad, NODES)
    answer = player.choose(pos)
    assert solves(entry, answer.code)
    if entry["kind"] == "avoid_loss":
        assert answer.info["flat_endgame_avoided"] == (bad,) and answer.nodes > 0
    else:
        assert answer.info["flat_endgame"] == "win" and answer.nodes == 0 and answer.value == 1.0
    # the same through set_search (the TEI options' path) and the batched match side
    other = _player(entry, bad, 0)
    other.set_search(flat_endgame_nodes=NODES)
    assert other.flat_endgame_nodes == NODES and solves(entry, other.choose(pos).code)
    config = SearchConfig(simulations=2, tinue_nodes=0, flat_endgame_nodes=NODES).evaluation()
    side = NetSide("net", FavourEvaluator(pos.size, bad), config, 2)
    assert solves(entry, network_moves(side, [pos])[0].code)
    off = NetSide("net", FavourEvaluator(pos.size, bad), replace(config, flat_endgame_nodes=0), 2)
    assert network_moves(off, [pos])[0].code == bad


# -- a timed move: the checks come out of its budget ---------------------------------------------


def _open_midgame() -> Position:
    """A 6x6 middle game inside the loose ``is_flat_endgame`` gate whose flat-endgame search
    proves nothing (bounds -1, 1 at depth 6): every check of it runs to its budget."""
    rng = np.random.default_rng(0)
    pos = Position.start(6)
    for _ in range(12):
        codes = pos.legal_move_codes()
        pos = pos.play(int(codes[rng.integers(len(codes))]))
    assert is_flat_endgame(pos, FLAT_ENDGAME_PLIES)
    return pos


def _record_solves(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float | None]]:
    """(call time, max_seconds) of every flat-endgame search the checks start."""
    import time

    import takzero.players.tactics as tactics_module

    calls: list[tuple[float, float | None]] = []
    real = tactics_module.solve

    def solve_recorded(position, max_plies, max_nodes=None, max_seconds=None):
        calls.append((time.perf_counter(), max_seconds))
        return real(position, max_plies, max_nodes=max_nodes, max_seconds=max_seconds)

    monkeypatch.setattr(tactics_module, "solve", solve_recorded)
    return calls


def test_a_timed_move_gives_the_flat_endgame_checks_and_the_search_shares_of_its_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found 2026-12-07: the checks took their whole node budget whatever the clock said (a
    0.05 s ``movetime`` answered after 0.5 s on a 6x6 middle game, the gate being loose). Now
    every search of the checks ends by the move's deadline, the root's within
    FLAT_ENDGAME_TIME_SHARE of the budget, and the search keeps as much back for the check of its
    move. (Budget arithmetic on the recorded calls, not timing.)"""
    import time

    from takzero.players.network_search import FLAT_ENDGAME_TIME_SHARE
    from takzero.search.limit import Limit

    pos = _open_midgame()
    calls = _record_solves(monkeypatch)
    player = NetworkPlayer(FavourEvaluator(6, int(pos.legal_move_codes()[0])), simulations=50, tinue_nodes=0,
                           flat_endgame_nodes=10**9)
    player.reset(6, 0, seed=0)
    searched: list[float | None] = []
    search = player._one()
    real_run = search.driver.run

    def run_recorded(games, limit, **kw):
        searched.append(limit.seconds)
        return real_run(games, limit, **kw)

    monkeypatch.setattr(search.driver, "run", run_recorded)
    budget = 0.2
    SLACK = 0.02  # noqa: N806 - a constant of this test
    t_before = time.perf_counter()
    answer = player.think(pos, Limit(seconds=budget))
    # the root's search, then the searched move's unless the deadline passed before it
    assert answer.info["flat_endgame"] == "open" and len(calls) in (1, 2)
    t_root, root_s = calls[0]
    assert root_s is not None and root_s <= FLAT_ENDGAME_TIME_SHARE * budget and t_root >= t_before
    # the move's deadline: its budget from the search's start (before t_root); SLACK covers a
    # preemption between the code's clock reading and the recording hook's (the bug's overrun
    # was the whole node budget, seconds)
    for t_move, move_s in calls[1:]:
        assert move_s is not None and t_move + move_s <= t_root + budget + SLACK
    assert searched and searched[0] is not None and searched[0] <= (1 - FLAT_ENDGAME_TIME_SHARE) * budget + 1e-9
    # without a clock the checks are node-limited only, as before (deterministic)
    calls.clear()
    player.think(pos, Limit(nodes=20))
    assert calls and all(s is None for _, s in calls)


def test_no_flat_endgame_search_starts_once_stop_is_set_or_the_deadline_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading
    import time

    from takzero.search.limit import Limit

    pos = _open_midgame()
    calls = _record_solves(monkeypatch)
    player = NetworkPlayer(FavourEvaluator(6, int(pos.legal_move_codes()[0])), simulations=50, tinue_nodes=0,
                           flat_endgame_nodes=10**9)
    player.reset(6, 0, seed=0)
    stop = threading.Event()
    stop.set()
    assert "flat_endgame" not in player.think(pos, Limit(stop=stop)).info and calls == []
    # the check of a searched move after its deadline or a stop: the move as it is
    root = flat_endgame_root(pos, NODES)
    assert root is not None and root.lower == -1 < root.upper
    calls.clear()
    code = int(pos.legal_move_codes()[0])
    answer = PlayerMove(code, value=0.1, nodes=3)
    for kw in ({"deadline": time.perf_counter() - 1.0}, {"stop": stop}):
        out = avoid_flat_loss(pos, answer, [code], root, 10**9, **kw)  # type: ignore[arg-type]
        assert out.code == code and out.info["flat_endgame"] == "open" and calls == []
    assert flat_endgame_root(pos, 10**9, deadline=time.perf_counter() - 1.0) is None and calls == []


# -- the training run's tactics curve: the network alone ----------------------------------------


def test_the_tactics_curve_runs_the_network_alone_whatever_mcts_flat_endgame_nodes(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``evaluator.tactics_every``'s point is the network alone (no tinuë prover): with
    ``mcts.flat_endgame_nodes`` > 0 (for the gating and baseline games) it ran the flat-endgame
    search too, which solves most positions of the set by itself (the gate holds on nearly every
    4x4 and 5x5 position), so the curve measured the solver, not the network."""
    import torch
    from smoke_config import smoke_config

    import takzero.pipeline.gating as gating
    from takzero.nn.model import TakNet

    cfg = smoke_config(tmp_path, **{"evaluator.tactics_every": 1, "evaluator.gating": "off",
                                    "mcts.simulations": 4, "evaluator.simulations": 4,
                                    "mcts.flat_endgame_nodes": NODES, "mcts.tinue_nodes": 1000})
    ev = gating.GatingEvaluator(cfg)
    assert ev.search.flat_endgame_nodes == NODES  # the games keep it
    seen: list[SearchConfig] = []

    def moves_recorded(side, positions, seed=0):
        seen.append(side.config)
        return [PlayerMove(int(p.legal_move_codes()[0])) for p in positions]

    monkeypatch.setattr(gating, "network_moves", moves_recorded)
    torch.manual_seed(0)
    ev.tactics_point(TakNet(cfg.model_config()).state_dict())
    assert seen and seen[0].flat_endgame_nodes == 0 and seen[0].tinue_nodes == 0


@pytest.mark.parametrize("name", ["flat_endgame_nodes", "tinue_nodes"])
@pytest.mark.parametrize("bad", [1.5, True, "10", None])
def test_a_node_budget_that_is_no_integer_is_refused_by_set_search_and_the_player_plays_on(
    name: str, bad: object
) -> None:
    """``set_search(flat_endgame_nodes=1.5)`` (or True) was taken and every later move failed
    (the search's own check refused it); ``tinue_nodes=2.7`` became 2 silently. Now
    ``SearchConfig`` refuses both, so ``set_search`` raises and changes nothing."""
    entry = ENTRIES[0]
    pos = entry["position"]
    player = _player(entry, 0, NODES)
    with pytest.raises(ValueError, match=name):
        player.set_search(**{name: bad})
    with pytest.raises(ValueError, match=name):
        SearchConfig(**{name: bad})  # type: ignore[arg-type]
    assert player.flat_endgame_nodes == NODES and player.tinue_nodes == 0
    assert solves(entry, player.choose(pos).code)


def test_an_evaluations_lines_record_its_flat_endgame_budget(tmp_path) -> None:
    """Each baseline's summary line records ``tinue_nodes``; ``flat_endgame_nodes`` (the
    ``--flat-endgame-nodes`` of the command) was left out, so runs with and without the checks
    gave the same lines."""
    import torch

    from takzero.matches.evaluation import evaluate
    from takzero.matches.spec import MatchSpec
    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict

    torch.manual_seed(0)
    tiny_model = tmp_path / "tiny.pt"
    torch.save(checkpoint_dict(TakNet(ModelConfig(size=3, channels=8, blocks=1))), tiny_model)
    lines: list[str] = []
    search = model_search(3, tinue_nodes=0, select_q_fraction=0.0, flat_endgame_nodes=5000)
    (r,) = evaluate(str(tiny_model), ["random"], MatchSpec(games=2, ply_limit=6), search,
                    say=lines.append, backend="torch")
    assert r["flat_endgame_nodes"] == 5000 and json.loads(lines[-1])["flat_endgame_nodes"] == 5000
