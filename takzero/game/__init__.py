"""Rules of Tak: compiled core (``core``), moves and notations (``moves``), positions and games
(``position``), symmetries (``symmetry``), PTN game files (``ptn``: the reader, with the record in
``ptn_game`` and the writer in ``ptn_write``) and perft."""

from takzero.game.moves import Move, MoveError
from takzero.game.position import Game, IllegalMoveError, Position, Result, TPSError

__all__ = ["Game", "IllegalMoveError", "Move", "MoveError", "Position", "Result", "TPSError"]
