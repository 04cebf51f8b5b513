"""The TEI options that do more than set an attribute, as the session's methods: ``setoption``
itself (:meth:`OptionSetters._cmd_setoption`: the line parsed, the row of
``takzero.protocols.tei.options.OPTIONS`` found, its value checked) and the setters its rows
name (``HalfKomi``, ``Fallback``, ``TreeNodes``, ``Model``). :class:`OptionSetters` is a part of
:class:`takzero.protocols.tei.engine.TEIEngine` (the engine is one), as
:class:`~takzero.protocols.tei.seat.PlayerSeat` is; it works on the session's attributes, listed in
its body and PlayerSeat's, and says what it refused with the session's ``info``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from takzero.game.position import Position
from takzero.protocols.tei.lines import TEIProtocolError, clip, parse_setoption
from takzero.protocols.tei.options import OPTIONS, TREE_BYTES_PER_NODE, MemoryBudget
from takzero.protocols.tei.seat import PlayerSeat, check_player_spec, network_file_digest

__all__ = ["OptionSetters", "load_refusal"]

#: A loader's parser detail at the end of its message, "(...)" (one level of nesting).
_PARSER_DETAIL = re.compile(r"\s*\((?:[^()]|\([^()]*\))*\)\s*$")


def load_refusal(e: BaseException) -> str:
    """What the peer is told of a model file that did not load: the loader's first line without
    the parser's detail in parentheses at its end (``not a torch.save file (Unsupported operand
    83)`` quoted the file's first byte: ``setoption name Model`` takes any path, and a WebSocket
    peer is any web page, so nothing read from a file that is not a model goes back to it)."""
    text = str(e).strip()
    line = text.splitlines()[0] if text else type(e).__name__
    return _PARSER_DETAIL.sub("", line) or type(e).__name__


class OptionSetters(PlayerSeat):
    """``setoption`` and the options' setters of a TEI session (module doc)."""

    # the session's state and steps that the setters read and call (set by TEIEngine)
    model_path: str | None
    model_digest: str | None
    nodes_default: int | None
    _komi_chosen: bool
    _komi_warned: set[tuple[str | None, int]]
    _memory: MemoryBudget
    _new_position: Callable[[Position, list[int]], None]
    _new_game: Callable[[int], None]

    def _cmd_setoption(self, args: list[str]) -> None:
        text = " ".join(args)
        try:
            name, value = parse_setoption(args)
        except TEIProtocolError as e:
            self.info(str(e))
            return
        option = OPTIONS.get(name.lower())
        if option is None:
            shown = text if len(text) <= 60 else text[:57] + "..."
            self.info(f"setoption: unknown option '{name[:40]}' ({shown})")
            return
        try:
            parsed = option.parse(value)
        except ValueError as e:
            self.info(f"{e}; keeping {option.text(self)}")
            return
        option.set(self, parsed)

    def _set_half_komi(self, hk: int, chosen: bool = True) -> None:
        self._komi_chosen = self._komi_chosen or chosen
        if hk == self.half_komi:
            self._check_model_komi()
            return
        self.half_komi = hk
        # The current game goes on under the new komi; the player starts a fresh tree.
        start = Position.from_tps(self.start.to_tps(), half_komi=hk)
        self._new_position(start, self.moves)
        if self._player is not None:
            self._player.reset(self.size, self.half_komi, None)
        self._synced = None
        self._check_model_komi()

    def _set_fallback(self, spec: str) -> None:
        if spec == "none":
            if not self._plays_with(spec, self.size):
                m = int(self.network.model_size)
                self.info(
                    f"setoption: Fallback none refused: the game is {self.size}x{self.size} and the "
                    f"model plays {m}x{m} only (start a {m}x{m} game first); keeping "
                    f"{self.fallback_spec}"
                )
                return
        else:
            try:
                check_player_spec(spec)
            except ValueError as e:
                self.info(f"setoption: Fallback: {clip(str(e), 300)}; keeping {clip(self.fallback_spec)}")
                return
        self.fallback_spec = spec
        self._select_player(announce=False)

    def _set_tree_nodes(self, nodes: int) -> None:
        """``setoption TreeNodes``: held against the memory budget (what the other engines of
        the process hold is not free); a value that does not fit is refused in one line, the
        old value kept."""
        need = nodes * TREE_BYTES_PER_NODE
        if not self._memory.hold(self, need):
            self.info(f"setoption: TreeNodes {nodes} refused: {self._memory.refusal(self, need)}; "
                      f"keeping {self.tree_nodes}")
            return
        self.tree_nodes = nodes
        self._configure_all()

    def _set_model(self, value: str) -> None:
        path = value.strip()
        if not path:
            self.info(f"setoption: Model needs a path (or <empty> for no model), got none; "
                      f"keeping {clip(self.model_path or '<empty>', 200)}")
            return
        if path == "<empty>":
            self.network = None
            self.model_path = None
            self.model_digest = None
            self._select_player(announce=False)
            return
        digest = network_file_digest(path)
        try:
            net = self._load(path, self.nodes_default)
        except Exception as e:  # noqa: BLE001 - report and keep the old model
            self.info(f"setoption: cannot load model '{clip(path, 200)}': {clip(load_refusal(e), 400)}; "
                      "keeping the previous player")
            return
        self.network = net
        self.model_path = path
        self.model_digest = digest
        own = getattr(net, "model_half_komi", None)
        if own is not None and not self._komi_chosen and int(own) != self.half_komi:
            self.half_komi = int(own)  # the new model's own komi, as nothing chose another
            self.start = Position.from_tps(self.start.to_tps(), half_komi=self.half_komi)
            self._new_position(self.start, self.moves)
        m = int(net.model_size)
        if m != self.size and self.fallback_spec == "none":
            self.info(
                f"the model plays {m}x{m} only and Fallback is none: starting a new {m}x{m} game"
            )
            self._new_game(m)
        else:
            self._select_player(announce=True)
        self._check_model_komi()

    def _check_model_komi(self) -> None:
        if self._player is None or self._player is not self.network:
            return
        hk = getattr(self.network, "model_half_komi", None)
        key = (self.model_path, self.half_komi)
        if hk is not None and hk != self.half_komi and key not in self._komi_warned:
            self._komi_warned.add(key)
            self.info(
                f"the model was trained for komi {hk / 2:g}; playing komi {self.half_komi / 2:g}"
            )
