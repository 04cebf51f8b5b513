"""The onnxruntime self-play backend: the same priors and values as torch, new weights per
generation, and the backend switch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from takzero.config import load_config
from takzero.game import Position
from takzero.nn.backends import choose_backend, onnx_evaluator
from takzero.nn.inference import Evaluator
from takzero.nn.model import ModelConfig, TakNet
from takzero.pipeline.selfplay import SelfPlayWorker

pytest.importorskip("onnxruntime")


# One torch thread, as in a self-play worker (tests/conftest.py): the nets and batches here are
# tiny, and more threads only spin on a loaded machine.
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _positions(size: int, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        pos = Position.start(size)
        for _ in range(int(rng.integers(0, 3 * size))):
            codes = pos.legal_move_codes()
            if pos.is_over or len(codes) == 0:
                break
            pos = pos.play(int(codes[rng.integers(len(codes))]))
        if not pos.is_over:
            out.append(pos.state.copy())
    return np.stack(out)


@pytest.mark.parametrize(("size", "channels", "blocks"), [(5, 32, 4), (6, 16, 3)])
def test_onnx_matches_torch(size, channels, blocks):
    torch.manual_seed(size)
    model = TakNet(ModelConfig(size=size, channels=channels, blocks=blocks))
    # trained-looking batch-norm statistics, so the test does not pass on an identity
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    states = _positions(size, 24, seed=size)
    p_t, v_t, wdl_t = Evaluator(model, device="cpu").evaluate(states)
    p_o, v_o, wdl_o = onnx_evaluator(model, threads=1).evaluate(states)
    np.testing.assert_allclose(p_o, p_t, atol=1e-5)
    np.testing.assert_allclose(v_o, v_t, atol=1e-5)
    np.testing.assert_allclose(wdl_o, wdl_t, atol=1e-5)
    if size == 6:  # once: it exports again
        assert choose_backend(model, 8, threads=1, repeats=1) in ("torch", "onnx")


def test_worker_with_onnx_backend_follows_new_weights():
    cfg = load_config(
        {
            "board": {"size": 4, "komi": 0.0},
            "model": {"channels": 8, "blocks": 1},
            "mcts": {"simulations": 4},
            "selfplay": {"games_per_worker": 3, "backend": "onnx"},
            "device": "cpu",
        }
    )
    worker = SelfPlayWorker.from_run(cfg, worker_id=0, device="cpu")
    assert worker.backend == "onnx"
    states = _positions(4, 6, seed=1)
    torch.manual_seed(7)
    new = TakNet(cfg.model_config()).state_dict()
    before = worker.evaluator.evaluate(states)[0]
    worker.set_weights(new, generation=1)
    after = worker.evaluator.evaluate(states)[0]
    reference = Evaluator(TakNet(cfg.model_config()), device="cpu")
    reference.load_state_dict(new)
    np.testing.assert_allclose(after, reference.evaluate(states)[0], atol=1e-5)
    assert np.abs(after - before).max() > 1e-4
    recs, stats, _ = worker.play_step()
    assert stats["count/moves"] == 3
    default_cfg = load_config({**{"board": {"size": 4}}, "device": "cpu"})  # every preset's: onnx
    assert SelfPlayWorker.from_run(default_cfg, worker_id=0, device="cpu").backend == "onnx"
    torch_cfg = load_config({"board": {"size": 4}, "device": "cpu", "selfplay": {"backend": "torch"}})
    assert SelfPlayWorker.from_run(torch_cfg, worker_id=0, device="cpu").backend == "torch"
