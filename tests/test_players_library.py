"""The network player in the library: one torch thread by default for its batch-1 searches (the
one place: ``set_search_threads``), and a warning when a network trained for one komi plays
another."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from takzero.game import Position
from takzero.game.core import num_actions
from takzero.players import network
from takzero.players.network import KomiMismatchWarning, NetworkPlayer, set_search_threads


class UniformEvaluator:
    """Uniform priors, value 0: a stand-in network for ``size`` with a trained ``half_komi``."""

    def __init__(self, size: int, half_komi: int | None) -> None:
        self.size = size
        self.metadata = {} if half_komi is None else {"half_komi": half_komi}

    def evaluate(self, states: np.ndarray):
        n = len(states)
        priors = np.full((n, num_actions(self.size)), 1.0, dtype=np.float32)
        return priors, np.zeros(n, dtype=np.float32), np.tile(np.float32([0.3, 0.4, 0.3]), (n, 1))


@pytest.fixture
def torch_threads(monkeypatch: pytest.MonkeyPatch):
    """Restore torch's thread count and the process's choice after the test."""
    before = torch.get_num_threads()
    monkeypatch.setattr(network, "_threads_chosen", False)
    yield
    torch.set_num_threads(before)


def test_load_uses_one_thread_by_default(torch_threads: None) -> None:
    torch.set_num_threads(2)
    NetworkPlayer.load(UniformEvaluator(4, 0), simulations=4)
    assert torch.get_num_threads() == 1


def test_a_command_line_choice_is_kept(torch_threads: None) -> None:
    torch.set_num_threads(2)
    set_search_threads(0)  # e.g. --threads 0: torch's default, kept by later loads
    NetworkPlayer.load(UniformEvaluator(4, 0), simulations=4)
    assert torch.get_num_threads() == 2
    NetworkPlayer.load(UniformEvaluator(4, 0), simulations=4, threads=1)  # an explicit count wins
    assert torch.get_num_threads() == 1
    with pytest.raises(ValueError, match="threads must be >= 0"):
        set_search_threads(-1)


@pytest.mark.parametrize(("trained", "played", "warns"), [(0, 4, True), (4, 0, True), (4, 4, False),
                                                          (None, 4, False)])
def test_komi_mismatch_warns_once(trained: int | None, played: int, warns: bool) -> None:
    player = NetworkPlayer(UniformEvaluator(4, trained), simulations=2, tinue_nodes=0)
    pos = Position.start(4, half_komi=played)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        player.reset(4, played, seed=0)
        player.choose(pos)
        player.reset(4, played, seed=1)  # the same komi again: no second warning
    komi = [w for w in caught if issubclass(w.category, KomiMismatchWarning)]
    assert len(komi) == (1 if warns else 0)
    if warns:
        assert f"trained for komi {trained / 2:g}" in str(komi[0].message)
        assert f"with komi {played / 2:g}" in str(komi[0].message)


def test_the_player_plays_the_best_q_of_the_well_visited_moves_unless_told() -> None:
    """The network player's move choice after a PUCT search is ``DEFAULT_SELECT_Q_FRACTION``
    (docs/results.md measures it); a config given keeps its own choice, and the played move is
    the one the rule picks from the root's visits and Q."""
    from takzero.search import HashEvaluator, SearchConfig

    player = NetworkPlayer(HashEvaluator(4, seed=3), simulations=120, tinue_nodes=0)
    assert player.config.select_q_fraction == network.DEFAULT_SELECT_Q_FRACTION > 0
    most_visited = NetworkPlayer(HashEvaluator(4, seed=3), simulations=120, tinue_nodes=0,
                                 config=SearchConfig(select_q_fraction=0.0))
    assert most_visited.config.select_q_fraction == 0.0
    differed = 0
    for opening in (("a1", "d4"), ("a1", "d1"), ("b2", "c3"), ("a4", "d1"), ("c2", "a1")):
        pos = Position.start(4).play(opening[0]).play(opening[1])
        choices = []
        for p in (player, most_visited):
            p.reset(4, 0, seed=0)
            choices.append(p.choose(pos).code)
            mcts = p._search.mcts
            moves, visits = mcts.root_visits(0)
            q = np.nan_to_num(mcts.root_q(0).astype(np.float64), nan=-np.inf)
            f = p.config.select_q_fraction
            ok = visits >= f * visits.max() if f > 0 else visits == visits.max()
            assert q[moves == choices[-1]][0] == q[ok].max()
        differed += choices[0] != choices[1]
    assert differed > 0  # the two choices part on some of these positions
