"""Shared pytest fixtures."""

from __future__ import annotations

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
