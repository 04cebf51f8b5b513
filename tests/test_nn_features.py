"""Input planes: shapes and exact channel contents on hand-built positions (the channels of feature
version 1, which version 2 keeps; the version-2 planes are tested in test_nn_features_v2.py)."""

from __future__ import annotations

import numpy as np
import pytest

from takzero.game import core
from takzero.game.core import (
    I_CAPS,
    I_HALF_KOMI,
    I_PLY,
    I_STONES,
    OFF_HEIGHT,
    OFF_HI,
    OFF_LO,
    OFF_TOP,
    STANDARD_RESERVES,
    STATE_LEN,
)
from takzero.nn import features as F

TOP_TYPES = {"": core.FLAT, "S": core.WALL, "C": core.CAP}


def square(name: str, size: int) -> int:
    return (int(name[1:]) - 1) * size + (ord(name[0]) - ord("a"))


def build(size: int, stacks: dict[str, str], ply: int = 2, half_komi: int = 0) -> np.ndarray:
    """Position from TPS-like stacks ({'c3': '1212S'}: colours bottom to top, optional S/C top);
    reserves are the standard counts minus the pieces on the board."""
    stones, caps = STANDARD_RESERVES[size]
    state = core.new_state(size, stones, caps, half_komi)
    used = np.zeros((2, 2), np.int64)  # [colour, stone/cap]
    for name, text in stacks.items():
        sq = square(name, size)
        suffix = text[-1] if text[-1] in "SC" else ""
        colours = [int(c) - 1 for c in text.rstrip("SC")]
        h = len(colours)
        lo = hi = 0
        for i, c in enumerate(colours):  # i = 0 bottom
            depth = h - 1 - i
            if depth < core.WORD_BITS:
                lo |= c << depth
            else:
                hi |= c << (depth - core.WORD_BITS)
        state[OFF_HEIGHT + sq] = h
        state[OFF_LO + sq] = lo
        state[OFF_HI + sq] = hi
        state[OFF_TOP + sq] = TOP_TYPES[suffix]
        for i, c in enumerate(colours):
            used[c, 1 if (suffix == "C" and i == h - 1) else 0] += 1
    for c in range(2):
        state[I_STONES + c] -= used[c, 0]
        state[I_CAPS + c] -= used[c, 1]
        assert state[I_STONES + c] >= 0 and state[I_CAPS + c] >= 0
    state[I_PLY] = ply
    state[core.I_HASH] = core.hash_from_scratch(state)
    return state


def planes_of(
    state: np.ndarray, layers: int | None = None, version: int = 1
) -> tuple[np.ndarray, dict[str, int]]:
    size = int(state[core.I_SIZE])
    out = F.new_planes(1, size, layers, version)
    F.encode(state[None], out, version=version)
    layers = F.layers_from_channels(out.shape[1], version)
    return out[0], {name: i for i, name in enumerate(F.channel_names(layers, version))}


def test_channel_count_and_names() -> None:
    assert F.num_channels(8, 1) == 31 and F.num_channels(1, 1) == 17
    assert F.num_channels(8, 2) == 40 and F.num_channels(8) == F.num_channels(8, F.FEATURE_VERSION)
    assert F.default_layers(6) == 8
    for version in F.FEATURE_VERSIONS:
        for layers in (1, 5, 8):
            assert len(F.channel_names(layers, version)) == F.num_channels(layers, version)
            assert F.layers_from_channels(F.num_channels(layers, version), version) == layers
        # version 2 keeps the channels of version 1 in front
        assert F.channel_names(8, version)[:31] == F.channel_names(8, 1)
    with pytest.raises(ValueError):
        F.layers_from_channels(30, 1)
    with pytest.raises(ValueError):
        F.layers_from_channels(31, 2)
    with pytest.raises(ValueError):
        F.num_channels(0)
    with pytest.raises(ValueError):
        F.num_channels(8, 3)
    assert f"{F.FEATURE_VERSION}" in F.__doc__


def test_empty_board_opening() -> None:
    state = core.new_state(6, 30, 1)
    p, ch = planes_of(state)
    assert p.shape == (31, 6, 6) and p.dtype == np.float32
    ones = {"own_stones", "own_caps", "opp_stones", "opp_caps", "board", "opening"}
    for name, i in ch.items():
        expect = 1.0 if name in ones else 0.0
        assert np.all(p[i] == expect), name


def test_black_to_move_after_first_ply() -> None:
    # ply 0: white placed a BLACK flat on a1 (opening swap); now black moves
    state = core.new_state(6, 30, 1)
    core.make_move(state, core.make_placement(0, core.FLAT))
    p, ch = planes_of(state)
    assert p[ch["opening"]].min() == 1.0
    assert p[ch["own_layer0"], 0, 0] == 1.0 and p[ch["own_layer0"]].sum() == 1.0
    assert p[ch["own_flat"], 0, 0] == 1.0 and p[ch["own_flat"]].sum() == 1.0
    assert p[ch["opp_layer0"]].sum() == 0.0
    assert np.allclose(p[ch["own_stones"]], 29 / 30) and np.allclose(p[ch["opp_stones"]], 1.0)
    # after both opening plies the flag is off
    core.make_move(state, core.make_placement(35, core.FLAT))
    p, ch = planes_of(state)
    assert p[ch["opening"]].max() == 0.0
    assert p[ch["own_flat"], 5, 5] == 1.0  # black placed a white flat on f6; white is to move


def test_tall_mixed_stack_walls_and_caps() -> None:
    # c3: 13 pieces, bottom to top 1,2,2,1,1,1,2,1,2,2,1,2 then a white wall on top
    stack = "122111212212" + "1S"
    state = build(6, {"c3": stack, "d4": "21C", "a6": "2S", "f1": "1"}, ply=4)  # white to move
    p, ch = planes_of(state, layers=8)
    r, f = 2, 2
    colours_from_top = [int(c) - 1 for c in stack.rstrip("S")][::-1]
    for d in range(8):
        own = 1.0 if colours_from_top[d] == 0 else 0.0
        assert p[ch[f"own_layer{d}"], r, f] == own, d
        assert p[ch[f"opp_layer{d}"], r, f] == 1.0 - own, d
    buried = colours_from_top[8:]
    assert np.isclose(p[ch["own_buried"], r, f], buried.count(0) / F.BURIED_SCALE)
    assert np.isclose(p[ch["opp_buried"], r, f], buried.count(1) / F.BURIED_SCALE)
    assert p[ch["own_wall"], r, f] == 1.0
    # d4 = rank 4, file d: black bottom, white capstone on top
    assert p[ch["own_cap"], 3, 3] == 1.0 and p[ch["own_layer0"], 3, 3] == 1.0
    assert p[ch["opp_layer1"], 3, 3] == 1.0 and p[ch["own_layer2"], 3, 3] == 0.0
    assert p[ch["opp_wall"], 5, 0] == 1.0
    assert p[ch["own_flat"], 0, 5] == 1.0
    expected_tops = {"own_flat": 1, "own_wall": 1, "own_cap": 1, "opp_flat": 0, "opp_wall": 1}
    expected_tops["opp_cap"] = 0
    for name, count in expected_tops.items():
        assert p[ch[name]].sum() == count, name
    # a square holds at most one top type; empty squares have none
    tops = sum(p[ch[name]] for name in expected_tops)
    heights = state[OFF_HEIGHT : OFF_HEIGHT + 36].reshape(6, 6)
    assert np.array_equal(tops, (heights > 0).astype(np.float32))
    # layer planes: exactly min(height, L) pieces per square
    layer_sum = p[: 2 * 8].sum(axis=0)
    assert np.array_equal(layer_sum, np.minimum(heights, 8).astype(np.float32))
    # reserves (white is to move and has used its capstone on d4)
    assert np.allclose(p[ch["own_stones"]], state[I_STONES] / 30)
    assert np.allclose(p[ch["own_caps"]], 0.0) and np.allclose(p[ch["opp_caps"]], 1.0)
    assert np.allclose(p[ch["opp_stones"]], state[I_STONES + 1] / 30)


def test_very_tall_stack_uses_second_colour_word() -> None:
    # 8x8: 70 pieces on one square; depth >= 62 lives in the OFF_HI word
    rng = np.random.default_rng(5)
    colours = rng.integers(0, 2, size=70)
    colours[-1] = 1  # black on top
    text = "".join(str(c + 1) for c in colours)
    state = build(8, {"e5": text}, ply=7)  # black to move
    assert state[OFF_HI + square("e5", 8)] != 0
    p, ch = planes_of(state, layers=3)
    from_top = colours[::-1]
    buried = from_top[3:]
    assert np.isclose(p[ch["own_buried"], 4, 4], (buried == 1).sum() / F.BURIED_SCALE)
    assert np.isclose(p[ch["opp_buried"], 4, 4], (buried == 0).sum() / F.BURIED_SCALE)
    # and with enough layers every piece is a layer plane (including depths >= 62)
    p, ch = planes_of(state, layers=70)
    for d in (0, 61, 62, 69):
        own = 1.0 if from_top[d] == 1 else 0.0
        assert p[ch[f"own_layer{d}"], 4, 4] == own and p[ch[f"opp_layer{d}"], 4, 4] == 1 - own
    assert p[ch["own_buried"]].sum() == 0.0 and p[ch["opp_buried"]].sum() == 0.0


@pytest.mark.parametrize("half_komi", [0, 3, -2])
def test_komi_plane_is_from_the_movers_view(half_komi: int) -> None:
    white = build(5, {"a1": "1", "b2": "2"}, ply=2, half_komi=half_komi)
    black = build(5, {"a1": "1", "b2": "2"}, ply=3, half_komi=half_komi)
    pw, ch = planes_of(white)
    pb, _ = planes_of(black)
    assert np.allclose(pw[ch["komi"]], -half_komi / F.KOMI_SCALE)
    assert np.allclose(pb[ch["komi"]], half_komi / F.KOMI_SCALE)


def colour_swap(state: np.ndarray) -> np.ndarray:
    """Same board with every piece's colour flipped, reserves swapped, the other side to move."""
    out = state.copy()
    size = int(state[core.I_SIZE])
    for sq in range(size * size):
        h = int(state[OFF_HEIGHT + sq])
        lo_bits = min(h, core.WORD_BITS)
        out[OFF_LO + sq] ^= (1 << lo_bits) - 1
        if h > core.WORD_BITS:
            out[OFF_HI + sq] ^= (1 << (h - core.WORD_BITS)) - 1
    out[I_STONES], out[I_STONES + 1] = state[I_STONES + 1], state[I_STONES]
    out[I_CAPS], out[I_CAPS + 1] = state[I_CAPS + 1], state[I_CAPS]
    out[I_PLY] += 1
    out[I_HALF_KOMI] = -state[I_HALF_KOMI]
    out[core.I_HASH] = core.hash_from_scratch(out)
    return out


@pytest.mark.parametrize("version", [1, 2])
def test_planes_do_not_depend_on_the_movers_colour(version: int) -> None:
    states = F.random_states(6, 40, seed=11, min_plies=2, max_plies=80, half_komi=3)
    swapped = np.stack([colour_swap(s) for s in states])
    a = F.new_planes(40, 6, version=version)
    b = F.new_planes(40, 6, version=version)
    F.encode(states, a, version=version)
    F.encode(swapped, b, version=version)
    assert np.array_equal(a, b)
    # and the encoding is not trivially constant across positions
    assert not np.array_equal(a[0], a[1])


def test_encode_overwrites_and_validates() -> None:
    states = F.random_states(5, 8, seed=2)
    out = F.new_planes(8, 5)
    F.encode(states, out)
    ref = out.copy()
    out[:] = 7.0  # garbage from a previous batch must not leak through
    F.encode(states, out)
    assert np.array_equal(out, ref)
    with pytest.raises(ValueError):
        F.encode(states, F.new_planes(8, 6))  # wrong board size
    with pytest.raises(ValueError):
        F.encode(states, out, layers=3)  # C does not match
    with pytest.raises(ValueError):
        F.encode(states, out, version=1)  # a version-2 buffer is not a version-1 one
    with pytest.raises(ValueError):
        F.encode(states, out, version=3)
    with pytest.raises(ValueError):
        F.encode(states.astype(np.int32), out)
    mixed = np.concatenate([states[:4], F.random_states(6, 4, seed=2)])
    with pytest.raises(ValueError):
        F.encode(mixed, out)
    assert F.encode(np.empty((0, STATE_LEN), np.int64), F.new_planes(0, 5)).shape[0] == 0


def test_random_states_are_legal_and_varied() -> None:
    states = F.random_states(6, 64, seed=4, min_plies=10, max_plies=60)
    assert states.shape == (64, STATE_LEN)
    assert (states[:, core.I_RESULT] == 0).all()
    for s in states[:16]:
        assert s[core.I_HASH] == core.hash_from_scratch(s)
    assert states[:, OFF_HEIGHT : OFF_HEIGHT + 36].max() >= 3
    assert np.array_equal(states, F.random_states(6, 64, seed=4, min_plies=10, max_plies=60))
