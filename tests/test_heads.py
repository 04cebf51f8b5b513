"""The head table (nn/heads.py), the batch targets (pipeline/targets.py) and the network interface
(nn/interface.py): a new head is one row plus its target; old checkpoints load unchanged; inference,
export and the trainer take any PolicyValueNet."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import Tensor, nn

from takzero.config import ModelSection, TrainSection, load_config
from takzero.game import Position
from takzero.nn.heads import HEADS, HIDDEN_PLANES, Head, HeadContext
from takzero.nn.inference import Evaluator
from takzero.nn.interface import PolicyValueNet
from takzero.nn.model import LossWeights, ModelConfig, TakNet, model_from_checkpoint, total_loss
from takzero.nn.model_export import export_torchscript
from takzero.pipeline.resume import model_config_diff
from takzero.pipeline.targets import TARGETS, TargetProducer
from takzero.pipeline.trainer import Trainer, make_batch
from tests.test_trainer import SIZE, _records

ROOT = Path(__file__).resolve().parents[1]
OLD = ROOT / "tests" / "data" / "old_heads_checkpoint.pt"  # tests/data/make_old_heads_checkpoint.py

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _train_section() -> TrainSection:
    return TrainSection(batch_size=32, lr=0.01, warmup_steps=0, total_steps=10)


# -- a new head: one row, one target producer -------------------------------------------------


class FlatCountHead(nn.Module):
    """conv1x1 on the value planes, averaged over the board: (B, C, N, N) -> (B,)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cfg.value_channels, 1, 1)

    def forward(self, v: Tensor) -> Tensor:
        return self.conv(v).mean(dim=(1, 2, 3))


def _flat_count_loss(outputs, ctx: HeadContext) -> Tensor:
    target, valid = ctx.target("flat_count")
    assert valid is not None and valid.all()
    return torch.nn.functional.mse_loss(outputs["flat_count"].float(), target)


def _flat_count_target(records, size, symmetries, settings):
    """The final flat difference over N (invariant under the board symmetries)."""
    return records.flat_diff.astype(np.float32) / size, np.ones(len(records), np.bool_)


@pytest.fixture
def flat_count(monkeypatch):
    """The toy head registered for one test: its row and its target producer."""
    row = Head("flat_count", "value", FlatCountHead, _flat_count_loss, "flat_count_weight",
               "flat_count", "final flat difference / N, MSE (a test head)")
    monkeypatch.setitem(HEADS, "flat_count", row)
    monkeypatch.setitem(TARGETS, "flat_count", TargetProducer("flat_count", _flat_count_target, "test"))
    return row


def test_a_new_head_is_one_row_and_trains(flat_count):
    recs = _records(32, seed=3)
    recs.flat_diff[:] = np.arange(len(recs)) % 5 - 2
    cfg = ModelConfig(size=SIZE, channels=8, blocks=1, heads=["flat_count", "ownership"])
    assert cfg.heads == ["ownership", "flat_count"]  # table order
    weights = LossWeights(heads={"flat_count": 0.5})
    tr = Trainer(_train_section(), cfg, weights, device="cpu", seed=0)
    assert tr.targets == ["flat_count"]
    head = tr.model.heads["flat_count"]
    before = head.conv.weight.detach().clone()
    m = tr.train_step(recs)
    assert tr.step == 1 and np.isfinite(m["loss/flat_count"]) and m["loss/flat_count"] > 0
    assert "loss/ownership" not in m  # built, but its weight is 0: no term
    assert not torch.equal(before, head.conv.weight)
    # the same term by hand: total_loss with the batch's targets, a finite gradient
    batch = make_batch(recs, SIZE, cfg.layers, np.random.default_rng(0), targets=["flat_count"])
    np.testing.assert_array_equal(batch.targets["flat_count"].numpy(), recs.flat_diff / SIZE)
    out = tr.model.forward_all(batch.planes)
    assert out["flat_count"].shape == (len(recs),)
    loss, parts = total_loss((out["policy"], out["wdl"], out["aux"]), batch.mask, batch.policy,
                             batch.value, weights=weights, heads=out, targets=batch.targets)
    tr.model.zero_grad()
    loss.backward()
    assert torch.isfinite(head.conv.weight.grad).all() and head.conv.weight.grad.abs().sum() > 0
    expect = torch.nn.functional.mse_loss(out["flat_count"].detach(), batch.targets["flat_count"])
    assert parts["flat_count"] == pytest.approx(float(expect))


def test_the_table_names_what_exists():
    """Every row reads planes the network has, trains on a target a producer makes, and has its
    weight field in ModelSection with its line (and default) under model: in train.yaml."""
    fields = {f.name: f.default for f in dataclasses.fields(ModelSection)}
    documented = yaml.safe_load((ROOT / "configs" / "train.yaml").read_text())["model"]
    for name, row in HEADS.items():
        assert row.name == name and row.reads in HIDDEN_PLANES and row.description
        assert row.target is None or row.target in TARGETS
        assert row.weight_key in fields, row.weight_key
        assert documented[row.weight_key] == fields[row.weight_key], row.weight_key
    for name, producer in TARGETS.items():
        assert producer.name == name


def test_config_turns_on_the_heads_whose_weight_is_positive():
    cfg = load_config({"board": {"size": 4}, "model": {"soft_policy_weight": 0.1, "ownership_weight": 1.5}})
    assert cfg.model_config().heads == ["ownership", "soft_policy"]
    assert cfg.loss_weights().heads == {"ownership": 1.5, "opponent_policy": 0.0, "soft_policy": 0.1}
    assert cfg.replay_opponent_top_k() == 0
    assert load_config({"model": {"opponent_policy_weight": 0.15}}).replay_opponent_top_k() > 0


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match=r"heads: unknown head 'nope'"):
        ModelConfig(size=4, heads=["nope"])
    with pytest.raises(ValueError, match=r"loss weights for unknown heads \['nope'\]"):
        LossWeights(heads={"nope": 1.0})
    with pytest.raises(ValueError, match=r"unknown batch target 'nope'"):
        make_batch(_records(4, seed=0), SIZE, ModelConfig(size=SIZE).layers, np.random.default_rng(0),
                   targets=["nope"])


# -- old checkpoints and seeded networks --------------------------------------------------------


@pytest.fixture(scope="module")
def old():
    return torch.load(OLD, weights_only=True)


def test_old_checkpoint_loads_with_identical_outputs(old):
    """A checkpoint written before the head table (config flags ownership_head/..., parameters
    ownership_out.*/...) loads, and forward_all gives what the old code gave."""
    assert old["model_config"]["ownership_head"] and any(k.startswith("ownership_out.") for k in old["model_state"])
    net = model_from_checkpoint({"model_config": old["model_config"], "model_state": old["model_state"]})
    assert net.config.heads == ["ownership", "opponent_policy", "soft_policy"]
    with torch.no_grad():
        out = net.eval().forward_all(old["planes"])
    assert set(out) == set(old["outputs"])
    for key, want in old["outputs"].items():  # up to float rounding: other thread counts, CPUs
        torch.testing.assert_close(out[key], want, rtol=1e-5, atol=1e-6, msg=key)


def test_seeded_network_has_the_old_weights(old):
    """``torch.manual_seed(1); TakNet(cfg)`` gives the weights the old code gave, parameter by
    parameter, whatever order the heads are named in."""
    cfg = ModelConfig.from_dict(old["model_config"])
    ref = TakNet(cfg)
    ref.load_state_dict(old["init_state"])
    for heads in (cfg.heads, cfg.heads[::-1]):
        torch.manual_seed(1)
        net = TakNet(dataclasses.replace(cfg, heads=heads))
        got, want = net.state_dict(), ref.state_dict()
        assert list(got) == list(want)
        for key in want:
            assert torch.equal(got[key], want[key]), key


def test_old_config_dicts_read_as_heads():
    old = ModelConfig(size=4).to_dict()
    del old["heads"]
    flags = {"ownership_head": False, "opponent_policy_head": True, "soft_policy_head": False}
    assert ModelConfig.from_dict({**old, **flags}).heads == ["opponent_policy"]
    assert ModelConfig.from_dict(old).heads == []
    assert ModelConfig.upgrade_dict({"size": 4}) == {"size": 4}
    # resume compares the old flags as heads: an ownership checkpoint is not this config's network
    cfg = load_config({"board": {"size": 4}})
    saved = {**ModelConfig.upgrade_dict(cfg.model_config().to_dict()), "ownership_head": True}
    del saved["heads"]
    assert "model.heads" in model_config_diff(saved, cfg, "checkpoint")
    assert model_config_diff({**saved, "ownership_head": False}, cfg, "checkpoint") == ""


def test_forward_is_the_same_with_and_without_heads():
    torch.manual_seed(0)
    with_heads = TakNet(ModelConfig(size=SIZE, channels=8, blocks=2, heads=list(HEADS))).eval()
    plain = TakNet(ModelConfig(size=SIZE, channels=8, blocks=2)).eval()
    plain.load_state_dict({k: v for k, v in with_heads.state_dict().items() if not k.startswith("heads.")})
    x = torch.rand(3, plain.config.in_channels, SIZE, SIZE)
    with torch.no_grad():
        a, b, every = with_heads(x), plain(x), with_heads.forward_all(x)
    for u, v, key in zip(a, b, ("policy", "wdl", "aux"), strict=True):
        assert torch.equal(u, v) and torch.equal(every[key], u)
    assert set(every) == {"policy", "wdl", "aux", "ownership", "ownership_logit", "opponent_policy", "soft_policy"}


# -- the interface -----------------------------------------------------------------------------


class Wrapped(nn.Module):
    """Another network class: a PolicyValueNet that is not a TakNet (it wraps one)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.inner = TakNet(cfg)
        self.config, self.size, self.num_actions = cfg, cfg.size, cfg.num_actions

    def forward(self, planes: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.inner(planes)

    def forward_all(self, planes: Tensor) -> dict[str, Tensor]:
        return self.inner.forward_all(planes)


def test_inference_export_and_trainer_take_any_policy_value_net(tmp_path):
    cfg = ModelConfig(size=SIZE, channels=8, blocks=1)
    torch.manual_seed(0)
    net = Wrapped(cfg)
    assert isinstance(net, PolicyValueNet) and isinstance(net.inner, PolicyValueNet)
    assert not isinstance(nn.Linear(2, 2), PolicyValueNet)
    pos = Position.start(SIZE)
    batch = np.stack([pos.state, pos.play(int(pos.legal_move_codes()[0])).state])
    ev = Evaluator(net, device="cpu")  # metadata from the interface
    ref = Evaluator(net.inner, device="cpu").evaluate(batch)
    for got, want in zip(ev.evaluate(batch), ref, strict=True):
        np.testing.assert_array_equal(got, want)
    path = tmp_path / "wrapped.pt"
    export_torchscript(net, path)
    scripted = Evaluator.load(path, device="cpu")
    assert not isinstance(scripted.model, PolicyValueNet)  # a traced module keeps only forward
    for got, want in zip(scripted.evaluate(batch), ref, strict=True):
        np.testing.assert_allclose(got, want, atol=1e-6)
    ev.load_state_dict(net.state_dict())
    tr = Trainer(_train_section(), cfg, device="cpu", build=Wrapped)
    assert isinstance(tr.model, Wrapped)
    assert np.isfinite(tr.train_step(_records(16, seed=4))["loss/total"])
