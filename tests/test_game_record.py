"""Self-play emits a typed game record (``pipeline.game_record.GameRecord``) and the replay records
are derived from it by the producers of ``replay.RECORD_FIELDS`` (issue 57): the records equal
those the worker built by hand before (kept below as the reference), with proofs, resignations,
draws and every opponent-policy width; the record checks its arrays."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from takzero.game import core
from takzero.game.ownership import ownership
from takzero.pipeline.game_record import NO_PROOF, GameRecord
from takzero.pipeline.replay import Records, Widths, pack_states, sparse_targets
from takzero.pipeline.selfplay import SelfPlayWorker
from tests.test_aux_heads import _cfg

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _old_records(size, top_k, opp_k, generation, slot, winner, reason) -> Records:
    """``SelfPlayWorker._records`` before the game record (main, issue 57), the reference."""
    n = len(slot.states)
    idx, prob = sparse_targets(slot.actions, slot.probs, top_k)
    movers = np.array(slot.movers)
    if winner is None:
        value = np.zeros(n, np.int8)
    else:
        value = np.where(movers == winner, 1, -1).astype(np.int8)
    for i, exact in enumerate(slot.proven):
        if exact is not None:
            value[i] = exact
    final = slot.game.position.state
    w, b = core.flat_counts(final)
    flat = np.where(movers == 0, w - b, b - w).astype(np.int8)
    white_owner = ownership(final, 0)
    own = np.where(movers[:, None] == 0, white_owner[None], -white_owner[None]).astype(np.int8)
    own_valid = np.full(n, reason != "resign", np.bool_)
    opp_idx = np.full((n, opp_k), -1, np.int32)
    opp_prob = np.zeros((n, opp_k), np.float16)
    if opp_k > 0 and n > 1:
        plies = np.array(slot.plies)
        rows = np.flatnonzero(plies[1:] == plies[:-1] + 1)
        if rows.size:
            a, p = sparse_targets([slot.actions[r + 1] for r in rows], [slot.probs[r + 1] for r in rows], opp_k)
            opp_idx[rows], opp_prob[rows] = a, p
    return Records(
        board=pack_states(np.stack(slot.states), size), policy_index=idx, policy_prob=prob, value=value,
        flat_diff=flat, game_id=np.full(n, slot.game_id, np.int64), generation=np.full(n, generation, np.int32),
        ply=np.array(slot.plies, np.int16), ownership=own, end_ply=np.full(n, final[core.I_PLY], np.int16),
        own_valid=own_valid, opp_index=opp_idx, opp_prob=opp_prob,
    )


class _Keeping(SelfPlayWorker):
    """Keeps a copy of each finished game's slot."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.kept: list = []

    def _records(self, slot, winner, reason=""):
        self.kept.append((copy.deepcopy(slot), winner, reason))
        return super()._records(slot, winner, reason)


@pytest.fixture(scope="module")
def games():
    torch.manual_seed(0)
    cfg = _cfg(ownership_weight=1.0, opponent_policy_weight=0.15)
    worker = _Keeping.from_run(cfg, worker_id=0, device="cpu")
    handed: list[Records] = []
    for _ in range(200):
        recs, _, _ = worker.play_step()
        if recs is not None:
            handed.append(recs)
        if len(worker.kept) >= 4:
            break
    assert len(worker.kept) >= 3
    return cfg, worker, handed


def _assert_same(got: Records, want: Records) -> None:
    for name in Records.FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_records_from_the_game_record_equal_the_old_ones(games) -> None:
    cfg, worker, handed = games
    # what the worker handed over is what the old code made of the same games
    want = [_old_records(worker.size, worker.top_k, worker.opponent_top_k, worker.generation, s, w, r)
            for s, w, r in worker.kept if s.states]
    _assert_same(Records.concat(handed), Records.concat(want))
    rng = np.random.default_rng(0)
    for slot, _, _ in worker.kept:
        if not slot.states:
            continue
        slot = copy.deepcopy(slot)
        slot.proven = [None if rng.random() < 0.6 else int(rng.integers(-1, 2)) for _ in slot.proven]
        if len(slot.plies) > 3:  # a cheap search left a ply unrecorded
            del slot.states[2], slot.actions[2], slot.probs[2], slot.movers[2], slot.plies[2], slot.proven[2]
        for winner, reason in ((0, "road"), (1, "resign"), (None, "draw"), (1, "flat")):
            for top_k, opp_k in ((8, 0), (8, 3), (4, 12), (16, 8)):
                worker.top_k, worker.opponent_top_k = top_k, opp_k
                game = worker.game_record(slot, winner, reason)
                assert len(game) == len(slot.states)
                got = Records.from_game(game, Widths(top_k, opp_k))
                _assert_same(got, _old_records(worker.size, top_k, opp_k, worker.generation, slot, winner, reason))


def _game(n: int = 3, **change) -> GameRecord:
    fields = dict(
        size=4, game_id=7, generation=2, states=np.zeros((n, core.STATE_LEN), np.int64),
        plies=np.arange(n, dtype=np.int16), movers=(np.arange(n) % 2).astype(np.int8),
        proven=np.full(n, NO_PROOF, np.int8), policy_offsets=np.arange(n + 1, dtype=np.int64),
        policy_actions=np.zeros(n, np.int64), policy_probs=np.ones(n, np.float32),
        final_state=np.zeros(core.STATE_LEN, np.int64), winner=0, reason="road",
    )
    fields.update(change)
    return GameRecord(**fields)


def test_the_game_record_checks_its_arrays() -> None:
    g = _game()
    assert len(g) == 3 and [a.tolist() for a in g.policies()[0]] == [[0], [0], [0]]
    with pytest.raises(ValueError, match=r"game record plies: int32\[3\], expected int16\[3\]"):
        _game(plies=np.arange(3, dtype=np.int32))
    with pytest.raises(ValueError, match="game record movers"):
        _game(movers=np.zeros(2, np.int8))
    with pytest.raises(ValueError, match="policy_offsets"):
        _game(policy_offsets=np.array([0, 2, 1, 3], np.int64))
    with pytest.raises(ValueError, match="winner"):
        _game(winner=2)
    # the per-game fields of the records come from the game
    recs = Records.from_game(g, Widths(2))
    assert recs.game_id.tolist() == [7] * 3 and recs.generation.tolist() == [2] * 3
    assert recs.value.tolist() == [1, -1, 1] and np.isnan(recs.search_value.astype(np.float32)).all()
