"""The training configuration: a typed schema (dataclasses) that Hydra's composed config is merged
into, so that unknown keys and wrong types are rejected at start-up, plus value checks that name
the offending key.

``configs/train.yaml`` holds the defaults, ``configs/config/<name>.yaml`` the named presets
(``+config=6x6``). Every key can be overridden on the command line (``mcts.simulations=400``).

Each section checks its own values when it is built (``check``, called by ``__post_init__``, as
:class:`takzero.search.SearchConfig` does), raising :class:`ConfigError` that names the full key;
:func:`validate` adds the top-level keys, the checks that span sections and those that look at the
machine (CUDA, the run folder). The parts of a run take their section whole
(``ReplayBuffer(cfg.replay, ...)``, ``Trainer(cfg.train, ...)``, ``SelfPlayWorker(cfg.selfplay,
...)``), so a new key is its field, its check, its use and its line in ``configs/train.yaml``.

The package, by concern: this module is the whole schema (:class:`TrainConfig`, the one
translation of keys into model, loss and search settings), its loading (Hydra composition,
:func:`load_config`) and :func:`validate`; :mod:`takzero.config.sections` the sections'
dataclasses and their checks; :mod:`takzero.config.machine` the checks that look at the machine
(run folder, memory, Ray address). Everything is importable from ``takzero.config``.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from takzero.config.machine import (
    NAME_MAX,
    RAY_CONNECT_TIMEOUT_S,
    check_ray_address,
    check_run_folder,
    check_sizes,
    getattr_key,
    implied_memory,
)
from takzero.config.sections import (
    INFERENCE_CHOICES,
    MAX_NODE_BUDGET,
    MAX_SEED,
    MAX_SIMULATIONS,
    PRESET_FIELDS,
    BoardConfig,
    ConfigError,
    EvaluatorConfig,
    ModelSection,
    RayConfig,
    ReplayConfig,
    SelfPlayConfig,
    TrainSection,
    _check,
    _finite,
)
from takzero.game.position import komi_to_half_komi
from takzero.nn.actions import num_actions
from takzero.nn.heads import HEADS
from takzero.nn.model import LossWeights, ModelConfig
from takzero.search.config import SearchConfig

__all__ = [
    "CONFIG_DIR",
    "INFERENCE_CHOICES",
    "MAX_NODE_BUDGET",
    "MAX_SEED",
    "MAX_SIMULATIONS",
    "NAME_MAX",
    "RAY_CONNECT_TIMEOUT_S",
    "RUN_SIMULATIONS",
    "BoardConfig",
    "ConfigError",
    "EvaluatorConfig",
    "ModelSection",
    "RayConfig",
    "ReplayConfig",
    "SelfPlayConfig",
    "TrainConfig",
    "TrainSection",
    "check_ray_address",
    "check_run_folder",
    "check_sizes",
    "compose_config",
    "compose_preset",
    "config_schema",
    "config_keys",
    "did_you_mean",
    "getattr_key",
    "implied_memory",
    "load_config",
    "unknown_override_keys",
    "validate",
]


#: ``mcts.simulations`` of a run that sets none (every preset sets its own): the schema's default
#: and ``configs/train.yaml``'s (tests/test_config_sections.py holds the two equal, key by key).
RUN_SIMULATIONS = 128


@dataclass
class TrainConfig:
    """Top-level schema; see configs/train.yaml for the documented defaults."""

    run_name: str = "run"
    checkpoint_root: str = "checkpoints"
    seed: int = 0
    device: str = "auto"  # auto, cpu, cuda, cuda:N
    resume: bool = True  # continue a run folder that already has checkpoints
    max_games: int = 0  # > 0: stop after this many self-play games
    log_every_s: float = 10.0
    sample_games_every: int = 50  # write one PTN sample game per this many games
    board: BoardConfig = field(default_factory=BoardConfig)
    model: ModelSection = field(default_factory=ModelSection)
    # the self-play search: SearchConfig's defaults but RUN_SIMULATIONS simulations a move (a
    # search built in code keeps SearchConfig's own 800, AlphaZero's)
    mcts: SearchConfig = field(default_factory=lambda: SearchConfig(simulations=RUN_SIMULATIONS))
    selfplay: SelfPlayConfig = field(default_factory=SelfPlayConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    train: TrainSection = field(default_factory=TrainSection)
    evaluator: EvaluatorConfig = field(default_factory=EvaluatorConfig)
    ray: RayConfig = field(default_factory=RayConfig)

    # -- translations to the settings of the parts of a run (the one place that maps keys) ------

    def model_config(self) -> ModelConfig:
        """The network's :class:`takzero.nn.model.ModelConfig`: ``board.size``, the ``model.*``
        keys that are :class:`~takzero.nn.model.NetworkSettings` fields (all of them, by name) and
        ``heads``, the rows of :data:`takzero.nn.heads.HEADS` whose weight is > 0. Raises
        ValueError for a network ``ModelConfig`` refuses (over ``MAX_PARAMETERS``)."""
        m = self.model
        return ModelConfig.of(m, self.board.size, heads=[name for name in HEADS if m.head_weight(name) > 0])

    def half_komi(self) -> int:
        """``board.komi`` in half points (the unit of the rules core and of model metadata)."""
        return komi_to_half_komi(self.board.komi)

    def loss_weights(self) -> LossWeights:
        """The loss weights of ``model.value_weight``, ``model.aux_weight`` and each head's
        ``model.<weight_key>`` (every row of :data:`takzero.nn.heads.HEADS`, 0 included)."""
        m = self.model
        return LossWeights(
            value=m.value_weight,
            aux=m.aux_weight,
            heads={name: m.head_weight(name) for name in HEADS},
        )

    def replay_opponent_top_k(self) -> int:
        """Opponent-policy entries stored per record: ``replay.top_k`` when a head that trains on
        the ``opponent_policy`` target (a row of :data:`takzero.nn.heads.HEADS`) has a weight > 0
        (``model.opponent_policy_weight``), else 0 (nothing stored)."""
        trained = any(
            self.model.head_weight(name) > 0 for name, row in HEADS.items() if row.target == "opponent_policy"
        )
        return self.replay.top_k if trained else 0

    def mcts_keys_given(self) -> frozenset[str]:
        """The ``mcts.*`` keys the composed config set (recorded by :func:`load_config`; empty for
        a TrainConfig built in code)."""
        return getattr(self, "_mcts_given", frozenset())

    def selfplay_search_config(self) -> SearchConfig:
        """The self-play :class:`SearchConfig`: ``mcts.*`` with ``max_plies`` =
        ``selfplay.ply_limit`` and, unless ``mcts.node_budget`` is given, a node budget sized to the
        simulation budget: ``min(200_000, max(A + 1, 300 * (max_simulations + 1)))`` nodes per tree
        (A = the number of action indices of the board)."""
        d = {**self.mcts.to_dict(), "max_plies": self.selfplay.ply_limit}
        if "node_budget" not in self.mcts_keys_given():
            probe = SearchConfig.from_dict(d)
            a = num_actions(self.board.size)
            d["node_budget"] = int(min(200_000, max(a + 1, 300 * (probe.max_simulations + 1))))
        return SearchConfig.from_dict(d)

    def evaluation_search_config(self) -> SearchConfig:
        """The gating/baseline :class:`SearchConfig`: ``mcts.*`` without noise or playout cap
        (:meth:`SearchConfig.evaluation`), ``evaluator.simulations`` (0: ``mcts.simulations``)
        and ``max_plies`` = ``selfplay.ply_limit``."""
        return SearchConfig.from_dict(
            {
                **self.mcts.evaluation().to_dict(),
                "max_plies": self.selfplay.ply_limit,
                "simulations": self.evaluation_simulations(),
            }
        )

    def evaluation_simulations(self) -> int:
        """Simulations per move in gating and baseline matches."""
        return self.evaluator.simulations or self.mcts.simulations


def config_keys() -> list[str]:
    """Every dotted key of the schema (``run_name``, ``mcts.simulations``, ...)."""
    out: list[str] = []

    def walk(prefix: str, cls: Any) -> None:
        for f in dataclasses.fields(cls):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if dataclasses.is_dataclass(default):
                walk(f"{prefix}{f.name}.", type(default))
            else:
                out.append(prefix + f.name)

    walk("", TrainConfig)
    return out


def did_you_mean(key: str) -> str:
    """`` (did you mean mcts.simulations?)`` for a mistyped key, or '' when no key is close
    (difflib's ratio >= 0.6 on the whole key, or on the last part within the same section)."""
    keys = config_keys()
    key = key.lstrip("+~")
    if "." not in key:  # a mistyped section (trian.lr): offer sections and top-level keys
        keys = sorted({k.split(".", 1)[0] for k in keys})
    close = difflib.get_close_matches(key, keys, n=2, cutoff=0.6)
    if not close and "." not in key:
        leaves: dict[str, list[str]] = {}
        for k in config_keys():
            leaves.setdefault(k.rsplit(".", 1)[-1], []).append(k)
        best = difflib.get_close_matches(key, list(leaves), n=1, cutoff=0.75)
        close = leaves[best[0]][:2] if best else []
    if not close:
        return ""
    return f" (did you mean {' or '.join(close)}?)"


def unknown_override_keys(overrides: list[str]) -> list[str]:
    """The keys of ``key=value`` command-line overrides that are not keys of the schema (Hydra's
    own ``hydra.*`` keys, ``+config=...`` presets and ``~key`` deletions excepted), each with
    :func:`did_you_mean`."""
    keys = set(config_keys())
    sections = {k.split(".", 1)[0] for k in keys if "." in k}
    bad = []
    for arg in overrides:
        if "=" not in arg or arg.startswith(("-", "~")):
            continue
        key = arg.split("=", 1)[0].lstrip("+")
        if key in ("config", "defaults") or key.startswith("hydra."):
            continue
        top = key.split(".", 1)[0]
        # A whole section (board={size:5}) or a dict entry is left to the schema merge.
        if key in keys or key in sections or top == "evaluator" and key.startswith("evaluator.baselines"):
            continue
        bad.append(f"{key}: not a config key{did_you_mean(key)}")
    return bad


#: The Hydra config folder: ``train.yaml`` and the presets under ``config/``.
CONFIG_DIR = Path(__file__).resolve().parent.parent.parent / "configs"


def compose_config(overrides: list[str] | tuple[str, ...] = (), run_name: str = "preset") -> TrainConfig:
    """The checked config of ``python -m takzero.train OVERRIDES``, composed by Hydra exactly as
    the training command composes it (so ``+config=<name>`` and a preset's own defaults list,
    such as 5x5_cpu_gumbel's ``- 5x5_cpu``, are honoured), with ``run_name`` set. For scripts and
    tests; the training command itself uses ``@hydra.main``.

    Raises ConfigError naming the key of a bad value; Hydra's errors for an unknown preset or a
    malformed override."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        raw = compose(config_name="train", overrides=list(overrides))
    raw.run_name = run_name
    return load_config(raw)


def compose_preset(name: str, overrides: list[str] | tuple[str, ...] = (), run_name: str = "preset") -> TrainConfig:
    """:func:`compose_config` of ``+config=<name>`` followed by ``overrides``."""
    return compose_config([f"+config={name}", *overrides], run_name)


def config_schema() -> DictConfig:
    """The schema a composed config is merged into: :class:`TrainConfig`'s defaults as OmegaConf
    holds them, with the :data:`~takzero.config.sections.PRESET_FIELDS` as declared, None ("not
    given": a network preset or the plain default fills them when the section is built), not
    as a default section's construction resolved them."""
    schema = OmegaConf.structured(TrainConfig)
    for key in PRESET_FIELDS:
        schema.model[key] = None
    return schema


def load_config(cfg: DictConfig | dict) -> TrainConfig:
    """Merge a composed config into the schema and check every value.

    Returns a TrainConfig object. Raises ConfigError naming the key of the first bad value or
    unknown key.
    """
    schema = config_schema()
    src = cfg if isinstance(cfg, DictConfig) else OmegaConf.create(cfg)
    drop = {"hydra", "defaults"}  # Hydra's own keys, present when a raw YAML file is loaded
    if drop & set(src.keys()):
        src = OmegaConf.masked_copy(src, [str(k) for k in src.keys() if k not in drop])
    given = src.get("mcts") if "mcts" in src else None
    if isinstance(given, DictConfig):
        _check_mcts_types(given)
    try:
        merged = OmegaConf.merge(schema, src)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or ""
        hint = did_you_mean(key) if key and key not in config_keys() else ""
        text = str(e.msg if hasattr(e, "msg") else e).splitlines()[0]
        raise ConfigError(f"{key}: {text}{hint}") from None
    try:
        out: TrainConfig = OmegaConf.to_object(merged)  # type: ignore[assignment]
    except ConfigError:  # a section's own check: its message names the full key
        raise
    except (ValueError, OmegaConfBaseException) as err:  # SearchConfig.validate
        msg = getattr(err, "msg", None) or str(err)
        raise ConfigError(f"mcts: {msg}") from None
    keys = frozenset(str(k) for k in given.keys()) if isinstance(given, DictConfig) else frozenset()
    object.__setattr__(out, "_mcts_given", keys)
    validate(out)
    return out


def _check_mcts_types(node: DictConfig) -> None:
    """Strict types for the given ``mcts.*`` values before OmegaConf's conversions (which would
    read ``1`` as ``true``): booleans must be booleans, integers must not be booleans or
    fractions, floats must be finite numbers. Unknown keys are left to the schema merge."""
    for f in dataclasses.fields(SearchConfig):
        if f.name not in node:
            continue
        v = node[f.name]
        key = f"mcts.{f.name}"
        if v is None:
            continue
        if isinstance(f.default, bool):
            _check(isinstance(v, bool), key, "must be true or false", v)
        elif "int" in str(f.type):
            _check(isinstance(v, int) and not isinstance(v, bool), key, "must be an integer", v)
        elif "float" in str(f.type):
            ok = isinstance(v, int | float) and not isinstance(v, bool) and _finite(float(v))
            _check(ok, key, "must be a finite number", v)


def validate(c: TrainConfig) -> None:
    """Every check of ``c``, raising ConfigError naming the key: each section's own
    (``check``, already run when the section was built; run again here for a config changed
    since), then the top-level keys, the checks that span sections and those that look at the
    machine (CUDA, the run folder)."""
    for section in (c.board, c.model, c.selfplay, c.replay, c.train, c.evaluator, c.ray):
        section.check()
    _check(0 <= c.seed <= MAX_SEED, "seed", f"must be in 0..{MAX_SEED} (2**32 - 1: numpy's seed bound; "
           "the run derives its streams from it)", c.seed)
    _check(c.max_games >= 0, "max_games", "must be >= 0", c.max_games)
    _check(_finite(c.log_every_s) and c.log_every_s > 0, "log_every_s", "must be > 0", c.log_every_s)
    _check(c.sample_games_every >= 1, "sample_games_every", "must be >= 1", c.sample_games_every)
    _check(re.fullmatch(r"auto|cpu|cuda(:\d+)?", c.device) is not None, "device",
           "must be auto, cpu or cuda[:N]", c.device)
    if c.device.startswith("cuda"):
        import torch

        _check(torch.cuda.is_available(), "device", "CUDA is not available on this machine", c.device)
    check_run_folder(c.checkpoint_root, c.run_name)
    r, t = c.replay, c.train
    window = min(r.window_max, r.fixed_window) if r.fixed_window > 0 else r.window_max
    _check(
        t.batch_size <= window,
        "train.batch_size",
        f"must not exceed the replay window (replay.window_max={r.window_max}"
        + (f", replay.fixed_window={r.fixed_window}" if r.fixed_window > 0 else "")
        + "): every batch would repeat positions",
        t.batch_size,
    )
    for key, value in (("evaluator.inference", c.evaluator.inference),
                       ("replay.reanalyse_inference", c.replay.reanalyse_inference)):
        _check(value != "server" or c.selfplay.inference == "server", key,
               "server needs selfplay.inference=server (the server exists only then)", value)
    check_sizes(c)
    check_ray_address(c.ray.address)
