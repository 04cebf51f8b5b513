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
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from takzero.game.core import STANDARD_RESERVES
from takzero.game.position import komi_to_half_komi
from takzero.io.machine import machine_memory
from takzero.nn.actions import num_actions
from takzero.nn.features import FEATURE_VERSIONS
from takzero.nn.heads import HEADS
from takzero.nn.model import (
    FIELD_RANGES,
    NETWORK_PRESETS,
    LossWeights,
    ModelConfig,
    NetworkSettings,
    network_preset,
)
from takzero.nn.trunks import TRUNKS
from takzero.search.config import SearchConfig


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


@dataclass
class ModelSection(NetworkSettings):
    """The ``model:`` section: the network's shape, whose keys are the fields of
    :class:`takzero.nn.model.NetworkSettings` (declared and documented there once, shared with
    the checkpoints' :class:`~takzero.nn.model.ModelConfig`; :meth:`TrainConfig.model_config`
    adds ``board.size`` and the heads), and the loss weights below.

    ``preset``: a network shape by name (:data:`takzero.nn.model.NETWORK_PRESETS`, e.g.
    ``b4c32``: 4 blocks of 32 channels) or None; it sets its fields that are left at their
    defaults, so a key given with another value overrides it (``model.preset=b4c32
    model.channels=48``: 4 blocks of 48)."""

    preset: str | None = None
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
        """Set the fields of ``preset`` that are left at their :class:`NetworkSettings` defaults
        to the preset's values (nothing without a preset). Raises ConfigError for an unknown
        preset."""
        if self.preset is None:
            return
        _check(self.preset in NETWORK_PRESETS, "model.preset", f"must be one of {', '.join(NETWORK_PRESETS)}", self.preset)
        defaults = {f.name: f.default for f in dataclasses.fields(NetworkSettings)}
        for key, value in network_preset(self.preset).items():
            if getattr(self, key) == defaults[key]:
                setattr(self, key, value)

    def check(self) -> None:
        """Raise ConfigError naming the first bad ``model.*`` key: the preset, the sizes in their ranges
        (``takzero.nn.model.FIELD_RANGES``), the feature version, the trunk (a row of
        :data:`takzero.nn.trunks.TRUNKS`), the settings of other trunks left unset, the row's own
        ``check`` (naming the key it returns), the loss weights."""
        _check(self.preset is None or self.preset in NETWORK_PRESETS, "model.preset",
               f"must be one of {', '.join(NETWORK_PRESETS)} (or null)", self.preset)  # fmt: skip
        for key, (lo, hi) in FIELD_RANGES.items():
            value = getattr(self, key)
            if value is not None:
                _check(lo <= value and (hi is None or value <= hi), f"model.{key}",
                       f"must be {lo}..{hi}" if hi is not None else f"must be >= {lo}", value)  # fmt: skip
        _check(self.feature_version in FEATURE_VERSIONS, "model.feature_version", f"must be one of {list(FEATURE_VERSIONS)}", self.feature_version)
        _check(self.trunk in TRUNKS, "model.trunk", f"must be one of {sorted(TRUNKS)}", self.trunk)
        for row in TRUNKS.values():
            for key in row.settings if row.name != self.trunk else ():
                _check(getattr(self, key) is None, f"model.{key}",
                       f"is a setting of the {row.name} trunk only, and model.trunk is {self.trunk} "
                       f"(remove it, or set model.trunk={row.name})", getattr(self, key))  # fmt: skip
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
    tinue_nodes: int = 0  # with proven_value_targets or tinue_policy_targets: prover nodes per recorded position (0: none)
    tinue_policy_targets: bool = False  # a forced road the prover finds is the policy target too
    backend: str = "onnx"  # network runtime on CPU workers: torch, onnx (onnxruntime), int8 (onnxruntime, quantized) or auto
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
        _check(0 <= s.resign_playout_share <= 1, "selfplay.resign_playout_share", "must be in [0, 1]", s.resign_playout_share)
        _check(s.threads >= 1, "selfplay.threads", "must be >= 1", s.threads)
        _check(0 <= s.tinue_nodes <= 10**9, "selfplay.tinue_nodes", "must be in 0..10^9 (0: off)", s.tinue_nodes)
        _check(s.resign_consecutive >= 1, "selfplay.resign_consecutive", "must be >= 1", s.resign_consecutive)
        _check(not s.tinue_policy_targets or s.tinue_nodes > 0, "selfplay.tinue_policy_targets",
               "needs selfplay.tinue_nodes > 0 (the prover that finds the forced roads)", s.tinue_policy_targets)  # fmt: skip
        _check(s.backend in ("torch", "onnx", "int8", "auto"), "selfplay.backend", "must be torch, onnx, int8 or auto", s.backend)
        _check(s.inference in ("local", "server"), "selfplay.inference", "must be local or server", s.inference)
        _check(1 <= s.server_max_batch <= 65536, "selfplay.server_max_batch", "must be in 1..65536 (positions)", s.server_max_batch)
        _check(_finite(s.server_max_wait_ms) and 0 <= s.server_max_wait_ms <= 1000, "selfplay.server_max_wait_ms",
               "must be in 0..1000 (milliseconds)", s.server_max_wait_ms)  # fmt: skip
        _check(_finite(s.stop_grace_seconds) and 0 <= s.stop_grace_seconds <= 3600, "selfplay.stop_grace_seconds",
               "must be in 0..3600 (seconds; 0: games in play at a stop are dropped)", s.stop_grace_seconds)  # fmt: skip
        if s.backend in ("onnx", "int8"):
            import importlib.util

            _check(
                importlib.util.find_spec("onnxruntime") is not None, "selfplay.backend",
                'onnx needs onnxruntime (pip install -e ".[onnx]")', s.backend,
            )  # fmt: skip


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
        _check(_finite(r.samples_per_position) and r.samples_per_position > 0, "replay.samples_per_position", "must be > 0 and finite", r.samples_per_position)
        _check(_finite(r.window_beta) and r.window_beta >= 0, "replay.window_beta", "must be >= 0", r.window_beta)
        _check(r.fixed_window >= 0, "replay.fixed_window", "must be >= 0", r.fixed_window)
        _check(r.max_ahead >= 1, "replay.max_ahead", "must be >= 1", r.max_ahead)
        _check(r.shard_positions >= 1, "replay.shard_positions", "must be >= 1", r.shard_positions)
        _check(_finite(r.reanalyse_fraction) and r.reanalyse_fraction >= 0, "replay.reanalyse_fraction",
               "must be >= 0 and finite (0 = off)", r.reanalyse_fraction)  # fmt: skip
        _check(_finite(r.reanalyse_value_weight) and 0 <= r.reanalyse_value_weight <= 1,
               "replay.reanalyse_value_weight", "must be in [0, 1]", r.reanalyse_value_weight)  # fmt: skip
        _check(r.reanalyse_batch >= 1, "replay.reanalyse_batch", "must be >= 1", r.reanalyse_batch)
        _check(r.reanalyse_inference in INFERENCE_CHOICES, "replay.reanalyse_inference",
               "must be auto, local or server", r.reanalyse_inference)  # fmt: skip
        _check(_finite(r.value_discount) and 0.5 <= r.value_discount <= 1, "replay.value_discount",
               "must be in [0.5, 1] (1 = off; at 0.5 a win 10 plies away is already worth 0.001)",
               r.value_discount)  # fmt: skip
        _check(_finite(r.value_discount_floor) and 0 <= r.value_discount_floor <= 1,
               "replay.value_discount_floor", "must be in [0, 1] (0 = no floor)",
               r.value_discount_floor)  # fmt: skip


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
        _check(t.lr_schedule in ("constant", "cosine", "step"), "train.lr_schedule", "must be constant, cosine or step", t.lr_schedule)
        _check(t.total_steps >= 1, "train.total_steps", "must be >= 1", t.total_steps)
        _check(t.checkpoint_every >= 1, "train.checkpoint_every", "must be >= 1", t.checkpoint_every)
        _check(t.keep_checkpoints >= 1, "train.keep_checkpoints", "must be >= 1", t.keep_checkpoints)
        _check(_finite(t.grad_clip) and t.grad_clip >= 0, "train.grad_clip", "must be >= 0 and finite (0 = off)", t.grad_clip)
        _check(t.max_minutes >= 0, "train.max_minutes", "must be >= 0", t.max_minutes)
        _check(t.threads >= 1, "train.threads", "must be >= 1", t.threads)
        _check(_finite(t.snapshot_minutes) and t.snapshot_minutes >= 0, "train.snapshot_minutes",
               "must be >= 0 and finite (0 = no weight snapshots)", t.snapshot_minutes)  # fmt: skip
        _check(not t.init_from or Path(t.init_from).is_file(), "train.init_from",
               "must be a model or checkpoint file (a ckpt_*.pt, best.pt or checkpoints/pretrained/*.pt)",
               t.init_from)  # fmt: skip


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
        _check(e.baseline_games >= 2 and e.baseline_games % 2 == 0, "evaluator.baseline_games", "must be an even number >= 2", e.baseline_games)
        _check(0 < e.sprt_alpha < 1, "evaluator.sprt_alpha", "must be in (0, 1)", e.sprt_alpha)
        _check(0 < e.sprt_beta < 1, "evaluator.sprt_beta", "must be in (0, 1)", e.sprt_beta)
        _check(e.simulations >= 0, "evaluator.simulations", "must be >= 0 (0 = mcts.simulations)", e.simulations)
        _check(e.sampling_plies >= 0, "evaluator.sampling_plies", "must be >= 0", e.sampling_plies)
        _check(e.inference in INFERENCE_CHOICES, "evaluator.inference", "must be auto, local or server", e.inference)
        _check(e.baseline_every >= 0, "evaluator.baseline_every", "must be >= 0", e.baseline_every)
        _check(e.uct_simulations >= 1, "evaluator.uct_simulations", "must be >= 1", e.uct_simulations)
        _check(e.tactics_every >= 0, "evaluator.tactics_every", "must be >= 0 (0 = no tactics curve)", e.tactics_every)
        _check(e.early_baseline_generation >= 0, "evaluator.early_baseline_generation",
               "must be >= 0 (0 = no early check)", e.early_baseline_generation)  # fmt: skip
        _check(e.early_baseline_games >= 2 and e.early_baseline_games % 2 == 0, "evaluator.early_baseline_games",
               "must be an even number >= 2", e.early_baseline_games)  # fmt: skip
        _check(e.baseline_every == 0 or len(e.baselines) > 0, "evaluator.baselines", "must not be empty (or set evaluator.baseline_every=0)", e.baselines)
        _check(e.early_baseline_generation == 0 or len(e.baselines) > 0, "evaluator.baselines",
               "must not be empty (or set evaluator.early_baseline_generation=0)", e.baselines)  # fmt: skip
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
                   "file name): list each baseline once, give a tei: engine its own name=LABEL", name)  # fmt: skip
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
        _check(0 <= ray_cfg.worker_gpu_share <= 1, "ray.worker_gpu_share", "must be in [0, 1]", ray_cfg.worker_gpu_share)
        _check(0 <= ray_cfg.worker_niceness <= 19, "ray.worker_niceness",
               "must be in 0..19 (added to the driver's niceness; lowering it needs root)", ray_cfg.worker_niceness)  # fmt: skip
        for key in ("selfplay_resources", "evaluator_resources"):
            for name, amount in (getattr(ray_cfg, key) or {}).items():
                full = f"ray.{key}.{name}"
                _check(name not in ("CPU", "GPU", "memory", "object_store_memory"), full,
                       "is a built-in Ray resource: use ray.num_cpus / ray.worker_gpu_share", name)  # fmt: skip
                _check(_finite(amount) and amount > 0, full, "must be a number > 0", amount)
        if ray_cfg.address is not None:
            _check(
                ray_cfg.address in ("auto", "local") or re.fullmatch(r"(ray://)?[\w.\-]+:\d+", ray_cfg.address) is not None,
                "ray.address", "must be auto, local, host:port or ray://host:port", ray_cfg.address,
            )


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


#: The longest folder name (bytes) of the usual file systems (ext4, XFS, APFS, NTFS in UTF-16 units).
NAME_MAX = 255


def check_run_folder(checkpoint_root: str, run_name: str) -> None:
    """Check ``checkpoint_root`` and ``run_name`` before anything is created: the name is one
    plain folder name, the root is (or can become) a folder, and the run folder is not a file.
    Raises ConfigError naming the key. ``takzero.train`` calls it before Hydra makes its output
    folder, so a refused name leaves nothing behind."""
    _check(
        bool(run_name) and re.fullmatch(r"[\w.\-]+", run_name) is not None and run_name not in (".", ".."),
        "run_name", "must be a plain folder name (letters, digits, '.', '_', '-')", run_name,
    )
    _check(len(run_name.encode()) <= NAME_MAX, "run_name",
           f"must be at most {NAME_MAX} bytes long (a folder name), not {len(run_name.encode())}", run_name)  # fmt: skip
    _check(bool(checkpoint_root.strip()), "checkpoint_root",
           "must name a folder (empty: the run's files would go to the filesystem root)", checkpoint_root)  # fmt: skip
    root = Path(checkpoint_root)
    blocker = next((p for p in (root, *root.parents) if p.exists()), None)
    _check(blocker is None or blocker.is_dir(), "checkpoint_root",
           f"must be a folder, but {blocker} is a file", checkpoint_root)  # fmt: skip
    run_dir = root / run_name
    _check(not run_dir.exists() or run_dir.is_dir(), "run_name",
           f"{run_dir} exists and is not a folder", run_name)  # fmt: skip


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


#: The Hydra config folder: ``train.yaml`` and the presets under ``config/``.
CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs"


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


def load_config(cfg: DictConfig | dict) -> TrainConfig:
    """Merge a composed config into the schema and check every value.

    Returns a TrainConfig object. Raises ConfigError naming the key of the first bad value or
    unknown key.
    """
    schema = OmegaConf.structured(TrainConfig)
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
           "the run derives its streams from it)", c.seed)  # fmt: skip
    _check(c.max_games >= 0, "max_games", "must be >= 0", c.max_games)
    _check(_finite(c.log_every_s) and c.log_every_s > 0, "log_every_s", "must be > 0", c.log_every_s)
    _check(c.sample_games_every >= 1, "sample_games_every", "must be >= 1", c.sample_games_every)
    _check(re.fullmatch(r"auto|cpu|cuda(:\d+)?", c.device) is not None, "device", "must be auto, cpu or cuda[:N]", c.device)
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
                       ("replay.reanalyse_inference", c.replay.reanalyse_inference)):  # fmt: skip
        _check(value != "server" or c.selfplay.inference == "server", key,
               "server needs selfplay.inference=server (the server exists only then)", value)  # fmt: skip
    check_sizes(c)
    check_ray_address(c.ray.address)


#: Values of ``evaluator.inference`` and ``replay.reanalyse_inference`` (auto: as ``selfplay.inference``).
INFERENCE_CHOICES = ("auto", "local", "server")
#: The largest seed (numpy's legacy seed bound; the run derives int64 seeds from it).
MAX_SEED = 2**32 - 1
#: Simulations per move of any search a run makes (``mcts.simulations``, ``mcts.full_sims``,
#: ``mcts.cheap_sims``, ``evaluator.simulations``, ``evaluator.uct_simulations``).
MAX_SIMULATIONS = 1_000_000
#: Nodes per search tree (``mcts.node_budget``): the trees index their nodes with int32.
MAX_NODE_BUDGET = 2**31 - 1
#: Seconds ``ray.address``'s host:port is given to answer at start-up.
RAY_CONNECT_TIMEOUT_S = 5.0


def implied_memory(c: TrainConfig) -> list[tuple[str, int, str]]:
    """The memory the sizes of ``c`` imply, one row per key that sizes an allocation:
    ``(key, bytes, what)``. Rough upper estimates, in the order of the allocations they stand for:

    * ``selfplay.games_per_worker``: the search trees of every self-play worker on this machine
      (all of them unless ``ray.address`` joins a cluster): workers x games x node budget x
      ``BYTES_PER_NODE``; ``mcts.node_budget`` when it was given;
    * ``mcts.simulations``: each worker's visit schedule, games x simulations x 4 bytes;
    * ``replay.window_max`` (or ``replay.fixed_window``): the replay window, positions x (packed
      board, ``replay.top_k`` policy entries of 6 bytes, targets), twice (a window is copied when
      positions are added);
    * ``train.batch_size``: a batch's input planes, policy target and mask, and the activations
      kept for the backward pass (some 8 tensors of the trunk's planes per block)."""
    from takzero.search.config import BYTES_PER_NODE

    n = c.board.size
    nsq = n * n
    actions = num_actions(n)
    local = c.ray.address in (None, "local")
    workers = c.selfplay.workers if local else 1
    games = c.selfplay.games_per_worker
    search = c.mcts
    budget = search.node_budget if "node_budget" in c.mcts_keys_given() else min(
        200_000, max(actions + 1, 300 * (search.max_simulations + 1)))
    tree_key = "mcts.node_budget" if "node_budget" in c.mcts_keys_given() else "selfplay.games_per_worker"
    rows = [
        (tree_key, workers * games * budget * BYTES_PER_NODE,
         f"{workers} workers x {games} games x {budget} nodes x {BYTES_PER_NODE} bytes of search trees"),
        ("mcts.simulations", workers * games * search.max_simulations * 4,
         f"{workers} workers x {games} games x {search.max_simulations} simulations of visit schedule"),
    ]
    r = c.replay
    window = min(r.window_max, r.fixed_window) if r.fixed_window > 0 else r.window_max
    board_bytes = 16 + 2 * nsq + 8 * (2 if n >= 7 else 1) * nsq  # pipeline.replay.board_record_len
    position = board_bytes + 6 * r.top_k + 6 * c.replay_opponent_top_k() + nsq + 24
    window_key = "replay.fixed_window" if r.fixed_window > 0 and r.fixed_window <= r.window_max else "replay.window_max"
    rows.append((window_key, 2 * window * position,
                 f"a replay window of {window} positions x {position} bytes, twice"))
    mc = c.model_config()
    sample = 4 * mc.in_channels * nsq + 5 * actions + 64 + 4 * mc.channels * nsq * (8 * mc.blocks + 8)
    rows.append(("train.batch_size", c.train.batch_size * sample,
                 f"{c.train.batch_size} samples x {sample} bytes of inputs, targets and activations"))
    return rows


def check_sizes(c: TrainConfig, memory: int | None = None) -> None:
    """Check the values of ``c`` that size an allocation, at start-up: the integers in their
    ranges (``replay.top_k`` up to the board's action count, simulations up to
    :data:`MAX_SIMULATIONS`, ``mcts.node_budget`` up to :data:`MAX_NODE_BUDGET`), then the memory
    they imply (:func:`implied_memory`), each and together, against ``memory`` bytes (default:
    :func:`machine_memory`). Raises ConfigError naming the key (the largest share when only the
    sum is too much)."""
    a = num_actions(c.board.size)
    _check(c.replay.top_k <= a, "replay.top_k",
           f"must be at most the {a} actions of a {c.board.size}x{c.board.size} board", c.replay.top_k)  # fmt: skip
    m = c.mcts
    for key, value in (("mcts.simulations", m.simulations), ("mcts.full_sims", m.full_sims),
                       ("mcts.cheap_sims", m.cheap_sims), ("evaluator.simulations", c.evaluator.simulations),
                       ("evaluator.uct_simulations", c.evaluator.uct_simulations)):  # fmt: skip
        if value is not None:
            _check(value <= MAX_SIMULATIONS, key, f"must be at most {MAX_SIMULATIONS:,} (MAX_SIMULATIONS)", value)
    _check(m.node_budget <= MAX_NODE_BUDGET, "mcts.node_budget",
           f"must be at most {MAX_NODE_BUDGET:,} (the trees index nodes with int32)", m.node_budget)  # fmt: skip
    _check(c.selfplay.games_per_worker <= 2**20, "selfplay.games_per_worker", "must be at most 2**20",
           c.selfplay.games_per_worker)  # fmt: skip
    memory = machine_memory() if memory is None else memory
    gib = 2**30
    rows = implied_memory(c)
    for key, need, what in rows:
        _check(need <= memory, key, f"needs about {need / gib:,.1f} GiB ({what}), more than the "
               f"{memory / gib:.1f} GiB of memory of this machine", getattr_key(c, key))  # fmt: skip
    total = sum(need for _, need, _ in rows)
    key, need, what = max(rows, key=lambda row: row[1])
    _check(total <= memory, key, f"the run's sizes need about {total / gib:,.1f} GiB together, more than the "
           f"{memory / gib:.1f} GiB of memory of this machine; the largest share is {key}: {what}",
           getattr_key(c, key))  # fmt: skip


def getattr_key(c: TrainConfig, key: str) -> Any:
    """The value of the dotted ``key`` of ``c`` (``replay.top_k``)."""
    obj: Any = c
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


def check_ray_address(address: str | None, timeout: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """A ``host:port`` (or ``ray://host:port``) ``ray.address`` must answer a TCP connection within
    ``timeout`` seconds, so that a wrong address is one line at start-up rather than a long wait
    in ``ray.init``; ``auto``, ``local`` and None are left to Ray. Raises ConfigError."""
    import socket

    if address is None or address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        _check(False, "ray.address", f"nothing answers at {host}:{port} within {timeout:g} s ({reason}); "
               "start the cluster's head (ray start --head) or fix the address", address)  # fmt: skip

