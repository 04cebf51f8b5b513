"""What a run carries from one start to the next: the checkpoint to resume from, the run's
counters, the launch number that keeps random streams apart, and the gated model.

Used by :class:`takzero.pipeline.run.Run`; no Ray here, so every rule is tested without a cluster.

* :func:`find_resume_checkpoint`: the newest verified checkpoint (newer ones that fail their
  check are skipped, and :func:`set_aside_rejected` renames them and says so in the run's log),
  or an error that names why a folder with checkpoints will not be resumed (``resume=false``,
  nothing verifies, another network).
* :class:`RunCounters`: games, positions, self-play counters, gating decisions, training minutes
  over all sessions, the promoted generation and its scores; saved in every checkpoint under
  ``"run"`` and read back from it.
* :func:`next_launch`: counts the starts of a run; each start takes self-play streams
  ``launch * STREAMS_PER_LAUNCH + k`` (``Coordinator.new_stream``), so no resumed run replays the
  games of an earlier start.
* :func:`recover_promoted`: the promoted (gated) weights for a run whose ``best.pt`` is missing or
  damaged; never the trainer's ungated weights.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, NamedTuple

import torch

from takzero.config import TrainConfig
from takzero.nn.model import ModelConfig
from takzero.nn.quoting import short_repr
from takzero.nn.safe_load import CONVERT_COMMAND
from takzero.pipeline.checkpoints import (
    CheckpointError,
    latest_verified,
    list_checkpoints,
    load_checked,
    set_aside,
)

#: Self-play actor starts per launch of a run (``Coordinator.new_stream``); stream ``s`` numbers
#: its games ``s << 32 | n``.
STREAMS_PER_LAUNCH = 1 << 16


class RunDirError(RuntimeError):
    """The run folder holds checkpoints that this run would not resume from (nothing started)."""


class ResumePoint(NamedTuple):
    """The checkpoint a run resumes from.

    Attributes:
        path, state: the newest checkpoint that verifies, and its contents.
        rejected: the newer checkpoints that failed their check (truncated, bit-flipped, checksum
            mismatch, no sidecar, not weights-only), newest first, each with its one-line reason;
            :func:`set_aside_rejected` renames them and says so.
    """

    path: Path
    state: dict[str, Any]
    rejected: list[tuple[Path, str]]


def find_resume_checkpoint(cfg: TrainConfig, run_dir: Path) -> ResumePoint | None:
    """The checkpoint a run in ``run_dir`` resumes from: None for an empty folder (a new run).
    Newer checkpoints that fail their check are skipped (``ResumePoint.rejected``).

    Refuses to start over in a folder that has checkpoints the run will not use (``resume=false``,
    or none of them verifies: the new run's checkpoints would sort before the old ones and be
    pruned at once), and to resume a checkpoint of another network than ``cfg`` builds (each
    differing key is named with both values).

    Raises:
        RunDirError: any of the above; nothing is changed on disk.
    """
    existing = list_checkpoints(run_dir)
    if not existing:
        left = outputs_without_checkpoints(run_dir)
        if left:
            best = run_dir / "best.pt"
            warm = (f"train.init_from={best} with a new run_name (a new run from its best model)"
                    if best.exists() else "")
            raise RunDirError(
                f"{run_dir} has no checkpoint left, but it has the outputs of a run that wrote "
                f"some ({', '.join(left)}): not starting over on top of them (generation numbers "
                f"and game files would be reused); either {warm + ', or ' if warm else ''}a new "
                "run_name (a new run from scratch), or put the ckpt_*.pt files back to resume"
            )
        return None
    if not cfg.resume:
        raise RunDirError(
            f"{run_dir} already has checkpoints ({existing[-1].name}) and resume=false: "
            "choose a new run_name (or move the old checkpoints away)"
        )
    found, rejected = latest_verified(run_dir, lambda state: checkpoint_problem(state, cfg))
    if found is None:
        why = "; ".join(reason for _, reason in rejected[:3]) + ("; ..." if len(rejected) > 3 else "")
        raise RunDirError(
            f"none of the {len(existing)} checkpoints in {run_dir} could be verified ({why}); "
            "not starting over on top of them: restore their .sha256 files, convert trusted "
            f"files that are not weights-only ({CONVERT_COMMAND} {run_dir}), move them away, "
            "or choose a new run_name"
        )
    saved = found[1].get("model_config")
    if saved is not None:
        keys = model_config_diff(saved, cfg, "checkpoint")
        if keys:
            raise RunDirError(
                f"{found[0]} was trained with another network than this config builds ({keys}); "
                "set those keys to the checkpoint's values to resume, or choose a new run_name"
            )
    return ResumePoint(found[0], found[1], rejected)


#: The file a run writes beside its checkpoints once it has written one (the newest one's name):
#: a folder with it and no checkpoint lost its checkpoints (:func:`outputs_without_checkpoints`).
CHECKPOINTED = "checkpointed"


def outputs_without_checkpoints(run_dir: Path) -> list[str]:
    """What in ``run_dir`` shows that the run wrote checkpoints which are gone: the
    :data:`CHECKPOINTED` marker, checkpoints set aside as ``.rejected``, or evaluation games in
    ``games/`` (each generation is a checkpoint), with ``best.pt``, ``replay/`` shards and the
    ``games/`` files named when present. [] for a new folder, or one whose run was stopped
    before its first checkpoint (its replay shards are resumed: nothing is lost)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    games = run_dir / "games"
    evaluated = games.is_dir() and any(p.name.startswith(("gating_", "baseline_")) for p in games.iterdir())
    rejected = any(p.name.startswith("ckpt_") and ".rejected" in p.name for p in run_dir.iterdir())
    marker = run_dir / CHECKPOINTED
    if not (marker.exists() or evaluated or rejected):
        return []
    found = []
    if marker.exists():
        last = marker.read_text(errors="replace").strip()[:80]
        found.append(f"{CHECKPOINTED}: the last was {last}" if last else CHECKPOINTED)
    if (run_dir / "best.pt").exists():
        found.append("best.pt")
    if any((run_dir / "replay").glob("shard_*")):
        found.append("replay/")
    if games.is_dir() and any(games.iterdir()):
        found.append("games/")
    if rejected:
        found.append("ckpt_*.rejected")
    return found


def checkpoint_problem(state: Any, cfg: TrainConfig) -> str | None:
    """What makes ``state`` (a verified file's contents) unusable as a checkpoint of the run
    ``cfg`` describes, in a few words, or None: not a dict, a missing or mistyped entry (``step``,
    ``generation``, ``model_state``, ``optimizer``, ``rng``, ``run``, ``promoted``), weights whose
    names or shapes are not those of the network (checked when the file's ``model_config`` is
    the config's: another network is :func:`find_resume_checkpoint`'s own error), non-finite
    weights, run counters that do not read back. Never raises."""
    from takzero.nn.model import TakNet, current_keys
    from takzero.pipeline.trainer import non_finite

    if not isinstance(state, dict):
        return f"it holds a {type(state).__name__}, not a checkpoint dict"
    saved = state.get("model_config")
    if saved is not None and not isinstance(saved, dict):
        return f"model_config is a {type(saved).__name__}, not a dict"
    try:
        if saved is not None and model_config_diff(saved, cfg, "checkpoint"):
            return None  # another network: find_resume_checkpoint names the keys
    except (TypeError, ValueError, AttributeError, KeyError) as e:
        return f"its model_config cannot be read ({e})"
    missing = [k for k in ("step", "generation", "model_state", "optimizer", "rng") if k not in state]
    if missing:
        return f"no {', '.join(missing)} entr{'y' if len(missing) == 1 else 'ies'}"
    for key in ("step", "generation"):
        v = state[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return f"{key} is {short_repr(v, 40)}, not a count"
    want = {k: tuple(v.shape) for k, v in TakNet(cfg.model_config()).state_dict().items()}

    def weights_problem(name: str, weights: Any) -> str | None:
        if not isinstance(weights, dict) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
            return f"{name} is not a dict of tensors"
        got = {k: tuple(v.shape) for k, v in current_keys(weights).items()}
        if got.keys() != want.keys():
            odd = sorted(set(got) ^ set(want))
            return f"{name} has other parameters than the network ({', '.join(odd[:3])})"
        wrong = [k for k in want if got[k] != want[k]]
        if wrong:
            k = wrong[0]
            return f"{name}: {k} has shape {list(got[k])}, the network's is {list(want[k])}"
        bad = non_finite(weights)
        return f"{name} has non-finite weights ({', '.join(bad[:3])})" if bad else None

    problem = weights_problem("model_state", state["model_state"])
    if problem:
        return problem
    opt = state["optimizer"]
    if (not isinstance(opt, dict) or not isinstance(opt.get("state"), dict)
            or not isinstance(opt.get("param_groups"), list)):
        return "optimizer is not an optimiser state"
    rng = state["rng"]
    if not isinstance(rng, dict) or any(k not in rng for k in ("numpy", "torch", "python")):
        return "rng is not the random streams' state"
    run = state.get("run", {})
    if not isinstance(run, dict):
        return f"run is a {type(run).__name__}, not the run's counters"
    try:
        RunCounters.from_checkpoint(state)
        from takzero.pipeline.schedule import Check

        for entry in run.get("owed_checks", []):
            Check.from_list(entry)
    except (TypeError, ValueError, AttributeError, KeyError) as e:
        return f"the run's counters do not read back ({e})"
    promoted = state.get("promoted")
    if promoted is not None:
        if not isinstance(promoted, (tuple, list)) or len(promoted) != 2 or isinstance(promoted[0], bool) \
                or not isinstance(promoted[0], int):
            return "promoted is not (generation, weights)"
        return weights_problem("promoted", promoted[1])
    return None


def model_config_diff(saved: dict[str, Any], cfg: TrainConfig, source: str) -> str:
    """The keys where the network ``saved`` (a file's ``model_config`` dict) differs from the one
    ``cfg`` builds, each with both values (``'model.channels: checkpoint 8, config 32'``;
    ``source`` names the file's side), "" when they are the same network. A key missing from
    ``saved`` counts as equal (files written before it existed); the head flags of files from
    before the head table count as their ``heads`` (``ModelConfig.upgrade_dict``). ``size`` is
    named ``board.size``, the key that sets it; ``heads`` is set by the ``model.*_weight`` keys."""
    saved = ModelConfig.upgrade_dict(saved)
    want = cfg.model_config().to_dict()
    diff = {k: (saved.get(k), v) for k, v in want.items() if saved.get(k, v) != v}
    return ", ".join(
        f"model.{k}: {source} {a!r}, config {b!r}" for k, (a, b) in sorted(diff.items())
    ).replace("model.size", "board.size").replace("model.heads", "model.heads (the model.*_weight keys > 0)")


def set_aside_rejected(point: ResumePoint) -> list[str]:
    """Rename each checkpoint newer than ``point`` that failed its check to ``<name>.rejected``
    (:func:`takzero.pipeline.checkpoints.set_aside`: never resumed, counted or pruned in place of
    a good one), and return one line per file for the run's log, saying why it was rejected, that
    the run goes on from ``point.path``, and where the file went. Call it after
    :func:`find_resume_checkpoint` succeeded, before the run writes a checkpoint."""
    lines = []
    for path, reason in point.rejected:
        try:
            moved = set_aside(path).name
        except OSError as e:
            moved = f"left in place (rename failed: {e.strerror or e})"
        lines.append(f"checkpoint rejected: {reason}; resuming from the older {point.path.name} "
                     f"instead (the rejected file is now {moved})")
    return lines


@dataclasses.dataclass
class RunCounters:
    """The run's own counters, carried across starts in each checkpoint's ``"run"`` entry.

    Attributes:
        games, positions: self-play games finished and positions made, over all starts.
        counters: the workers' ``count/*`` statistics summed (results, resignations, ...).
        gating_decisions: promote/reject decisions so far.
        minutes: training wall time of all earlier sessions, minutes (``train.max_minutes``
            counts it).
        last_gating: the last gating line shown to the user.
        best_scores: ``score/vs_*`` of the promoted generation, by baseline.
        best_results: the evaluation line of each baseline (``progress.evaluation_line``) of
            the promoted generation's last check, by baseline; ``best_results_generation``
            the generation they measured (-1: none).
        promoted_generation: generation of the gated model in ``best.pt``.
        launch: which start of the run wrote the checkpoint (0 = the first).
        last_strength: the progress line's latest Elo against the strongest (last listed)
            baseline (``progress.strength_text``), "" before the first.
        strength_points: the last points of that Elo curve, ``[generation, elo, lower, upper]``.
        skipped_checks: the evaluations not run and why (``schedule.EvaluationSchedule``).
        owed_checks: the checks a Ctrl-C cut or left owed, ``[generation, step, [kinds],
            baseline_games]`` (``schedule.Check.to_list``), owed again by the next session (the
            weights come from ``ckpt_<step>.pt``).
        init_from: where the run's initial weights came from (``train.init_from`` at its first
            start, :func:`takzero.pipeline.warm_start.load_init_weights`), "" for random ones.
        earlier: the training before this run in its warm-start chain (the initial weights'
            :class:`~takzero.pipeline.lineage.Lineage`, ``Lineage.to_dict``; {} for none).
        snapshot_minutes_at: the chain's training minutes (``earlier`` plus this run's) when
            the last weight snapshot of ``train.snapshot_minutes`` was written; the next is due
            once they pass the next multiple (a new run starts at ``earlier``'s minutes).
    """

    games: int = 0
    positions: int = 0
    counters: dict[str, float] = dataclasses.field(default_factory=dict)
    gating_decisions: int = 0
    minutes: float = 0.0
    last_gating: str = "none yet"
    best_scores: dict[str, float] = dataclasses.field(default_factory=dict)
    promoted_generation: int = 0
    launch: int = 0
    best_results: dict[str, str] = dataclasses.field(default_factory=dict)
    best_results_generation: int = -1
    last_strength: str = ""
    strength_points: list[list[float]] = dataclasses.field(default_factory=list)
    skipped_checks: list[str] = dataclasses.field(default_factory=list)
    owed_checks: list[list[Any]] = dataclasses.field(default_factory=list)
    init_from: str = ""
    earlier: dict[str, Any] = dataclasses.field(default_factory=dict)
    snapshot_minutes_at: float = 0.0

    @classmethod
    def from_checkpoint(cls, state: dict[str, Any] | None) -> RunCounters:
        """Read the ``"run"`` entry of a checkpoint (None or a missing entry: a new run)."""
        extra = (state or {}).get("run", {})
        return cls(
            games=int(extra.get("games", 0)),
            positions=int(extra.get("positions", 0)),
            counters=dict(extra.get("counters", {})),
            gating_decisions=int(extra.get("gating_decisions", 0)),
            minutes=float(extra.get("minutes", 0.0)),
            last_gating=str(extra.get("last_gating", "none yet")),
            best_scores=dict(extra.get("best_scores", {})),
            promoted_generation=int(extra.get("promoted_generation", 0)),
            launch=int(extra.get("launch", 0)),
            best_results=dict(extra.get("best_results", {})),
            best_results_generation=int(extra.get("best_results_generation", -1)),
            last_strength=str(extra.get("last_strength", "")),
            strength_points=[list(x) for x in extra.get("strength_points", [])],
            skipped_checks=list(extra.get("skipped_checks", [])),
            owed_checks=[list(x) for x in extra.get("owed_checks", [])],
            init_from=str(extra.get("init_from", "")),
            earlier=dict(extra.get("earlier", {})),
            snapshot_minutes_at=float(extra.get("snapshot_minutes_at", 0.0)),
        )

    def to_checkpoint(self) -> dict[str, Any]:
        """The ``"run"`` entry of a checkpoint (plain types only)."""
        return dataclasses.asdict(self)


def next_launch(run_dir: Path) -> int:
    """Count this start of the run in ``run_dir/launches`` (atomically) and return its number:
    0 for the first start, 1 for the first resume, ... (kills included: the count is written
    before anything else starts)."""
    path = run_dir / "launches"
    try:
        n = int(path.read_text().strip())
    except (OSError, ValueError):
        n = 0
    tmp = path.with_name("launches.tmp")
    tmp.write_text(f"{n + 1}\n")
    os.replace(tmp, path)
    return n


def recover_promoted(
    run_dir: Path, generation: int, state: dict[str, Any]
) -> tuple[int, dict[str, torch.Tensor]]:
    """The promoted weights of a resumed run whose ``best.pt`` is missing or damaged.

    Looks in the checkpoint ``state`` (every checkpoint carries ``"promoted"``: (generation,
    weights)) and then in every verified checkpoint of ``run_dir`` for ``generation``.

    Returns:
        (generation, state dict of CPU tensors).

    Raises:
        RunDirError: no gated copy of that generation is left (never falls back to the trainer's
            ungated weights).
    """
    saved = state.get("promoted")
    if saved is not None and int(saved[0]) == generation:
        return int(saved[0]), saved[1]
    for path in reversed(list_checkpoints(run_dir)):
        try:
            d = load_checked(path, require_checksum=True)
        except CheckpointError:
            continue
        if int(d.get("generation", -1)) == generation:
            return generation, d["model_state"]
    raise RunDirError(
        f"best.pt in {run_dir} is missing or damaged and no checkpoint holds the promoted "
        f"generation {generation}; not promoting ungated weights: restore best.pt or start a new "
        "run_name"
    )
