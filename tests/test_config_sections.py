"""Each config section checks its own keys when it is built, naming the full key, both in code and
through ``load_config``; ``configs/train.yaml`` documents exactly the sections' defaults; the parts
of a run take their section whole, so a section's value reaches them without a copy."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf
from smoke_config import smoke_raw

from takzero.config import (
    BoardConfig,
    ConfigError,
    EvaluatorConfig,
    ModelSection,
    RayConfig,
    ReplayConfig,
    SelfPlayConfig,
    TrainConfig,
    TrainSection,
    config_keys,
    config_schema,
    load_config,
    validate,
)
from takzero.pipeline.replay import ReplayBuffer

ROOT = Path(__file__).resolve().parent.parent

BAD = [
    (BoardConfig, "board", "size", 9),
    (BoardConfig, "board", "komi", 0.3),
    (ModelSection, "model", "channels", 0),
    (ModelSection, "model", "ownership_weight", float("inf")),
    (SelfPlayConfig, "selfplay", "ply_limit", 1),
    (SelfPlayConfig, "selfplay", "backend", "tensorflow"),
    (ReplayConfig, "replay", "window_max", 0),
    (ReplayConfig, "replay", "window_beta", -0.5),
    (ReplayConfig, "replay", "samples_per_position", 0.0),
    (ReplayConfig, "replay", "value_discount", 0.0),
    (ReplayConfig, "replay", "value_discount", 1e-30),  # would zero every value target
    (ReplayConfig, "replay", "value_discount", 1.5),
    (ReplayConfig, "replay", "value_discount", float("nan")),
    (ReplayConfig, "replay", "value_discount_floor", -0.1),
    (ReplayConfig, "replay", "value_discount_floor", 1.01),
    (ReplayConfig, "replay", "value_discount_floor", float("inf")),
    (TrainSection, "train", "lr", 0.0),
    (TrainSection, "train", "optimizer", "rmsprop"),
    (EvaluatorConfig, "evaluator", "games", 3),
    (EvaluatorConfig, "evaluator", "baselines", ["minimax"]),
    (RayConfig, "ray", "worker_niceness", 20),
]


_raw = functools.partial(smoke_raw, run_name="test")


@pytest.mark.parametrize(("cls", "section", "key", "value"), BAD)
def test_a_section_checks_itself_naming_the_full_key(cls: type, section: str, key: str, value: object) -> None:
    full = re.escape(f"{section}.{key}: ")
    with pytest.raises(ConfigError, match=f"^{full}"):
        cls(**{key: value})
    with pytest.raises(ConfigError, match=f"^{full}"):
        load_config(_raw(**{f"{section}.{key}": value}))


def test_validate_checks_a_section_changed_after_it_was_built() -> None:
    cfg = load_config(_raw())
    cfg.replay.window_max = -1
    with pytest.raises(ConfigError, match=r"^replay\.window_max: must be >= 1 \(got -1\)"):
        validate(cfg)


#: Keys of the schema that configs/train.yaml leaves out: set by the run itself (max_plies from
#: selfplay.ply_limit; node_budget sized to the board unless given, so a line would always count as
#: given).
SET_BY_THE_RUN = {"mcts.max_plies", "mcts.node_budget"}


def _yaml_value(tree: dict, key: str) -> object:
    node: object = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return "<absent>"
        node = node[part]
    return node


def test_train_yaml_is_the_schemas_defaults_key_by_key() -> None:
    """Every key of the schema (``config_keys``: the top-level keys and every section's, ``mcts``
    included) has its line in ``configs/train.yaml`` with the dataclasses' default, and train.yaml
    has no other key: one set of defaults, so a TrainConfig built in code is the composed one.
    (``SearchConfig.simulations`` once defaulted to 800 in the schema where train.yaml said 128.)
    ``run_name`` is the one interpolation (a time stamp, resolved by Hydra at launch)."""
    yaml = OmegaConf.to_container(OmegaConf.load(ROOT / "configs/train.yaml"), resolve=False)
    schema = OmegaConf.to_container(config_schema())
    assert isinstance(yaml, dict) and isinstance(schema, dict)
    keys = config_keys()
    wrong = {}
    for key in keys:
        want = "<absent>" if key in SET_BY_THE_RUN else _yaml_value(schema, key)
        if key == "run_name":
            want = "${board.size}x${board.size}-${now:%Y%m%d-%H%M%S}"
        got = _yaml_value(yaml, key)
        if got != want:
            wrong[key] = (got, want)
    assert not wrong, f"train.yaml (first) disagrees with the schema's defaults: {wrong}"
    given = [f"{name}.{k}" if isinstance(schema.get(name), dict) else name
             for name, v in yaml.items() if name not in ("defaults", "hydra")
             for k in (v if isinstance(schema.get(name), dict) else [None])]
    extra = [k for k in given if k not in keys]
    assert not extra, f"train.yaml has keys the schema does not: {extra}"
    raw = OmegaConf.load(ROOT / "configs/train.yaml")
    raw.run_name = TrainConfig().run_name
    assert load_config(raw) == TrainConfig()  # the composed defaults are the code-built ones


def test_the_buffer_reads_its_section() -> None:
    """The buffer keeps no copy of its settings: the window follows the section it was given
    (KataGo's W(N) = c (1 + beta ((N / c)^alpha - 1) / alpha), capped at window_max)."""
    cfg = ReplayConfig(top_k=4, window_c=10, window_alpha=0.5, window_beta=1.0, window_max=1000)
    buf = ReplayBuffer(cfg, 3)
    buf.total_added = 160
    assert buf.window() == int(10 * (1 + 1.0 * ((160 / 10) ** 0.5 - 1) / 0.5))  # 70
    cfg.window_max = 50
    assert buf.window() == 50
    assert buf.data.policy_index.shape == (0, 4) and buf.data.policy_index.dtype == np.int32


@pytest.mark.parametrize("value", [True, 10**400, "0.5", None])
def test_a_float_key_takes_only_finite_numbers(value: object) -> None:
    """Booleans are ints to Python and an int too large for a float overflows: neither is a
    number a float key takes; numpy scalars are."""
    with pytest.raises(ConfigError, match=r"^replay\.samples_per_position: "):
        ReplayConfig(samples_per_position=value)
    import numpy as np

    assert ReplayConfig(samples_per_position=np.float32(2.0), value_discount=np.float64(0.98)).value_discount == 0.98
