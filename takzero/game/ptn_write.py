"""Writing PTN (Portable Tak Notation): one game (:func:`write_ptn`), several
(:func:`write_ptn_games`) and a played game in one call (:func:`game_to_ptn`), as text. The text
is the inverse of the reader, the same grammar, so it stays with the rules and formats in
``game``; writing it to a file is output (:func:`takzero.io.files.write_ptn_file`).

The text is the format of ``tak-rules.md`` as :mod:`takzero.game.ptn` reads it back: the tags in
order, a blank line, one numbered line per move. The records are
:class:`takzero.game.ptn_game.PTNGame`. Every name here is also importable from
:mod:`takzero.game.ptn`.
"""

from __future__ import annotations

from collections.abc import Iterable

from takzero.game.position import Game
from takzero.game.ptn_game import PTNGame


def _escape(value: str) -> str:
    if "\n" in value:
        raise ValueError(f"a tag value cannot contain a newline: {value!r}")
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _comment(text: str) -> str:
    if "}" in text:
        raise ValueError(f"a PTN comment cannot contain '}}': {text!r}")
    return "{" + text + "}"


def write_ptn(game: PTNGame) -> str:
    """PTN text of one game: the tags in order, a blank line, then one line per move number
    (``N. white black``; ``N. -- black`` when the start is black to move), shortest move forms with
    ``*`` on spreads where a capstone flattens a wall, the stored marks and comments, and the
    result token (if any) at the end of the last line. Ends with a newline.

    Raises PTNError if the tags are bad or a move is illegal (the game is replayed to find the
    flattening spreads), ValueError if a tag value holds a newline, a comment holds ``}`` or a
    comment key is outside ``0..len(moves)``.
    """
    moves = game.ptn_moves()
    bad = [k for k in game.comments if not 0 <= k <= len(moves)]
    if bad:
        raise ValueError(f"comments at plies {bad}: the game has {len(moves)} moves")
    lines = [f'[{key} "{_escape(value)}"]' for key, value in game.tags.items()]
    body: list[str] = []
    if game.comments.get(0):
        body.append(" ".join(_comment(c) for c in game.comments[0]))
    ply0 = game.start.ply
    cur: list[str] | None = None
    for i, text in enumerate(moves):
        ply = ply0 + i
        if i > 0 and game.comments.get(i):
            assert cur is not None
            cur.extend(_comment(c) for c in game.comments[i])
        text += game.marks.get(i, "")
        if ply % 2 == 0:
            if cur:
                body.append(" ".join(cur))
            cur = [f"{ply // 2 + 1}.", text]
        elif cur is None:
            cur = [f"{ply // 2 + 1}.", "--", text]
        else:
            cur.append(text)
    if cur is None:
        cur = []
    if moves and game.comments.get(len(moves)):
        cur.extend(_comment(c) for c in game.comments[len(moves)])
    if game.result:
        cur.append(game.result)
    if cur:
        body.append(" ".join(cur))
    if lines and body:
        return "\n".join(lines) + "\n\n" + "\n".join(body) + "\n"
    return "\n".join(lines or body) + "\n"


def write_ptn_games(games: Iterable[PTNGame]) -> str:
    """PTN text of several games, separated by blank lines (see :func:`write_ptn`)."""
    return "\n".join(write_ptn(g) for g in games)


def game_to_ptn(game: Game, **kwargs) -> str:
    """PTN text of a played :class:`~takzero.game.position.Game`; ``kwargs`` go to
    :meth:`PTNGame.from_game` (``tags``, ``result``, ``comments``)."""
    return write_ptn(PTNGame.from_game(game, **kwargs))


__all__ = ["game_to_ptn", "write_ptn", "write_ptn_games"]
