"""KataGo's auxiliary heads: ownership, opponent policy, soft policy. Targets from self-play,
records and shards, symmetry augmentation, losses, masking, config keys, and the shipped model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from takzero.config import ConfigError, ReplayConfig, load_config
from takzero.game import Position
from takzero.game.ownership import ownership
from takzero.game.symmetry import NUM_SYMMETRIES, transform_squares, transform_state
from takzero.nn.actions import legal_mask, num_actions
from takzero.nn.features import encode, num_channels
from takzero.nn.model import (
    LossWeights,
    ModelConfig,
    TakNet,
    model_from_checkpoint,
    opponent_policy_loss,
    ownership_loss,
    soft_policy_target,
    total_loss,
)
from takzero.pipeline.replay import Records, ReplayBuffer, atomic_save_npz, unpack_states
from takzero.pipeline.selfplay import SelfPlayWorker
from takzero.pipeline.trainer import Trainer, make_batch

SIZE = 3
PRETRAINED = Path(__file__).resolve().parents[1] / "checkpoints" / "pretrained" / "5x5_v1.pt"


def _random_final(size: int, seed: int) -> np.ndarray:
    """A position after random plies (a game's final position, finished or not)."""
    rng = np.random.default_rng(seed)
    pos = Position.start(size)
    for _ in range(3 * size * size):
        codes = pos.legal_move_codes()
        if pos.is_over or len(codes) == 0:
            break
        pos = pos.play(int(codes[rng.integers(len(codes))]))
    return pos.state.copy()


# One torch thread, as in a self-play worker (tests/conftest.py): the nets and batches here are
# tiny, and more threads only spin on a loaded machine.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- ownership target -----------------------------------------------------------------------


def test_ownership_of_a_small_position():
    pos = Position.from_tps("x3/x,2,x/1,x2 1 2")  # TPS rows from rank 3 down to rank 1
    own_w = ownership(pos.state, 0).reshape(SIZE, SIZE)
    # a1 (rank 0, file 0) white flat, b2 black flat, everything else empty
    expect = np.zeros((SIZE, SIZE), np.int8)
    expect[0, 0] = 1
    expect[1, 1] = -1
    np.testing.assert_array_equal(own_w, expect)
    np.testing.assert_array_equal(ownership(pos.state, 1).reshape(SIZE, SIZE), -expect)
    with pytest.raises(ValueError):
        ownership(pos.state, 2)


@pytest.mark.parametrize("size", [3, 5, 6])
def test_ownership_follows_the_board_symmetries(size):
    """Transforming a final position and its ownership target agrees with the target computed on
    the transformed position, for every symmetry and both movers."""
    for seed in range(3):
        final = _random_final(size, seed)
        for mover in (0, 1):
            own = ownership(final, mover)
            assert np.abs(own).sum() > 0
            for t in range(NUM_SYMMETRIES):
                np.testing.assert_array_equal(
                    transform_squares(own, size, t), ownership(transform_state(final, t), mover)
                )


# -- self-play targets ------------------------------------------------------------------------


def _cfg(**model):
    return load_config(
        {
            "board": {"size": SIZE, "komi": 0.0},
            "model": {"channels": 8, "blocks": 1, **model},
            "mcts": {"simulations": 8, "temperature_plies": 30},
            "selfplay": {"games_per_worker": 6, "ply_limit": 24, "resign_threshold": -1.0,
                         "opening_random_plies": 1},
            "replay": {"top_k": 8},
            "device": "cpu",
        }
    )


class _Recording(SelfPlayWorker):
    """Keeps each finished game's final position and recorded states next to its records."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.games: list[tuple[np.ndarray, list[np.ndarray], Records, str]] = []

    def _records(self, slot, winner, reason=""):
        recs = super()._records(slot, winner, reason)
        if recs is not None:
            self.games.append((slot.game.position.state.copy(), list(slot.states), recs, reason))
        return recs


@pytest.fixture(scope="module")
def played():
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as a self-play worker (selfplay.threads): tiny batches
    try:
        cfg = _cfg(ownership_weight=1.5, opponent_policy_weight=0.15, soft_policy_weight=0.1)
        worker = _Recording.from_run(cfg, worker_id=0, device="cpu")
        parts = []
        for _ in range(200):
            recs, _, _ = worker.play_step()
            if recs is not None:
                parts.append(recs)
            if len(worker.games) >= 6:
                break
    finally:
        torch.set_num_threads(threads)
    assert len(worker.games) >= 3
    return cfg, worker, Records.concat(parts)


def test_selfplay_fills_ownership_of_every_position_from_the_final_one(played):
    _, worker, _ = played
    for final, states, recs, reason in worker.games:
        assert recs.ownership.shape == (len(recs), SIZE * SIZE)
        for i, st in enumerate(states):
            mover = int(st[1]) & 1
            np.testing.assert_array_equal(recs.ownership[i], ownership(final, mover))
        assert recs.own_valid.all() == (reason != "resign")


def test_selfplay_opponent_policy_is_the_next_positions_target(played):
    cfg, worker, _ = played
    k = cfg.replay_opponent_top_k()
    assert k == cfg.replay.top_k
    for _, _, recs, _ in worker.games:
        assert recs.opp_index.shape == (len(recs), k)
        for i in range(len(recs)):
            has = bool((recs.opp_index[i] >= 0).any())
            nxt = i + 1 < len(recs) and recs.ply[i + 1] == recs.ply[i] + 1
            assert has == nxt
            if has:
                np.testing.assert_array_equal(recs.opp_index[i], recs.policy_index[i + 1])
                np.testing.assert_array_equal(recs.opp_prob[i], recs.policy_prob[i + 1])
        assert not (recs.opp_index[-1] >= 0).any()  # masked at the last position


def test_resigned_games_mask_ownership():
    cfg = _cfg(ownership_weight=1.0)
    worker = SelfPlayWorker.from_run(cfg, worker_id=1, device="cpu")
    slot = worker.slots[0]
    slot.states.append(slot.game.position.state.copy())
    slot.actions.append(np.array([0], np.int64))
    slot.probs.append(np.array([1.0], np.float32))
    slot.movers.append(0)
    slot.plies.append(slot.game.position.ply)
    slot.proven.append(None)
    assert not worker._records(slot, 1, "resign").own_valid.any()
    assert worker._records(slot, 1, "road").own_valid.all()
    assert worker._records(slot, None, "draw").own_valid.all()


# -- augmentation -----------------------------------------------------------------------------


def test_batch_augments_targets_with_the_planes(played):
    """Each sample's ownership target equals the target computed on the transformed final
    position, its planes the encoding of the transformed position, and its opponent-policy mass
    lies on the legal moves of the transformed next position."""
    cfg, worker, _ = played
    finals, states, nexts, parts = [], [], [], []
    for final, sts, recs, _ in worker.games:
        for i in range(len(recs)):
            finals.append(final)
            states.append(sts[i])
            nexts.append(sts[i + 1] if i + 1 < len(sts) else None)
        parts.append(recs)
    recs = Records.concat(parts)
    layers = cfg.model_config().layers
    seed = 11
    ts = np.random.default_rng(seed).integers(0, NUM_SYMMETRIES, size=len(recs))
    batch = make_batch(recs, SIZE, layers, np.random.default_rng(seed), feature_version=2)
    assert len(set(ts.tolist())) > 3
    a = num_actions(SIZE)
    for r in range(len(recs)):
        t = int(ts[r])
        mover = int(states[r][1]) & 1
        expect = ownership(transform_state(finals[r], t), mover)
        np.testing.assert_array_equal(batch.targets["ownership"][r].numpy(), expect.astype(np.float32))
        moved = transform_state(unpack_states(recs.board[r : r + 1], SIZE)[0], t)
        planes = np.zeros((1, num_channels(layers, 2), SIZE, SIZE), np.float32)
        encode(moved[None], planes, layers, 2)
        np.testing.assert_array_equal(batch.planes[r].numpy(), planes[0])
        if batch.targets["opponent_policy_valid"][r]:
            legal = np.zeros((1, a), np.bool_)
            legal_mask(transform_state(nexts[r], t)[None], legal)
            opp = batch.targets["opponent_policy"][r].numpy()
            assert opp.sum() == pytest.approx(1.0, abs=1e-3)
            assert opp[~legal[0]].sum() == 0
    assert batch.targets["opponent_policy_valid"].any() and batch.targets["ownership_valid"].all()


# -- model and losses -------------------------------------------------------------------------


ALL_HEADS = ["ownership", "opponent_policy", "soft_policy"]


def _net(heads=()):
    torch.manual_seed(0)
    return TakNet(ModelConfig(size=SIZE, channels=8, blocks=2, heads=list(heads)))


def test_heads_shapes_and_forward_unchanged():
    net = _net(ALL_HEADS).eval()
    x = torch.rand(5, net.config.in_channels, SIZE, SIZE)
    out = net.forward_all(x)
    a = num_actions(SIZE)
    assert out["ownership"].shape == (5, SIZE, SIZE)
    assert out["ownership"].abs().max() <= 1
    assert out["opponent_policy"].shape == (5, a)
    assert out["soft_policy"].shape == (5, a)
    policy, wdl, aux = net(x)
    assert torch.equal(policy, out["policy"]) and torch.equal(wdl, out["wdl"])
    assert set(_net().forward_all(x)) == {"policy", "wdl", "aux"}


def test_losses_finite_and_masked():
    net = _net(ALL_HEADS)
    b, a = 6, num_actions(SIZE)
    x = torch.rand(b, net.config.in_channels, SIZE, SIZE)
    heads = net.forward_all(x)
    mask = torch.rand(b, a) < 0.3
    mask[:, 0] = True
    target = torch.rand(b, a) * mask
    target = target / target.sum(1, keepdim=True)
    own = torch.randint(-1, 2, (b, SIZE * SIZE)).float()
    valid = torch.tensor([True, True, False, True, False, True])
    opp = torch.softmax(torch.randn(b, a), 1)
    opp_valid = torch.tensor([True, False, True, True, False, False])
    weights = LossWeights(heads={"ownership": 1.5, "opponent_policy": 0.15, "soft_policy": 0.1})
    targets = {"ownership": own, "ownership_valid": valid, "opponent_policy": opp, "opponent_policy_valid": opp_valid}
    loss, parts = total_loss(
        (heads["policy"], heads["wdl"], heads["aux"]), mask, target, torch.zeros(b),
        weights=weights, heads=heads, targets=targets,
    )
    assert torch.isfinite(loss)
    for name in ("ownership", "opponent_policy", "soft_policy"):
        assert torch.isfinite(parts[name]) and parts[name] > 0
    loss.backward()
    for head in net.heads.values():
        assert head.conv.weight.grad is not None and head.conv.weight.grad.abs().sum() > 0
    # masked rows do not count: changing their targets changes nothing
    z = heads["ownership_logit"].detach()
    own2 = own.clone()
    own2[~valid] = -own2[~valid] + 1
    assert ownership_loss(z, own, valid) == ownership_loss(z, own2.clamp(-1, 1), valid)
    lo = heads["opponent_policy"].detach()
    opp2 = opp.clone()
    opp2[~opp_valid] = torch.softmax(torch.randn(int((~opp_valid).sum()), a), 1)
    assert opponent_policy_loss(lo, opp, opp_valid) == opponent_policy_loss(lo, opp2, opp_valid)
    none = torch.zeros(b, dtype=torch.bool)
    assert ownership_loss(z, own, none) == 0 and opponent_policy_loss(lo, opp, none) == 0
    # a perfect ownership prediction has a lower loss than the opposite one
    sure = own.reshape(b, SIZE, SIZE) * 10
    assert ownership_loss(sure, own) < ownership_loss(-sure, own)


def test_missing_head_or_target_is_an_error():
    net = _net()
    x = torch.rand(2, net.config.in_channels, SIZE, SIZE)
    heads = net.forward_all(x)
    mask = torch.ones(2, num_actions(SIZE), dtype=torch.bool)
    t = torch.full((2, num_actions(SIZE)), 1.0 / num_actions(SIZE))
    with pytest.raises(ValueError, match="ownership"):
        total_loss(net(x), mask, t, torch.zeros(2), weights=LossWeights(heads={"ownership": 1.0}), heads=heads)


def test_soft_policy_target_is_the_quarter_power():
    t = torch.tensor([[0.81, 0.16, 0.03, 0.0], [0.0, 0.0, 0.0, 0.0]])
    soft = soft_policy_target(t)
    root = np.array([0.81, 0.16, 0.03, 0.0]) ** 0.25
    np.testing.assert_allclose(soft[0].numpy(), root / root.sum(), rtol=1e-5)
    assert soft[0, 3] == 0 and soft[1].sum() == 0
    assert soft[0, 2] / soft[0, 0] > t[0, 2] / t[0, 0]  # flatter than the target


def test_trainer_step_with_every_head(played):
    cfg, _, recs = played
    tr = Trainer(cfg.train, cfg.model_config(), cfg.loss_weights(), device="cpu", seed=0)
    m = tr.train_step(recs)
    for name in ("ownership", "opponent_policy", "soft_policy"):
        assert np.isfinite(m[f"loss/{name}"])
    assert tr.step == 1


# -- records, shards, config, old checkpoints -------------------------------------------------


def test_shards_keep_the_targets_and_old_shards_load(tmp_path, played):
    cfg, _, recs = played
    k = cfg.replay_opponent_top_k()
    rcfg = ReplayConfig(top_k=8, shard_positions=1)
    buf = ReplayBuffer(rcfg, SIZE, shard_dir=tmp_path, opponent_top_k=k)
    assert buf.add(recs)
    back = ReplayBuffer(rcfg, SIZE, shard_dir=tmp_path, opponent_top_k=k)
    assert back.load() == len(recs)
    for f in ("ownership", "own_valid", "opp_index", "opp_prob"):
        np.testing.assert_array_equal(getattr(back.data, f), getattr(recs, f))
    # a shard written before these fields existed
    old = tmp_path / "old"
    atomic_save_npz(old / "shard_00000000.npz", **{f: getattr(recs, f) for f in Records.FIELDS[:8]})
    legacy = ReplayBuffer(rcfg, SIZE, shard_dir=old, opponent_top_k=k)
    assert legacy.load() == len(recs)
    assert not legacy.data.own_valid.any()
    assert legacy.data.opp_index.shape == (len(recs), k) and (legacy.data.opp_index == -1).all()
    # a buffer that does not train the opponent head keeps no opponent targets
    slim = ReplayBuffer(rcfg, SIZE, opponent_top_k=0)
    slim.add(recs)
    assert slim.data.opp_index.shape == (len(recs), 0)


def test_config_keys_are_checked():
    cfg = _cfg()
    assert not cfg.model_config().heads and not cfg.replay_opponent_top_k()
    for key in ("ownership_weight", "opponent_policy_weight", "soft_policy_weight"):
        with pytest.raises(ConfigError, match=f"model.{key}"):
            load_config({"model": {key: -0.5}})
    with pytest.raises(ConfigError, match="selfplay.backend"):
        load_config({"selfplay": {"backend": "tensorflow"}})
    with pytest.raises(ConfigError, match="forced_k"):
        load_config({"mcts": {"forced_k": -1.0}})
    with pytest.raises(ConfigError, match="mcts.forced_playouts"):
        load_config({"mcts": {"forced_playouts": 1}})


def test_shipped_model_loads_without_heads():
    net = model_from_checkpoint(str(PRETRAINED))
    cfg = net.config
    assert not cfg.heads and not net.heads
    x = torch.zeros(1, cfg.in_channels, cfg.size, cfg.size)
    assert set(net.eval().forward_all(x)) == {"policy", "wdl", "aux"}
