"""The tinuë checks at a player's root (takzero.players.tactics) in the network player, the UCT
player, the batched match sides and the TEI info line.

Every claim is checked independently of the prover with the plain exhaustive search of
``takzero.game.exhaustive`` (all moves of both sides, no proof numbers).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from takzero.game import Position
from takzero.game.exhaustive import forced_win, safe_moves
from takzero.matches.games import NetSide, play_games
from takzero.matches.tactics_set import TACTICS_FILE
from takzero.players import NetworkPlayer, PlayerMove, UCTPlayer
from takzero.players.tactics import (
    avoid_tinue,
    check_tinue_nodes,
    opponent_wins_after,
    proven_win,
    ranked_by_visits,
)
from takzero.protocols.tei.lines import format_info
from takzero.search import SearchConfig, UniformEvaluator

DATA = Path(__file__).parent / "data"
MINED = json.loads(TACTICS_FILE.read_text())  # the package's mined set (takzero/data)


def _position(entry: dict) -> Position:
    return Position.from_tps(entry["tps"], komi=entry["komi"])


def _entries(kind: str, size: int, count: int) -> list[dict]:
    return [e for e in MINED if e["kind"] == kind and e["size"] == size][:count]


WINS = _entries("win_in_3", 5, 4) + _entries("win_in_5", 5, 2) + _entries("win_in_3", 6, 2)
AVOIDS = _entries("avoid_loss", 5, 4) + _entries("avoid_loss", 6, 2)


def test_the_fixture_has_the_kinds_used_here() -> None:
    assert len(WINS) == 8 and len(AVOIDS) == 6


@pytest.mark.parametrize("entry", WINS, ids=lambda e: e["id"])
def test_proven_win_plays_a_move_that_wins_by_force(entry: dict) -> None:
    pos = _position(entry)
    answer = proven_win(pos, 20_000)
    assert answer is not None
    assert answer.value == 1.0 and answer.nodes == 0 and answer.info["tinue"] == "win"
    mate = int(answer.info["mate"])
    assert mate >= 1  # df-pn proves a win, not always the shortest one
    # Independent check: after the move, the mover still wins by force within the plies left.
    after = pos.play(answer.code)
    mover = pos.side_to_move
    assert after.is_over and after.result.winner == mover or forced_win(
        after, mate - 1, attacker=mover
    )
    assert answer.pv[0] == answer.code


def test_no_proven_win_in_a_quiet_opening() -> None:
    pos = Position.start(5).play("a1").play("e5").play("c3")
    assert proven_win(pos, 5_000) is None
    assert proven_win(pos, 0) is None  # 0: checks off


@pytest.mark.parametrize("entry", AVOIDS, ids=lambda e: e["id"])
def test_avoid_tinue_replaces_a_losing_move_by_a_safe_one(entry: dict) -> None:
    pos = _position(entry)
    safe = set(safe_moves(pos, entry["plies"]))
    codes = [int(c) for c in pos.legal_move_codes()]
    losing = [c for c in codes if c not in safe and opponent_wins_after(pos, c, 20_000)]
    assert losing, "the position must have a move the prover refutes"
    bad = PlayerMove(losing[0], value=0.3, nodes=50, pv=(losing[0],))
    # The search's ranking: the losing move first, then the rest with the safe ones late.
    ranked = [losing[0]] + [c for c in codes if c not in safe] + [c for c in codes if c in safe]
    answer = avoid_tinue(pos, bad, ranked, 20_000)
    assert answer.code != losing[0]
    assert losing[0] in answer.info["tinue_avoided"]
    # Independently: the opponent cannot force a road within the plies after the new move.
    assert not forced_win(pos.play(answer.code), entry["plies"] - 1, roads_only=True)
    assert answer.value == 0.3 and answer.nodes == 50  # the search's figures are kept


def test_avoid_tinue_keeps_a_safe_move_and_is_off_at_zero() -> None:
    entry = AVOIDS[0]
    pos = _position(entry)
    safe = safe_moves(pos, entry["plies"])
    good = PlayerMove(safe[0], value=0.1)
    assert avoid_tinue(pos, good, [safe[0]], 20_000) is good
    losing = next(
        c for c in pos.legal_move_codes() if int(c) not in safe and opponent_wins_after(pos, int(c), 20_000)
    )
    bad = PlayerMove(int(losing))
    assert avoid_tinue(pos, bad, [int(losing), safe[0]], 0) is bad


def test_a_move_that_loses_at_once_is_refuted() -> None:
    """A move that ends the game with the opponent's win (found among the legal moves of the mined
    positions: spreads that complete only the opponent's road, or flat losses) counts as refuted,
    and a move that wins at once does not."""
    seen_loss = seen_win = False
    for entry in MINED:
        pos = _position(entry)
        for code in (int(c) for c in pos.legal_move_codes()):
            after = pos.play(code)
            if not after.is_over:
                continue
            loses = after.result.winner == 1 - pos.side_to_move
            assert opponent_wins_after(pos, code, 1) == loses
            seen_loss |= loses
            seen_win |= after.result.winner == pos.side_to_move
        if seen_loss and seen_win:
            break
    assert seen_loss and seen_win


def test_ranked_by_visits_puts_the_choice_first_then_the_most_visited() -> None:
    assert ranked_by_visits(7, [3, 7, 5, 9], [10, 2, 30, 10]) == [7, 5, 3, 9]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3", float("inf"), float("nan"), 10**12])
def test_bad_budgets_are_rejected(bad) -> None:
    with pytest.raises((ValueError, TypeError)):
        check_tinue_nodes(bad)
    with pytest.raises((ValueError, TypeError)):
        UCTPlayer(simulations=10, tinue_nodes=bad)
    with pytest.raises(ValueError):
        SearchConfig(tinue_nodes=-1)
    with pytest.raises(ValueError):
        SearchConfig(tinue_nodes=10**12)


@pytest.mark.parametrize("budget", [{"max_seconds": float("inf")}, {"max_seconds": float("nan")},
                                    {"max_nodes": float("inf")}, {"max_nodes": 10**12}])
def test_prover_rejects_unbounded_budgets(budget: dict) -> None:
    from takzero.game.tinue import prove_tinue

    with pytest.raises(ValueError, match="max_"):
        prove_tinue(Position.start(5).play("a1").play("e5"), **budget)


def test_training_key_mcts_tinue_nodes() -> None:
    """The key is in configs/train.yaml (so ``mcts.tinue_nodes=0`` needs no ``+``), reaches the
    gating search, and a bad value stops the run at start-up naming the key."""
    from omegaconf import OmegaConf

    from takzero.config import ConfigError, load_config

    root = Path(__file__).resolve().parent.parent
    raw = OmegaConf.load(root / "configs/train.yaml")
    assert "tinue_nodes" in raw.mcts
    raw.run_name = "t"
    raw.mcts.tinue_nodes = 0
    assert load_config(raw).evaluation_search_config().tinue_nodes == 0
    raw.mcts.tinue_nodes = -1
    with pytest.raises(ConfigError, match="tinue_nodes"):
        load_config(raw)


def _network_player(size: int, tinue_nodes: int | None, simulations: int = 16) -> NetworkPlayer:
    return NetworkPlayer(
        UniformEvaluator(size, masked=True), simulations=simulations, tinue_nodes=tinue_nodes
    )


@pytest.mark.parametrize("entry", WINS[:3], ids=lambda e: e["id"])
def test_network_and_uct_players_play_the_proven_win(entry: dict) -> None:
    pos = _position(entry)
    for player in (_network_player(pos.size, 20_000), UCTPlayer(simulations=50, tinue_nodes=20_000)):
        player.reset(pos.size, pos.half_komi, seed=1)
        answer = player.choose(pos)
        assert answer.info.get("tinue") == "win" and answer.nodes == 0
        after = pos.play(answer.code)
        mate = int(answer.info["mate"])
        assert after.is_over or forced_win(after, mate - 1, attacker=pos.side_to_move)


def test_players_without_checks_do_not_report_a_proof() -> None:
    entry = WINS[0]
    pos = _position(entry)
    for player in (_network_player(pos.size, 0), UCTPlayer(simulations=50, tinue_nodes=0)):
        player.reset(pos.size, pos.half_komi, seed=1)
        assert "tinue" not in player.choose(pos).info


@pytest.mark.parametrize("entry", AVOIDS[:3], ids=lambda e: e["id"])
def test_network_player_never_plays_a_refuted_move(entry: dict) -> None:
    """A uniform evaluator with 8 simulations plays almost at random; with the checks on, its
    move must still leave the opponent without a forced road (exhaustive check)."""
    pos = _position(entry)
    for seed in range(3):
        player = _network_player(pos.size, 20_000, simulations=8)
        player.reset(pos.size, pos.half_komi, seed=seed)
        answer = player.choose(pos)
        assert not forced_win(pos.play(answer.code), entry["plies"] - 1, roads_only=True)


def test_batched_network_side_uses_the_checks() -> None:
    """In a batched match the network side plays the proven win of a mined position at once."""
    entry = WINS[0]
    pos = _position(entry)
    config = SearchConfig(simulations=8, tinue_nodes=20_000).evaluation()
    side = NetSide("net", UniformEvaluator(pos.size, masked=True), config, 8)
    opponent = UCTPlayer(simulations=20, tinue_nodes=0, name="uct")
    records = play_games(side, opponent, pos, [()], [pos.side_to_move == 0], ply_limit=60)
    first = records[0].infos[0]
    assert first is not None and first.info.get("tinue") == "win"
    assert records[0].winner == pos.side_to_move


def test_tei_info_reports_a_proof_as_mate_in_moves() -> None:
    entry = WINS[0]
    pos = _position(entry)
    answer = proven_win(pos, 20_000)
    line = format_info(pos, answer, 0.01)
    mate = int(answer.info["mate"])
    assert f"score mate {(mate + 1) // 2} " in line and " cp " not in line
    plain = format_info(pos, PlayerMove(answer.code, value=0.5), 0.01)
    assert "score cp" in plain


def test_proven_win_does_not_change_the_position() -> None:
    pos = _position(WINS[1])
    before = pos.state.copy()
    proven_win(pos, 5_000)
    opponent_wins_after(pos, int(pos.legal_move_codes()[0]), 5_000)
    assert np.array_equal(pos.state, before)


def test_avoid_tinue_after_stop_takes_the_next_move_unchecked() -> None:
    """Once the stop flag is set (TEI ``stop``), a refuted choice is still replaced, but by the
    next move of the ranking without a prover call per alternative."""
    import threading

    entry = AVOIDS[0]
    pos = _position(entry)
    safe = set(safe_moves(pos, entry["plies"]))
    codes = [int(c) for c in pos.legal_move_codes()]
    losing = [c for c in codes if c not in safe and opponent_wins_after(pos, c, 20_000)]
    bad = PlayerMove(losing[0], value=0.3)
    ranked = [losing[0]] + [c for c in codes if c != losing[0]]
    stop = threading.Event()
    stop.set()
    answer = avoid_tinue(pos, bad, ranked, 20_000, stop=stop)
    assert answer.code == ranked[1] and answer.info["tinue_avoided"] == (losing[0],)
