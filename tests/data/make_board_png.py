"""Writes board_5x5.png, the reference picture of tests/test_picture.py::test_picture_matches_reference.

    python tests/data/make_board_png.py

Run it again (and look at the picture) only when the drawing is meant to change.
"""

from __future__ import annotations

from pathlib import Path

from takzero.game.position import Position
from takzero.io.picture import save_board

#: A 5x5 position with stacks of both colours, a wall and a capstone of each colour and the last
#: move a spread (``2b3>11``: b3 -> c3, d3); the test draws the same.
TPS = "2,x,1S,x2/x,1,12,2S,x/2,x,21,12,x/1,2,x,1C,x/x4,2C 1 10"
LAST_MOVE = "2b3>11"
WIDTH, DPI = 3.0, 80

if __name__ == "__main__":
    out = Path(__file__).parent / "board_5x5.png"
    save_board(Position.from_tps(TPS), out, last_move=LAST_MOVE, width=WIDTH, dpi=DPI)
    print(f"wrote {out}")
