"""Network shapes by name, KataGo-style (``model.preset=b4c32``; issue 57, item 2): every preset
of ``takzero.nn.presets.NETWORK_PRESETS`` builds a network of its shape, a key given with another
value always overrides the preset's (also the plain default's value), and the shipped configs name their
shapes so."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch

from takzero.config import ConfigError, ModelSection, TrainConfig, compose_config, compose_preset
from takzero.config.sections import PRESET_FIELDS
from takzero.nn.model import ModelConfig, NetworkSettings, TakNet
from takzero.nn.presets import NETWORK_PRESETS, network_preset

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", list(NETWORK_PRESETS))
def test_every_preset_builds_a_network_of_its_shape(name: str) -> None:
    fields = network_preset(name)
    assert set(fields) <= {f.name for f in dataclasses.fields(NetworkSettings)}
    blocks, channels = map(int, re.fullmatch(r"b(\d+)c(\d+)", name).groups())  # type: ignore[union-attr]
    assert (fields["blocks"], fields["channels"]) == (blocks, channels)  # the name says the shape
    section = ModelSection(preset=name)
    assert (section.blocks, section.channels) == (blocks, channels)
    cfg = TrainConfig(model=section).model_config()
    assert (cfg.blocks, cfg.channels) == (blocks, channels)
    if blocks * channels <= 4 * 64:  # the large ones are checked for their config only
        net = TakNet(cfg).eval()
        policy, wdl, _aux = net(torch.zeros(2, cfg.in_channels, cfg.size, cfg.size))
        assert policy.shape[0] == 2 and wdl.shape == (2, 3)


def test_a_key_given_overrides_the_preset() -> None:
    cfg = compose_config(["model.preset=b10c128", "model.channels=96"])
    assert (cfg.model.blocks, cfg.model.channels) == (10, 96)
    assert cfg.model_config().channels == 96
    section = ModelSection(preset="b4c32", blocks=2)
    assert (section.blocks, section.channels) == (2, 32)
    # without a preset the keys are as given, and the schema's defaults are b6c64's
    plain = ModelSection()
    assert plain.preset is None and (plain.blocks, plain.channels) == (6, 64) == tuple(
        NETWORK_PRESETS["b6c64"][k] for k in ("blocks", "channels")
    )


@pytest.mark.parametrize("key", ["blocks", "channels"])
def test_a_key_given_wins_even_at_the_plain_default(key: str) -> None:
    """``+config=6x6 model.blocks=6`` is 6 blocks (the plain default is 6 too: a key given is never
    taken for one left out), on the preset's 32 channels; the same in the dataclass."""
    plain = {"blocks": 6, "channels": 64}[key]
    cfg = compose_preset("6x6", [f"model.{key}={plain}"])
    other = "channels" if key == "blocks" else "blocks"
    assert getattr(cfg.model, key) == plain and getattr(cfg.model, other) == network_preset("b4c32")[other]
    assert getattr(cfg.model_config(), key) == plain
    section = ModelSection(preset="b4c32", **{key: plain})
    assert getattr(section, key) == plain


def test_every_preset_sets_only_the_fields_left_open_for_it() -> None:
    """A preset row may set only the PRESET_FIELDS (None in ModelSection until given): a field that
    holds a real default could not tell a key given at that default from one left out."""
    defaults = {f.name: f.default for f in dataclasses.fields(ModelSection)}
    for name, row in NETWORK_PRESETS.items():
        assert set(row) <= set(PRESET_FIELDS), name
    assert all(defaults[key] is None for key in PRESET_FIELDS)


def test_a_preset_config_can_take_another_network_preset() -> None:
    """``+config=6x6`` names its shape as a preset, so ``model.preset=`` on the command line
    replaces it whole (with ``channels: 32`` written out it would have kept 32 channels)."""
    six = compose_preset("6x6")
    assert (six.model.preset, six.model.blocks, six.model.channels) == ("b4c32", 4, 32)
    bigger = compose_preset("6x6", ["model.preset=b10c128"])
    assert (bigger.model.blocks, bigger.model.channels) == (10, 128)


def test_an_unknown_preset_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"^model.preset: must be one of b1c16, .*got 'b3c7'"):
        compose_config(["model.preset=b3c7"])
    with pytest.raises(ValueError, match="unknown network preset"):
        network_preset("b3c7")


def test_the_shipped_configs_keep_their_shapes() -> None:
    """The presets of configs/config/ that moved from channels/blocks to a network preset build the
    same networks as before."""
    before = {"3x3": (2, 32), "4x4": (4, 48), "5x5": (6, 64), "5x5_cpu": (4, 32), "5x5_cpu_gumbel": (4, 32),
              "6x6": (4, 32), "6x6_gpu": (10, 128), "7x7": (8, 96), "8x8": (10, 128), "smoke": (1, 16)}
    assert {p.stem for p in (ROOT / "configs" / "config").glob("*.yaml")} == set(before)
    for name, shape in before.items():
        cfg = compose_preset(name)
        assert (cfg.model.blocks, cfg.model.channels) == shape, name
        assert isinstance(cfg.model_config(), ModelConfig)


@pytest.mark.parametrize("key", PRESET_FIELDS)
def test_a_built_section_left_without_a_size_is_refused_naming_the_key(key: str, tmp_path: Path) -> None:
    """None is "not given" only until the section is built; a config changed since to None (a
    script's ``cfg.model.channels = None``) passed validate() and failed later in the network's
    constructor with a TypeError."""
    from takzero.config import validate

    cfg = TrainConfig(run_name="t", checkpoint_root=str(tmp_path))
    setattr(cfg.model, key, None)
    with pytest.raises(ConfigError, match=rf"^model\.{key}: must be set"):
        validate(cfg)
    with pytest.raises(ConfigError, match=rf"^model\.{key}: must be set"):
        cfg.model.check()
