"""Compact forms of what a replay record stores: positions packed into bytes (:func:`pack_states`,
:func:`unpack_states`, and :func:`board_problem`, the check that a packed position is one the
compiled rules can take) and policies as their K largest entries (:func:`sparse_policy`,
:func:`sparse_targets`, :func:`dense_policy`). Plain numpy, vectorised over the batch."""

from __future__ import annotations

from typing import Any

import numpy as np

from takzero.game import core
from takzero.game.core import OFF_HEIGHT, OFF_HI, OFF_LO, OFF_TOP

__all__ = [
    "MAX_HALF_KOMI",
    "MAX_PIECES",
    "board_problem",
    "board_record_len",
    "dense_policy",
    "first_problem",
    "pack_states",
    "size_of_record",
    "sparse_policy",
    "sparse_targets",
    "unpack_states",
]


def board_record_len(size: int) -> int:
    """Bytes of one packed position on a board of ``size``."""
    nsq = size * size
    words = 2 if size >= 7 else 1  # 62 colour bits hold every stack up to 6x6 (62 pieces)
    return 16 + 2 * nsq + 8 * words * nsq


def size_of_record(record_len: int) -> int:
    """The board size whose packed positions are ``record_len`` bytes long."""
    for size in range(3, 9):
        if board_record_len(size) == record_len:
            return size
    raise ValueError(f"no board size packs into {record_len} bytes")


def pack_states(states: np.ndarray, size: int) -> np.ndarray:
    """Pack states (B, STATE_LEN) int64 into (B, board_record_len(size)) uint8.

    Layout: header int16 x 8 (size, ply, white/black stones, white/black caps, half-komi, 0), then
    heights uint8 (N*N), top types uint8 (N*N), low colour words int64 (N*N), high colour words
    int64 (N*N, sizes 7 and 8 only).
    """
    states = np.atleast_2d(states)
    b = states.shape[0]
    nsq = size * size
    out = np.zeros((b, board_record_len(size)), dtype=np.uint8)
    header = np.zeros((b, 8), dtype=np.int16)
    header[:, :7] = states[:, :7]
    out[:, :16] = header.view(np.uint8)
    out[:, 16 : 16 + nsq] = states[:, OFF_HEIGHT : OFF_HEIGHT + nsq]
    out[:, 16 + nsq : 16 + 2 * nsq] = states[:, OFF_TOP : OFF_TOP + nsq]
    pos = 16 + 2 * nsq
    out[:, pos : pos + 8 * nsq] = np.ascontiguousarray(states[:, OFF_LO : OFF_LO + nsq]).view(np.uint8)
    if size >= 7:
        pos += 8 * nsq
        out[:, pos : pos + 8 * nsq] = np.ascontiguousarray(states[:, OFF_HI : OFF_HI + nsq]).view(
            np.uint8
        )
    return out


def _packed_fields(records: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """The fields of packed positions (B, board_record_len(size)) uint8 (:func:`pack_states`'s
    layout): header (B, 8) int16, heights (B, N*N) uint8, top types (B, N*N) uint8, and the colour
    words (B, N*N) int64, low then (sizes 7 and 8) high."""
    nsq = size * size
    header = np.ascontiguousarray(records[:, :16]).view(np.int16)
    heights = records[:, 16 : 16 + nsq]
    tops = records[:, 16 + nsq : 16 + 2 * nsq]
    pos = 16 + 2 * nsq
    words = [np.ascontiguousarray(records[:, pos : pos + 8 * nsq]).view(np.int64)]
    if size >= 7:
        words.append(np.ascontiguousarray(records[:, pos + 8 * nsq : pos + 16 * nsq]).view(np.int64))
    return header, heights, tops, words


def unpack_states(records: np.ndarray, size: int) -> np.ndarray:
    """Inverse of :func:`pack_states`: (B, R) uint8 -> (B, STATE_LEN) int64 with hashes
    recomputed and the result field 0 (records are never finished positions)."""
    records = np.atleast_2d(records)
    b = records.shape[0]
    nsq = size * size
    states = np.zeros((b, core.STATE_LEN), dtype=np.int64)
    header, heights, tops, words = _packed_fields(records, size)
    states[:, :7] = header[:, :7]
    states[:, OFF_HEIGHT : OFF_HEIGHT + nsq] = heights
    states[:, OFF_TOP : OFF_TOP + nsq] = tops
    states[:, OFF_LO : OFF_LO + nsq] = words[0]
    if size >= 7:
        states[:, OFF_HI : OFF_HI + nsq] = words[1]
    for i in range(b):
        states[i, core.I_HASH] = core.hash_from_scratch(states[i])
    return states



#: The most pieces a position may hold in all, board and reserves: the rules core's two colour
#: words of a stack (``core.new_state``'s bound; ``core.Z_PIECE`` has MAX_HEIGHT = 128 rows).
MAX_PIECES = 2 * core.WORD_BITS
#: The largest half-komi the game takes (``game.position``: half_komi in -200..200).
MAX_HALF_KOMI = 200
#: How far over 1 a row of float16 probabilities may sum (rounding of the renormalised top K).
_POWERS_OF_TWO = np.left_shift(np.int64(1), np.arange(core.WORD_BITS + 1, dtype=np.int64))  # 2 ** 0..62


def _first_row(bad: np.ndarray) -> int | None:
    """The first row of ``bad`` (B,) or (B, W) bool with a True in it, None when there is none."""
    if not bad.any():
        return None
    return int(np.argmax(bad.reshape(len(bad), -1).any(axis=1)))


def first_problem(checks: list[tuple[np.ndarray, Any]]) -> tuple[int, str] | None:
    """The first row that fails any of ``checks`` ((bad rows (B,) or (B, W) bool, row -> what is
    wrong)) as (row, what), the earlier check's words where two fail on that row; None: none."""
    found: tuple[int, str] | None = None
    for bad, what in checks:
        i = _first_row(bad)
        if i is not None and (found is None or i < found[0]):
            found = (i, what(i))
    return found


def board_problem(board: np.ndarray, size: int) -> tuple[int, str] | None:
    """The first packed position of ``board`` ((B, board_record_len(size)) uint8, :func:`pack_states`)
    that the compiled rules cannot safely take as a position of a ``size`` board, as (row, what
    is wrong), or None when every row is one. Vectorised numpy (no compiled call sees a row before
    it passes): the header's size is ``size``, its ply >= 0, its four reserves >= 0, its half-komi
    within +-MAX_HALF_KOMI; each square's top type EMPTY..CAP, EMPTY exactly on the empty squares;
    a stack's height within the packed colour words (62 pieces a word) and no colour bit above it;
    the pieces on the board and in the reserves at most MAX_PIECES in all (so no move sequence can
    build a stack beyond the rules core's tables)."""
    assert board.ndim == 2 and board.shape[1] == board_record_len(size), board.shape
    header, heights, tops, words = _packed_fields(board, size)
    reserves = header[:, core.I_STONES : core.I_CAPS + 2]
    pieces = heights.sum(axis=1, dtype=np.int64) + reserves.sum(axis=1, dtype=np.int64)
    checks: list[tuple[np.ndarray, Any]] = [
        (header[:, core.I_SIZE] != size, lambda i: f"board size {header[i, core.I_SIZE]}, this run's is {size}"),
        (header[:, core.I_PLY] < 0, lambda i: f"ply {header[i, core.I_PLY]} is negative"),
        (reserves < 0, lambda i: f"a negative reserve {reserves[i].tolist()} (stones, stones, caps, caps)"),
        (np.abs(header[:, core.I_HALF_KOMI].astype(np.int32)) > MAX_HALF_KOMI,
         lambda i: f"half-komi {header[i, core.I_HALF_KOMI]} outside -{MAX_HALF_KOMI}..{MAX_HALF_KOMI}"),
        (tops > core.CAP, lambda i: f"a top piece type {int(tops[i].max())} (0..{core.CAP})"),
        ((heights == 0) != (tops == core.EMPTY), lambda i: "an empty square with a top piece, or a stack without one"),
        (heights > core.WORD_BITS * len(words),
         lambda i: f"a stack of {int(heights[i].max())} pieces, more than the packed colour words hold"),
        (pieces > MAX_PIECES,
         lambda i: f"{pieces[i]} pieces on the board and in the reserves, more than {MAX_PIECES}"),
    ]
    for w, word in enumerate(words):
        # a word holds the colours of its stack's pieces w * 62 .. w * 62 + 61 from the top, so it
        # is below 2 ** (the pieces it holds): no colour bit above the stack, none beyond 62 bits
        held = np.minimum(np.maximum(heights.astype(np.int16) - w * core.WORD_BITS, 0), core.WORD_BITS)
        stray = (word < 0) | (word >= _POWERS_OF_TWO[held])
        checks.append((stray, lambda i: "colour bits above a stack's height"))
    return first_problem(checks)


def sparse_policy(dense: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``top_k`` largest entries of policy rows (B, A) as (indices int32 (B, K) with -1 for
    unused slots, probabilities float16 (B, K) renormalised to sum 1)."""
    dense = np.atleast_2d(dense)
    b, a = dense.shape
    k = min(top_k, a)
    idx = np.argpartition(-dense, k - 1, axis=1)[:, :k]
    p = np.take_along_axis(dense, idx, axis=1)
    keep = p > 0
    total = np.where(keep, p, 0).sum(axis=1, keepdims=True)
    total[total == 0] = 1
    probs = np.where(keep, p / total, 0)
    out_i = np.full((b, top_k), -1, np.int32)
    out_p = np.zeros((b, top_k), np.float16)
    out_i[:, :k] = np.where(keep, idx, -1)
    out_p[:, :k] = probs
    return out_i, out_p


def sparse_targets(
    actions: list[np.ndarray], probs: list[np.ndarray], top_k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Search policy targets (per position: action indices (k,) and probabilities (k,)) as
    records' sparse rows: the ``top_k`` most probable actions of each (ties: first listed),
    renormalised (uniform if all are 0). Returns (indices int32 (B, top_k) with -1 for unused
    slots, probabilities float16 (B, top_k))."""
    n = len(actions)
    idx = np.full((n, top_k), -1, np.int32)
    prob = np.zeros((n, top_k), np.float16)
    for i, (a, p) in enumerate(zip(actions, probs, strict=True)):
        order = np.argsort(-p, kind="stable")[:top_k]
        pp = p[order].astype(np.float64)
        pp = pp / pp.sum() if pp.sum() > 0 else np.full(len(order), 1.0 / len(order))
        idx[i, : len(order)] = a[order]
        prob[i, : len(order)] = pp
    return idx, prob


def dense_policy(index: np.ndarray, prob: np.ndarray, num_actions: int) -> np.ndarray:
    """Inverse of :func:`sparse_policy`: (B, K) -> (B, A) float32."""
    b = index.shape[0]
    out = np.zeros((b, num_actions), np.float32)
    rows = np.repeat(np.arange(b), index.shape[1])
    flat_i = index.reshape(-1)
    ok = flat_i >= 0
    np.add.at(out, (rows[ok], flat_i[ok]), prob.reshape(-1)[ok].astype(np.float32))
    return out


