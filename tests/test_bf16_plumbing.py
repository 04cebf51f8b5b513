"""bf16 on CUDA, float32 on CPU (issue 55): ``selfplay.bf16`` reaches the self-play evaluator and
``train.amp`` the trainer's autocast; on the CPU both stay float32. The CUDA side is reached by
monkeypatching the one CUDA check each uses, so the plumbing is tested on a machine without a GPU."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from takzero.config import compose_preset
from takzero.nn.features import random_states
from takzero.nn.inference import Evaluator
from takzero.nn.model import ModelConfig, TakNet
from takzero.pipeline import selfplay as selfplay_module
from takzero.pipeline import trainer as trainer_module
from takzero.pipeline.selfplay import SelfPlayWorker
from tests.test_trainer import SIZE, _records, _trainer

SMALL = ["device=cpu", "selfplay.games_per_worker=2", "model.channels=8", "model.blocks=1"]


def test_use_bf16_autocast_is_amp_on_cuda_only() -> None:
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert trainer_module.use_bf16_autocast(True, cuda) is True
    assert trainer_module.use_bf16_autocast(True, torch.device("cuda:1")) is True
    assert trainer_module.use_bf16_autocast(False, cuda) is False
    assert trainer_module.use_bf16_autocast(True, cpu) is False


class _Spy:
    """Wraps ``forward_all`` to record whether autocast was on, and in which dtype."""

    def __init__(self, model: Any) -> None:
        self.seen: list[tuple[bool, torch.dtype]] = []
        forward_all = model.forward_all

        def spy(x: torch.Tensor) -> Any:
            self.seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
            return forward_all(x)

        model.forward_all = spy


def test_trainer_on_cpu_stays_float32() -> None:
    trainer = _trainer()
    assert trainer.cfg.amp and not trainer.autocast_bf16
    spy = _Spy(trainer.model)
    metrics = trainer.train_step(_records(16, seed=0))
    assert spy.seen == [(False, spy.seen[0][1])]
    assert np.isfinite(metrics["loss/total"])


def test_trainer_autocast_follows_the_cuda_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pretend the CPU is a CUDA device for the one check: train.amp must turn bf16 autocast on
    # around the forward pass (CPU autocast stands in for CUDA's), and train.amp=false keep it off.
    monkeypatch.setattr(trainer_module, "use_bf16_autocast", lambda amp, device: bool(amp))
    for amp in (True, False):
        trainer = _trainer()
        trainer.cfg.amp = amp
        trainer.autocast_bf16 = trainer_module.use_bf16_autocast(amp, trainer.device)
        spy = _Spy(trainer.model)
        trainer.train_step(_records(16, seed=1))
        assert spy.seen[0][0] is amp
        if amp:
            assert spy.seen[0][1] == torch.bfloat16
    # and the constructor reads it from the section
    monkeypatch.setattr(trainer_module, "use_bf16_autocast", lambda amp, device: True)
    assert _trainer().autocast_bf16 is True


class _RecordingEvaluator(Evaluator):
    calls: list[dict[str, Any]] = []

    def __init__(self, model: Any, device: Any = "auto", bf16: bool = False, **kw: Any) -> None:
        type(self).calls.append({"device": str(device), "bf16": bf16})
        super().__init__(model, device=device, bf16=bf16, **kw)


@pytest.mark.parametrize(("setting", "expected"), [("true", True), ("false", False)])
def test_selfplay_bf16_reaches_the_evaluator(monkeypatch: pytest.MonkeyPatch, setting: str, expected: bool) -> None:
    _RecordingEvaluator.calls = []
    monkeypatch.setattr(selfplay_module, "Evaluator", _RecordingEvaluator)
    worker = SelfPlayWorker.from_run(compose_preset("smoke", [*SMALL, f"selfplay.bf16={setting}"], run_name="t"))
    assert _RecordingEvaluator.calls == [{"device": "cpu", "bf16": expected}]
    assert worker.evaluator.bf16 is False  # on the CPU the evaluator stays float32


def test_selfplay_bf16_defaults_on_and_is_off_on_cpu() -> None:
    cfg = compose_preset("smoke", SMALL, run_name="t")
    assert cfg.selfplay.bf16 is True
    worker = SelfPlayWorker.from_run(cfg)
    assert worker.evaluator.bf16 is False and worker.evaluator.device.type == "cpu"
    # and a CPU evaluator told bf16 computes in float32: the same numbers as without
    model = TakNet(ModelConfig(size=SIZE, channels=8, blocks=1))
    states = random_states(SIZE, 4)
    a = Evaluator(model, device="cpu", bf16=True).evaluate(states)
    b = Evaluator(model, device="cpu", bf16=False).evaluate(states)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
