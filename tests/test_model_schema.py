"""The network's schema is declared once (issue 57, item 2): a run's ``model:`` section is
:class:`takzero.nn.model_config.NetworkSettings` plus the loss weights, the checkpoints' ``ModelConfig``
is the same fields plus the board size and the heads, and a trunk's own settings are data in its
row of ``TRUNKS`` (default and range). A trunk setting costs four edits, walked here on a copy of
the package with a toy one; every shipped network still loads, and a run's config can name it."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from takzero.config import ModelSection, TrainConfig
from takzero.config.sections import PRESET_FIELDS
from takzero.nn.model import ModelConfig, NetworkSettings, model_from_checkpoint
from takzero.nn.safe_load import load_weights_only
from takzero.nn.trunks import TRUNKS

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = sorted((ROOT / "checkpoints" / "pretrained").glob("*.pt"))

#: The walk of "a trunk with a setting of its own" (the FFN width of the transformer, as a
#: multiple of its channels), as (file, the text, the text that replaces it): every edit it takes.
WALK = [
    ("takzero/nn/model_config.py",  # 1. its field, unset by default (NetworkSettings)
     "    attention_heads: int | None = None\n",
     "    attention_heads: int | None = None\n    ffn_mult: int | None = None\n"),
    ("takzero/nn/trunks.py",  # 2. its default and range, data in the trunk's row
     'settings={"attention_heads": Setting(DEFAULT_ATTENTION_HEADS, 1, 1024)}',
     'settings={"attention_heads": Setting(DEFAULT_ATTENTION_HEADS, 1, 1024), "ffn_mult": Setting(4, 1, 16)}'),
    ("takzero/nn/trunks.py",  # 3. the builder reads it
     "AttentionBlock(c, heads)",
     "AttentionBlock(c, heads, int(cfg.ffn_mult or 4))"),
    ("configs/train.yaml",  # 4. its line under model:
     "  attention_heads: null",
     "  ffn_mult: null       # transformer only: FFN width / channels (null = 4)\n  attention_heads: null"),
]

WALK_CHECK = textwrap.dedent(
    f"""
    import pytest
    from takzero.config import ConfigError, compose_config
    from takzero.nn.model import TakNet, checkpoint_dict, model_from_checkpoint

    base = ["+config=smoke", "model.trunk=transformer", "model.channels=16"]
    cfg = compose_config([*base, "model.ffn_mult=2"], run_name="walk").model_config()
    assert cfg.ffn_mult == 2 and cfg.to_dict()["ffn_mult"] == 2
    net = TakNet(cfg)
    assert net.trunk.blocks[0].ffn_in.out_features == 32
    again = model_from_checkpoint(checkpoint_dict(net))
    assert again.config == cfg and again.trunk.blocks[0].ffn_in.out_features == 32
    assert compose_config(base, run_name="walk").model_config().ffn_mult == 4  # unset: the row's default
    with pytest.raises(ConfigError, match="^model.ffn_mult: is a setting of the transformer trunk only"):
        compose_config(["+config=smoke", "model.ffn_mult=2"], run_name="walk")
    with pytest.raises(ConfigError, match="^model.ffn_mult: must be 1..16"):
        compose_config([*base, "model.ffn_mult=0"], run_name="walk")
    with pytest.raises(ValueError, match="ffn_mult=17 must be 1..16"):
        type(cfg)(size=4, channels=16, trunk="transformer", ffn_mult=17)
    old = model_from_checkpoint({str(ROOT / "checkpoints/pretrained/6x6.pt")!r})  # stored without it
    assert old.config.ffn_mult == 4 and old.config.trunk == "resnet"
    print("walked")
    """
)


@pytest.mark.slow  # a fresh interpreter with torch and Hydra: ~20 s on a busy core
@pytest.mark.timeout(300)
def test_a_trunk_setting_is_four_edits(tmp_path: Path) -> None:
    """Apply exactly the edits of :data:`WALK` to a copy of the package and its configs: the new
    setting is a ``model.*`` key (its default filled in, refused with another trunk and out of its
    range, naming the key), reaches the network and its checkpoint, and old checkpoints load."""
    for folder in ("takzero", "configs"):
        shutil.copytree(ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for path, old, new in WALK:
        target = tmp_path / path
        text = target.read_text()
        assert text.count(old) == 1, f"{path}: the walk's anchor {old!r} is not there once"
        target.write_text(text.replace(old, new))
    assert len(WALK) <= 4 and len({p for p, _, _ in WALK}) == 3
    out = subprocess.run([sys.executable, "-c", WALK_CHECK], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path)},
                         timeout=280)
    assert out.returncode == 0 and out.stdout.strip().endswith("walked"), out.stderr[-3000:]


def test_the_trunk_settings_are_network_fields_unset_by_default() -> None:
    """Each row's settings are fields of NetworkSettings (so of the run's model: section and of
    ModelConfig) whose default is None (the row's default is filled in), and no two rows give one
    setting two defaults."""
    defaults = {f.name: f.default for f in dataclasses.fields(NetworkSettings)}
    seen: dict[str, int] = {}
    for row in TRUNKS.values():
        for key, setting in row.settings.items():
            assert defaults.get(key, "missing") is None, (
                f"{row.name}: {key} is not a NetworkSettings field with default None")
            assert seen.setdefault(key, setting.default) == setting.default
            assert setting.problem(setting.default) is None


def test_the_model_section_is_the_network_settings_plus_the_loss_weights() -> None:
    """No field of the network is declared twice: the section's fields are NetworkSettings'
    (inherited), the name of a network preset (``preset``, which sets some of them) and its own
    loss weights; ModelConfig adds only size and heads."""
    network = {f.name for f in dataclasses.fields(NetworkSettings)}
    section = {f.name for f in dataclasses.fields(ModelSection)}
    assert network <= section
    assert all(k.endswith("_weight") for k in section - network - {"preset"})
    assert {f.name for f in dataclasses.fields(ModelConfig)} - network == {"size", "heads"}
    # redeclared only to default to None, "not given" (a network preset or the plain default fills them)
    redeclared = set(ModelSection.__dict__.get("__annotations__", {})) & network
    assert redeclared == set(PRESET_FIELDS)
    assert all(getattr(ModelSection(), k) == getattr(NetworkSettings(), k) for k in PRESET_FIELDS)


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_network_loads_and_a_run_config_names_it(path: Path) -> None:
    """A shipped model file (configs from before the head table and the trunk registry among
    them) loads with every stored key as it was, and a run's ``model:`` section with
    ``board.size`` describes the same network (so ``train.init_from`` and a resume accept it)."""
    from takzero.pipeline.resume import model_config_diff

    stored = ModelConfig.upgrade_dict(load_weights_only(path)["model_config"])
    net = model_from_checkpoint(str(path))
    have = net.config.to_dict()
    assert {k: have[k] for k in stored} == stored
    own = TRUNKS[net.config.trunk].settings
    others = {k for row in TRUNKS.values() for k in row.settings if k not in own}
    section = ModelSection(**{k: v for k, v in net.config.network_settings().items() if k not in others})
    run = TrainConfig(model=section)
    run.board.size = net.config.size
    assert ModelConfig.of(section, net.config.size, net.config.heads) == net.config
    assert model_config_diff(load_weights_only(path)["model_config"], run, "file") == ""
