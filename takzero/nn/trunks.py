"""The trunk registry: the body of the network between the input planes and the heads.

A trunk maps the input planes (B, C_in, N, N) float32 (``features.encode``) to hidden planes
(B, channels, N, N) float32, from which every head of :class:`takzero.nn.model.TakNet` reads.
``ModelConfig.trunk`` names one row of :data:`TRUNKS`; a new trunk is one row here (its name, its
builder, one line of description). A setting of its own is four edits: its field (default None)
in ``takzero.nn.model_config.NetworkSettings``, its name and default in the row's ``settings`` (with its
test in the row's ``check``), the builder reading it, and its line under ``model:`` in
``configs/train.yaml`` (``attention_heads`` is the transformer's; tests/test_nn_trunks.py walks a
toy one). The run's ``model.*`` key, its refusal with another trunk, the default filled in and the
checkpoint's config follow. Heads, losses, inference, ONNX export and the search never see which
trunk a network has.

Rows:

* ``resnet``: stem conv3x3 -> BN -> ReLU, then ``blocks`` residual blocks (conv3x3-BN-ReLU-
  conv3x3-BN, skip, ReLU; He et al. 2016 as in AlphaZero). With ``global_pool`` every
  ``gpool_every``-th block (blocks gpool_every-1, 2*gpool_every-1, ...) is a KataGo global-pooling
  block (Wu 2019, arXiv:1902.10565, section 3.3): its first conv also produces ``gpool_channels``
  channels whose mean and max over the board go through a linear layer into a per-channel bias
  before the second conv. Each block's last BN scale starts at 0, so the tower starts as identity.
* ``transformer``: attention over the N*N squares as tokens, in the spirit of Leela Chess Zero's
  BT nets (one token per square, learned positional embedding; no smolgen): a conv3x3 stem to
  ``channels`` (as the ResNet's, so the tokens see their neighbourhood from the start), a learned
  (N*N, channels) position embedding, then ``blocks`` pre-LayerNorm encoder blocks (Xiong et al.
  2020, "On Layer Normalization in the Transformer Architecture"): ``x + MHA(LN(x))`` with
  ``attention_heads`` heads, then ``x + FFN(LN(x))`` with a GELU FFN of width ``4 * channels``
  (Vaswani et al. 2017), and a final LayerNorm. The output projection of each branch starts at 0
  (identity at start, as the ResNet). Attention is written out (matmul, softmax, matmul) so that
  the ONNX export (opset 17, TorchScript-based) and onnxruntime run it as plain ops.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

if TYPE_CHECKING:  # the config module imports this table (annotations only)
    from takzero.nn.model_config import ModelConfig, NetworkSettings

__all__ = [
    "TRUNKS", "DEFAULT_ATTENTION_HEADS", "Setting", "Trunk", "build_trunk", "pool_mean_max", "ResNetTrunk",
    "TransformerTrunk",
]


def pool_mean_max(x: Tensor) -> Tensor:
    """(B, C, N, N) -> (B, 2C): mean and max over the board (KataGo's global pooling, without its
    board-size term, which a single-size net does not need)."""
    # adaptive pools export to ONNX GlobalAveragePool/GlobalMaxPool (no opset-dependent axes)
    return torch.cat(
        [F.adaptive_avg_pool2d(x, 1).flatten(1), F.adaptive_max_pool2d(x, 1).flatten(1)], dim=1
    )


class ResBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN + skip, ReLU; (B, C, N, N) -> (B, C, N, N)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(x + y)


class GlobalPoolBlock(nn.Module):
    """Residual block whose first conv also yields ``gpool`` channels pooled (mean, max) over the
    board into a per-channel bias of the other channels (KataGo's global pooling bias);
    (B, C, N, N) -> (B, C, N, N)."""

    def __init__(self, channels: int, gpool: int) -> None:
        super().__init__()
        self.channels = channels
        self.conv1 = nn.Conv2d(channels, channels + gpool, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels + gpool)
        self.pool_fc = nn.Linear(2 * gpool, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: Tensor) -> Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        a = y[:, : self.channels]
        g = y[:, self.channels :]
        a = a + self.pool_fc(pool_mean_max(g))[:, :, None, None]
        y = self.bn2(self.conv2(a))
        return F.relu(x + y)


class ResNetTrunk(nn.Module):
    """The ``resnet`` row (module docstring): (B, C_in, N, N) -> (B, channels, N, N).

    Its parameters are ``stem.*`` and ``tower.*`` (under ``trunk.`` in a ``TakNet``; checkpoints
    from before the registry, with top-level ``stem.*``/``tower.*``, are renamed on load by
    ``TakNet.load_state_dict``)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        c = cfg.channels
        self.stem = nn.Sequential(
            nn.Conv2d(cfg.in_channels, c, 3, padding=1, bias=False),
            nn.BatchNorm2d(c),
            nn.ReLU(inplace=True),
        )
        tower: list[nn.Module] = []
        for i in range(cfg.blocks):
            if cfg.global_pool and i % cfg.gpool_every == cfg.gpool_every - 1:
                tower.append(GlobalPoolBlock(c, int(cfg.gpool_channels or 8)))
            else:
                tower.append(ResBlock(c))
        self.tower = nn.Sequential(*tower)

    def init_weights(self) -> None:
        """Residual branches start near identity (each block's last BN scale 0); the convs'
        Kaiming init is ``TakNet``'s, over every conv of the network."""
        for block in self.tower:
            nn.init.zeros_(cast(ResBlock | GlobalPoolBlock, block).bn2.weight)

    def forward(self, planes: Tensor) -> Tensor:
        return self.tower(self.stem(planes))


class AttentionBlock(nn.Module):
    """Pre-LN encoder block over T tokens: ``x + MHA(LN(x))``, ``x + FFN(LN(x))``;
    (B, T, D) -> (B, T, D). Multi-head attention with D / heads dims per head, scaled by
    1/sqrt(D / heads) (Vaswani et al. 2017, eq. 1), written out for a plain ONNX graph."""

    def __init__(self, dim: int, heads: int, ffn_mult: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.ffn_in = nn.Linear(dim, ffn_mult * dim)
        self.ffn_out = nn.Linear(ffn_mult * dim, dim)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        qkv = self.qkv(self.norm1(x)).reshape(b, t, 3, self.heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (B, H, T, Dh)
        att = torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(self.head_dim)), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.ffn_out(F.gelu(self.ffn_in(self.norm2(x))))


class TransformerTrunk(nn.Module):
    """The ``transformer`` row (module docstring): (B, C_in, N, N) -> (B, channels, N, N), with
    ``channels`` divisible by ``attention_heads``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        c, n = cfg.channels, cfg.size
        self.stem = nn.Sequential(
            nn.Conv2d(cfg.in_channels, c, 3, padding=1, bias=False),
            nn.BatchNorm2d(c),
            nn.ReLU(inplace=True),
        )
        self.position = nn.Parameter(torch.zeros(1, n * n, c))
        heads = int(cfg.attention_heads or DEFAULT_ATTENTION_HEADS)  # filled in by ModelConfig
        self.blocks = nn.ModuleList([AttentionBlock(c, heads) for _ in range(cfg.blocks)])
        self.norm = nn.LayerNorm(c)

    def init_weights(self) -> None:
        """Position embedding N(0, 0.02) (as BERT/ViT); each branch's output projection 0, so
        every block starts as identity."""
        nn.init.normal_(self.position, std=0.02)
        for block in self.blocks:
            block = cast(AttentionBlock, block)
            for layer in (block.proj, block.ffn_out):
                nn.init.zeros_(layer.weight)
                nn.init.zeros_(layer.bias)

    def forward(self, planes: Tensor) -> Tensor:
        x = self.stem(planes)  # (B, C, N, N)
        b, c, n, _ = x.shape
        tokens = x.flatten(2).transpose(1, 2) + self.position  # (B, N*N, C), square-major
        for block in self.blocks:
            tokens = block(tokens)
        return self.norm(tokens).transpose(1, 2).reshape(b, c, n, n)


@dataclass(frozen=True)
class Setting:
    """A trunk's own setting in its row (:attr:`Trunk.settings`): a whole number, its default
    and its range (checked by ``ModelConfig`` and by a run's ``model:`` section, naming the key)."""

    default: int
    min: int = 1
    max: int | None = None

    def problem(self, value: int) -> str | None:
        """Why ``value`` is out of range ("must be 1..16"), or None."""
        if self.min <= value and (self.max is None or value <= self.max):
            return None
        return f"must be {self.min}..{self.max}" if self.max is not None else f"must be >= {self.min}"


@dataclass(frozen=True)
class Trunk:
    """One row of :data:`TRUNKS`.

    Attributes:
        name: the value of ``ModelConfig.trunk`` (``model.trunk`` in a run's config).
        build: ``build(cfg) -> nn.Module`` from a :class:`~takzero.nn.model_config.ModelConfig`, mapping
            (B, cfg.in_channels, N, N) float32 to (B, cfg.channels, N, N) float32; the module
            may have ``init_weights()``, called once after ``TakNet`` has initialised every conv
            (Kaiming).
        check: ``check(cfg) -> (key, why) | None``: the field of ``cfg`` (a
            :class:`~takzero.nn.model_config.NetworkSettings`, every trunk setting filled in) that does
            not fit this trunk and why, or None when it fits. ``ModelConfig`` raises ValueError
            with ``why``; a run's config names ``model.<key>``.
        description: one line for ``--help`` texts and docs.
        settings: the settings only this trunk reads, by name, each a :class:`Setting` (default
            and range) and a field of ``NetworkSettings`` (a ``model.*`` key of a run's config,
            default None there: the setting's default); refused by a run's config while
            ``model.trunk`` names another trunk (``takzero.config.ModelSection``) rather than
            silently ignored. ``check`` need only test what spans settings (a divisibility).
    """

    name: str
    build: Callable[[ModelConfig], nn.Module]
    check: Callable[[NetworkSettings], tuple[str, str] | None]
    description: str
    settings: Mapping[str, Setting] = field(default_factory=dict)


#: The transformer's attention heads when ``model.attention_heads`` is not set.
DEFAULT_ATTENTION_HEADS = 4


def _check_resnet(cfg: NetworkSettings) -> tuple[str, str] | None:
    return None


def _check_transformer(cfg: NetworkSettings) -> tuple[str, str] | None:
    if cfg.blocks < 1:
        return "blocks", f"the transformer trunk needs blocks >= 1 (blocks={cfg.blocks}: no attention at all)"
    heads = cfg.attention_heads or DEFAULT_ATTENTION_HEADS
    if cfg.channels % heads:
        return "attention_heads", (f"the transformer trunk needs channels ({cfg.channels}) divisible by "
                                   f"attention_heads ({heads})")
    return None


TRUNKS: dict[str, Trunk] = {
    row.name: row
    for row in (
        Trunk("resnet", ResNetTrunk, _check_resnet,
              "residual conv tower, optional KataGo global pooling (AlphaZero, KataGo)"),
        Trunk("transformer", TransformerTrunk, _check_transformer,
              "pre-LN attention over the squares, learned positions (lc0 BT-style, no smolgen)",
              settings={"attention_heads": Setting(DEFAULT_ATTENTION_HEADS, 1, 1024)}),
    )
}


def build_trunk(cfg: ModelConfig) -> nn.Module:
    """The trunk of ``cfg.trunk``. Raises ValueError for an unknown name (naming the rows) or a
    config the trunk refuses (its ``check``)."""
    row = TRUNKS.get(cfg.trunk)
    if row is None:
        raise ValueError(f"unknown trunk {cfg.trunk!r}; the trunks are {sorted(TRUNKS)}")
    refused = row.check(cfg)
    if refused:
        raise ValueError(refused[1])
    return row.build(cfg)
