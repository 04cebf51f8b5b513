"""The network's settings: :class:`NetworkSettings` (the shape of a network, shared with a run's
``model:`` section) and :class:`ModelConfig` (those plus the board size and the auxiliary heads:
everything needed to rebuild a ``TakNet``), their validation against the bounds of a stranger's
file (``MAX_*``, :data:`FIELD_RANGES`) and the upgrade of configs stored before the head table.

Nothing here builds a network; ``takzero.nn.model`` (which re-exports these names) holds the
network, its checkpoints and its loss.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from takzero.nn.actions import action_channels, num_actions
from takzero.nn.features import FEATURE_VERSION, FEATURE_VERSIONS, default_layers, num_channels
from takzero.nn.heads import head_names
from takzero.nn.quoting import short_repr
from takzero.nn.trunks import TRUNKS

__all__ = [
    "FIELD_RANGES",
    "MAX_BLOCKS",
    "MAX_CHANNELS",
    "MAX_HEAD_CHANNELS",
    "MAX_LAYERS",
    "MAX_PARAMETERS",
    "MAX_VALUE_HIDDEN",
    "ModelConfig",
    "NetworkSettings",
]


@dataclass
class NetworkSettings:
    """The shape of a network but its board size and auxiliary heads: the fields that a run's
    ``model:`` section (``takzero.config.ModelSection``, which derives from this class and adds
    the loss weights) and :class:`ModelConfig` (which adds ``size`` and ``heads``) share, declared
    once here. ``TrainConfig.model_config`` copies them by this class's fields
    (:meth:`ModelConfig.of`), so a new field here is a ``model.*`` key of a run at once (with its
    line under ``model:`` in ``configs/train.yaml``, which tests/test_config_sections.py asks for).

    Attributes:
        channels: width of the trunk.
        blocks: number of trunk blocks (residual blocks, attention blocks).
        layers: stack layers L of the input features (None -> ``default_layers(size)`` = N + 2).
        global_pool: use KataGo-style global-pooling bias blocks (and a pooled policy bias).
        gpool_channels: pooled channels per pooling block (None -> channels // 4, at least 8).
        gpool_every: every gpool_every-th block is a pooling block.
        policy_channels: hidden channels of the policy head.
        value_channels: hidden channels of the value head before pooling.
        value_hidden: width of the value head's fully connected layer.
        feature_version: the input feature version the net was built for (one of
            ``features.FEATURE_VERSIONS``; new nets: ``features.FEATURE_VERSION``). It fixes the
            input planes (``features.encode(..., version=feature_version)``) and their number.
        trunk: the body between the input planes and the heads, a name of
            :data:`takzero.nn.trunks.TRUNKS` (``resnet``, the default and every checkpoint from
            before the registry; ``transformer``). ``channels`` and ``blocks`` size either trunk;
            ``global_pool``, ``gpool_channels`` and ``gpool_every`` shape the ResNet's blocks (the
            policy head's pooled bias is on with ``global_pool`` for both).

    The trunks' own settings follow, each named in its row's ``settings`` with its default
    (``Trunk.settings``): None here means that default (:class:`ModelConfig` fills it in, for
    every row, as configs have always stored it; a run's config refuses a value for a trunk it
    does not use):

        attention_heads: heads of the transformer trunk's attention (``channels`` must be
            divisible by it; default ``DEFAULT_ATTENTION_HEADS``).
    """

    channels: int = 64
    blocks: int = 6
    layers: int | None = None
    global_pool: bool = True
    gpool_channels: int | None = None
    gpool_every: int = 3
    policy_channels: int = 32
    value_channels: int = 32
    value_hidden: int = 128
    feature_version: int = FEATURE_VERSION
    trunk: str = "resnet"
    attention_heads: int | None = None

    def network_settings(self) -> dict[str, Any]:
        """The :class:`NetworkSettings` fields of this object (of a subclass too), by name."""
        return {f.name: getattr(self, f.name) for f in fields(NetworkSettings)}

    def with_trunk_defaults(self) -> NetworkSettings:
        """A plain :class:`NetworkSettings` of these values with every trunk setting left None
        (of every row of :data:`takzero.nn.trunks.TRUNKS`) set to its row's default: what the
        rows' ``check`` read."""
        values = self.network_settings()
        for row in TRUNKS.values():
            for key, setting in row.settings.items():
                if values[key] is None:
                    values[key] = setting.default
        return NetworkSettings(**values)

    def trunk_setting_problem(self) -> tuple[str, str] | None:
        """``(key, why)`` for the first of this trunk's own settings out of its row's range
        (:class:`takzero.nn.trunks.Setting`), else None. Unset settings (None) are in range."""
        row = TRUNKS.get(self.trunk)
        for key, setting in row.settings.items() if row is not None else ():
            value = getattr(self, key)
            why = setting.problem(value) if value is not None else None
            if why:
                return key, why
        return None


@dataclass
class ModelConfig(NetworkSettings):
    """Everything needed to rebuild a ``TakNet`` (stored in checkpoints and exported files): the
    :class:`NetworkSettings` (the fields of a run's ``model:`` section, documented there), the
    board size and the auxiliary heads.

    Attributes:
        size: board size N (3..8).
        heads: the optional auxiliary heads, names of :data:`takzero.nn.heads.HEADS` (kept
            without repeats, in table order). Default none: a stored config without the field
            rebuilds the same network; one from before the table, with the flags
            ``ownership_head``/``opponent_policy_head``/``soft_policy_head``, is read by
            :meth:`from_dict` (a flag that is true becomes the head's name).

    ``layers``, ``gpool_channels`` and the trunks' settings left None are filled in when it is
    built (the feature default for the size, channels // 4, each row's default).

    Raises ValueError (naming the field) for a size outside 3..8, an unknown trunk, head or
    feature version, or a value a trunk refuses.
    """

    size: int = 6
    heads: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, settings: NetworkSettings, size: int, heads: list[str] | None = None) -> ModelConfig:
        """The config of the network ``settings`` describe (a run's ``model:`` section) on a
        ``size`` board with the auxiliary ``heads``: the one copy of the shared fields."""
        return cls(size=size, heads=list(heads or []), **settings.network_settings())

    def __post_init__(self) -> None:
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
                raise ValueError(f"model config {name} must be a whole number, got {_shown(value)}")
        if not 3 <= self.size <= 8:
            raise ValueError(f"size must be 3..8, got {self.size}")
        if self.layers is None:
            self.layers = default_layers(self.size)
        if self.gpool_channels is None:
            self.gpool_channels = max(8, self.channels // 4)
        for key, value in self.with_trunk_defaults().network_settings().items():
            setattr(self, key, value)
        if self.channels < 1 or self.blocks < 0 or self.layers < 1 or self.gpool_every < 1:
            raise ValueError(f"invalid model config {short_repr(asdict(self), 200)}")
        for name, bound in _BOUNDS.items():  # before anything is sized by them
            value = getattr(self, name)
            if value > bound:
                raise ValueError(f"model config {name}={_shown(value)} is over the bound of {bound} "
                                 f"({_BOUND_NAMES[name]}); no network of takzero is that large")
        if min(self.policy_channels, self.value_channels, self.value_hidden) < 1:
            raise ValueError(f"invalid model config {short_repr(asdict(self), 200)}")
        if self.feature_version not in FEATURE_VERSIONS:
            raise ValueError(
                f"model built for feature version {self.feature_version}, this code encodes "
                f"versions {FEATURE_VERSIONS}"
            )
        row = TRUNKS.get(self.trunk)
        if row is None:
            raise ValueError(f"trunk: unknown trunk {short_repr(self.trunk)}; the trunks are {sorted(TRUNKS)}")
        refused = self.trunk_setting_problem()
        if refused:
            raise ValueError(f"model config {refused[0]}={_shown(getattr(self, refused[0]))} {refused[1]} "
                             f"(a setting of the {self.trunk} trunk)")
        refused = row.check(self)
        if refused:
            raise ValueError(f"trunk {self.trunk!r}: {refused[1]}")
        self.heads = head_names(self.heads)
        params = self.estimated_parameters()
        if params > MAX_PARAMETERS:
            raise ValueError(f"model config {self.blocks} blocks x {self.channels} channels: some "
                             f"{params:,} parameters, over the bound of {MAX_PARAMETERS:,} "
                             "(MAX_PARAMETERS)")

    def estimated_parameters(self) -> int:
        """An upper estimate of the network's parameters, from the config alone (nothing is
        built): the stem, ``blocks`` of 18 c^2 (two 3x3 convs; a transformer block is 12 c^2)
        plus their pooling, the heads. ``__post_init__`` refuses a config over
        :data:`MAX_PARAMETERS`."""
        c, n = self.channels, self.size
        pc, vc, vh = self.policy_channels, self.value_channels, self.value_hidden
        ac = action_channels(n)
        gp = self.gpool_channels or 0
        trunk = self.in_channels * c * 9 + self.blocks * (18 * c * c + 6 * c * gp + 4 * c) + c * n * n
        policy = c * pc + pc * ac * (1 + len(self.heads)) + 2 * pc * pc + 4 * pc + ac
        value = c * vc + 2 * vc * vh + 4 * vh + 4 * vc + c
        return int(trunk + policy + value)

    @property
    def in_channels(self) -> int:
        """Input planes C = features.num_channels(layers, feature_version)."""
        assert self.layers is not None  # set by __post_init__
        return num_channels(self.layers, self.feature_version)

    @property
    def num_actions(self) -> int:
        """Policy size A = actions.num_actions(size)."""
        return num_actions(self.size)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-serialisable) of the fields."""
        return asdict(self)

    @staticmethod
    def upgrade_dict(d: Mapping[str, Any]) -> dict[str, Any]:
        """A stored config dict in today's keys: the head flags of configs from before the head
        table (``ownership_head: true``, ...) become names in ``heads`` (present, possibly empty,
        whenever a flag was); other keys are kept as they are, missing ones stay missing."""
        out = {k: v for k, v in d.items() if k not in _OLD_HEAD_FLAGS}
        flags = [k for k in _OLD_HEAD_FLAGS if k in d]
        if flags:
            heads = list(out.get("heads") or [])
            heads += [_OLD_HEAD_FLAGS[k] for k in flags if d[k] and _OLD_HEAD_FLAGS[k] not in heads]
            out["heads"] = heads
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ModelConfig:
        """Inverse of ``to_dict``, also for every config stored before (:meth:`upgrade_dict`);
        unknown keys raise ValueError."""
        d = cls.upgrade_dict(d)
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            keys = sorted(k if isinstance(k, str) else short_repr(k) for k in unknown)
            raise ValueError(f"unknown model config keys {short_repr(keys, 200)}")
        return cls(**d)


#: Bounds of a model config's sizes, checked before a network is built (a file's config is a
#: stranger's word): generous for real networks (AlphaZero's 20-40 blocks of 256 channels).
MAX_CHANNELS = 1024
MAX_BLOCKS = 256
#: policy_channels, value_channels, gpool_channels.
MAX_HEAD_CHANNELS = 1024
MAX_VALUE_HIDDEN = 4096
#: Stack layers of the input features (a 8x8 board's default is 10).
MAX_LAYERS = 64
#: The most parameters (:meth:`ModelConfig.estimated_parameters`): 1 GB of float32 weights; a
#: 40-block, 256-channel ResNet has some 47 million.
MAX_PARAMETERS = 250_000_000
_BOUND_NAMES = {
    "channels": "MAX_CHANNELS", "blocks": "MAX_BLOCKS", "layers": "MAX_LAYERS",
    "policy_channels": "MAX_HEAD_CHANNELS", "value_channels": "MAX_HEAD_CHANNELS",
    "gpool_channels": "MAX_HEAD_CHANNELS", "value_hidden": "MAX_VALUE_HIDDEN",
}
_BOUNDS = {name: globals()[const] for name, const in _BOUND_NAMES.items()}
#: The range of each sizing field of :class:`NetworkSettings` (None: no upper bound), for the
#: checks of a run's ``model:`` section (``takzero.config.ModelSection``).
FIELD_RANGES: dict[str, tuple[int, int | None]] = {
    "channels": (1, MAX_CHANNELS), "blocks": (0, MAX_BLOCKS), "layers": (1, MAX_LAYERS),
    "gpool_channels": (1, MAX_HEAD_CHANNELS), "gpool_every": (1, None),
    "policy_channels": (1, MAX_HEAD_CHANNELS), "value_channels": (1, MAX_HEAD_CHANNELS),
    "value_hidden": (1, MAX_VALUE_HIDDEN),
}
#: The whole-number fields (every ``int`` field, a trunk's own settings included), checked first.
_INT_FIELDS = tuple(f.name for f in fields(ModelConfig) if f.type in ("int", "int | None"))


def _shown(value: Any) -> str:
    """A repr of ``value`` of at most 40 characters, for a message (:func:`short_repr`: bounded
    time and memory whatever a file's value holds)."""
    return short_repr(value, 40)


#: Head flags of the configs stored before the head table, and the head each one turned on.
_OLD_HEAD_FLAGS = {
    "ownership_head": "ownership",
    "opponent_policy_head": "opponent_policy",
    "soft_policy_head": "soft_policy",
}
