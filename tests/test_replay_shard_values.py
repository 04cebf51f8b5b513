"""Replay shards read from disk are checked value by value (the bounds and rules of
``RECORD_FIELDS``) before any record reaches the compiled rules or a training batch: a shard with a
board that is not a position of the run's size (a crafted one used to segfault every resume in
``unpack_states``), a policy index outside the action space, an out-of-range value target, a
non-finite probability... is skipped as corrupt, naming the field, and the run goes on."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable

import numpy as np
import pytest

from takzero.config import ReplayConfig
from takzero.game import Position, core
from takzero.pipeline.replay import (
    MAX_PIECES,
    RECORD_FIELDS,
    Records,
    ReplayBuffer,
    board_problem,
    pack_states,
)

SIZE = 5
A = core.num_actions(SIZE)
K = 4
OPP_K = 3


def _states(size: int, n: int, seed: int) -> np.ndarray:
    """``n`` positions of random games on a ``size`` board that go on (states (n, STATE_LEN))."""
    rng = np.random.default_rng(seed)
    out: list[np.ndarray] = []
    while len(out) < n:
        p = Position.start(size)
        for _ in range(int(rng.integers(0, 60))):
            moves = p.legal_move_codes()
            if len(moves) == 0 or p.is_over:
                break
            nxt = p.copy()
            core.make_move(nxt.state, int(rng.choice(moves)))
            if nxt.is_over:
                break
            p = nxt
        out.append(p.state.copy())
    return np.stack(out)


def _records(n: int, game: int, size: int = SIZE, seed: int = 0) -> Records:
    """``n`` plausible self-play records of one game: real positions, sparse targets over real
    action indices, every optional field set."""
    rng = np.random.default_rng([seed, game])
    states = _states(size, n, seed=1000 * seed + game)
    a = core.num_actions(size)
    idx = np.full((n, K), -1, np.int32)
    idx[:, :3] = rng.integers(0, a, size=(n, 3))
    prob = np.zeros((n, K), np.float16)
    prob[:, :3] = [0.5, 0.3, 0.2]
    opp_idx = np.full((n, OPP_K), -1, np.int32)
    opp_idx[:, 0] = a - 1
    opp_prob = np.zeros((n, OPP_K), np.float16)
    opp_prob[:, 0] = 1
    ply = states[:, core.I_PLY].astype(np.int16)
    return Records(
        board=pack_states(states, size),
        policy_index=idx,
        policy_prob=prob,
        value=rng.integers(-1, 2, size=n).astype(np.int8),
        flat_diff=rng.integers(-size * size, size * size + 1, size=n).astype(np.int8),
        game_id=np.full(n, game, np.int64),
        generation=np.zeros(n, np.int32),
        ply=ply,
        ownership=rng.integers(-1, 2, size=(n, size * size)).astype(np.int8),
        own_valid=np.ones(n, np.bool_),
        opp_index=opp_idx,
        opp_prob=opp_prob,
        search_value=np.where(np.arange(n) % 2 == 0, np.nan, 0.25).astype(np.float16),
        end_ply=np.full(n, int(ply.max()) + 1, np.int16),
    )


def _rcfg() -> ReplayConfig:
    return ReplayConfig(top_k=K, shard_positions=10, min_positions=1, samples_per_position=100.0)


# -- the board: packed bytes that are not a position of the run ---------------------------------


def _header(board: np.ndarray) -> np.ndarray:
    return board[:, :16].view(np.int16)


def _set_square(board: np.ndarray, sq: int, height: int, top: int, lo: int) -> None:
    nsq = SIZE * SIZE
    board[:, 16 + sq] = height
    board[:, 16 + nsq + sq] = top
    pos = 16 + 2 * nsq + 8 * sq
    board[:, pos : pos + 8] = np.array([lo], np.int64).view(np.uint8)


def _random_bytes(z: dict) -> None:  # the hostile tester's shard
    rng = np.random.default_rng(7)
    z["board"] = rng.integers(0, 256, z["board"].shape).astype(np.uint8)


def _other_size(z: dict) -> None:
    _header(z["board"])[:, core.I_SIZE] = 8  # would walk 64 squares of a 25-square record


def _negative_ply(z: dict) -> None:
    _header(z["board"])[:, core.I_PLY] = -3


def _negative_reserve(z: dict) -> None:
    _header(z["board"])[:, core.I_CAPS + 1] = -1


def _huge_reserves(z: dict) -> None:  # a search could then build a stack beyond the hash tables
    _header(z["board"])[:, core.I_STONES] = 30_000


def _half_komi(z: dict) -> None:
    _header(z["board"])[:, core.I_HALF_KOMI] = 20_000


def _top_type(z: dict) -> None:
    _set_square(z["board"], 3, 1, 9, 0)  # indexes Z_TOP[sq, 9]


def _empty_with_top(z: dict) -> None:
    _set_square(z["board"], 3, 0, core.WALL, 0)


def _stack_without_top(z: dict) -> None:
    _set_square(z["board"], 3, 2, core.EMPTY, 0b01)


def _tall_stack(z: dict) -> None:
    _set_square(z["board"], 3, 200, core.FLAT, 0)  # indexes Z_PIECE[sq, 199]


def _colour_bits_above(z: dict) -> None:
    _set_square(z["board"], 3, 2, core.FLAT, 0b1101)


def _colour_word_negative(z: dict) -> None:
    _set_square(z["board"], 3, 62, core.FLAT, -1)


BAD_SHARDS: list[tuple[str, Callable[[dict], None]]] = [
    ("board", _random_bytes),
    ("board", _other_size),
    ("board", _negative_ply),
    ("board", _negative_reserve),
    ("board", _huge_reserves),
    ("board", _half_komi),
    ("board", _top_type),
    ("board", _empty_with_top),
    ("board", _stack_without_top),
    ("board", _tall_stack),
    ("board", _colour_bits_above),
    ("board", _colour_word_negative),
    ("policy_index", lambda z: z["policy_index"].__setitem__((4, 1), A)),  # the tester's IndexError
    ("policy_index", lambda z: z["policy_index"].__setitem__((4, 3), -2)),
    ("policy_prob", lambda z: z["policy_prob"].__setitem__((2, 0), np.nan)),
    ("policy_prob", lambda z: z["policy_prob"].__setitem__((2, 0), np.inf)),
    ("policy_prob", lambda z: z["policy_prob"].__setitem__((2, 0), -0.25)),
    ("policy_prob", lambda z: z["policy_prob"].__setitem__((2, 0), 1.5)),
    ("policy_prob", lambda z: z["policy_prob"].__setitem__(slice(None), 1.0)),  # rows summing to 4
    ("value", lambda z: z["value"].__setitem__(5, 100)),  # the tester's training target of 100
    ("value", lambda z: z["value"].__setitem__(5, -2)),
    ("value", lambda z: z.__setitem__("value", z["value"] + np.float32(0.5))),  # a fraction in an int8 field
    ("flat_diff", lambda z: z["flat_diff"].__setitem__(0, SIZE * SIZE + 1)),
    ("generation", lambda z: z["generation"].__setitem__(0, -1)),
    ("ply", lambda z: z["ply"].__setitem__(0, -1)),
    ("ownership", lambda z: z["ownership"].__setitem__((1, 1), 5)),
    ("own_valid", lambda z: z.__setitem__("own_valid", np.full(len(z["value"]), 2, np.int8))),
    ("opp_index", lambda z: z["opp_index"].__setitem__((1, 2), A + 7)),
    ("opp_prob", lambda z: z["opp_prob"].__setitem__((1, 2), np.nan)),
    ("search_value", lambda z: z["search_value"].__setitem__(1, 2.0)),
    ("search_value", lambda z: z["search_value"].__setitem__(1, -np.inf)),
    ("end_ply", lambda z: z["end_ply"].__setitem__(1, -5)),
    ("value", lambda z: z.__setitem__("value", np.full(len(z["value"]), 300, np.int64))),  # wraps in int8
]


@pytest.mark.parametrize("field, spoil", BAD_SHARDS)
def test_a_shard_with_bad_values_is_skipped_naming_the_field(tmp_path, caplog, field, spoil) -> None:
    buf = ReplayBuffer(_rcfg(), SIZE, shard_dir=tmp_path, opponent_top_k=OPP_K)
    buf.add(_records(10, game=0))
    buf.add(_records(10, game=1))
    good, bad_shard = sorted(tmp_path.glob("shard_*.npz"))
    with np.load(bad_shard) as z:
        arrays = {k: z[k].copy() for k in z.files}
    spoil(arrays)
    with open(bad_shard, "wb") as f:
        np.savez(f, **arrays)
    fresh = ReplayBuffer(_rcfg(), SIZE, shard_dir=tmp_path, opponent_top_k=OPP_K)
    with caplog.at_level("WARNING"):
        assert fresh.load(buf.state_dict()) == 10  # the good shard only
    assert any(bad_shard.name in r.getMessage() and f"replay field {field!r}" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    assert set(fresh.data.game_id.tolist()) == {0}
    # what was loaded trains: the compiled decoding, the legal masks and the targets take it
    from takzero.pipeline.trainer import make_batch

    batch = fresh.sample(16)
    assert batch is not None
    out = make_batch(batch, SIZE, layers=4, rng=np.random.default_rng(0))
    assert out.planes.shape[0] == 16 and bool(out.value.abs().max() <= 1)


@pytest.mark.parametrize("size", [3, 4, 5, 6, 7, 8])
def test_every_field_of_real_records_passes_the_checks(size) -> None:
    """The checks refuse nothing self-play writes: real positions of every size (8x8 with a
    stack taller than one colour word too), NaN where a field allows it, empty policy slots."""
    recs = _records(30, game=3, size=size, seed=size)
    recs.check_values(size)
    if size == 8:
        tall = Position.from_tps("x8/x8/x8/x8/x8/x8/x8/" + "1" * 40 + "2" * 30 + "1C,x7 2 40", flats=60)
        assert board_problem(pack_states(tall.state[None], 8), 8) is None
    # a shard of the same records, through np.savez and the buffer's load, comes back whole
    back = Records.from_arrays({f: getattr(recs, f) for f in Records.FIELDS}, OPP_K)
    back.check_values(size)


def test_the_checks_are_declared_in_the_field_table() -> None:
    """Every field of the table but the opaque game id has a bound or a rule (a new field is
    checked by declaring its row, not by a new branch)."""
    unchecked = [f.name for f in RECORD_FIELDS if f.low is None and f.high is None and not f.rule
                 and f.dtype is not np.bool_]
    assert unchecked == ["game_id"]


def test_max_pieces_is_what_the_rules_core_allows() -> None:
    assert MAX_PIECES < core.MAX_HEIGHT and MAX_PIECES == 2 * core.WORD_BITS
    with pytest.raises(ValueError):
        core.new_state(5, MAX_PIECES // 2, 1)


_SAFE_CHECK = """
import numpy as np
from takzero.game import core
from takzero.nn.actions import legal_mask
from takzero.nn.features import encode, num_channels
from takzero.pipeline.replay import unpack_states
boards = np.load({path!r})
size = {size}
states = unpack_states(boards, size)
mask = np.zeros((len(states), core.num_actions(size)), np.bool_)
legal_mask(states, mask)
planes = np.zeros((len(states), num_channels(4, 2), size, size), np.float32)
encode(states, planes, 4, 2)
buf = np.empty(core.num_actions(size), np.int64)
moves = 0
for s in states:
    for _ in range(6):  # a few plies of each position: placements and spreads on odd stacks
        n = core.generate_moves(s, buf)
        if n == 0:
            break
        core.make_move(s, int(buf[(moves * 7919) % n]))
        moves += 1
        if s[core.I_RESULT]:
            break
print("ok", len(states), moves)
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("size", [5, 7])
def test_every_board_that_passes_is_safe_for_the_compiled_rules(tmp_path, size) -> None:
    """Fuzz the kind: real packed positions with one or a few bytes changed at random. Every row
    that ``board_problem`` accepts is decoded, hashed, given its legal moves and encoded by the
    compiled code in a child process, which must not crash (a segfault would kill pytest)."""
    rng = np.random.default_rng(size)
    base = pack_states(_states(size, 40, seed=size), size)
    rows = np.repeat(base, 50, axis=0)
    nsq = size * size
    for r in range(len(rows)):
        for _ in range(int(rng.integers(1, 4))):
            kind = rng.integers(0, 5)
            if kind == 0:  # any byte
                rows[r, rng.integers(0, rows.shape[1])] = rng.integers(0, 256)
            elif kind == 1:  # a header number: size, ply, reserves, half-komi
                rows[r, :16].view(np.int16)[rng.integers(0, 7)] = rng.integers(-3, 140)
            elif kind == 2:  # a height
                rows[r, 16 + rng.integers(0, nsq)] = rng.integers(0, 130)
            elif kind == 3:  # a top type
                rows[r, 16 + nsq + rng.integers(0, nsq)] = rng.integers(0, 5)
            else:  # one colour bit of one word
                byte = 16 + 2 * nsq + rng.integers(0, rows.shape[1] - 16 - 2 * nsq)
                rows[r, byte] ^= np.uint8(1 << int(rng.integers(0, 8)))
    accepted = []
    for r in range(len(rows)):
        if board_problem(rows[r : r + 1], size) is None:
            accepted.append(rows[r])
    assert 150 < len(accepted) < len(rows) - 150  # both kinds occur: the fuzz tests something
    bad = rows[[board_problem(rows[r : r + 1], size) is not None for r in range(len(rows))]]
    problems = board_problem(bad, size)
    assert problems is not None and problems[0] == 0  # a batch reports its first bad row
    path = tmp_path / "boards.npy"
    np.save(path, np.stack(accepted))
    code = textwrap.dedent(_SAFE_CHECK.format(path=str(path), size=size))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("ok")


def test_a_field_whose_values_change_in_the_cast_to_its_dtype_is_refused() -> None:
    recs = _records(4, game=0)
    arrays = {f: getattr(recs, f) for f in Records.FIELDS}
    with pytest.raises(ValueError, match="replay field 'board'"):
        Records.from_arrays({**arrays, "board": recs.board.astype(np.float64) + 0.5}, 0)
    with pytest.raises(ValueError, match="replay field 'ply'"):
        Records.from_arrays({**arrays, "ply": np.full(4, 70_000, np.int64)}, 0)
    # whole values of another dtype load as the field's dtype
    back = Records.from_arrays({**arrays, "value": recs.value.astype(np.float64)}, 0)
    assert back.value.dtype == np.int8 and np.array_equal(back.value, recs.value)
    back.check_values(SIZE)
