"""Network shapes by name, KataGo-style: :data:`NETWORK_PRESETS` (``b<blocks>c<channels>``, as
KataGo's ``b18c384``) and :func:`network_preset`; a run names one with ``model.preset=<name>``
(``takzero.config.ModelSection``).
"""

from __future__ import annotations

from typing import Any

from takzero.nn.quoting import short_repr

__all__ = ["NETWORK_PRESETS", "network_preset"]

#: Network shapes by name, KataGo-style (``b<blocks>c<channels>``, as KataGo's ``b18c384``): the
#: :class:`~takzero.nn.model_config.NetworkSettings` fields each preset sets, chosen with ``model.preset=<name>`` (a
#: run's ``model:`` section, ``takzero.config.ModelSection``); a ``model.*`` key given always
#: wins (``takzero.config.sections.PRESET_FIELDS``: the fields a row may set). The presets of
#: configs/config/ use them (``6x6``: ``b4c32``); a new shape is one row here.
NETWORK_PRESETS: dict[str, dict[str, Any]] = {
    "b1c16": {"blocks": 1, "channels": 16},  # the smoke run's
    "b2c32": {"blocks": 2, "channels": 32},  # 3x3
    "b4c32": {"blocks": 4, "channels": 32},  # 5x5 and 6x6 on a CPU machine
    "b4c48": {"blocks": 4, "channels": 48},  # 4x4
    "b6c64": {"blocks": 6, "channels": 64},  # 5x5: the schema's defaults
    "b8c96": {"blocks": 8, "channels": 96},  # 7x7
    "b10c128": {"blocks": 10, "channels": 128},  # 8x8, 6x6 on a GPU
    "b15c192": {"blocks": 15, "channels": 192},  # larger GPU runs
    "b20c256": {"blocks": 20, "channels": 256},  # AlphaZero's chess and shogi width
}


def network_preset(name: str) -> dict[str, Any]:
    """The :class:`~takzero.nn.model_config.NetworkSettings` fields of the preset ``name`` (a copy, from
    :data:`NETWORK_PRESETS`). Raises ValueError naming the presets for an unknown name."""
    if name not in NETWORK_PRESETS:
        raise ValueError(f"unknown network preset {short_repr(name, 40)}: one of {', '.join(NETWORK_PRESETS)}")
    return dict(NETWORK_PRESETS[name])
