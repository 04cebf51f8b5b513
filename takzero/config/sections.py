"""The sections of a run's configuration (``configs/train.yaml``): one dataclass per section
(``board``, ``model``, ``selfplay``, ``replay``, ``train``, ``evaluator``, ``ray``), each holding
its defaults and checking its own keys when built (``check``, called by ``__post_init__``),
raising :class:`ConfigError` that names the full key. The whole schema, ``TrainConfig``, and its
loading are in :mod:`takzero.config`; the machine's checks in :mod:`takzero.config.machine`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from takzero.game.core import STANDARD_RESERVES
from takzero.game.position import komi_to_half_komi
from takzero.nn.features import FEATURE_VERSIONS
from takzero.nn.heads import HEADS
from takzero.nn.model_config import (
    FIELD_RANGES,
    NetworkSettings,
)
from takzero.nn.presets import NETWORK_PRESETS, network_preset
from takzero.nn.trunks import TRUNKS

#: Values of ``evaluator.inference`` and ``replay.reanalyse_inference`` (auto: as ``selfplay.inference``).
INFERENCE_CHOICES = ("auto", "local", "server")
#: The largest seed (numpy's legacy seed bound; the run derives int64 seeds from it).
MAX_SEED = 2**32 - 1
#: Simulations per move of any search a run makes (``mcts.simulations``, ``mcts.full_sims``,
#: ``mcts.cheap_sims``, ``evaluator.simulations``, ``evaluator.uct_simulations``).
MAX_SIMULATIONS = 1_000_000
#: Nodes per search tree (``mcts.node_budget``): the trees index their nodes with int32.
MAX_NODE_BUDGET = 2**31 - 1


def _finite(x: float) -> bool:
    """A finite real number: Python or numpy ints and floats (``numbers.Real``), not booleans
    (``True`` is an int to Python, never a number in a config), not NaN, not infinite (an int too
    large for a float is not finite either)."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def _check(cond: bool, key: str, msg: str, value: object) -> None:
    if not cond:
        raise ConfigError(f"{key}: {msg} (got {value!r})")


class ConfigError(ValueError):
    """A configuration key with a bad value; the message starts with the key."""


@dataclass
class BoardConfig:
    size: int = 6
    komi: float = 2.0  # points added to black's flat count; half-komi = 2 * komi
    flats: int | None = None  # stones per player (None: standard for the size)
    caps: int | None = None  # capstones per player (None: standard for the size)

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ConfigError naming the first bad ``board.*`` key."""
        _check(self.size in STANDARD_RESERVES, "board.size", "must be 3..8", self.size)
        _check(math.isfinite(self.komi) and abs(self.komi) <= 20, "board.komi", "must be within -20..20", self.komi)
        try:
            komi_to_half_komi(self.komi)
        except ValueError:
            _check(False, "board.komi", "must be a multiple of 0.5", self.komi)
        if self.flats is not None:
            _check(1 <= self.flats <= 60, "board.flats", "must be 1..60", self.flats)
        if self.caps is not None:
            n = self.size
            _check(0 <= self.caps <= n // 2, "board.caps", f"a {n}x{n} board allows 0..{n // 2}", self.caps)


#: The ``model.*`` keys a network preset sets (every row of :data:`NETWORK_PRESETS` sets only
#: these; ``tests/test_network_presets.py`` holds it so): None in :class:`ModelSection` until given.
PRESET_FIELDS = ("channels", "blocks")


@dataclass
class ModelSection(NetworkSettings):
    """The ``model:`` section: the network's shape, whose keys are the fields of
    :class:`takzero.nn.model_config.NetworkSettings` (declared and documented there once, shared with
    the checkpoints' :class:`~takzero.nn.model_config.ModelConfig`; :meth:`TrainConfig.model_config`
    adds ``board.size`` and the heads), and the loss weights below.

    ``preset``: a network shape by name (:data:`takzero.nn.presets.NETWORK_PRESETS`, e.g.
    ``b4c32``: 4 blocks of 32 channels) or None. The fields a preset sets (:data:`PRESET_FIELDS`:
    ``channels``, ``blocks``) default to None here, "not given": a given value always wins
    (``+config=6x6 model.blocks=6``: 6 blocks of the preset's 32 channels, though 6 is also the
    plain default), then the preset's, then :class:`NetworkSettings`' default (64 channels, 6
    blocks). After construction they hold ints."""

    preset: str | None = None
    channels: int | None = None  # type: ignore[assignment]  # None: the preset's, else 64
    blocks: int | None = None  # type: ignore[assignment]  # None: the preset's, else 6
    value_weight: float = 1.0
    aux_weight: float = 0.1
    # the optional auxiliary heads (rows of takzero.nn.heads.HEADS; 0 = head absent): the weight
    # of each one's loss, one field per row, named by its weight_key
    ownership_weight: float = 0.0  # final owner of each top piece; KataGo: 1.5 (1/N^2 inside the loss)
    opponent_policy_weight: float = 0.0  # the opponent's reply policy target; KataGo: 0.15
    soft_policy_weight: float = 0.0  # policy target ** (1/4), renormalised

    def __post_init__(self) -> None:
        self.apply_preset()
        self.check()

    def apply_preset(self) -> None:
        """Fill each :data:`PRESET_FIELDS` field left None: from ``preset`` when it sets it, else
        :class:`NetworkSettings`' default. A given value is kept. Raises ConfigError for an
        unknown preset."""
        chosen: dict[str, Any] = {}
        if self.preset is not None:
            _check(self.preset in NETWORK_PRESETS, "model.preset", f"must be one of {', '.join(NETWORK_PRESETS)}",
                   self.preset)
            chosen = network_preset(self.preset)
        defaults = {f.name: f.default for f in dataclasses.fields(NetworkSettings)}
        for key in PRESET_FIELDS:
            if getattr(self, key) is None:
                setattr(self, key, chosen.get(key, defaults[key]))

    def check(self) -> None:
        """Raise ConfigError naming the first bad ``model.*`` key: the preset, the sizes in their ranges
        (``takzero.nn.model_config.FIELD_RANGES``), the feature version, the trunk (a row of
        :data:`takzero.nn.trunks.TRUNKS`), the settings of other trunks left unset, the row's own
        ``check`` (naming the key it returns), the loss weights."""
        _check(self.preset is None or self.preset in NETWORK_PRESETS, "model.preset",
               f"must be one of {', '.join(NETWORK_PRESETS)} (or null)", self.preset)
        for key in PRESET_FIELDS:  # None is "not given" only until the section is built (apply_preset)
            _check(getattr(self, key) is not None, f"model.{key}",
                   "must be set (null is filled from model.preset or the default only when the section is built)",
                   getattr(self, key))
        for key, (lo, hi) in FIELD_RANGES.items():
            value = getattr(self, key)
            if value is not None:
                _check(lo <= value and (hi is None or value <= hi), f"model.{key}",
                       f"must be {lo}..{hi}" if hi is not None else f"must be >= {lo}", value)
        _check(self.feature_version in FEATURE_VERSIONS, "model.feature_version",
               f"must be one of {list(FEATURE_VERSIONS)}", self.feature_version)
        _check(self.trunk in TRUNKS, "model.trunk", f"must be one of {sorted(TRUNKS)}", self.trunk)
        for row in TRUNKS.values():
            for key in row.settings if row.name != self.trunk else ():
                _check(getattr(self, key) is None, f"model.{key}",
                       f"is a setting of the {row.name} trunk only, and model.trunk is {self.trunk} "
                       f"(remove it, or set model.trunk={row.name})", getattr(self, key))
        refused = self.trunk_setting_problem()
        if refused:
            _check(False, f"model.{refused[0]}", refused[1], getattr(self, refused[0]))
        resolved = self.with_trunk_defaults()
        refused = TRUNKS[self.trunk].check(resolved)
        if refused:
            key, why = refused
            _check(False, f"model.{key}", why, getattr(resolved, key))
        _check(self.value_weight >= 0, "model.value_weight", "must be >= 0", self.value_weight)
        _check(self.aux_weight >= 0, "model.aux_weight", "must be >= 0", self.aux_weight)
        for head in HEADS.values():
            w = self.head_weight(head.name)
            _check(_finite(w) and w >= 0, f"model.{head.weight_key}", "must be >= 0 and finite (0 = head off)", w)

    def head_weight(self, name: str) -> float:
        """The loss weight of head ``name`` (a row of :data:`takzero.nn.heads.HEADS`): the field
        its ``weight_key`` names. Raises AttributeError when this section has no such field (a
        row added without its ``model.<weight_key>`` field)."""
        key = HEADS[name].weight_key
        if not hasattr(self, key):
            raise AttributeError(f"head {name!r}: ModelSection has no field {key!r} (its loss weight, model.{key})")
        return getattr(self, key)


@dataclass
class SelfPlayConfig:
    workers: int = 1  # self-play Ray actors
    games_per_worker: int = 64  # games each worker plays at once (one batched net call per step)
    ply_limit: int = 200  # games longer than this are adjudicated draws
    opening_random_plies: int = 2  # uniformly random plies at the start of each game
    resign_threshold: float = -0.95  # root value below which the mover resigns (-1 disables)
    resign_consecutive: int = 3  # plies in a row below the threshold
    resign_playout_share: float = 0.1  # share of games where resignation is disabled (measured)
    use_latest: bool = False  # play with the latest trained weights instead of the promoted ones
    threads: int = 1  # torch threads per worker
    proven_value_targets: bool = False  # a proven position's exact value is its value target
    # with proven_value_targets or tinue_policy_targets: prover nodes per recorded position (0: none)
    tinue_nodes: int = 0
    tinue_policy_targets: bool = False  # a forced road the prover finds is the policy target too
    # network runtime on CPU workers: torch, onnx (onnxruntime), int8 (onnxruntime, quantized) or auto
    backend: str = "onnx"
    bf16: bool = True  # the self-play network under bf16 autocast on CUDA (ignored on CPU, as train.amp)
    pipeline: bool = False  # the worker's games in two halves: one half searched while the other's network call runs
    # local: each worker runs its own network; server: one inference server per device
    # (takzero.pipeline.inference_server) runs the networks of all workers as one batch
    inference: str = "local"
    server_max_batch: int = 1024  # inference server: positions per network call at most
    server_max_wait_ms: float = 2.0  # inference server: how long a request waits for others to join its batch
    # at a stop: seconds the workers play on (no new games), handing in the games that finish;
    # those still in play are kept in the run folder and continued by the next start (0: dropped)
    stop_grace_seconds: float = 10.0

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ConfigError naming the first bad ``selfplay.*`` key (``backend=onnx`` also needs
        onnxruntime installed)."""
        s = self
        _check(s.workers >= 1, "selfplay.workers", "must be >= 1", s.workers)
        _check(s.games_per_worker >= 1, "selfplay.games_per_worker", "must be >= 1", s.games_per_worker)
        _check(s.ply_limit >= 2, "selfplay.ply_limit", "must be >= 2", s.ply_limit)
        _check(s.opening_random_plies >= 0, "selfplay.opening_random_plies", "must be >= 0", s.opening_random_plies)
        _check(-1 <= s.resign_threshold <= 1, "selfplay.resign_threshold", "must be in [-1, 1]", s.resign_threshold)
        _check(0 <= s.resign_playout_share <= 1, "selfplay.resign_playout_share", "must be in [0, 1]",
               s.resign_playout_share)
        _check(s.threads >= 1, "selfplay.threads", "must be >= 1", s.threads)
        _check(0 <= s.tinue_nodes <= 10**9, "selfplay.tinue_nodes", "must be in 0..10^9 (0: off)", s.tinue_nodes)
        _check(s.resign_consecutive >= 1, "selfplay.resign_consecutive", "must be >= 1", s.resign_consecutive)
        _check(not s.tinue_policy_targets or s.tinue_nodes > 0, "selfplay.tinue_policy_targets",
               "needs selfplay.tinue_nodes > 0 (the prover that finds the forced roads)", s.tinue_policy_targets)
        _check(s.backend in ("torch", "onnx", "int8", "auto"), "selfplay.backend",
               "must be torch, onnx, int8 or auto", s.backend)
        _check(s.inference in ("local", "server"), "selfplay.inference", "must be local or server", s.inference)
        _check(1 <= s.server_max_batch <= 65536, "selfplay.server_max_batch", "must be in 1..65536 (positions)",
               s.server_max_batch)
        _check(_finite(s.server_max_wait_ms) and 0 <= s.server_max_wait_ms <= 1000, "selfplay.server_max_wait_ms",
               "must be in 0..1000 (milliseconds)", s.server_max_wait_ms)
        _check(_finite(s.stop_grace_seconds) and 0 <= s.stop_grace_seconds <= 3600, "selfplay.stop_grace_seconds",
               "must be in 0..3600 (seconds; 0: games in play at a stop are dropped)", s.stop_grace_seconds)
        if s.backend in ("onnx", "int8"):
            import importlib.util

            _check(
                importlib.util.find_spec("onnxruntime") is not None, "selfplay.backend",
                'onnx needs onnxruntime (pip install -e ".[onnx]")', s.backend,
            )


@dataclass
class ReplayConfig:
    top_k: int = 64  # policy entries kept per position
    window_max: int = 250_000
    fixed_window: int = 0  # > 0: fixed window instead of the KataGo growing window
    window_c: int = 20_000
    window_alpha: float = 0.75
    window_beta: float = 0.4
    min_positions: int = 2_000
    samples_per_position: float = 4.0  # reuse cap: samples trained per new position
    max_ahead: int = 50_000  # positions workers may run ahead of the trainer before they wait
    shard_positions: int = 5_000
    # Reanalyse (MuZero Reanalyse, Schrittwieser et al. 2021; takzero.pipeline.reanalyse): a worker
    # re-searches replay positions with the latest weights and refreshes their policy target.
    # The rate: positions handed out for reanalysis <= reanalyse_fraction * samples the trainer
    # drew (over the run; 0 = off, no worker).
    reanalyse_fraction: float = 0.0
    reanalyse_value_weight: float = 0.0  # w: value target (1 - w) z + w v (v: reanalysed root value)
    reanalyse_batch: int = 64  # positions searched together (one batched network call per step)
    # Where Reanalyse's network runs: auto (as selfplay.inference), local (its own network) or
    # server (the self-play inference server; needs selfplay.inference=server)
    reanalyse_inference: str = "auto"
    # gamma in [0.5, 1]: a decisive outcome's value target is z * gamma ** (plies to the game's end),
    # so the network and the search prefer the shorter win and the longer loss (1 = off, the
    # AlphaZero target); replay.discount_value
    value_discount: float = 1.0
    # f in [0, 1]: the discount factor never falls below f, so only the last plies of a game are
    # discounted and a distant win keeps f * z (0 = no floor: the plain gamma ** plies)
    value_discount_floor: float = 0.0

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ConfigError naming the first bad ``replay.*`` key."""
        r = self
        _check(r.top_k >= 1, "replay.top_k", "must be >= 1", r.top_k)
        _check(r.window_max >= 1, "replay.window_max", "must be >= 1", r.window_max)
        _check(r.window_c >= 1, "replay.window_c", "must be >= 1", r.window_c)
        _check(0 < r.window_alpha <= 1, "replay.window_alpha", "must be in (0, 1]", r.window_alpha)
        _check(r.min_positions >= 1, "replay.min_positions", "must be >= 1", r.min_positions)
        _check(_finite(r.samples_per_position) and r.samples_per_position > 0, "replay.samples_per_position",
               "must be > 0 and finite", r.samples_per_position)
        _check(_finite(r.window_beta) and r.window_beta >= 0, "replay.window_beta", "must be >= 0", r.window_beta)
        _check(r.fixed_window >= 0, "replay.fixed_window", "must be >= 0", r.fixed_window)
        _check(r.max_ahead >= 1, "replay.max_ahead", "must be >= 1", r.max_ahead)
        _check(r.shard_positions >= 1, "replay.shard_positions", "must be >= 1", r.shard_positions)
        _check(_finite(r.reanalyse_fraction) and r.reanalyse_fraction >= 0, "replay.reanalyse_fraction",
               "must be >= 0 and finite (0 = off)", r.reanalyse_fraction)
        _check(r.reanalyse_batch >= 1, "replay.reanalyse_batch", "must be >= 1", r.reanalyse_batch)
        _check(r.reanalyse_inference in INFERENCE_CHOICES, "replay.reanalyse_inference",
               "must be auto, local or server", r.reanalyse_inference)
        check_value_target(r.value_discount, r.value_discount_floor, r.reanalyse_value_weight)


def check_value_target(value_discount: float, value_discount_floor: float, reanalyse_value_weight: float) -> None:
    """Raise ConfigError naming the first bad setting of the value target (``replay.value_discount``,
    ``replay.value_discount_floor``, ``replay.reanalyse_value_weight``): the one place their ranges
    are declared, for :class:`ReplayConfig` and ``takzero.pipeline.targets.TargetSettings``."""
    _check(_finite(value_discount) and 0.5 <= value_discount <= 1, "replay.value_discount",
           "must be in [0.5, 1] (1 = off; at 0.5 a win 10 plies away is already worth 0.001)", value_discount)
    _check(_finite(value_discount_floor) and 0 <= value_discount_floor <= 1, "replay.value_discount_floor",
           "must be in [0, 1] (0 = no floor)", value_discount_floor)
    _check(_finite(reanalyse_value_weight) and 0 <= reanalyse_value_weight <= 1, "replay.reanalyse_value_weight",
           "must be in [0, 1]", reanalyse_value_weight)


@dataclass
class TrainSection:
    batch_size: int = 256
    optimizer: str = "sgd"  # sgd (momentum, Nesterov) or adamw
    lr: float = 0.02
    momentum: float = 0.9
    weight_decay: float = 1e-4
    lr_schedule: str = "cosine"  # constant, cosine or step
    warmup_steps: int = 100
    total_steps: int = 100_000  # stop after this many optimiser steps
    max_minutes: float = 0.0  # > 0: stop after this wall time
    grad_clip: float = 5.0
    checkpoint_every: int = 500  # steps between checkpoints (and new generations)
    keep_checkpoints: int = 5
    amp: bool = True  # bf16 autocast on GPU (ignored on CPU)
    threads: int = 1  # torch threads of the trainer
    # a new run starts from these weights (a ckpt_*.pt, best.pt or shipped model file; "" = random
    # initial weights); optimiser, steps and replay start fresh; ignored when the run resumes
    init_from: str = ""
    # > 0: keep the weights every this many minutes of training (over the warm-start chain) in
    # <run>/snapshots/ (model files, never pruned: a strength curve per CPU-hour); 0 = none
    snapshot_minutes: float = 0.0

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ConfigError naming the first bad ``train.*`` key."""
        t = self
        _check(t.batch_size >= 1, "train.batch_size", "must be >= 1", t.batch_size)
        _check(t.optimizer in ("sgd", "adamw"), "train.optimizer", "must be sgd or adamw", t.optimizer)
        _check(_finite(t.lr) and t.lr > 0, "train.lr", "must be > 0 and finite", t.lr)
        _check(0 <= t.momentum < 1, "train.momentum", "must be in [0, 1)", t.momentum)
        _check(_finite(t.weight_decay) and t.weight_decay >= 0, "train.weight_decay", "must be >= 0", t.weight_decay)
        _check(t.warmup_steps >= 0, "train.warmup_steps", "must be >= 0", t.warmup_steps)
        _check(t.lr_schedule in ("constant", "cosine", "step"), "train.lr_schedule",
               "must be constant, cosine or step", t.lr_schedule)
        _check(t.total_steps >= 1, "train.total_steps", "must be >= 1", t.total_steps)
        _check(t.checkpoint_every >= 1, "train.checkpoint_every", "must be >= 1", t.checkpoint_every)
        _check(t.keep_checkpoints >= 1, "train.keep_checkpoints", "must be >= 1", t.keep_checkpoints)
        _check(_finite(t.grad_clip) and t.grad_clip >= 0, "train.grad_clip", "must be >= 0 and finite (0 = off)",
               t.grad_clip)
        _check(t.max_minutes >= 0, "train.max_minutes", "must be >= 0", t.max_minutes)
        _check(t.threads >= 1, "train.threads", "must be >= 1", t.threads)
        _check(_finite(t.snapshot_minutes) and t.snapshot_minutes >= 0, "train.snapshot_minutes",
               "must be >= 0 and finite (0 = no weight snapshots)", t.snapshot_minutes)
        _check(not t.init_from or Path(t.init_from).is_file(), "train.init_from",
               "must be a model or checkpoint file (a ckpt_*.pt, best.pt or checkpoints/pretrained/*.pt)",
               t.init_from)


@dataclass
class EvaluatorConfig:
    gating: str = "threshold"  # threshold, sprt or off (promote every checkpoint)
    games: int = 40  # games per gating match (paired openings: games / 2 openings)
    threshold: float = 0.55  # promotion score with gating=threshold
    sprt_elo0: float = 0.0
    sprt_elo1: float = 35.0
    sprt_alpha: float = 0.05
    sprt_beta: float = 0.05
    simulations: int = 0  # search budget per move in evaluation (0: the mcts.simulations)
    sampling_plies: int = 4  # plies sampled with temperature 1 so games differ
    baseline_every: int = 1  # play the baselines every k-th evaluation (0: never)
    baseline_games: int = 20
    baselines: list[str] = field(default_factory=lambda: ["random", "greedy", "uct"])
    uct_simulations: int = 200
    tactics_every: int = 1  # the tactics curve every k-th generation (0: never)
    # A cheap first point of the Elo curve: this generation owes a baseline check too (0: none),
    # of early_baseline_games games per baseline (the later checks play baseline_games)
    early_baseline_generation: int = 0
    early_baseline_games: int = 4
    # Where the evaluation networks run: auto (as selfplay.inference), local (the evaluator's own,
    # on the CPU) or server (the self-play inference server, each generation pinned there by
    # number; needs selfplay.inference=server)
    inference: str = "auto"

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ConfigError naming the first bad ``evaluator.*`` key (each baseline is checked
        against the player table, ``model:PATH`` files included)."""
        e = self
        _check(e.gating in ("threshold", "sprt", "off"), "evaluator.gating", "must be threshold, sprt or off", e.gating)
        _check(e.games >= 2 and e.games % 2 == 0, "evaluator.games", "must be an even number >= 2", e.games)
        _check(0 < e.threshold < 1, "evaluator.threshold", "must be in (0, 1)", e.threshold)
        _check(e.baseline_games >= 2 and e.baseline_games % 2 == 0, "evaluator.baseline_games",
               "must be an even number >= 2", e.baseline_games)
        _check(0 < e.sprt_alpha < 1, "evaluator.sprt_alpha", "must be in (0, 1)", e.sprt_alpha)
        _check(0 < e.sprt_beta < 1, "evaluator.sprt_beta", "must be in (0, 1)", e.sprt_beta)
        _check(e.simulations >= 0, "evaluator.simulations", "must be >= 0 (0 = mcts.simulations)", e.simulations)
        _check(e.sampling_plies >= 0, "evaluator.sampling_plies", "must be >= 0", e.sampling_plies)
        _check(e.inference in INFERENCE_CHOICES, "evaluator.inference", "must be auto, local or server", e.inference)
        _check(e.baseline_every >= 0, "evaluator.baseline_every", "must be >= 0", e.baseline_every)
        _check(e.uct_simulations >= 1, "evaluator.uct_simulations", "must be >= 1", e.uct_simulations)
        _check(e.tactics_every >= 0, "evaluator.tactics_every", "must be >= 0 (0 = no tactics curve)", e.tactics_every)
        _check(e.early_baseline_generation >= 0, "evaluator.early_baseline_generation",
               "must be >= 0 (0 = no early check)", e.early_baseline_generation)
        _check(e.early_baseline_games >= 2 and e.early_baseline_games % 2 == 0, "evaluator.early_baseline_games",
               "must be an even number >= 2", e.early_baseline_games)
        _check(e.baseline_every == 0 or len(e.baselines) > 0, "evaluator.baselines",
               "must not be empty (or set evaluator.baseline_every=0)", e.baselines)
        _check(e.early_baseline_generation == 0 or len(e.baselines) > 0, "evaluator.baselines",
               "must not be empty (or set evaluator.early_baseline_generation=0)", e.baselines)
        # the player specs' one table
        from takzero.players.registry import check_spec, ladder_offset, spec_label

        labels: dict[str, str] = {}
        for name in e.baselines:
            try:
                if ladder_offset(name) is None:  # generation:-K: the run's own earlier network
                    check_spec(name, engines=True)  # tei: engines too (started by the evaluator)
            except ValueError as err:
                _check(False, "evaluator.baselines", str(err), name)
            label = spec_label(name)
            _check(label not in labels, "evaluator.baselines",
                   f"has the label '{label}' of '{labels.get(label)}' too (one TensorBoard tag, one "
                   "file name): list each baseline once, give a tei: engine its own name=LABEL", name)
            labels[label] = name


@dataclass
class RayConfig:
    address: str | None = None  # None: start a local Ray; "auto" or host:port: join a cluster
    num_cpus: int | None = None
    num_gpus: int | None = None
    worker_gpu_share: float = 0.0  # GPU share per self-play worker (when the cluster has GPUs)
    # Niceness Ray adds to its worker processes (self-play, evaluator) on the local instance it
    # starts: 0 = the trainer's (Ray's own default, 15, starves self-play beside other work);
    # 0..19. A joined cluster keeps what its `ray start` was given (RAY_worker_niceness).
    worker_niceness: int = 0
    # Ray custom resources each self-play worker / the evaluator asks for, e.g. {gpu_node: 1}
    # (nodes offer them with ray start --resources='{"gpu_node": 4}'); checked at start-up.
    # (null rather than {} by default, so that `ray.selfplay_resources={gpu_node: 1}` works on the
    # command line without a '+': Hydra cannot add keys to an empty dict of its struct config)
    selfplay_resources: dict[str, float] | None = None
    evaluator_resources: dict[str, float] | None = None
    # Extra Ray runtime_env of the run (e.g. {pip: [takzero==0.1.0]} or {py_modules: [PATH]}).
    runtime_env: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ConfigError naming the first bad ``ray.*`` key."""
        ray_cfg = self
        if ray_cfg.num_cpus is not None:
            _check(ray_cfg.num_cpus >= 1, "ray.num_cpus", "must be >= 1", ray_cfg.num_cpus)
        if ray_cfg.num_gpus is not None:
            _check(ray_cfg.num_gpus >= 0, "ray.num_gpus", "must be >= 0", ray_cfg.num_gpus)
        _check(0 <= ray_cfg.worker_gpu_share <= 1, "ray.worker_gpu_share", "must be in [0, 1]",
               ray_cfg.worker_gpu_share)
        _check(0 <= ray_cfg.worker_niceness <= 19, "ray.worker_niceness",
               "must be in 0..19 (added to the driver's niceness; lowering it needs root)", ray_cfg.worker_niceness)
        for key in ("selfplay_resources", "evaluator_resources"):
            for name, amount in (getattr(ray_cfg, key) or {}).items():
                full = f"ray.{key}.{name}"
                _check(name not in ("CPU", "GPU", "memory", "object_store_memory"), full,
                       "is a built-in Ray resource: use ray.num_cpus / ray.worker_gpu_share", name)
                _check(_finite(amount) and amount > 0, full, "must be a number > 0", amount)
        if ray_cfg.address is not None:
            _check(
                ray_cfg.address in ("auto", "local")
                or re.fullmatch(r"(ray://)?[\w.\-]+:\d+", ray_cfg.address) is not None,
                "ray.address", "must be auto, local, host:port or ray://host:port", ray_cfg.address,
            )
