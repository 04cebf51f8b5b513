"""Rules of Tak: compiled core (``core``), moves and notations (``moves``), positions and games
(``position``), symmetries (``symmetry``), PTN game files (``ptn``: the reader, with the record in
``ptn_game`` and the writer of the text in ``ptn_write``), TPS, perft, threats and the tinue
prover. Nothing here writes files or draws: the presentation of game records (PTN Ninja links,
board pictures) and the atomic file writes are in :mod:`takzero.io`, a room above this one."""

from takzero.game.moves import Move, MoveError
from takzero.game.position import Game, IllegalMoveError, Position, Result, TPSError

__all__ = ["Game", "IllegalMoveError", "Move", "MoveError", "Position", "Result", "TPSError"]
