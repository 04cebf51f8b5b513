"""Warm start: a new run begins from another run's weights (``train.init_from=PATH``).

A new machine keeps no replay folder, but the weights are enough to carry on: the file (a run's
``ckpt_*.pt`` or ``best.pt``, or a shipped ``checkpoints/pretrained/*.pt``) is read weights-only
and verified against its ``.sha256`` sidecar when it has one
(:func:`takzero.pipeline.checkpoints.load_checked`); only its ``model_state`` is taken. The
optimiser, the step and generation counters and the replay buffer start fresh; generation 0 (the
first published and promoted weights, so the first self-play games) is the loaded network. The
file's :class:`~takzero.pipeline.lineage.Lineage` (the training behind it, over its own chain of
warm starts) becomes the run's earlier training (``RunCounters.earlier``): the run's model files
carry the chain's totals.

Refused at start-up, before Ray starts, with a :class:`~takzero.config.ConfigError` naming
``train.init_from`` and every key where the file's network differs from the one the config builds
(``board.size``, ``model.feature_version``, ``model.channels``, ``model.blocks``, ... any
``ModelConfig`` field, since each changes the state dict), or the tensors that do not fit.

A run whose folder already has checkpoints resumes from them and ignores ``train.init_from``
(:class:`takzero.pipeline.run.Run` says so in ``train.log``): resume wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from takzero.config import ConfigError, TrainConfig
from takzero.nn.model import ModelConfig, TakNet, current_keys
from takzero.nn.quoting import short_repr
from takzero.pipeline.checkpoints import CheckpointError, load_checked
from takzero.pipeline.lineage import Lineage
from takzero.pipeline.resume import model_config_diff

__all__ = ["InitWeights", "check_init_from", "load_init_weights", "warm_start_lines"]


@dataclass(frozen=True)
class InitWeights:
    """The weights a new run starts from.

    Attributes:
        path: the file (as given in ``train.init_from``).
        model_state: its state dict (CPU tensors), fitting ``cfg.model_config()``.
        generation: the generation the file records (-1: none).
        run_name: the run that made it ("" when the file does not say).
        half_komi: the half-komi it was trained with (None when the file does not say).
        lineage: the training behind the file (``Lineage.of_file``).
    """

    path: str
    model_state: dict[str, torch.Tensor]
    generation: int
    run_name: str
    half_komi: int | None
    lineage: Lineage = Lineage()

    def describe(self) -> str:
        """One line for the start-up lines, the run counters and the summary:
        ``'checkpoints/pretrained/6x6.pt (run 6x6, generation 14)'``."""
        said = [f"run {self.run_name}"] if self.run_name else []
        if self.generation >= 0:
            said.append(f"generation {self.generation}")
        return self.path + (f" ({', '.join(said)})" if said else "")


def _fail(path: str, why: str) -> ConfigError:
    return ConfigError(f"train.init_from: {why} (got {path!r})")


def load_init_weights(cfg: TrainConfig) -> InitWeights:
    """Read ``cfg.train.init_from`` weights-only and check that it fits the run's network.

    Returns:
        the :class:`InitWeights` (its ``model_state`` loads into ``TakNet(
        cfg.model_config())`` with every key and shape matching).

    Raises:
        ConfigError: naming ``train.init_from``: the file cannot be read or verified (missing,
            truncated, checksum mismatch, not weights-only), holds no ``model_state`` and
            ``model_config``, or its network differs from the config's (each differing key with
            the file's and the config's value; tensors that do not fit are named when the
            configs agree but the weights do not), or its ``lineage`` entry is malformed.
    """
    path = cfg.train.init_from
    try:
        d: dict[str, Any] = load_checked(Path(path))
    except CheckpointError as e:
        raise _fail(path, f"cannot be loaded: {e}") from None
    if not isinstance(d, dict) or "model_state" not in d or "model_config" not in d:
        raise _fail(path, "holds no model_state and model_config (not a takzero model or checkpoint)")
    try:
        saved = ModelConfig.from_dict(dict(d["model_config"])).to_dict()  # missing fields: defaults
    except (TypeError, ValueError) as e:
        raise _fail(path, f"its model_config cannot be read ({e})") from None
    keys = model_config_diff(saved, cfg, "file")
    if keys:
        raise _fail(path, f"another network than this config builds ({keys}); set those keys to "
                          "the file's values, or start without train.init_from")
    # older files name the trunk and heads as before (the shipped 5x5.pt): today's names
    state = {k: v.detach().to("cpu") for k, v in current_keys(d["model_state"]).items()}
    model = TakNet(cfg.model_config())
    want = model.state_dict()
    missing = sorted(set(want) - set(state))
    extra = sorted(set(state) - set(want))
    shapes = sorted(k for k in set(want) & set(state) if tuple(want[k].shape) != tuple(state[k].shape))
    if missing or extra or shapes:
        parts = [f"{name}: {', '.join(ks[:4])}{', ...' if len(ks) > 4 else ''}"
                 for name, ks in (("missing", missing), ("unexpected", extra), ("other shape", shapes)) if ks]
        raise _fail(path, f"its weights do not fit the config's network ({'; '.join(parts)})")
    from takzero.pipeline.trainer import non_finite

    bad = non_finite(state)
    if bad:  # a NaN network would train on as NaN and be promoted as generation 0
        raise _fail(path, f"its weights are not finite (NaN or inf in {', '.join(bad[:3])}"
                          f"{', ...' if len(bad) > 3 else ''}): not a network to start from")
    try:
        lineage = Lineage.of_file(d)
    except ValueError as e:
        raise _fail(path, str(e)) from None
    hk = d.get("half_komi")
    try:
        generation = int(d.get("generation", -1))
        half_komi = None if hk is None else int(hk)
    except (TypeError, ValueError):
        raise _fail(path, f"its generation {short_repr(d.get('generation'), 40)} or half_komi "
                          f"{short_repr(hk, 40)} is not a whole number") from None
    run_name = d.get("run_name")
    return InitWeights(
        path=str(path),
        model_state=state,
        generation=generation,
        run_name=run_name if isinstance(run_name, str) else "",
        half_komi=half_komi,
        lineage=lineage,
    )


def check_init_from(cfg: TrainConfig) -> None:
    """The command line's early check of ``train.init_from`` (before the run folder is made):
    :func:`load_init_weights` unless the key is empty or the run folder has checkpoints (the run
    resumes and ignores it). Raises ConfigError as :func:`load_init_weights` does."""
    from takzero.pipeline.checkpoints import list_checkpoints

    if cfg.train.init_from and not list_checkpoints(Path(cfg.checkpoint_root) / cfg.run_name):
        load_init_weights(cfg)


def warm_start_lines(cfg: TrainConfig, init: InitWeights | None, resumed: Any) -> list[str]:
    """The start-up lines about ``train.init_from`` (for the console and ``train.log``): the
    weights loaded (with a note when the file was trained with another komi), or, for a run that
    resumes (``resumed``: its resume point, None for a new run), that the key is ignored."""
    path = cfg.train.init_from
    if not path:
        return []
    if resumed is not None:
        return [f"train.init_from={path} ignored: the run folder has checkpoints, so the run "
                f"resumes from {Path(resumed[0]).name} (resume wins)"]
    if init is None:
        return []
    lines = [f"  warm start: weights from {init.describe()} (train.init_from); optimiser, "
             "steps and replay start fresh"]
    if init.lineage.minutes > 0 or init.lineage.positions > 0 or not init.lineage.known:
        lines.append(f"  warm start: the training behind it: {init.lineage.describe()}")
    if init.half_komi is not None and init.half_komi != cfg.half_komi():
        lines.append(f"  warm start: the file was trained with komi {init.half_komi / 2:g}, this "
                     f"run plays komi {cfg.board.komi:g}")
    return lines
