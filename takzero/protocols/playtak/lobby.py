"""The playtak bot's lobby: the open seeks it could accept, and which one it accepts next.

The bot posts its own seek (:class:`~takzero.protocols.playtak.lines.SeekSpec`) and posts it again
after each game, and/or accepts the open seeks it can play (``accept``: any seeker, or one name).
A seek is kept only if the bot could accept it (another's, open to the bot, from the seeker asked
for, with settings the player plays, not refused by the server before), at most
:data:`MAX_OFFERS` of them, so each seek line costs O(1) and a lobby of millions of seeks a
bounded memory; the oldest (lowest number) is accepted first.
"""

from __future__ import annotations

from collections.abc import Callable

from takzero.game.position import Position
from takzero.protocols.playtak.lines import SeekOffer

#: Most open seeks the bot keeps to accept (only seeks it could accept are kept; more are
#: ignored until some are removed), so a lobby of millions of seeks costs a bounded memory.
MAX_OFFERS = 1000


class Lobby:
    """The seeks the bot could accept (see the module doc).

    ``accept``: "" any seeker, a name: only that player's, None: accept nothing.
    ``model_size``: the board size the player plays (called at each new setting; None: any).
    """

    def __init__(self, accept: str | None, model_size: Callable[[], int | None]) -> None:
        self.accept = accept
        self._model_size = model_size
        self.offers: dict[int, SeekOffer] = {}
        self._refused: set[int] = set()  # refused by the server (NOK); forgotten at removal
        self._playable: dict[tuple[int, int, int, int], bool] = {}  # can_play by settings
        #: the seek whose ``Accept`` was sent and not yet answered (None: none)
        self.accepting: int | None = None

    def clear(self) -> None:
        """Forget every seek (a new connection gets the lobby again)."""
        self.offers.clear()
        self._refused.clear()
        self.accepting = None

    def can_play(self, offer: SeekOffer) -> bool:
        """Whether the player plays ``offer``'s settings (size, stones, capstones, komi)."""
        key = (offer.size, offer.flats, offer.caps, offer.half_komi)
        known = self._playable.get(key)
        if known is not None:
            return known
        model_size = self._model_size()
        ok = model_size is None or model_size == offer.size
        if ok:
            try:
                Position.start(offer.size, flats=offer.flats, caps=offer.caps, half_komi=offer.half_komi)
            except ValueError:
                ok = False
        if len(self._playable) >= MAX_OFFERS:
            self._playable.clear()
        self._playable[key] = ok
        return ok

    def acceptable(self, offer: SeekOffer, name: str) -> bool:
        """Whether a bot called ``name`` would accept ``offer`` (another's, open to it, from the
        seeker asked for, with settings it plays, not refused before)."""
        return not (
            offer.number in self._refused
            or offer.name == name
            or not offer.open_to(name)
            or (self.accept and offer.name.lower() != self.accept.lower())
            or not self.can_play(offer)
        )

    def on_seek(self, kind: str, offer: SeekOffer, name: str) -> None:
        """A ``Seek new`` (``kind`` 'new') or ``Seek remove`` line."""
        if kind == "remove":
            self.offers.pop(offer.number, None)
            self._refused.discard(offer.number)
            if self.accepting == offer.number:
                self.accepting = None
            return
        if self.accept is None or not self.acceptable(offer, name):
            self.offers.pop(offer.number, None)  # a seek changed to one the bot cannot take
            return
        if offer.number in self.offers or len(self.offers) < MAX_OFFERS:
            self.offers[offer.number] = offer

    def refused(self) -> None:
        """The server answered the pending ``Accept`` with ``NOK``: never that seek again."""
        if self.accepting is not None:
            self._refused.add(self.accepting)
            self.offers.pop(self.accepting, None)
            self.accepting = None

    def next_offer(self, name: str) -> SeekOffer | None:
        """The oldest seek the bot (``name``) may accept now, or None; seeks that are no longer
        acceptable (e.g. the bot's name changed at a new login) are dropped on the way."""
        while self.offers:
            n = min(self.offers)
            offer = self.offers[n]
            if self.acceptable(offer, name):
                return offer
            del self.offers[n]
        return None


__all__ = ["MAX_OFFERS", "Lobby"]
