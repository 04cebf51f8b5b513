"""Links that open a game in PTN Ninja (https://ptn.ninja, the Tak game viewer and editor):
:func:`ptn_ninja_url` writes one, :func:`read_ptn_ninja_url` reads one back.

The format is PTN Ninja's own (source: gruppler/PTN-Ninja, the ``url`` getter of its ``ui``
store and the ``local`` route in ``src/router/routes.js``)::

    https://ptn.ninja/<PTN>[&name=<NAME>][&ply=<INDEX>[!]]

``<PTN>`` is the PTN text (tags and moves) compressed with lz-string's
``compressToEncodedURIComponent`` (:mod:`takzero.io.lz_string`; characters ``A-Z a-z 0-9 + -
$``, so it goes into the path as it is); ``<NAME>`` is the game's name compressed the same way,
then percent-encoded; ``ply=INDEX`` opens the game at the ply of that 0-based index, before it,
or after it with ``!``. A link without ``ply`` opens at the start of the game: PTN Ninja loads a
linked game without its ``skipToEndOnLoad`` option (tried with PTN Ninja 3.5.5, issue 34), so a
link that should show the end passes ``ply=len(moves)``.

A link longer than :data:`MAX_LINK_CHARS` (a game of thousands of moves, or long comments) may
not open: browsers and the web servers in front of a site cut long addresses at different
lengths. :func:`link_length_problem` says so in one line; ``python -m takzero.game link`` still
prints such a link, with that warning on stderr.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

from takzero.game.ptn_game import PTNGame
from takzero.game.ptn_write import write_ptn
from takzero.io.lz_string import (
    compress_to_encoded_uri_component,
    decompress_from_encoded_uri_component,
)

__all__ = ["MAX_LINK_CHARS", "PTN_NINJA", "link_length_problem", "ptn_ninja_url", "read_ptn_ninja_url"]

#: The site's address (links are ``PTN_NINJA + compressed PTN + parameters``).
PTN_NINJA = "https://ptn.ninja/"

#: The longest link said to open (characters): browsers and servers accept about this much
#: everywhere (Chrome takes 2 MB, Firefox some 65,000 characters, web servers often less).
MAX_LINK_CHARS = 32_000


def link_length_problem(url: str) -> str | None:
    """None for a link of at most :data:`MAX_LINK_CHARS` characters, else one line saying how
    long it is, that it may not open, and what to do instead."""
    if len(url) <= MAX_LINK_CHARS:
        return None
    return (f"its PTN Ninja link is {len(url):,} characters, over the {MAX_LINK_CHARS:,} that "
            "browsers and web servers reliably accept (MAX_LINK_CHARS): it may not open; open "
            "the PTN file in PTN Ninja instead (its Open button)")


def _url_encode(text: str) -> str:
    """PTN Ninja's ``urlEncode``: JavaScript's ``encodeURIComponent`` with ``(`` and ``)``
    percent-encoded too."""
    return quote(text, safe="-_.!~*'")


def ptn_ninja_url(
    game: str | PTNGame,
    name: str | None = None,
    ply: int | None = None,
    base: str = PTN_NINJA,
) -> str:
    """A PTN Ninja link that opens ``game`` (PTN text with its tags, or a
    :class:`~takzero.game.ptn_game.PTNGame`, written with
    :func:`~takzero.game.ptn_write.write_ptn`).

    ``name``: the title the site shows (default: the site makes one from the tags). ``ply``: open
    the game after that many plies of the move text (0: at the start; default: no ``ply``, and
    PTN Ninja opens the game at its start too). ``base``: the site's address, ending in ``/``.

    Raises TypeError if ``game`` is neither, ValueError if ``game`` is empty or ``ply`` negative,
    and what :func:`~takzero.game.ptn_write.write_ptn` raises for a record that cannot be written.
    """
    if isinstance(game, PTNGame):
        text = write_ptn(game)
    elif isinstance(game, str):
        text = game
    else:
        raise TypeError(f"game must be PTN text or a PTNGame, got {type(game).__name__}")
    if not text.strip():
        raise ValueError("the game's PTN is empty")
    url = base + compress_to_encoded_uri_component(text)
    params: list[str] = []
    if name:
        params.append("name=" + _url_encode(compress_to_encoded_uri_component(name)))
    if ply is not None:
        if ply < 0:
            raise ValueError(f"ply must be >= 0, got {ply}")
        params.append(f"ply={ply - 1}!" if ply > 0 else "ply=0")
    return url + "".join("&" + p for p in params)


def read_ptn_ninja_url(url: str) -> tuple[str, dict[str, str]]:
    """The PTN text and the parameters of a PTN Ninja link (as :func:`ptn_ninja_url` writes
    them; ``name`` decompressed, ``ply`` as written, e.g. ``"11!"``). Everything up to the last
    ``/`` before the data is taken as the site's address.

    Raises ValueError if the link holds no lz-string data or its data does not decompress.
    """
    path = url.rsplit("/", 1)[-1]
    data, *rest = path.split("&")
    ptn = decompress_from_encoded_uri_component(data)
    params: dict[str, str] = {}
    for item in rest:
        key, _, value = item.partition("=")
        value = unquote(value)
        if key == "name":
            try:
                value = decompress_from_encoded_uri_component(value) or value
            except ValueError:
                pass  # an uncompressed name, as older links have (the site does the same)
        params[key] = value
    return ptn, params
