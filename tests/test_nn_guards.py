"""The promises and error messages of the docstrings in ``takzero/nn`` (model.py, inference.py):
the masked softmax (torch and NumPy) and the policy loss tried with -inf, +inf and NaN logits,
legal and illegal, and all-masked rows; every ValueError/TypeError a docstring names, raised with
its message."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from takzero.nn.backends import with_backend
from takzero.nn.inference import Evaluator
from takzero.nn.model import (
    LossWeights,
    ModelConfig,
    TakNet,
    masked_log_softmax,
    masked_softmax,
    ownership_loss,
    policy_loss,
    total_loss,
    value_loss,
)
from takzero.nn.model_export import export_onnx, export_torchscript
from takzero.nn.outputs import masked_softmax_np

INF, NAN = math.inf, math.nan

#: (name, logits row, legal mask row, expected probabilities; None = NaN on the legal entries)
ROWS = [
    ("finite", [1.0, 2.0, 3.0, 0.0], [1, 1, 0, 0], "softmax"),
    ("-inf on a legal entry", [-INF, 2.0, 3.0, 0.0], [1, 1, 0, 1], "softmax"),
    ("-inf on every legal entry", [-INF, -INF, 3.0, 0.0], [1, 1, 0, 0], "zeros"),
    ("all masked", [1.0, 2.0, 3.0, 0.0], [0, 0, 0, 0], "zeros"),
    ("all masked, illegal +inf and NaN", [INF, NAN, -INF, 0.0], [0, 0, 0, 0], "zeros"),
    ("+inf and NaN on illegal entries", [INF, NAN, 1.0, 2.0], [0, 0, 1, 1], "softmax"),
    ("huge finite", [1e30, -1e30, 3e38, 0.0], [1, 1, 1, 0], "softmax"),
    ("NaN on a legal entry", [NAN, 2.0, 3.0, 0.0], [1, 1, 0, 0], "nan"),
    ("+inf on a legal entry", [INF, 2.0, 3.0, 0.0], [1, 1, 0, 0], "nan"),
]


def _expected(logits: list[float], legal: list[int], kind: str) -> np.ndarray:
    out = np.zeros(len(logits), np.float64)
    idx = [i for i, m in enumerate(legal) if m]
    if kind == "nan":
        out[idx] = np.nan
    elif kind == "softmax":
        x = np.array([logits[i] for i in idx], np.float64)
        finite = np.isfinite(x)
        e = np.where(finite, np.exp(x - x[finite].max()), 0.0)
        out[idx] = e / e.sum()
    return out


@pytest.mark.parametrize("name,logits,legal,kind", ROWS, ids=[r[0] for r in ROWS])
def test_masked_softmax_on_non_finite_and_empty_rows(name, logits, legal, kind) -> None:
    lt = torch.tensor([logits], dtype=torch.float32)
    mt = torch.tensor([legal], dtype=torch.bool)
    want = _expected(logits, legal, kind)
    for got in (masked_softmax(lt, mt)[0].numpy(), masked_softmax_np(lt.numpy(), mt.numpy())[0]):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, atol=1e-6, equal_nan=True)
        assert np.all(got[~mt[0].numpy()] == 0)  # illegal entries: 0, whatever they hold
    logp = masked_log_softmax(lt, mt)[0]
    assert torch.all(torch.isneginf(logp[~mt[0]]))
    if kind != "nan":
        assert not torch.isnan(logp).any()
        # the gradient is finite, and zero on illegal entries and on empty rows
        x = lt.clone().requires_grad_(True)
        out = masked_log_softmax(x, mt)
        out.masked_fill(~torch.isfinite(out.detach()), 0.0).sum().backward()
        assert torch.isfinite(x.grad).all() and torch.all(x.grad[~mt] == 0)
        if kind == "zeros":
            assert torch.all(x.grad == 0)


def test_policy_loss_is_finite_unless_the_target_wants_a_ruled_out_move() -> None:
    """Rows: -inf on a legal entry the target gives no mass, an empty row (all masked, with NaN
    and +inf on its illegal entries), NaN/+inf on illegal entries: finite loss and gradient. A
    target on a -inf legal entry costs +inf (the trainer skips such a step)."""
    logits = torch.tensor([[-INF, 1.0, 2.0, 0.0], [NAN, INF, 0.0, 0.0], [INF, NAN, 1.0, 2.0]],
                          requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0], [0, 0, 0, 0], [0, 0, 1, 1]], dtype=torch.bool)
    target = torch.tensor([[0.0, 0.5, 0.5, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.3, 0.7]])
    loss = policy_loss(logits, mask, target)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    assert torch.all(logits.grad[1] == 0) and torch.all(logits.grad[~mask] == 0)
    wants = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    assert policy_loss(logits[:1].detach(), mask[:1], wants) == INF


# -- error messages of nn/model.py ------------------------------------------------------------------


def test_model_config_and_loss_errors_name_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="size must be 3..8, got 9"):
        ModelConfig(size=9)
    with pytest.raises(ValueError, match="invalid model config"):
        ModelConfig(size=5, channels=0)
    with pytest.raises(ValueError, match="model built for feature version 99"):
        ModelConfig(size=5, feature_version=99)
    with pytest.raises(ValueError, match=r"unknown model config keys \['colour'\]"):
        ModelConfig.from_dict({"size": 5, "colour": 1})
    with pytest.raises(ValueError, match=r"logits \(2, 3\) and mask \(2, 4\) differ"):
        masked_log_softmax(torch.zeros(2, 3), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"target \(2, 2\) does not fit \(2, 3\)"):
        value_loss(torch.zeros(2, 3), torch.zeros(2, 2))
    with pytest.raises(ValueError, match=r"ownership logits .* and targets .* differ"):
        ownership_loss(torch.zeros(2, 9), torch.zeros(2, 4))
    outputs = (torch.zeros(2, 4), torch.zeros(2, 3), torch.zeros(2, 1))
    mask, pol, val = torch.ones(2, 4, dtype=torch.bool), torch.full((2, 4), 0.25), torch.zeros(2)
    with pytest.raises(ValueError, match="size is needed for the auxiliary loss"):
        total_loss(outputs, mask, pol, val, target_flat_diff=torch.zeros(2))
    with pytest.raises(ValueError, match="the ownership loss weight is 1.5 but the model has no ownership head"):
        total_loss(outputs, mask, pol, val, weights=LossWeights(heads={"ownership": 1.5}))
    heads = {"ownership_logit": torch.zeros(2, 9), "ownership": torch.zeros(2, 9)}
    with pytest.raises(ValueError, match="the ownership loss weight is 1.5 but the batch has no ownership target"):
        total_loss(outputs, mask, pol, val, weights=LossWeights(heads={"ownership": 1.5}), heads=heads,
                   targets={})


# -- error messages of nn/inference.py --------------------------------------------------------------


@pytest.fixture(scope="module")
def net():
    torch.manual_seed(0)
    return TakNet(ModelConfig(size=4, channels=8, blocks=1)).eval()


def test_evaluator_construction_and_input_errors(net) -> None:
    with pytest.raises(ValueError, match="metadata is required unless model is a PolicyValueNet"):
        Evaluator(torch.nn.Linear(2, 2), device="cpu")
    meta = Evaluator(net, device="cpu").metadata
    with pytest.raises(ValueError, match="metadata num_actions does not match"):
        Evaluator(net, device="cpu", metadata={**meta, "num_actions": 7})
    with pytest.raises(ValueError, match="a model or an ONNX session is needed"):
        Evaluator(None, device="cpu", metadata=meta)
    ev = Evaluator(net, device="cpu")
    with pytest.raises(ValueError, match=r"states must be \(B, \d+\) int64"):
        ev.evaluate(np.zeros((2, 3), np.int64))
    from takzero.game import Position

    with pytest.raises(ValueError, match="this model plays size 4"):
        ev.evaluate(Position.start(5).state[None, :].copy())
    with pytest.raises(ValueError, match=r"expected planes .* and masks"):
        ev.evaluate_planes(np.zeros((1, 3, 4, 4), np.float32), np.zeros((1, 9), bool))
    with pytest.raises(ValueError, match=r"logits .* and mask .* must be the same \(B, A\)"):
        masked_softmax_np(np.zeros(4, np.float32), np.zeros(4, bool))


def test_files_without_takzero_metadata_and_other_kinds_are_refused(net, tmp_path: Path) -> None:
    plain_ts = tmp_path / "plain.pt"
    torch.jit.trace(torch.nn.Linear(2, 2), torch.zeros(1, 2)).save(str(plain_ts))
    with pytest.raises(ValueError, match="plain.pt has no takzero metadata"):
        Evaluator.from_torchscript(plain_ts, device="cpu")
    ts = tmp_path / "model.pt"
    export_torchscript(net, ts)
    ev = Evaluator.load(ts, device="cpu")
    with pytest.raises(TypeError, match=r"only an eager network \(PolicyValueNet\) evaluator can take new weights"):
        ev.load_state_dict(net.state_dict())
    with pytest.raises(ValueError, match="the onnx backend needs a checkpoint"):
        with_backend(ev, "onnx")
    with pytest.raises(ValueError, match="backend must be one of"):
        with_backend(ev, "tpu")
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    onnx_path = tmp_path / "model.onnx"
    export_onnx(net, onnx_path)
    import onnx

    bare = onnx.load(str(onnx_path))
    del bare.metadata_props[:]
    onnx.save(bare, str(tmp_path / "bare.onnx"))
    with pytest.raises(ValueError, match="bare.onnx has no takzero metadata"):
        Evaluator.from_onnx(tmp_path / "bare.onnx")
    assert json.loads(json.dumps(Evaluator.from_onnx(onnx_path).metadata))["size"] == 4
