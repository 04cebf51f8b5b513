"""The smoke config as tests build it: configs/train.yaml merged with configs/config/smoke.yaml
(what ``python -m takzero.train +config=smoke`` composes), a run name, an optional checkpoint
root, and dotted-key overrides. One implementation for every test module that needs a config
without Hydra."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from takzero.config import TrainConfig, load_config

ROOT = Path(__file__).resolve().parents[1]


def smoke_raw(checkpoint_root: Path | str | None = None, run_name: str = "r", **overrides: Any) -> DictConfig:
    """The merged smoke config before its checks.

    ``checkpoint_root``: the runs' folder (train.yaml's own when None). ``overrides``: dotted
    keys, e.g. ``**{"mcts.simulations": 4}``; a key the config lacks is added (so that a test
    can check the config's refusal of it).
    """
    raw = OmegaConf.merge(OmegaConf.load(ROOT / "configs/train.yaml"),
                          OmegaConf.load(ROOT / "configs/config/smoke.yaml"))
    raw.run_name = run_name
    if checkpoint_root is not None:
        raw.checkpoint_root = str(checkpoint_root)
    for key, value in overrides.items():
        OmegaConf.update(raw, key, value, force_add=True)
    assert isinstance(raw, DictConfig)
    return raw


def smoke_config(checkpoint_root: Path | str | None = None, run_name: str = "r", **overrides: Any) -> TrainConfig:
    """``smoke_raw`` checked: the TrainConfig a run would get. Raises ConfigError naming the key
    of a bad override."""
    return load_config(smoke_raw(checkpoint_root, run_name, **overrides))
