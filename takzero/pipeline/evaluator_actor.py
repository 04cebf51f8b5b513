"""The evaluator actor of a training run and the baseline model files it plays with.

:class:`EvaluatorActor` (a Ray actor; the class is plain Python) plays a candidate generation
against the incumbent (gating) and the fixed baselines around
:class:`takzero.pipeline.gating.GatingEvaluator`, with its own networks or through the run's
inference server (:func:`pinned_evaluators`). The files of ``model:PATH`` baselines travel as
bytes: the driver reads them (:func:`model_spec_files`), the evaluator copies them into a private
temporary folder on its node (:func:`localize_model_specs`) and removes the folders of evaluators
killed before their close (:func:`remove_stale_model_folders`). The driver
(``takzero.pipeline.run_evaluation``) creates and places it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from takzero.config import TrainConfig

__all__ = [
    "MODELS_PREFIX",
    "EvaluatorActor",
    "localize_model_specs",
    "model_spec_files",
    "pinned_evaluators",
    "remove_stale_model_folders",
]


class EvaluatorActor:
    """Ray actor that plays a candidate generation against the incumbent (gating) and against the
    fixed baselines (Elo on a fixed scale). Its games never enter the replay buffer; it reads no
    file of the run or of the checkout: weights come as object-store references, the files of
    ``model:PATH`` baselines as bytes read by the driver (``model_files``), copied into a private
    temporary folder on the evaluator's node.

    Its networks are its own (torch on the CPU), or with ``evaluator.inference`` resolving to
    server (``inference_server.uses_server``) the run's inference server's: each generation's
    weights pinned there by number (``InferenceServer.pin``), found by the names the
    coordinator (``progress``) holds.

    The run creates it with the config alone and hands the coordinator and the files with each
    :meth:`evaluate` (the evaluator is built at the first): Ray keeps no actor handle or
    object-store argument of a constructor alive for a restart (ray-project/ray#53727), and
    says so at every start with an error-level line on the console when an actor that Ray
    restarts is created with one. ``model_files`` and ``progress`` given here (tests) are used
    instead."""

    def __init__(self, cfg: TrainConfig, model_files: dict[str, bytes] | None = None,
                 progress: Any = None) -> None:
        torch.set_num_threads(1)
        remove_stale_model_folders()  # those of evaluators killed before their close
        self.cfg = cfg
        self.folder: Path | None = None
        self.model_files = model_files
        self.progress = progress  # the coordinator: hears each finished game (Coordinator.eval_game)
        self.server: tuple[Any, str] | None = None
        self.evaluator: Any = None  # the GatingEvaluator, built at the first evaluate (_build)

    def _build(self, progress: Any, model_files: list[Any] | None) -> None:
        """Build the evaluator once: the ``model:PATH`` baselines copied from ``model_files``
        (``[ObjectRef]`` of :func:`model_spec_files`' dict, or nothing), the inference server
        found through the coordinator ``progress`` when this role uses one."""
        import ray

        from takzero.pipeline.gating import GatingEvaluator
        from takzero.pipeline.inference_server import server_for

        if self.progress is None:
            self.progress = progress
        if self.evaluator is not None:
            return
        files = self.model_files if self.model_files is not None else (ray.get(model_files[0]) if model_files else {})
        local = localize_model_specs(self.cfg.evaluator.baselines, files or {}, self)
        self.server = server_for(self.cfg, self.progress, "evaluator") if self.progress is not None else None
        make = None if self.server is None else pinned_evaluators(self.cfg, self.server)
        self.evaluator = GatingEvaluator(self.cfg, baseline_specs=local, make_evaluator=make)

    def close(self) -> None:
        """Remove the private copies of the ``model:PATH`` files (the run calls it at its end;
        the actor runs it while an evaluation is still playing: it has two threads)."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def evaluate(
        self,
        candidate_generation: int,
        candidate: dict[str, torch.Tensor],
        incumbent_generation: int,
        incumbent: dict[str, torch.Tensor],
        play_baselines: bool,
        seed: int | None = None,
        tactics: bool = False,
        baseline_games: int = 0,
        kept: dict[str, Any] | None = None,
        progress: Any = None,
        model_files: list[Any] | None = None,
    ) -> dict[str, Any]:
        """:meth:`GatingEvaluator.evaluate` of the two generations (pass ObjectRefs: Ray resolves
        them from the node's object store), playing only the games ``kept`` does not hold
        (``gating.KeptGames``); each finished game goes to the coordinator ``progress`` (or the
        one given at creation; ``Coordinator.eval_game``). ``model_files``: ``[ObjectRef]`` of
        the bytes of the ``model:PATH`` baselines (:func:`model_spec_files`), read at the first
        call. The candidate's weights are not sent back (the driver has them)."""
        self._build(progress, model_files)
        on_game = None
        if self.progress is not None:
            progress = self.progress

            def on_game(key: str, index: int, score: float, ptn: str) -> None:
                progress.eval_game.remote(candidate_generation, key, index, score, ptn)

        out = self.evaluator.evaluate(
            (candidate_generation, candidate), (incumbent_generation, incumbent), play_baselines, seed,
            tactics=tactics, baseline_games=baseline_games, kept=kept, on_game=on_game,
        )
        out.pop("candidate_weights", None)
        return out


def pinned_evaluators(cfg: TrainConfig, server: tuple[Any, str]) -> Any:
    """``make_evaluator(generation, weights)`` for :class:`~takzero.pipeline.gating.GatingEvaluator`
    over the inference server ``server`` (handle, name): a ``RemoteEvaluator`` with those weights
    pinned under their generation (weights of no generation, < 0: a local network)."""
    from takzero.pipeline.gating import evaluator_from_weights
    from takzero.pipeline.inference_server import RemoteEvaluator

    def make(generation: int, weights: dict[str, torch.Tensor]) -> Any:
        if generation < 0:
            return evaluator_from_weights(cfg.model_config(), weights)
        return RemoteEvaluator(server[0], cfg.board.size, name=server[1], pin=(generation, weights))

    return make


def model_spec_files(specs: list[str]) -> dict[str, bytes]:
    """Driver side: the bytes of each ``model:PATH[:N]`` file among ``specs`` (by PATH), for an
    evaluator that may run on a node without the file. Raises OSError for an unreadable file."""
    from takzero.players.registry import model_spec_path

    out: dict[str, bytes] = {}
    for spec in specs:
        path = model_spec_path(spec)
        if path is not None:
            out[path] = Path(path).read_bytes()
    return out


#: Prefix of the private folders of the evaluators' model copies, followed by the pid of the
#: process that made it (:func:`remove_stale_model_folders` removes those of dead processes).
MODELS_PREFIX = "takzero-models-"


def remove_stale_model_folders(root: str | Path | None = None) -> list[Path]:
    """Remove the model-copy folders (:data:`MODELS_PREFIX`) in ``root`` (default: the temp
    folder) whose process is gone (an evaluator killed before its close); returns them."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    for p in root.glob(f"{MODELS_PREFIX}*"):
        pid = p.name[len(MODELS_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or not p.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or another user's): left alone
        except ProcessLookupError:
            pass
        except OSError:
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def localize_model_specs(specs: list[str], files: dict[str, bytes], owner: Any = None) -> list[str]:
    """Evaluator side: ``specs`` with each ``model:PATH`` whose bytes are in ``files`` rewritten
    to a copy in a private temporary folder (same file name, so labels and player names stay),
    never in the run folder. Other specs are returned as they are. ``owner.folder`` (when
    given) is set to the folder, which the owner removes when it is done
    (``EvaluatorActor.close``); the folder's name carries this process's id, so a later one
    removes it if this process dies first (:func:`remove_stale_model_folders`)."""
    if not files:
        return list(specs)
    from takzero.players.registry import model_spec_path

    folder = Path(tempfile.mkdtemp(prefix=f"{MODELS_PREFIX}{os.getpid()}-"))
    if owner is not None:
        owner.folder = folder
    out = []
    for spec in specs:
        path = model_spec_path(spec)
        if path is None or path not in files:
            out.append(spec)
            continue
        local = folder / str(len(out)) / Path(path).name
        local.parent.mkdir(parents=True)
        local.write_bytes(files[path])
        out.append(spec.replace(path, str(local), 1))
    return out
