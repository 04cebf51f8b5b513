"""Matches: the game loop (single games, paired-opening matches, batched matches), draws, PTN,
Elo formulas and SPRT."""

from __future__ import annotations

import math

import pytest

from takzero.game import IllegalMoveError, Position
from takzero.game.ptn import read_ptn
from takzero.matches.games import NetSide, play_game, play_games, play_match, run_match
from takzero.matches.openings import random_openings
from takzero.matches.results import MatchResult
from takzero.matches.stats import (
    elo_pentanomial,
    elo_to_score,
    elo_trinomial,
    llr_logistic,
    llr_normal,
    score_interval,
    score_to_elo,
    sprt,
)
from takzero.players import (
    BasePlayer,
    GreedyPlayer,
    NetworkPlayer,
    PlayerMove,
    RandomPlayer,
    UCTPlayer,
)
from takzero.search import HashEvaluator, SearchConfig


class ScriptedPlayer(BasePlayer):
    """Plays the given PTN moves in order (for tests)."""

    def __init__(self, moves: list[str], name: str = "scripted") -> None:
        super().__init__(0, name)
        self.moves = list(moves)
        self.i = 0
        self.observed: list[int] = []

    def reset(self, size: int, half_komi: int, seed: int | None = None) -> None:
        super().reset(size, half_komi, seed)
        self.i = 0

    def choose(self, position: Position) -> PlayerMove:
        move = self.moves[self.i]
        self.i += 1
        return PlayerMove(position.check_move(move))

    def observe(self, position: Position, move: int) -> None:
        self.observed.append(move)


class CodePlayer(BasePlayer):
    """Answers a bare int (a minimal player), always the first legal move."""

    name = "first"

    def choose(self, position: Position) -> int:  # type: ignore[override]
        return int(position.legal_move_codes()[0])


class IllegalPlayer(BasePlayer):
    def choose(self, position: Position) -> PlayerMove:
        return PlayerMove(128)


# -- games -------------------------------------------------------------------------------------


def test_play_game_records_moves_and_observes() -> None:
    white = ScriptedPlayer(["a1", "a2"], "w")
    black = ScriptedPlayer(["b1", "b2"], "b")
    start = Position.start(3)
    rec = play_game(white, black, start, ply_limit=6, opening_moves=["c3", "c1"])
    assert rec.moves[:2] == [start.check_move("c3"), start.play("c3").check_move("c1")]
    assert rec.ptn_moves == ["c3", "c1", "a1", "b1", "a2", "b2"]
    assert rec.opening_plies == 2
    assert rec.infos[0] is None and rec.infos[1] is None
    assert all(isinstance(i, PlayerMove) for i in rec.infos[2:])
    assert white.observed == black.observed == rec.moves
    assert rec.white == "w" and rec.black == "b"
    assert rec.plies == 6 and rec.reason == "ply limit"


def test_play_game_road_result() -> None:
    white = ScriptedPlayer(["b3", "c3"], "w")
    black = ScriptedPlayer(["b1", "c1"], "b")
    rec = play_game(white, black, Position.start(3), ply_limit=50, opening_moves=["a1", "a3"])
    # a3 is white (placed by black), then b3 and c3: a white road on rank 3 at ply 4.
    assert rec.result == "R-0" and rec.reason == "road" and rec.winner == 0
    assert rec.plies == 5
    assert rec.score_for(0) == 1.0 and rec.score_for(1) == 0.0


def test_ply_limit_is_a_draw_counted_half() -> None:
    rec = play_game(RandomPlayer(1), RandomPlayer(2), Position.start(5), ply_limit=6, seed=3)
    assert rec.plies == 6 and rec.reason == "ply limit" and rec.result == "1/2-1/2"
    assert rec.winner is None and rec.score_for(0) == rec.score_for(1) == 0.5
    m = run_match(RandomPlayer(1), RandomPlayer(2), 5, 0, num_openings=3, ply_limit=4, seed=1)
    assert (m.wins, m.draws, m.losses) == (0, 6, 0)
    assert m.score == 0.5 and m.draw_rate == 1.0 and m.white_win_rate == 0.0


def test_threefold_repetition_is_a_draw() -> None:
    shuffle_w = ["a1+", "a2-"] * 4
    shuffle_b = ["c3-", "c2+"] * 4
    rec = play_game(
        ScriptedPlayer(shuffle_w),
        ScriptedPlayer(shuffle_b),
        Position.start(3),
        100,
        opening_moves=["c3", "a1"],
    )
    assert rec.reason == "repetition" and rec.result == "1/2-1/2"
    assert rec.plies == 2 + 8
    # Without the adjudication the same moves go on.
    with pytest.raises(IndexError):  # the script runs out: the game did not stop
        play_game(
            ScriptedPlayer(shuffle_w),
            ScriptedPlayer(shuffle_b),
            Position.start(3),
            100,
            threefold=False,
            opening_moves=["c3", "a1"],
        )


def test_bare_int_answers_and_errors() -> None:
    rec = play_game(CodePlayer(), CodePlayer(), Position.start(3), ply_limit=200)
    assert rec.result in ("R-0", "0-R", "F-0", "0-F", "1/2-1/2")
    with pytest.raises(IllegalMoveError):  # a wall on ply 0 (code 128 = Sa1)
        play_game(IllegalPlayer(), RandomPlayer(), Position.start(3), 10)
    with pytest.raises(IllegalMoveError):
        play_game(RandomPlayer(), RandomPlayer(), Position.start(3), 10, opening_moves=["Sa1"])
    with pytest.raises(ValueError):
        play_game(RandomPlayer(), RandomPlayer(), Position.from_tps("1,1,1/x3/2,2,x 2 3"), 10)


def test_ptn_output() -> None:
    white = ScriptedPlayer(["b3", "c3"], "alpha")
    black = ScriptedPlayer(["b1", "c1"], "beta")
    rec = play_game(white, black, Position.start(3, komi=0.5), 50, opening_moves=["a1", "a3"])
    text = rec.to_ptn({"Event": "test"})
    assert '[Size "3"]' in text and '[Komi "0.5"]' in text
    assert '[Player1 "alpha"]' in text and '[Player2 "beta"]' in text
    assert '[Result "R-0"]' in text and '[Event "test"]' in text and "TPS" not in text
    assert "1. a1 a3\n2. b3 b1\n3. c3 R-0" in text
    (back,) = read_ptn(text)
    assert back.moves == rec.moves and back.result == "R-0"
    assert str(back.replay().result) == "R-0"
    # A black-to-move start writes a TPS tag and "N. -- move"; a ply-limit draw is commented.
    start = Position.from_tps("x3/x,1,x/2,x2 2 2")
    rec2 = play_game(ScriptedPlayer(["a2"]), ScriptedPlayer(["c3"]), start, 2)
    text2 = rec2.to_ptn()
    assert '[TPS "x3/x,1,x/2,x2 2 2"]' in text2
    assert "2. -- c3\n3. a2 {adjudicated draw: ply limit} 1/2-1/2" in text2
    (back2,) = read_ptn(text2)
    assert back2.start == start and back2.moves == rec2.moves


# -- openings and matches ----------------------------------------------------------------------


def test_random_openings_distinct_and_deterministic() -> None:
    start = Position.start(3)
    ops = random_openings(start, 72, plies=2, seed=4)
    assert len(set(ops)) == 72  # every 2-ply opening of 3x3 (9 * 8)
    assert random_openings(start, 10, 2, seed=4) == random_openings(start, 10, 2, seed=4)
    assert random_openings(start, 10, 2, seed=4) != random_openings(start, 10, 2, seed=5)
    assert len(random_openings(start, 80, 2, seed=4, max_tries=2)) == 80  # duplicates allowed
    with pytest.raises(ValueError):
        random_openings(start, -1)


def test_run_match_pairs_openings_with_both_colours() -> None:
    a, b = GreedyPlayer(1, name="A"), RandomPlayer(2, name="B")
    m = run_match(a, b, 4, half_komi=2, num_openings=4, ply_limit=200, seed=9)
    assert m.num_games == 8 and len(m.games) == 8
    assert m.fully_paired and len(m.pairs()) == 4
    for k in range(4):
        idx = [i for i, o in enumerate(m.opening_index) if o == k]
        assert len(idx) == 2
        g1, g2 = (m.games[i] for i in idx)
        assert {m.a_white[idx[0]], m.a_white[idx[1]]} == {True, False}
        assert g1.moves[:2] == g2.moves[:2] and g1.opening_plies == 2
        assert {g1.white, g2.white} == {"A", "B"} and g1.white == g2.black
        assert g1.half_komi == 2
    assert m.wins + m.draws + m.losses == 8
    assert sum(m.pentanomial()) == 4
    # Each game's score for A matches its record.
    for rec, aw, s in zip(m.games, m.a_white, m.a_scores, strict=True):
        assert s == rec.score_for(0 if aw else 1)
    # Reproducible.
    m2 = run_match(GreedyPlayer(1, name="A"), RandomPlayer(2, name="B"), 4, 2, 4, 200, seed=9)
    assert [g.moves for g in m2.games] == [g.moves for g in m.games]


def test_run_match_given_openings_stop_and_callback() -> None:
    seen = []
    m = run_match(
        RandomPlayer(1),
        RandomPlayer(2),
        3,
        0,
        ply_limit=100,
        seed=1,
        openings=[["a1", "c3"], ["b2", "a1"], ["c1", "c2"]],
        stop=lambda r: r.num_games >= 4,
        on_game=seen.append,
    )
    assert m.num_games == 4 and len(seen) == 4
    assert m.games[2].ptn_moves[:2] == ["b2", "a1"]
    with pytest.raises(ValueError):
        run_match(RandomPlayer(), RandomPlayer(), 3, openings=[])
    with pytest.raises(ValueError):
        run_match(RandomPlayer(), RandomPlayer(), 3, num_openings=0)


def test_match_counts_draws_as_half() -> None:
    m = MatchResult("a", "b")
    for score, aw, o in [(1.0, True, 0), (0.5, False, 0), (0.5, True, 1), (0.0, False, 1)]:
        m.add(None, aw, score, o)
    assert (m.wins, m.draws, m.losses) == (1, 2, 1)
    assert m.score == 0.5
    assert m.trinomial() == [1, 2, 1]
    assert m.pentanomial() == [0, 1, 0, 1, 0]  # pairs: 1 + 0.5 = 1.5; 0.5 + 0 = 0.5
    assert m.white_wins == 2  # game 0: A won as white; game 3: A lost as black
    with pytest.raises(ValueError):
        m.add(None, True, 0.25, 2)
    with pytest.raises(ValueError):
        _ = MatchResult("a", "b").score


# -- statistics --------------------------------------------------------------------------------


def test_elo_formula_known_values() -> None:
    assert score_to_elo(0.5) == 0.0
    assert score_to_elo(0.75) == pytest.approx(190.848, abs=1e-3)
    assert score_to_elo(0.25) == pytest.approx(-190.848, abs=1e-3)
    assert score_to_elo(10 / 11) == pytest.approx(400.0)
    assert score_to_elo(1.0) == math.inf and score_to_elo(0.0) == -math.inf
    assert elo_to_score(score_to_elo(0.64)) == pytest.approx(0.64)
    with pytest.raises(ValueError):
        score_to_elo(1.5)


def test_elo_intervals() -> None:
    est = elo_trinomial(30, 10, 10)
    assert est.score == pytest.approx(0.7)
    # var = (30 * 0.3^2 + 10 * 0.2^2 + 10 * 0.7^2) / 50 = 0.16; se = sqrt(0.16 / 50)
    assert est.stderr == pytest.approx(math.sqrt(0.16 / 50))
    assert est.elo == pytest.approx(score_to_elo(0.7)) and est.model == "trinomial"
    # The score-test interval: at 50 games it is near the normal interval 0.7 +- z se.
    z = 1.959963984540054
    lo, hi = score_interval(est)
    assert lo == pytest.approx(0.7 - z * est.stderr, abs=0.02)
    assert hi == pytest.approx(0.7 + z * est.stderr, abs=0.02)
    pent = elo_pentanomial([0, 0, 10, 0, 0])  # every pair split 1-1: no variance in the sample
    assert pent.elo == 0.0 and pent.stderr == 0.0
    assert pent.lower == pytest.approx(-pent.upper) and pent.upper > 50  # still a real interval
    # Paired results that all split the same way have a smaller interval than the trinomial.
    m = MatchResult("a", "b")
    for k in range(20):
        m.add(None, True, 1.0, k)
        m.add(None, False, 0.0 if k % 2 else 0.5, k)
    assert m.elo().model == "pentanomial"
    assert m.elo().stderr < m.elo(model="trinomial").stderr
    with pytest.raises(ValueError):
        elo_trinomial(0, 0, 0)
    with pytest.raises(ValueError):
        elo_trinomial(1, 1, -1)
    with pytest.raises(ValueError):
        m.elo(model="bayes")


def test_sprt_decisions() -> None:
    assert sprt([5, 10, 85], 0, 35).decision == "accept"
    assert sprt([85, 10, 5], 0, 35).decision == "reject"
    assert sprt([10, 5, 10], 0, 35).decision == "continue"
    assert sprt([0, 0, 2], 0, 35).decision == "continue"  # two wins prove nothing yet
    assert sprt([1, 3, 10, 30, 40], 0, 35).decision == "accept"  # pentanomial
    assert sprt([40, 30, 10, 3, 1], 0, 35).decision == "reject"
    res = sprt([5, 10, 85], 0, 35, alpha=0.05, beta=0.1)
    assert res.upper == pytest.approx(math.log(0.9 / 0.05))
    assert res.lower == pytest.approx(math.log(0.1 / 0.95))
    with pytest.raises(ValueError):
        sprt([1, 1, 1], 10, 0)
    with pytest.raises(ValueError):
        sprt([1, 1], 0, 10)


def test_llr_exact_and_normal_agree_on_large_samples() -> None:
    results = [300, 400, 340]
    assert llr_logistic(0, 10, results) == pytest.approx(llr_normal(0, 10, results), rel=0.02)
    # Antisymmetry of the hypotheses.
    assert llr_logistic(0, 10, results) == pytest.approx(-llr_logistic(10, 0, results))


def test_summary_keys() -> None:
    m = run_match(GreedyPlayer(1), RandomPlayer(2), 3, 0, num_openings=2, ply_limit=60, seed=2)
    s = m.summary()
    for key in ("games", "wins", "draws", "losses", "score", "elo", "elo_lower", "elo_upper"):
        assert key in s
    assert s["elo_model"] == "pentanomial"
    # the pair counts that pool matches on other openings: 2 pairs, A's points add up to its score
    penta = s["pentanomial"]
    assert len(penta) == 5 and sum(penta) == 2
    assert sum(k / 2 * c for k, c in enumerate(penta)) == pytest.approx(m.wins + m.draws / 2)


# -- the one game loop reproduces the records of the loops it replaced --------------------------
#
# Expected moves produced with the code before the restructure (an untouched checkout at commit
# deafe75: takzero.arena.play_game / run_match and takzero.evaluate.play_match / NetSide, the same
# calls with the same arguments, PYTHONPATH pointing at that checkout); the new loop must give the
# same games move for move.

OLD_PLAY_GAME = "a1 d4 a3 c1 c4 d2 b4 Sa4 b3"
OLD_RUN_MATCH = [
    "b3 c1 b2 b3- c1< 2b2- Sa3 c2 b3 a2 c3 b1+",
    "b3 c1 a3 Sc3 a2 c3- a1",
    "a1 a2 Sc1 a1+ Sb3 a1 a3 2a2+ b3< b3 3a3- b3< b1 a1> 3a2> c3 b3 a1 b2+ c3-",
    "a1 a2 a3 c1 a2- c3 a2",
]
OLD_PLAY_MATCH_RANDOM = [
    "a4 b1 Sc1 d1 d3 Sb3 c1< c4 a3 b3- Sd2 c4> c2 Sc3 c4 Sb3 d3+ "
    "b3+ d3 b4< Sa2 Sb4 d3+ b2> a2> b4- 3d4< 2a4> c4> c3> Sc3 Sa1 Sa2 c1 a4",
    "a4 b1 d1 Sb4 a1 Sc1 a1+ Sd2 Sc3 Sc4 Sd3 b4- c3- Sc3 Sd4 a1 b1+ a3 c2< a3+ "
    "a3 d2< a3+ b4 3a4-12 b4< d3- c3> 2b2< b1 b2 a3+ d2- Sa3 3a2- a3+ 2a1> 2a2- Sc3 a2",
    "c1 a2 Sa4 Sd4 Sb1 d4< b1< Sa3 Sb3 b4 b1 d2 Sd1 c4< a2> d4 c2 d3 b1+ d2+ d2 c1< b2<",
    "c1 a2 Sd3 b1 d1 b1+ Sc2 d2 a2- a3 Sb3 c3 c2+ a2 b4 c1+",
]
OLD_PLAY_MATCH_NETS = [
    "a4 b1 Sd3 b2 b1> Sa3 Sb4 Sa1 d2 a3- b4- Sb4 c4 b2- Sc3 b4> d3- Sb2 2d2- "
    "2c4<11 Sd3 2a4- Sd4 a4 b3+ a1> c2 a1 c3< d2 d1+ a2- d3< Sc4 a2 2a3- d3 b1> a3",
    "a4 b1 Sa1 Sa3 Sd2 Sd4 Sd1 Sb4 Sc1 b4< Sb3 b4 c1< c2 d1< Sd1 a1+ b2 a1 a4> Sd3 d4< b1+ Sd4 c3",
    "c1 a2 a2> Sc3 Sd4 Sa2 b4 c3> b4> c1< b4 Sa3 Sb3 b1> Sd1 d3- b1 d2< d3 a1 "
    "b4< d2 Sb4 a2- b4< c2> b1> c3 c1< d2< b1+ c2< 2a4> c2 d1< d2< c1+ d1 2b4> Sb1",
    "c1 a2 b2 Sd4 a2+ Sc4 d1 d4- b1 Sa1 b4 c1< b3 c3 b3> c2 2c3- Sa2 a3+ a1> "
    "Sa3 3b1+12 d1+ 2b3+ Sd4 3b4-111 a3> d3- a1 a3 Sb4 c1 3c2+ d1 d4- b1+ Sc2 b2- c2< d2<",
]


def test_play_game_same_record_as_the_old_arena() -> None:
    rec = play_game(
        GreedyPlayer(1, name="greedy"),
        RandomPlayer(2, name="random"),
        Position.start(4, half_komi=2),
        ply_limit=200,
        opening_moves=["a1", "d4"],
        seed=5,
    )
    assert " ".join(rec.ptn_moves) == OLD_PLAY_GAME
    assert (rec.result, rec.reason) == ("R-0", "road")
    assert [None if i is None else i.value for i in rec.infos] == [None] * 8 + [1.0]


def test_run_match_same_games_as_the_old_arena() -> None:
    m = run_match(
        UCTPlayer(simulations=20, tinue_nodes=0, seed=1, name="uct"), GreedyPlayer(2, name="greedy"), 3, 0,
        num_openings=2, ply_limit=60, seed=2,
    )
    assert [" ".join(g.ptn_moves) for g in m.games] == OLD_RUN_MATCH
    assert m.a_scores == [0.0, 0.0, 0.0, 0.0] and m.a_white == [True, False, True, False]


def _hash_side(name: str, seed: int, sims: int, sampling: int) -> NetSide:
    return NetSide(name, HashEvaluator(4, seed=seed), SearchConfig(simulations=sims, tinue_nodes=0).evaluation(),
                   sims, sampling_plies=sampling)


def test_play_match_same_games_as_the_old_evaluator() -> None:
    start = Position.start(4, half_komi=1)
    openings = random_openings(start, 2, plies=2, seed=3)
    side = _hash_side("hash", 7, 16, 2)
    m = play_match(side, RandomPlayer(9, name="random"), start, openings, 40, seed=4)
    assert [" ".join(g.ptn_moves) for g in m.games] == OLD_PLAY_MATCH_RANDOM
    assert m.a_scores == [1.0, 0.5, 1.0, 1.0] and m.a_white == [True, False, True, False]
    assert [g.result for g in m.games] == ["F-0", "1/2-1/2", "R-0", "0-R"]
    m2 = play_match(side, _hash_side("hash2", 8, 8, 3), start, openings, 40, seed=6)
    assert [" ".join(g.ptn_moves) for g in m2.games] == OLD_PLAY_MATCH_NETS
    assert m2.a_scores == [1.0, 0.0, 0.5, 0.5]
    # The network side's answers are kept per ply: root value, simulations, a PV from the move.
    rec = m.games[0]
    assert rec.white == "hash" and rec.infos[:2] == [None, None] and len(rec.infos) == rec.plies
    for ply, info in enumerate(rec.infos[2:], start=2):
        assert info is not None and info.code == rec.moves[ply]
        if ply % 2 == 0:  # white: the network
            assert info.pv[0] == info.code and info.nodes == 16 and -1.0 <= info.value <= 1.0


def test_a_game_plays_the_same_alone_and_in_a_batch() -> None:
    # Deterministic sides (a network side at temperature 0, a player without randomness): each
    # game of a batch is the game the same call plays alone.
    start = Position.start(4)
    openings = random_openings(start, 3, plies=2, seed=1)
    side = _hash_side("hash", 3, 8, 0)
    a_white = [True, False, True]
    batch = play_games(side, CodePlayer(), start, openings, a_white, 30, seeds=(5, None))
    assert [r.white for r in batch] == ["hash", "first", "hash"]
    for gi, opening in enumerate(openings):
        (single,) = play_games(
            side, CodePlayer(), start, [opening], [a_white[gi]], 30, seeds=(5, None)
        )
        assert single.moves == batch[gi].moves and single.result == batch[gi].result
    with pytest.raises(ValueError):  # one colour assignment per opening
        play_games(side, CodePlayer(), start, openings, [True], 30)
    with pytest.raises(ValueError):  # an opening that ends the game
        road = ["a1", "a3", "b3", "b1", "c3"]
        play_games(RandomPlayer(), RandomPlayer(), Position.start(3), [road], [True], 30)


def test_play_match_searches_a_network_player_as_a_batched_side() -> None:
    net = NetworkPlayer(HashEvaluator(4, seed=2), simulations=8, name="hashnet")
    assert net.batchable
    batch = net.batched(3, seed=1)
    assert batch.simulations == 8 and batch.name == "hashnet" and batch.mcts.num_games == 3
    timed = NetworkPlayer(HashEvaluator(4, seed=2), simulations=8, seconds=1.0)
    assert not timed.batchable  # a clock cannot be batched: played as a player
    with pytest.raises(ValueError, match="time limit"):
        timed.batched(2)
    with pytest.raises(ValueError, match="not batchable"):
        RandomPlayer(1).batched(2)
    start = Position.start(4)
    with pytest.raises(ValueError, match="4x4, not 5x5"):
        play_match(net, RandomPlayer(1), Position.start(5), random_openings(Position.start(5), 1, seed=0), 30)
    openings = random_openings(start, 2, seed=0)
    m = play_match(net, RandomPlayer(1), start, openings, 30, seed=0)
    assert m.num_games == 4 and m.player_a == "hashnet"
    assert all(g.infos[-1] is not None for g in m.games)
    # the player and a NetSide of the same network and settings are one search path
    side = NetSide("hashnet", HashEvaluator(4, seed=2), net.config, 8)
    m2 = play_match(side, RandomPlayer(1), start, openings, 30, seed=0)
    assert [g.moves for g in m2.games] == [g.moves for g in m.games]


# -- honest intervals on small and one-sided samples (issue 15) -------------------------------


@pytest.mark.parametrize("games", range(2, 9))
def test_wilson_elo_never_collapses_to_a_point(games: int) -> None:
    """Every W/D/L split of 2..8 games: a real interval around the estimate (the normal
    intervals gave '+0.0 [+0.0, +0.0]' for one split pair and '-inf [-inf, -inf]' for 0-4)."""
    from takzero.matches.stats import describe_elo, elo_wilson

    for wins in range(games + 1):
        for draws in range(games - wins + 1):
            losses = games - wins - draws
            est = elo_wilson(wins, draws, losses)
            assert est.model == "wilson"
            assert est.lower < est.upper and est.lower <= est.elo <= est.upper
            assert math.isfinite(est.lower) or math.isfinite(est.upper)
            if losses == games:
                assert est.elo == est.lower == -math.inf and math.isfinite(est.upper)
            elif wins == games:
                assert est.elo == est.upper == math.inf and math.isfinite(est.lower)
            else:
                assert math.isfinite(est.lower) and math.isfinite(est.upper)
            text = describe_elo(wins, draws, losses)
            assert "Wilson" in text and f"{games} games" in text
            assert "[+0.0, +0.0]" not in text and "[-inf, -inf]" not in text and "[+inf, +inf]" not in text


@pytest.mark.parametrize(
    "pairs", [1, 2, pytest.param(3, marks=pytest.mark.slow), pytest.param(4, marks=pytest.mark.slow)]
)
def test_paired_and_trinomial_intervals_never_collapse_to_a_point(pairs: int) -> None:
    """Every pentanomial count vector of 1..4 pairs and every W/D/L split of as many games: the
    score-test interval is a real interval around the estimate, bounded on the side away from
    a one-sided result (the normal interval gave '+0.0 [+0.0, +0.0]' for one split pair and a
    point at 0% or 100%)."""
    from itertools import product

    from takzero.matches.stats import elo_pentanomial, elo_trinomial

    vectors = [c for c in product(range(pairs + 1), repeat=5) if sum(c) == pairs]
    vectors += [c for c in product(range(2 * pairs + 1), repeat=3) if sum(c) == 2 * pairs]
    for counts in vectors:
        est = elo_pentanomial(counts) if len(counts) == 5 else elo_trinomial(counts[2], counts[1], counts[0])
        assert est.lower < est.upper and est.lower <= est.elo <= est.upper, counts
        if est.score == 1.0:
            assert est.elo == est.upper == math.inf and math.isfinite(est.lower), counts
        elif est.score == 0.0:
            assert est.elo == est.lower == -math.inf and math.isfinite(est.upper), counts
        else:
            assert math.isfinite(est.lower) and math.isfinite(est.upper), counts


def test_score_test_interval_is_wilson_for_two_outcomes_and_solves_its_equation() -> None:
    """Wins and losses only: the trinomial interval is the Wilson interval. In general each end
    ``mu`` solves ``n (s - mu)^2 = z^2 V(mu)`` with V the variance of the maximum-likelihood
    distribution of mean mu (checked here on a pentanomial sample)."""
    from takzero.matches.stats import (
        _mle_with_mean,
        elo_pentanomial,
        elo_trinomial,
        wilson_interval,
    )

    for w, lost in ((30, 10), (3, 1), (1, 7), (12, 12)):
        lo, hi = score_interval(elo_trinomial(w, 0, lost))
        assert (lo, hi) == pytest.approx(wilson_interval(w / (w + lost), w + lost), abs=2e-4)
    counts = [2, 5, 30, 10, 3]
    est = elo_pentanomial(counts)
    values, n, z = [0, 0.25, 0.5, 0.75, 1], sum(counts), 1.959963984540054
    probs = [c / n for c in counts]
    for elo in (est.lower, est.upper):
        mu = elo_to_score(elo)
        q = _mle_with_mean(values, probs, mu)
        v = sum(qi * (x - mu) ** 2 for qi, x in zip(q, values, strict=True))
        assert n * (est.score - mu) ** 2 == pytest.approx(z * z * v, rel=1e-3)


def test_wilson_elo_is_the_wilson_score_interval_mapped_to_elo() -> None:
    from takzero.matches.stats import elo_wilson, score_to_elo, wilson_interval

    est = elo_wilson(30, 10, 10)
    lo, hi = wilson_interval(est.score, 50)
    assert est.score == 0.7
    assert est.lower == pytest.approx(score_to_elo(lo), abs=0.2)
    assert est.upper == pytest.approx(score_to_elo(hi), abs=0.2)
    assert elo_wilson(0, 0, 4).upper == pytest.approx(score_to_elo(wilson_interval(0.0, 4)[1]), abs=0.5)


@pytest.mark.parametrize(("wins", "draws", "losses"), [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)])
def test_too_few_games_for_an_interval(wins: int, draws: int, losses: int) -> None:
    from takzero.matches.stats import describe_elo

    assert describe_elo(wins, draws, losses) == f"too few games ({wins + draws + losses}) for an Elo interval"


def test_match_result_wilson_model() -> None:
    m = MatchResult("a", "b")
    m.add(None, True, 1.0, 0)
    m.add(None, False, 0.0, 0)
    pent = m.elo()  # one split pair: the pentanomial interval is wide, not a point
    assert pent.model == "pentanomial" and pent.lower < -300 and pent.upper > 300
    wilson = m.elo(model="wilson")
    assert wilson.lower < -300 and wilson.upper > 300
    # what people see is the model elo() and summary() use, named
    assert m.describe_elo() == (f"+0.0 [{pent.lower:+.1f}, {pent.upper:+.1f}] "
                                "(95%, pentanomial score-test interval, 1 game pair)")
    m.add(None, True, 0.5, 1)  # an unpaired game: the trinomial over games
    assert m.elo().model == "trinomial"
    assert m.describe_elo().endswith("(95%, trinomial score-test interval, 3 games)")
    assert MatchResult("a", "b").describe_elo() == "too few games (0) for an Elo interval"
    assert m.tally() == "1-1-1 (W-D-L)"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: elo_pentanomial("12345"), "expected 5 outcome counts"),
        (lambda: elo_pentanomial([float("nan"), 0, 0, 0, 1]), "finite and >= 0"),
        (lambda: elo_pentanomial([float("inf"), 0, 0, 0, 1]), "finite and >= 0"),
        (lambda: elo_trinomial(1e-300, 0, 0), "no games"),
        (lambda: elo_trinomial(10**400, 0, 0), "must be numbers"),
        (lambda: elo_trinomial(0.5, 0, 0), "no games"),
        (lambda: elo_pentanomial([0, 0, 0, 0, 1e17]), "float rounding"),
        (lambda: elo_trinomial("a", 0, 0), "must be numbers"),
    ],
)
def test_bad_counts_are_refused_naming_them(call, message: str) -> None:
    """Every model's counts pass one check: strings, non-finite, non-numeric, under one game in
    all, or so many that float rounding would collapse the interval are a ValueError."""
    with pytest.raises(ValueError, match=message):
        call()


def test_huge_one_sided_counts_keep_a_real_interval() -> None:
    from takzero.matches.stats import MAX_GAMES, elo_wilson

    for est in (elo_pentanomial([0, 0, 0, 0, MAX_GAMES]), elo_trinomial(MAX_GAMES, 0, 0), elo_wilson(MAX_GAMES, 0, 0)):
        assert est.upper == math.inf and math.isfinite(est.lower) and est.lower > 4000
