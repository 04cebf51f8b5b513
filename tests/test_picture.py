"""Board pictures (``takzero.io.picture``) and ``python -m takzero.game show``."""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from takzero.game.__main__ import main
from takzero.game.moves import Move, MoveError, square_index
from takzero.game.position import Position
from takzero.io.picture import (
    BOARD_DARK,
    BOARD_LIGHT,
    LAST_MOVE,
    PIECE_FILL,
    board_image,
    check_last_move,
    draw_board,
    last_move_squares,
    save_board,
)

DATA = Path(__file__).parent / "data"
_spec = importlib.util.spec_from_file_location("make_board_png", DATA / "make_board_png.py")
assert _spec is not None and _spec.loader is not None
REF = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(REF)
GAME_FILE = DATA / "games" / "gotak" / "gotak_5x5_01.ptn"


def _rgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=float)


def _read_png(path: Path) -> np.ndarray:
    import matplotlib.image

    return np.rint(matplotlib.image.imread(path)[:, :, :3] * 255).astype(np.uint8)


def test_picture_matches_reference() -> None:
    """The drawing of a fixed position at a fixed size equals the stored PNG
    (``tests/data/make_board_png.py``) up to rasterisation: on the board at most 25 pixels differ
    by more than 40 of 255 in a channel (one more piece in a stack changes about 75, another
    last move about 400), and in the whole picture, text included, at most 2%."""
    want = _read_png(DATA / "board_5x5.png")
    pos = Position.from_tps(REF.TPS)
    got = board_image(pos, REF.LAST_MOVE, width=REF.WIDTH, dpi=REF.DPI)
    assert got.shape == want.shape and got.dtype == np.uint8
    differ = np.abs(got.astype(int) - want.astype(int)).max(axis=2) > 40
    fig = draw_board(pos, width=REF.WIDTH)
    fig.set_dpi(REF.DPI)
    box = fig.axes[0].get_window_extent()
    height = got.shape[0]
    board = differ[int(height - box.y1) : int(height - box.y0), int(box.x0) : int(box.x1)]
    assert board.size > 0.5 * differ.size
    assert board.sum() <= 25
    assert differ.mean() < 0.02


def _pixel(fig, arr: np.ndarray, x: float, y: float) -> np.ndarray:
    """The RGB colour at board coordinates (x, y) (a square is 1 x 1, a1's corner at 0, 0)."""
    px, py = fig.axes[0].transData.transform((x, y))
    return arr[int(round(arr.shape[0] - py)), int(round(px))].astype(float)


@pytest.mark.parametrize("size", [3, 5, 8])
def test_pieces_and_last_move_are_where_the_position_has_them(size: int) -> None:
    """On boards of several sizes: each top piece's middle has its colour, an empty square the
    board's, the squares of the last move their red outline and the others none."""
    rng = np.random.default_rng(size)
    pos = Position.start(size)
    last = None
    while pos.ply < 4 * size and not pos.is_over:
        moves = pos.legal_moves()
        last = moves[int(rng.integers(len(moves)))]
        pos = pos.play(last)
    fig = draw_board(pos, last)
    fig.set_dpi(100)
    fig.canvas.draw()
    arr = np.asarray(fig.canvas.buffer_rgba())[:, :, :3]
    origin, dests = last_move_squares(last, size)
    board = [_rgb(BOARD_LIGHT), _rgb(BOARD_DARK)]
    for sq in range(size * size):
        file, rank = sq % size, sq // size
        colours, _ = pos.stack(sq)
        centre = _pixel(fig, arr, file + 0.6, rank + 0.5)
        if colours:
            assert np.abs(centre - _rgb(PIECE_FILL[colours[-1]])).max() < 30, (sq, centre)
        else:
            assert min(np.abs(centre - b).max() for b in board) < 30, (sq, centre)
        edge = _pixel(fig, arr, file + 0.5, rank + 0.04)
        marked = np.abs(edge - _rgb(LAST_MOVE)).max() < 40
        assert marked == (sq in dests or sq == origin), (sq, edge)


def test_last_move_squares() -> None:
    assert last_move_squares(None, 5) == (None, [])
    assert last_move_squares("Cc3", 5) == (None, [square_index("c3", 5)])
    a2, b2, c2, d2 = (square_index(s, 5) for s in ("a2", "b2", "c2", "d2"))
    assert last_move_squares("3a2>21", 5) == (a2, [b2, c2])
    assert last_move_squares("3d2<111", 5)[1] == [c2, b2, a2]
    with pytest.raises(MoveError):
        last_move_squares("f9", 5)


def test_save_png_and_svg(tmp_path: Path) -> None:
    pos = Position.from_tps(REF.TPS)
    png = save_board(pos, tmp_path / "b.png", last_move=REF.LAST_MOVE, width=REF.WIDTH, dpi=REF.DPI)
    assert np.array_equal(_read_png(png), board_image(pos, REF.LAST_MOVE, width=REF.WIDTH, dpi=REF.DPI))
    svg = save_board(pos, tmp_path / "b.svg", title="white vs black")
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    assert "white vs black" in svg.read_text()
    with pytest.raises(ValueError, match="png, svg"):
        save_board(pos, tmp_path / "b.jpg")
    with pytest.raises(OSError, match="cannot write"):
        save_board(pos, tmp_path / "missing" / "b.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.png", "b.svg"]  # no temp file left


def test_show_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tps.png"
    assert main(["show", "--tps", REF.TPS, "--last-move", REF.LAST_MOVE, "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    assert _read_png(out).shape == board_image(Position.from_tps(REF.TPS)).shape

    # a PTN file after 10 plies: the same picture as the position drawn directly
    from takzero.game.ptn import read_ptn_file

    game = read_ptn_file(GAME_FILE)[0]
    pos = game.start
    for code in game.moves[:10]:
        pos = pos.play(code)
    out = tmp_path / "ptn.png"
    assert main(["show", "--ptn", str(GAME_FILE), "--ply", "10", "-o", str(out), "--dpi", "40"]) == 0
    assert np.array_equal(_read_png(out), board_image(pos, game.moves[9], dpi=40))

    for bad in (
        ["--ptn", str(GAME_FILE), "--ply", "999"],
        ["--tps", "x5/x5 1 1"],
        ["--tps", REF.TPS, "--last-move", "z9"],
        ["--tps", REF.TPS, "--ply", "3"],
        ["--tps", REF.TPS, "--width", "1000"],  # 100,000 pixels wide: 45 GB of drawing buffer
        ["--tps", REF.TPS, "--width", "4", "--dpi", "100000"],
        ["--tps", REF.TPS, "--width", "1000000000"],
    ):
        assert main(["show", *bad, "-o", str(tmp_path / "bad.png")]) == 2
        assert capsys.readouterr().err.startswith("error: ")
    assert not (tmp_path / "bad.png").exists()


def test_game_modules_import_matplotlib_only_inside_functions() -> None:
    """``import takzero.game`` stays light: no module of the room imports matplotlib at its top
    level (the picture functions import it when called)."""
    import ast

    room = Path(__file__).resolve().parent.parent / "takzero" / "game"
    for path in sorted(room.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n.split(".")[0] == "matplotlib" for n in names), path.name


@pytest.mark.parametrize(
    ("tps", "move", "why"),
    [
        ("x5/x5/x5/x5/x5 1 1", "5a1+", "ply 0"),  # the tester's case: no move played yet
        ("x5/x5/x5/x5/x5 1 1", "a1", "ply 0"),
        ("x5/x5/x5/x5/x,1,x3 1 3", "c1", "c1 is empty"),  # placement on an empty square
        ("x5/x5/x5/x5/x,12,x3 1 3", "b1", "holds 2 pieces"),  # a placement leaves one piece
        ("x5/x5/x5/x5/x,1S,x3 1 3", "b1", "topped by a wall"),  # wrong kind
        ("x5/x5/x5/x5/x,1,x3 1 3", "b1", "white piece"),  # black moved last: wrong colour
        ("2,x4/x5/x5/x5/x5 1 2", "a5", "black piece"),  # ply 2: black placed a white flat
        ("2,x4/x5/x5/x5/x5 2 1", "Sa5", "only flats"),
        ("x5/x5/x5/x5/x,1,x3 1 3", "2a1>", "fewer than the 2"),  # a spread's drop squares
        ("x5/x5/x5/x5/x,21,x3 1 3", "a1>", "not the mover"),
        ("x5/x5/x5/x5/2,1,x3 2 1", "a1>", "first two plies"),
    ],
)
def test_a_last_move_that_cannot_have_led_to_the_position_is_refused(
    tps: str, move: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    pos = Position.from_tps(tps)
    with pytest.raises(MoveError, match=why):
        check_last_move(pos, move)
    with pytest.raises(MoveError):
        draw_board(pos, move)
    out = tmp_path / "b.png"
    assert main(["show", "--tps", tps, "--last-move", move, "-o", str(out)]) == 2
    assert "--last-move" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize(
    ("tps", "move"),
    [
        ("x5/x5/x5/x5/2,x4 2 1", "a1"),  # white's first ply placed black's flat
        ("x5/x5/x5/x5/x,12,x3 1 3", "a1>"),  # black carried its top flat onto b1
        ("x5/x5/x5/x5/x,1,x3 2 2", "b1"),
        ("x5/x5/x5/x5/x,1C,x3 2 2", "Cb1"),
        ("x5/x5/x5/x5/x,1,2,x2 1 3", "2a1>11"),
    ],
)
def test_a_last_move_that_fits_is_accepted(tps: str, move: str) -> None:
    assert check_last_move(Position.from_tps(tps), move).to_ptn() == Move.from_ptn(move, 5).to_ptn()
