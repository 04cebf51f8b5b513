"""Evaluator outputs, loading from every format, and export parity (TorchScript, ONNX)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from takzero.game import core
from takzero.nn import actions as A
from takzero.nn import features as F
from takzero.nn.inference import Evaluator, resolve_device
from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict, masked_softmax
from takzero.nn.model_export import (
    export_onnx,
    export_torchscript,
    read_onnx_metadata,
    read_torchscript_metadata,
)

SIZE = 5


@pytest.fixture(autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def model() -> TakNet:
    """A small net with non-trivial weights and BN statistics (not the identity at init)."""
    torch.manual_seed(1)
    net = TakNet(ModelConfig(size=SIZE, channels=16, blocks=3, gpool_every=2))
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.2 * torch.randn_like(p))
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    return net.eval()


@pytest.fixture(scope="module")
def states() -> np.ndarray:
    return F.random_states(SIZE, 12, seed=21, min_plies=0, max_plies=40)


def reference(net: TakNet, states: np.ndarray):
    planes = F.new_planes(len(states), SIZE)
    F.encode(states, planes)
    mask = np.zeros((len(states), A.num_actions(SIZE)), bool)
    A.legal_mask(states, mask)
    with torch.no_grad():
        logits, wdl_logits, aux = net(torch.from_numpy(planes))
    return planes, mask, (logits.numpy(), wdl_logits.numpy(), aux.numpy())


def test_evaluator_outputs(model: TakNet, states: np.ndarray) -> None:
    ev = Evaluator.from_checkpoint(checkpoint_dict(model, half_komi=4), device="cpu")
    assert ev.device.type == "cpu" and ev.metadata["half_komi"] == 4
    priors, values, wdl = ev.evaluate(states)
    assert priors.shape == (12, A.num_actions(SIZE)) and priors.dtype == np.float32
    assert values.shape == (12,) and values.dtype == np.float32 and wdl.shape == (12, 3)
    _, mask, (logits, wdl_logits, _) = reference(model, states)
    assert np.all(priors[~mask] == 0)
    assert np.allclose(priors.sum(axis=1), 1.0, atol=1e-5)
    expect = masked_softmax(torch.from_numpy(logits), torch.from_numpy(mask)).numpy()
    assert np.allclose(priors, expect, atol=1e-6)
    wdl_ref = torch.softmax(torch.from_numpy(wdl_logits), dim=-1).numpy()
    assert np.allclose(wdl, wdl_ref, atol=1e-6)
    assert np.allclose(values, wdl[:, 0] - wdl[:, 2], atol=1e-6)
    assert np.all(np.abs(values) <= 1.0) and np.std(values) > 0
    # the same position always gets the same answer, whatever the batch around it
    p1, v1, _ = ev.evaluate(states[3:4])
    assert np.allclose(p1[0], priors[3], atol=1e-6) and np.isclose(v1[0], values[3], atol=1e-6)
    # results are fresh arrays: a later call does not overwrite them
    keep = priors.copy()
    ev.evaluate(states[::-1].copy())
    assert np.array_equal(priors, keep)


def test_evaluator_edge_cases(model: TakNet, states: np.ndarray) -> None:
    ev = Evaluator(TakNet(model.config), device="cpu")
    finished = states[:2].copy()
    finished[0, core.I_RESULT] = core.RESULT_ROAD_WHITE
    priors, values, _ = ev.evaluate(finished)
    assert np.all(priors[0] == 0) and not np.isnan(priors).any() and np.isfinite(values).all()
    assert np.isclose(priors[1].sum(), 1.0, atol=1e-5)
    empty = ev.evaluate(np.empty((0, core.STATE_LEN), np.int64))
    assert [a.shape[0] for a in empty] == [0, 0, 0]
    with pytest.raises(ValueError):
        ev.evaluate(F.random_states(6, 2, seed=0))
    with pytest.raises(ValueError):
        ev.evaluate_planes(np.zeros((2, 3, SIZE, SIZE), np.float32), np.zeros((2, 10), bool))
    # single position, evaluate_planes on the evaluator's own buffers
    planes, mask = ev.buffers(2)
    assert planes.shape == (2, model.config.in_channels, SIZE, SIZE) and mask.dtype == np.bool_
    one = ev.evaluate(states[0])
    F.encode(states[:2], planes)
    A.legal_mask(states[:2], mask)
    two = ev.evaluate_planes(planes, mask)
    assert np.allclose(one[0][0], two[0][0], atol=1e-6)
    assert str(resolve_device("auto")) == ("cuda" if torch.cuda.is_available() else "cpu")
    assert Evaluator(TakNet(model.config), device="cpu", bf16=True).bf16 is False


def test_evaluator_takes_new_weights(model: TakNet, states: np.ndarray) -> None:
    fresh = TakNet(model.config)
    ev = Evaluator(fresh, device="cpu")
    before = ev.evaluate(states)[0]
    ev.load_state_dict(model.state_dict())
    after = ev.evaluate(states)[0]
    ref = Evaluator.from_checkpoint(checkpoint_dict(model), device="cpu").evaluate(states)[0]
    assert not np.allclose(before, after) and np.allclose(after, ref, atol=1e-6)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_torchscript_export_parity(model: TakNet, states: np.ndarray, tmp_path: Path) -> None:
    path = tmp_path / "net.ts"
    meta = export_torchscript(model, path, {"half_komi": 4, "generation": 7})
    assert meta["size"] == SIZE and meta["feature_version"] == F.FEATURE_VERSION
    assert read_torchscript_metadata(path) == meta
    planes, mask, eager = reference(model, states)
    module = torch.jit.load(str(path))
    with torch.no_grad():
        out = module(torch.from_numpy(planes))  # batch 12, traced with batch 2
    for a, b in zip(out, eager, strict=True):
        assert np.abs(a.numpy() - b).max() < 1e-4
    ev = Evaluator.load(path, device="cpu")
    ref = Evaluator(TakNet(model.config), device="cpu")
    ref.load_state_dict(model.state_dict())
    for a, b in zip(ev.evaluate(states), ref.evaluate(states), strict=True):
        assert np.abs(a - b).max() < 1e-4
    assert ev.metadata["generation"] == 7
    with pytest.raises(ValueError):
        export_torchscript(model, tmp_path / "bad.ts", {"size": 6})
    # the caller's model is untouched by export (still eval mode, same device)
    assert not model.training


@pytest.mark.parametrize(
    "opset",
    [
        17,
        # the torch.export-based exporter (opset >= 18) takes 10-30 s on 2 cores: opt-in
        pytest.param(
            18,
            marks=pytest.mark.skipif(
                not os.environ.get("TAKZERO_TEST_ONNX_DYNAMO"),
                reason="set TAKZERO_TEST_ONNX_DYNAMO=1 to test the opset-18 exporter",
            ),
        ),
    ],
)
def test_onnx_export_parity(model: TakNet, states: np.ndarray, tmp_path: Path, opset: int) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    if opset >= 18:
        pytest.importorskip("onnxscript")
    import onnx
    import onnxruntime as ort

    path = tmp_path / "net.onnx"
    meta = export_onnx(model, path, {"half_komi": 2}, opset=opset)
    proto = onnx.load(str(path))
    assert {o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")} == {opset}
    assert read_onnx_metadata(path) == meta and meta["onnx_opset"] == opset
    planes, mask, eager = reference(model, states)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    out = session.run(None, {"planes": planes})
    for a, b in zip(out, eager, strict=True):
        assert a.shape == b.shape and np.abs(a - b).max() < 1e-4
    ev = Evaluator.load(path)
    ref = Evaluator(TakNet(model.config), device="cpu")
    ref.load_state_dict(model.state_dict())
    for a, b in zip(ev.evaluate(states), ref.evaluate(states), strict=True):
        assert np.abs(a - b).max() < 1e-4
    assert ev.metadata["half_komi"] == 2


def test_load_checkpoint_file(model: TakNet, states: np.ndarray, tmp_path: Path) -> None:
    path = tmp_path / "ckpt.pt"
    torch.save(checkpoint_dict(model, generation=3), path)
    ev = Evaluator.load(path, device="cpu")
    assert ev.metadata["generation"] == 3 and ev.config == model.config
    ref = Evaluator.from_checkpoint(checkpoint_dict(model), device="cpu")
    assert np.array_equal(ev.evaluate(states)[0], ref.evaluate(states)[0])


@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_two_threads_may_evaluate_at_once(model: TakNet, states: np.ndarray, backend: str) -> None:
    """The pipelined search of one game calls ``evaluate`` from two threads at once: each thread
    encodes into its own input buffers, so batches of the same size never mix (the shared buffer
    of one batch size gave one thread the other's positions)."""
    import threading

    from takzero.nn.backends import with_backend
    from takzero.search.driver import CachedEvaluator

    ev = with_backend(Evaluator.from_checkpoint(checkpoint_dict(model, half_komi=4), device="cpu"), backend)
    halves = (states[:6].copy(), states[6:].copy())  # two batches of the same size
    expect = [ev.evaluate(h) for h in halves]
    for target in (ev, CachedEvaluator(ev, 16)):  # the cache too: 16 slots, so entries evict
        wrong: list[int] = []

        def hammer(i: int, target=target, wrong=wrong) -> None:
            for _ in range(150):
                priors, values, _ = target.evaluate(halves[i])
                if not (np.allclose(priors, expect[i][0], atol=2e-3) and np.allclose(values, expect[i][1], atol=1e-4)):
                    wrong.append(i)

        threads = [threading.Thread(target=hammer, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not wrong, f"{len(wrong)} of 300 concurrent calls of {type(target).__name__} got another's answer"


@pytest.mark.parametrize("size", [3, 4, 5, 6, 7, 8])
def test_legal_softmax_is_the_masked_softmax_over_the_legal_mask(size: int) -> None:
    """``actions.legal_softmax`` (the onnxruntime path's priors, from the legal moves) gives the
    numbers of ``masked_softmax_np`` over ``legal_mask`` (the other paths'), edge rows included:
    a finished position, all legal logits -inf, a NaN and a +inf legal logit."""
    from takzero.nn.outputs import masked_softmax_np

    states = F.random_states(size, 24, seed=size, min_plies=0, max_plies=60)
    states[0, core.I_RESULT] = core.RESULT_ROAD_WHITE  # finished: no legal move
    a = A.num_actions(size)
    rng = np.random.default_rng(size)
    logits = (3 * rng.standard_normal((24, a))).astype(np.float32)
    mask = np.zeros((24, a), bool)
    A.legal_mask(states, mask)
    logits[1, mask[1]] = -np.inf
    logits[2, np.flatnonzero(mask[2])[0]] = np.nan
    logits[3, np.flatnonzero(mask[3])[-1]] = np.inf
    expect = masked_softmax_np(logits, mask)
    got = A.legal_softmax(states, logits)
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-7)  # NaN where NaN
    assert np.isnan(got[2][mask[2]]).all() and np.isnan(got[3][mask[3]]).all()
    assert not got[0].any() and not got[1].any()
    np.testing.assert_allclose(got[4:].sum(axis=1), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="size"):
        A.legal_softmax(states, logits[:, :-1])
    with pytest.raises(ValueError, match="logits"):
        A.legal_softmax(states, logits[:3])


def test_the_onnx_evaluator_gives_the_priors_of_evaluate_planes(model: TakNet, states: np.ndarray) -> None:
    """``evaluate`` on onnxruntime takes the priors from the legal moves (``legal_softmax``),
    ``evaluate_planes`` from a mask: the same numbers."""
    from takzero.nn.backends import with_backend

    ev = with_backend(Evaluator.from_checkpoint(checkpoint_dict(model, half_komi=4), device="cpu"), "onnx")
    priors, values, wdl = ev.evaluate(states)
    planes, mask = F.new_planes(len(states), SIZE), np.zeros((len(states), A.num_actions(SIZE)), bool)
    F.encode(states, planes, ev.layers, ev.feature_version)
    A.legal_mask(states, mask)
    p2, v2, w2 = ev.evaluate_planes(planes, mask)
    np.testing.assert_allclose(priors, p2, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(values, v2, atol=1e-6)
    np.testing.assert_allclose(wdl, w2, atol=1e-6)
    np.testing.assert_allclose(values, wdl[:, 0] - wdl[:, 2], atol=1e-6)
