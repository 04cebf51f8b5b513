"""Rules of Tak: compiled core (``core``), moves and notations (``moves``), positions and games
(``position``), symmetries (``symmetry``), PTN game files (``ptn``: the reader, with the record in
``ptn_game`` and the writer in ``ptn_write``), perft, and the presentation of game records:
PTN Ninja links (``ptn_ninja``, over the lz-string codec ``lz_string``) and board pictures
(``picture``, which imports matplotlib only when it draws)."""

from takzero.game.moves import Move, MoveError
from takzero.game.position import Game, IllegalMoveError, Position, Result, TPSError

__all__ = ["Game", "IllegalMoveError", "Move", "MoveError", "Position", "Result", "TPSError"]
