"""Model: shapes, config round trips, masked softmax, losses and a small overfitting run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from takzero.nn import actions as A
from takzero.nn import features as F
from takzero.nn.model import (
    LossWeights,
    ModelConfig,
    TakNet,
    aux_loss,
    checkpoint_dict,
    masked_log_softmax,
    masked_softmax,
    model_from_checkpoint,
    outcome_to_wdl,
    policy_loss,
    total_loss,
    value_loss,
    wdl_to_value,
)
from takzero.nn.outputs import masked_softmax_np


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny nets run fastest on one thread, and do not suffer when other processes hold the
    cores (two threads spin-waiting on a busy 2-core machine are many times slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def small(size: int = 5, **kw) -> TakNet:
    torch.manual_seed(0)
    cfg = {"size": size, "channels": 16, "blocks": 2, "gpool_every": 2, **kw}
    return TakNet(ModelConfig(**cfg))


@pytest.mark.parametrize("size", [3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("global_pool", [True, False])
def test_forward_shapes(size: int, global_pool: bool) -> None:
    model = small(size, global_pool=global_pool, blocks=2)
    cfg = model.config
    assert cfg.layers == size + 2 and cfg.in_channels == F.num_channels(size + 2)
    x = torch.randn(3, cfg.in_channels, size, size)
    logits, wdl, aux = model(x)
    assert logits.shape == (3, A.num_actions(size)) and wdl.shape == (3, 3) and aux.shape == (3, 1)
    assert logits.dtype == torch.float32
    has_pool = any(type(b).__name__ == "GlobalPoolBlock" for b in model.trunk.tower)
    assert has_pool == global_pool


def test_policy_logits_are_channel_major() -> None:
    # the policy conv's output channel c at square sq must land on index c * N * N + sq
    model = small(5).eval()
    x = torch.randn(2, model.config.in_channels, 5, 5)
    with torch.no_grad():
        model.policy_out.weight.zero_()
        model.policy_out.bias.zero_()
        model.policy_out.bias[7] = 1.0  # channel 7 = first spread pattern of direction 1
        logits, _, _ = model(x)
    hot = torch.nonzero(logits[0]).flatten()
    assert torch.equal(hot, torch.arange(7 * 25, 8 * 25))


def test_config_round_trip_and_checkpoint() -> None:
    cfg = ModelConfig(size=6)
    assert cfg.channels == 64 and cfg.blocks == 6 and cfg.layers == 8 and cfg.global_pool
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError):
        ModelConfig.from_dict({**cfg.to_dict(), "bogus": 1})
    with pytest.raises(ValueError):
        ModelConfig(feature_version=F.FEATURE_VERSION + 1)
    with pytest.raises(ValueError):
        ModelConfig(size=9)
    model = small(5).eval()
    copy = model_from_checkpoint(checkpoint_dict(model, generation=3)).eval()
    x = torch.randn(4, model.config.in_channels, 5, 5)
    with torch.no_grad():
        for a, b in zip(model(x), copy(x), strict=True):
            assert torch.equal(a, b)
    assert copy.config == model.config


def test_default_model_is_small() -> None:
    model = TakNet(ModelConfig())
    n_params = sum(p.numel() for p in model.parameters())
    assert 2e5 < n_params < 1e6


def random_logits_and_mask(rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    logits = torch.from_numpy(rng.normal(0, 5, size=(6, 40)).astype(np.float32))
    mask = torch.from_numpy(rng.random((6, 40)) < 0.3)
    mask[0] = False  # all masked
    mask[1] = False
    mask[1, 3] = True  # a single legal move
    logits[2, :] = 1e30  # huge logits
    logits[3, :] = -1e30
    logits[4, 5] = float("inf")
    mask[4, 5] = False  # +inf on an illegal entry must not matter
    return logits, mask


def test_masked_softmax_properties() -> None:
    rng = np.random.default_rng(0)
    for _ in range(5):
        logits, mask = random_logits_and_mask(rng)
        p = masked_softmax(logits, mask)
        assert not torch.isnan(p).any()
        assert torch.all(p[~mask] == 0)
        legal_rows = mask.any(dim=1)
        sums = p.sum(dim=1)
        assert torch.allclose(sums[legal_rows], torch.ones(int(legal_rows.sum())), atol=1e-5)
        assert torch.all(p[0] == 0) and p[1, 3] == 1.0
        logp = masked_log_softmax(logits, mask)
        assert torch.all(torch.isneginf(logp[~mask])) and torch.isfinite(logp[mask]).all()
        # the NumPy twin agrees
        pn = masked_softmax_np(logits.numpy(), mask.numpy())
        assert np.allclose(pn, p.numpy(), atol=1e-6) and not np.isnan(pn).any()
    # bf16 logits are handled in float32
    logits, mask = random_logits_and_mask(rng)
    logits[2:4] = 0.0
    p = masked_softmax(logits.bfloat16(), mask)
    assert p.dtype == torch.float32 and not torch.isnan(p).any()
    with pytest.raises(ValueError):
        masked_softmax(logits, mask[:, :10])
    with pytest.raises(ValueError):
        masked_softmax_np(logits.numpy(), mask.numpy()[:, :10])


def test_masked_softmax_matches_plain_softmax_on_legal_entries() -> None:
    logits = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    mask = torch.tensor([[True, False, True, False]])
    expect = torch.softmax(torch.tensor([1.0, 3.0]), dim=0)
    p = masked_softmax(logits, mask)
    assert torch.allclose(p[0, [0, 2]], expect) and p[0, 1] == 0 and p[0, 3] == 0


def test_policy_loss_and_gradients_never_nan() -> None:
    rng = np.random.default_rng(1)
    logits, mask = random_logits_and_mask(rng)
    logits[2:5] = torch.from_numpy(rng.normal(size=(3, 40)).astype(np.float32))
    logits.requires_grad_(True)
    target = torch.rand(6, 40) * mask  # mass on legal entries only
    target = target / target.sum(dim=1, keepdim=True).clamp(min=1e-9)
    loss = policy_loss(logits, mask, target)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    assert torch.all(logits.grad[0] == 0)  # the all-masked row gets no gradient
    assert torch.all(logits.grad[~mask] == 0)
    # formula: -sum target * log p over legal moves, mean over the batch
    with torch.no_grad():
        logp = masked_log_softmax(logits, mask)
        manual = [-(target[b][mask[b]] * logp[b][mask[b]]).sum() for b in range(6)]
        assert torch.isclose(loss, torch.stack(manual).mean())
    # target mass on illegal moves is ignored
    noisy = target + (~mask).float()
    assert torch.isclose(policy_loss(logits, mask, noisy), loss)


def test_value_and_aux_losses() -> None:
    wdl = torch.zeros(4, 3)
    outcome = torch.tensor([1.0, 0.0, -1.0, 1.0])
    assert math.isclose(value_loss(wdl, outcome).item(), math.log(3), rel_tol=1e-6)
    onehot = outcome_to_wdl(outcome)
    assert torch.equal(onehot, torch.tensor([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]]))
    assert torch.isclose(value_loss(wdl, onehot), value_loss(wdl, outcome))
    soft = outcome_to_wdl(torch.tensor([0.5, -0.25]))
    assert torch.allclose(soft, torch.tensor([[0.5, 0.5, 0.0], [0.0, 0.75, 0.25]]))
    assert torch.allclose(wdl_to_value(soft), torch.tensor([0.5, -0.25]))
    confident = torch.tensor([[20.0, 0, 0], [0, 20, 0], [0, 0, 20], [20, 0, 0]])
    assert value_loss(confident, outcome).item() < 1e-6
    with pytest.raises(ValueError):
        value_loss(wdl, torch.zeros(4, 2))
    aux = torch.tensor([[1.0], [0.0]])
    flat = torch.tensor([6.0, -3.0])
    assert math.isclose(aux_loss(aux, flat, 6).item(), ((1 - 1) ** 2 + (0 + 0.5) ** 2) / 2)


def test_total_loss_weights() -> None:
    torch.manual_seed(0)
    logits = torch.randn(4, 10)
    mask = torch.rand(4, 10) < 0.5
    mask[:, 0] = True
    target = mask.float() / mask.float().sum(dim=1, keepdim=True)
    wdl, aux = torch.randn(4, 3), torch.randn(4, 1)
    value, flat = torch.tensor([1.0, -1.0, 0.0, 1.0]), torch.tensor([2.0, -1.0, 0.0, 4.0])
    w = LossWeights(policy=0.5, value=2.0, aux=0.25)
    total, parts = total_loss((logits, wdl, aux), mask, target, value, flat, 5, w)
    expect = (
        0.5 * policy_loss(logits, mask, target)
        + 2.0 * value_loss(wdl, value)
        + 0.25 * aux_loss(aux, flat, 5)
    )
    assert torch.isclose(total, expect) and torch.isclose(parts["total"], expect)
    no_aux, parts = total_loss((logits, wdl, aux), mask, target, value, None, None, w)
    assert torch.isclose(no_aux, expect - 0.25 * aux_loss(aux, flat, 5))
    assert parts["aux"].item() == 0.0
    with pytest.raises(ValueError):
        total_loss((logits, wdl, aux), mask, target, value, flat, None, w)


def test_small_net_overfits_a_fixed_batch() -> None:
    size, batch = 5, 16
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    states = F.random_states(size, batch, seed=9, min_plies=2, max_plies=30)
    planes = F.new_planes(batch, size)
    F.encode(states, planes)
    mask = np.zeros((batch, A.num_actions(size)), bool)
    A.legal_mask(states, mask)
    target = np.zeros(mask.shape, np.float32)
    for b in range(batch):  # one random legal move per position: the loss can reach ~0
        target[b, rng.choice(np.flatnonzero(mask[b]))] = 1.0
    value = torch.from_numpy(rng.choice([-1.0, 0.0, 1.0], size=batch).astype(np.float32))
    flat = torch.from_numpy(rng.integers(-5, 6, size=batch).astype(np.float32))
    x, m, t = torch.from_numpy(planes), torch.from_numpy(mask), torch.from_numpy(target)
    model = TakNet(ModelConfig(size=size, channels=16, blocks=2, gpool_every=2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    losses = []
    for _ in range(40):
        loss, _ = total_loss(model(x), m, t, value, flat, size)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0] / 50, (losses[0], losses[-1])
