"""Pictures of a Tak position with matplotlib: :func:`draw_board` (a Figure), :func:`save_board`
(PNG or SVG file) and :func:`board_image` (an RGB array, e.g. for TensorBoard's image tab).

What a picture shows, on a board of ``size`` x ``size`` squares seen from above (files ``a..``
left to right, ranks ``1..`` bottom to top, labelled on the edges):

* the top piece of each stack in the middle of its square: a flat as a rounded square, a wall
  (standing stone) as a slanted bar, a capstone as a disc; white pieces cream with a dark
  edge, black pieces dark with a light edge;
* the stack under it, for stacks of two or more pieces: a column of bars at the square's left
  edge, one per piece, bottom piece lowest, in the pieces' colours, and the height in the
  square's upper right corner;
* the last move, when given: the squares it put pieces on outlined in red, and for a spread the
  square it left outlined in dashes and an arrow (under the pieces) from it to the last square
  reached;
* a title line: ply, side to move or result, komi, flat count and both reserves.

matplotlib is imported inside the functions (``import takzero.game`` stays light) and only its
object-oriented API with the Agg canvas is used: no pyplot, no global state, no display needed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from takzero.game.core import BLACK, CAP, FLAT, WALL, WHITE, direction_step
from takzero.game.moves import FILES, Move, MoveError, square_name
from takzero.game.position import Position
from takzero.io.files import atomic_open

if TYPE_CHECKING:  # pragma: no cover - for the annotations only
    from matplotlib.figure import Figure

__all__ = ["PICTURE_FORMATS", "board_image", "check_last_move", "draw_board", "last_move_squares", "save_board"]

#: File formats :func:`save_board` writes, by suffix.
PICTURE_FORMATS = ("png", "svg")

BOARD_LIGHT = "#e3cfa4"
BOARD_DARK = "#d4bd8c"
GRID = "#8a7450"
PIECE_FILL = {WHITE: "#f6efe0", BLACK: "#2e2a26"}
PIECE_EDGE = {WHITE: "#3a3126", BLACK: "#cfc6b4"}
LAST_MOVE = "#d62728"

#: Default figure width in inches (the height adds the title and the labels).
DEFAULT_WIDTH = 4.0


def last_move_squares(move: Move | int | str | None, size: int) -> tuple[int | None, list[int]]:
    """The squares a move touches: (the square a spread leaves or None for a placement, the
    squares it puts pieces on in order). ``move``: a Move, a move code or PTN text; None gives
    (None, []). Raises MoveError for PTN that cannot be read (off the board, bad syntax)."""
    if move is None:
        return None, []
    if isinstance(move, str):
        move = Move.from_ptn(move, size)
    elif not isinstance(move, Move):
        move = Move(int(move), size)
    if move.is_placement:
        return None, [move.square]
    step = direction_step(move.direction, size)
    return move.square, [move.square + step * (i + 1) for i in range(len(move.drops))]


def check_last_move(position: Position, move: Move | int | str) -> Move:
    """Check that ``move`` could be the move that led to ``position`` as far as the position
    shows it: there was a previous ply (ply >= 1); a placement's square holds exactly one piece,
    of the kind placed and of the placer's colour (the opponent's in the first two plies, when
    only flats are placed); a spread (not in the first two plies) left at least as many pieces on
    each square it dropped on as it dropped there, the last one topped by the mover's colour.
    Returns the Move. Raises MoveError (a ValueError) naming what does not fit."""
    size = position.size
    if isinstance(move, str):
        move = Move.from_ptn(move, size)
    elif not isinstance(move, Move):
        move = Move(int(move), size)
    text = move.to_ptn()
    if position.ply == 0:
        raise MoveError(f"{text} cannot be the last move: the position is at ply 0 (no move played yet)")
    mover = 1 - position.side_to_move
    opening = position.ply <= 2
    _, dests = last_move_squares(move, size)
    if move.is_placement:
        sq = dests[0]
        colours, top = position.stack(sq)
        where = f"{text} cannot be the last move: {square_name(sq, size)}"
        if not colours:
            raise MoveError(f"{where} is empty")
        if len(colours) != 1:
            raise MoveError(f"{where} holds {len(colours)} pieces, not the one placed")
        if opening and move.piece != FLAT:
            raise MoveError(f"{text} cannot be the last move: only flats are placed in the first two plies")
        if top != move.piece:
            raise MoveError(f"{where} is topped by a {_KIND_NAME[top]}, not the {_KIND_NAME[move.piece]} placed")
        colour = position.side_to_move if opening else mover
        if colours[-1] != colour:
            raise MoveError(f"{where} holds a {('white', 'black')[colours[-1]]} piece; the placement put a "
                            f"{('white', 'black')[colour]} one there")
        return move
    if opening:
        raise MoveError(f"{text} cannot be the last move: no spread is possible in the first two plies")
    for sq, n in zip(dests, move.drops, strict=True):
        colours, _ = position.stack(sq)
        if len(colours) < n:
            raise MoveError(f"{text} cannot be the last move: {square_name(sq, size)} holds {len(colours)} "
                            f"pieces, fewer than the {n} dropped there")
    colours, _ = position.stack(dests[-1])
    if colours[-1] != mover:
        raise MoveError(f"{text} cannot be the last move: {square_name(dests[-1], size)} is topped by "
                        f"{('white', 'black')[colours[-1]]}, not the mover ({('white', 'black')[mover]})")
    return move


_KIND_NAME = {FLAT: "flat", WALL: "wall", CAP: "capstone"}


def _title(pos: Position) -> str:
    white, black = pos.flat_counts()
    if pos.is_over:
        state = f"result {pos.result} ({pos.result.reason})"
    else:
        state = ("white", "black")[pos.side_to_move] + " to move"
    return (
        f"ply {pos.ply}, {state}, komi {pos.komi:g}\n"
        f"flats {white}-{black}   reserves: white {pos.stones(WHITE)}+{pos.capstones(WHITE)}C, "
        f"black {pos.stones(BLACK)}+{pos.capstones(BLACK)}C"
    )


def _piece(ax, x: float, y: float, colour: int, kind: int, scale: float = 1.0) -> None:
    """The top piece of a stack centred at (x, y) in board units (a square is 1 x 1)."""
    from matplotlib.patches import Circle, FancyBboxPatch, Polygon

    fill, edge = PIECE_FILL[colour], PIECE_EDGE[colour]
    lw = 1.2 * scale
    if kind == CAP:
        ax.add_patch(Circle((x, y), 0.21, facecolor=fill, edgecolor=edge, linewidth=lw, zorder=4))
    elif kind == WALL:
        half_w, half_h = 0.09, 0.3  # a standing stone seen from above, slanted
        c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)
        corners = [(-half_w, -half_h), (half_w, -half_h), (half_w, half_h), (-half_w, half_h)]
        pts = [(x + c * u - s * v, y + s * u + c * v) for u, v in corners]
        ax.add_patch(Polygon(pts, closed=True, facecolor=fill, edgecolor=edge, linewidth=lw, zorder=4))
    else:
        ax.add_patch(
            FancyBboxPatch(
                (x - 0.21, y - 0.21), 0.42, 0.42, boxstyle="round,pad=0,rounding_size=0.06",
                facecolor=fill, edgecolor=edge, linewidth=lw, zorder=4,
            )
        )


def draw_board(
    position: Position,
    last_move: Move | int | str | None = None,
    title: str | None = None,
    width: float = DEFAULT_WIDTH,
) -> Figure:
    """A matplotlib Figure (Agg canvas, not shown anywhere) of ``position`` (see the module
    docstring for what it shows). ``last_move``: the move that led to the position (Move, move
    code or PTN text), marked on the board. ``title``: a first title line (e.g. the players),
    above the default ones. ``width``: figure width in inches (height: width * 1.14).

    Raises MoveError if ``last_move`` is PTN that cannot be read or a move that cannot have led to
    the position (:func:`check_last_move`), ValueError if ``width`` is not positive."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, Rectangle

    if not width > 0:
        raise ValueError(f"width must be > 0 inches, got {width}")
    size = position.size
    if last_move is not None:
        last_move = check_last_move(position, last_move)
    origin, dests = last_move_squares(last_move, size)
    fig = Figure(figsize=(width, width * 1.14))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.07, 0.05, 0.9, 0.9 / 1.14))
    ax.set_xlim(-0.02, size + 0.02)
    ax.set_ylim(-0.02, size + 0.02)
    ax.set_aspect("equal")
    ax.set_xticks([f + 0.5 for f in range(size)], list(FILES[:size]))
    ax.set_yticks([r + 0.5 for r in range(size)], [str(r + 1) for r in range(size)])
    ax.tick_params(length=0, labelsize=9 * width / DEFAULT_WIDTH)
    for spine in ax.spines.values():
        spine.set_visible(False)
    scale = width / DEFAULT_WIDTH * 6 / size
    for sq in range(size * size):
        file, rank = sq % size, sq // size
        shade = BOARD_LIGHT if (file + rank) % 2 else BOARD_DARK
        ax.add_patch(Rectangle((file, rank), 1, 1, facecolor=shade, edgecolor=GRID, linewidth=0.8, zorder=1))
        colours, top = position.stack(sq)
        if not colours:
            continue
        _piece(ax, file + 0.6, rank + 0.5, colours[-1], top, scale)
        if len(colours) > 1:
            bar = min(0.14, 0.84 / len(colours))
            for i, c in enumerate(colours):
                ax.add_patch(
                    Rectangle(
                        (file + 0.05, rank + 0.08 + i * bar), 0.2, bar * 0.8,
                        facecolor=PIECE_FILL[c], edgecolor=PIECE_EDGE[c], linewidth=0.5 * scale, zorder=3,
                    )
                )
            ax.text(
                file + 0.94, rank + 0.93, str(len(colours)), ha="right", va="top",
                fontsize=8 * scale, color="#222222", zorder=5,
            )
    for sq in dests:
        ax.add_patch(
            Rectangle(
                (sq % size + 0.04, sq // size + 0.04), 0.92, 0.92, fill=False, edgecolor=LAST_MOVE,
                linewidth=2.2 * scale, zorder=6,
            )
        )
    if origin is not None and dests:
        ax.add_patch(
            Rectangle(
                (origin % size + 0.04, origin // size + 0.04), 0.92, 0.92, fill=False,
                edgecolor=LAST_MOVE, linewidth=1.6 * scale, linestyle=(0, (3, 2)), zorder=6,
            )
        )
        start = (origin % size + 0.5, origin // size + 0.5)
        end = (dests[-1] % size + 0.5, dests[-1] // size + 0.5)
        ax.add_patch(
            FancyArrowPatch(
                start, end, arrowstyle="-|>", mutation_scale=14 * scale, color=LAST_MOVE,
                linewidth=1.8 * scale, alpha=0.8, zorder=3.5,
            )
        )
    text = _title(position)
    if title:
        text = f"{title}\n{text}"
    fig.text(0.5, 0.985, text, ha="center", va="top", fontsize=8.5 * width / DEFAULT_WIDTH, linespacing=1.3)
    return fig


def board_image(
    position: Position,
    last_move: Move | int | str | None = None,
    title: str | None = None,
    width: float = DEFAULT_WIDTH,
    dpi: int = 100,
) -> np.ndarray:
    """The picture of :func:`draw_board` as an RGB array, shape (H, W, 3), dtype uint8, with
    W = round(width * dpi) pixels (H about 1.14 W); for ``SummaryWriter.add_image(...,
    dataformats="HWC")``. Raises like :func:`draw_board`, and ValueError if ``dpi`` < 1."""
    if dpi < 1:
        raise ValueError(f"dpi must be >= 1, got {dpi}")
    fig = draw_board(position, last_move, title, width)
    fig.set_dpi(dpi)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)  # draw_board attaches an Agg canvas
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()


def save_board(
    position: Position,
    path: str | os.PathLike[str],
    last_move: Move | int | str | None = None,
    title: str | None = None,
    width: float = DEFAULT_WIDTH,
    dpi: int = 100,
) -> Path:
    """Write the picture of :func:`draw_board` to ``path``: PNG (``dpi`` pixels per inch) or SVG,
    chosen by the suffix. The file is written to a temporary file beside it and renamed, so a
    failed write leaves any older file whole. Returns the path.

    Raises ValueError for another suffix or ``dpi`` < 1 (nothing written), OSError if the folder
    cannot be written, and like :func:`draw_board`."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in PICTURE_FORMATS:
        raise ValueError(f"{path}: the picture format must be one of {', '.join(PICTURE_FORMATS)} (by suffix)")
    if dpi < 1:
        raise ValueError(f"dpi must be >= 1, got {dpi}")
    fig = draw_board(position, last_move, title, width)
    try:
        with atomic_open(path, "wb") as f:
            fig.savefig(f, format=fmt, dpi=dpi, metadata={"Software": None} if fmt == "png" else {"Date": None})
    except OSError as e:
        raise OSError(e.errno, f"{path}: cannot write: {e.strerror}") from None
    return path
