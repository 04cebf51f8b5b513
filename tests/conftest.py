"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def one_torch_thread():
    """Batch-1 network calls: one torch thread (as the CLIs use) is much faster than several
    on a busy machine; the setting is restored after each test."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _tiny_tei_model(tmp_path: Path, size: int = 4) -> Path:
    """A tiny untrained network (8 channels, 1 block, trained-for komi 1), exported to
    TorchScript as ``tmp_path/model.pt``."""
    import torch

    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
    from takzero.pipeline.export import export_checkpoint

    torch.manual_seed(0)
    model = TakNet(ModelConfig(size=size, channels=8, blocks=1))
    ckpt = checkpoint_dict(model, generation=3, run_name="tiny", half_komi=2)
    out = tmp_path / "model.pt"
    export_checkpoint(ckpt, out, warn=lambda _m: None)
    return out


@pytest.fixture
def tiny_tei_model():
    """``make(tmp_path, size=4) -> Path``: a tiny exported model for the TEI engine tests."""
    return _tiny_tei_model
