"""The trunk registry (takzero/nn/trunks.py): every row builds a network that the heads, the
losses, the checkpoints and the ONNX export take unchanged; a bad trunk is refused by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from takzero.config import ConfigError, ModelSection
from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict, model_from_checkpoint, total_loss
from takzero.nn.trunks import TRUNKS, build_trunk


def _config(trunk: str, size: int = 5) -> ModelConfig:
    return ModelConfig(size=size, channels=16, blocks=2, trunk=trunk, attention_heads=4)


def _perturbed(model: TakNet, seed: int = 0) -> TakNet:
    """The model with every parameter moved off its init (zero-initialised branches would make
    a trunk an identity and hide what it computes)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model.eval()


@pytest.mark.parametrize("trunk", sorted(TRUNKS))
@pytest.mark.parametrize("size", [3, 6])
def test_every_trunk_maps_planes_to_hidden_planes(trunk: str, size: int) -> None:
    cfg = _config(trunk, size)
    body = build_trunk(cfg)
    x = torch.randn(3, cfg.in_channels, size, size)
    assert body(x).shape == (3, cfg.channels, size, size)
    net = TakNet(cfg)
    policy, wdl, aux = net(x)
    assert policy.shape == (3, cfg.num_actions) and wdl.shape == (3, 3) and aux.shape == (3, 1)


@pytest.mark.parametrize("trunk", sorted(TRUNKS))
def test_every_trunk_trains_and_round_trips_through_a_checkpoint(trunk: str) -> None:
    torch.manual_seed(0)
    net = _perturbed(TakNet(_config(trunk)))
    net.train()
    x = torch.randn(4, net.config.in_channels, 5, 5)
    mask = torch.ones(4, net.num_actions, dtype=torch.bool)
    target = torch.softmax(torch.randn(4, net.num_actions), dim=-1)
    loss, _ = total_loss(net(x), mask, target, torch.tensor([1.0, -1.0, 0.0, 1.0]))
    loss.backward()
    grads = [p.grad for p in net.trunk.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(float(g.abs().sum()) > 0 for g in grads)  # the trunk learns, not only the heads
    net.eval()
    again = model_from_checkpoint(checkpoint_dict(net)).eval()
    assert again.config == net.config
    with torch.no_grad():
        for a, b in zip(net(x), again(x), strict=True):
            torch.testing.assert_close(a, b)


@pytest.mark.parametrize("trunk", sorted(TRUNKS))
def test_every_trunk_exports_to_onnx_with_the_same_outputs(trunk: str, tmp_path) -> None:
    ort = pytest.importorskip("onnxruntime")
    from takzero.nn.model_export import export_onnx

    torch.manual_seed(1)
    net = _perturbed(TakNet(_config(trunk)), seed=1)
    x = torch.randn(5, net.config.in_channels, 5, 5)
    with torch.no_grad():
        want = [t.numpy() for t in net(x)]
    export_onnx(net, tmp_path / "net.onnx")
    session = ort.InferenceSession(str(tmp_path / "net.onnx"))
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_attention_mixes_far_squares_and_the_resnet_of_two_blocks_does_not() -> None:
    """What tells the rows apart: one transformer block sees the whole board, while two 3x3 conv
    blocks see 5 squares wide (plus the global-pooling bias, off here)."""
    size = 7
    outs = {}
    for trunk in ("resnet", "transformer"):
        cfg = ModelConfig(size=size, channels=16, blocks=1, trunk=trunk, global_pool=False)
        body = _perturbed(TakNet(cfg)).trunk
        x = torch.randn(1, cfg.in_channels, size, size)
        y = x.clone()
        y[0, :, 0, 0] += 1.0  # change one corner square
        with torch.no_grad():
            outs[trunk] = (body(y) - body(x))[0, :, size - 1, size - 1].abs().max().item()
    assert outs["resnet"] == 0.0
    assert outs["transformer"] > 1e-6


def test_a_checkpoint_from_before_the_registry_loads_unchanged() -> None:
    """Checkpoints written before trunks.py kept the ResNet's layers at the top level
    (``stem.*``, ``tower.*``); they load under ``trunk.`` with the same outputs, and their stored
    config (no ``trunk`` key) rebuilds a ResNet."""
    torch.manual_seed(2)
    net = _perturbed(TakNet(_config("resnet")))
    old_state = {k.removeprefix("trunk."): v for k, v in net.state_dict().items()}
    assert any(k.startswith("stem.") for k in old_state) and any(k.startswith("tower.") for k in old_state)
    old_config = net.config.to_dict()
    del old_config["trunk"], old_config["attention_heads"]
    again = model_from_checkpoint({"model_config": old_config, "model_state": old_state}).eval()
    assert again.config.trunk == "resnet"
    x = torch.randn(2, net.config.in_channels, 5, 5)
    with torch.no_grad():
        for a, b in zip(net(x), again(x), strict=True):
            torch.testing.assert_close(a, b)


def test_a_state_dict_of_another_trunk_is_refused() -> None:
    resnet = TakNet(_config("resnet"))
    transformer = TakNet(_config("transformer"))
    with pytest.raises(RuntimeError):
        transformer.load_state_dict(resnet.state_dict())


def test_bad_trunks_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown trunk 'mlp'.*resnet.*transformer"):
        ModelConfig(size=5, trunk="mlp")
    with pytest.raises(ValueError, match="divisible by attention_heads"):
        ModelConfig(size=5, channels=30, trunk="transformer", attention_heads=4)
    with pytest.raises(ConfigError, match="model.trunk"):
        ModelSection(trunk="mlp")
    with pytest.raises(ConfigError, match="model.attention_heads"):
        ModelSection(trunk="transformer", channels=30, attention_heads=4)
    with pytest.raises(ConfigError, match="model.attention_heads: is a setting of the transformer trunk only"):
        ModelSection(trunk="resnet", channels=32, attention_heads=4)  # the ResNet would ignore it
    ModelSection(trunk="resnet", channels=30)  # unset: fine
    assert ModelConfig.of(ModelSection(trunk="transformer", channels=32), 5).attention_heads == 4  # unset: the default
    with pytest.raises(ConfigError, match="model.blocks: the transformer trunk needs blocks >= 1"):
        ModelSection(trunk="transformer", channels=32, blocks=0)
    with pytest.raises(ValueError, match="needs blocks >= 1"):
        ModelConfig(size=5, channels=32, blocks=0, trunk="transformer")
    ModelSection(trunk="resnet", blocks=0)  # a stem-only ResNet stays allowed


def test_every_trunk_setting_is_refused_with_another_trunk() -> None:
    """The kind, not one key: each row's own settings, set while model.trunk names another row."""
    from takzero.nn.trunks import TRUNKS

    for row in TRUNKS.values():
        for key in row.settings:
            for other in TRUNKS:
                if other != row.name:
                    with pytest.raises(ConfigError, match=f"model.{key}: is a setting of the {row.name} trunk"):
                        ModelSection(trunk=other, channels=32, **{key: 4})
    assert any(row.settings for row in TRUNKS.values())
