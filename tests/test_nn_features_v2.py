"""Feature version 2: the road-threat, line-cover, group-span and flat-difference planes (golden
positions checked by hand and by brute force, symmetry equivariance, agreement with playing every
move), version 1 unchanged (a fixture written by the pre-version-2 code), the shipped version-1
model, and a version-2 model that trains and exports."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from takzero.game import Position, core
from takzero.game.moves import square_name
from takzero.nn import actions as A
from takzero.nn import features as F
from takzero.nn.inference import Evaluator
from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict, total_loss
from takzero.nn.model_export import export_torchscript

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "features_v1.npz"
#: the first shipped 5x5 network (features v1, no extra heads)
SHIPPED = ROOT / "checkpoints" / "pretrained" / "5x5_v1.pt"
THREATS = ("own_place_road", "opp_place_road", "own_spread_road", "opp_spread_road")


def v2_planes(states: np.ndarray, layers: int | None = None) -> np.ndarray:
    size = int(states[0, core.I_SIZE])
    out = F.new_planes(len(states), size, layers, version=2)
    return F.encode(states, out, version=2)


def channels(size: int) -> dict[str, int]:
    names = F.channel_names(F.default_layers(size), version=2)
    return {name: i for i, name in enumerate(names)}


def squares_of(plane: np.ndarray) -> set[str]:
    size = plane.shape[-1]
    return {square_name(int(sq), size) for sq in np.flatnonzero(plane.reshape(-1) == 1.0)}


def flipped(pos: Position) -> Position:
    """The same position with the other side to move (ply ^ 1), as the encoder's opponent view."""
    state = pos.state.copy()
    state[core.I_PLY] ^= 1
    state[core.I_HASH] = core.hash_from_scratch(state)
    return Position(state)


def brute_force_road_moves(pos: Position) -> tuple[set[str], set[str]]:
    """(squares where a placement, origins where a spread) of the side to move ends the game with
    a road win for that side: every legal move played with the Position API."""
    mover = pos.side_to_move
    place: set[str] = set()
    spread: set[str] = set()
    for move in pos.legal_moves():
        result = pos.play(move).result
        if result.reason == "road" and result.winner == mover:
            (place if move.is_placement else spread).add(square_name(move.square, pos.size))
    return place, spread


def brute_force_threats(pos: Position) -> dict[str, set[str]]:
    own_place, own_spread = brute_force_road_moves(pos)
    opp_place, opp_spread = brute_force_road_moves(flipped(pos))
    return {
        "own_place_road": own_place,
        "opp_place_road": opp_place,
        "own_spread_road": own_spread,
        "opp_spread_road": opp_spread,
    }


def sample_states(size: int, count: int, seed: int, half_komi: int = 0) -> np.ndarray:
    """``count`` positions of ``size``: half from random games, half the same kind of position
    with one rank or file of a random colour filled with flats but for one random square (flats
    pushed onto whatever stands there; positions that end up finished are dropped). Random games
    alone seldom hold a road threat on the larger boards."""
    rng = np.random.default_rng(seed)
    states = F.random_states(size, 2 * count, seed=seed, min_plies=2 * size,
                             max_plies=20 * size, half_komi=half_komi, spread_bias=0.3)
    lined = []
    for state in states[count:]:
        s = state.copy()
        colour, line, gap = rng.integers(2), rng.integers(size), rng.integers(size)
        vertical = rng.integers(2) == 1
        for i in range(size):
            sq = int(i * size + line if vertical else line * size + i)
            if i != gap and s[core.OFF_HEIGHT + sq] < 40:
                core._set_top(s, sq, core.EMPTY)
                core._push(s, sq, int(colour), 1)
                core._set_top(s, sq, core.FLAT)
        s[core.I_HASH] = core.hash_from_scratch(s)
        if core.compute_result(s, (int(s[core.I_PLY]) - 1) & 1) == core.RESULT_NONE:
            lined.append(s)
    lined = lined[: count // 2]
    return np.concatenate([np.stack(lined), states[: count - len(lined)]])


# Golden positions. Expected sets derived by hand (reasons in the comments), then checked against
# the brute force above and against the encoder.
GOLDEN = [
    pytest.param(
        # white a1-a4 needs a5 (file a); black b5-e5 needs a5 too (rank 5). Spreads: a4+ leaves a4
        # empty, b5< leaves b5 empty: no spread wins. c3 is a white wall (not a road piece).
        "x,2,2,2,2/1,x4/1,x,1S,x2/1,x4/1,x4 1 6", 0,
        {"own_place_road": {"a5"}, "opp_place_road": {"a5"},
         "own_spread_road": set(), "opp_spread_road": set()},
        id="5x5-both-want-a5",
    ),
    pytest.param(
        # white's 5-stack on a3 spreads 4a3>1111: a3 keeps its bottom white flat, b3-e3 get one
        # white flat each: rank 3 road. Black e1,e2,e4,e5 needs e3 (file e); black's single
        # flats cannot spread without leaving a hole in file e.
        "x4,2/x4,2/11111,x4/x4,2/x4,2 1 10", 0,
        {"own_place_road": set(), "opp_place_road": {"e3"},
         "own_spread_road": {"a3"}, "opp_spread_road": set()},
        id="5x5-stack-spread",
    ),
    pytest.param(
        # white c1-c4, capstone on c5 over two white flats, black wall on c6: c5+ flattens the
        # wall (lone capstone), c5 keeps a white flat: file c road; no empty square completes it.
        # Black f1,f2,f3,f5,f6 needs f4: placement, or e4>1 / 2e4> from the black 2-stack on e4.
        "x2,2S,x2,2/x2,11C,x2,2/x2,1,x,22,x/x2,1,x2,2/x2,1,x2,2/x2,1,x2,2 1 12", 0,
        {"own_place_road": set(), "opp_place_road": {"f4"},
         "own_spread_road": {"c5"}, "opp_spread_road": {"e4"}},
        id="6x6-capstone-flattens",
    ),
    pytest.param(
        # black to move. Black b1-b3 needs b4 (placement). a4> moves black's top flat to b4 and
        # uncovers white's a4 flat: both roads (a1-a4 white, b1-b4 black), the mover wins (dragon
        # clause). White a1-a3 would need a4, which is occupied: no white threat.
        "12,x3/1,2,x2/1,2,x2/1,2,x2 2 6", 1,
        {"own_place_road": {"b4"}, "opp_place_road": set(),
         "own_spread_road": {"a4"}, "opp_spread_road": set()},
        id="4x4-dragon-clause",
    ),
]


@pytest.mark.parametrize(("tps", "half_komi", "expected"), GOLDEN)
def test_golden_threats(tps: str, half_komi: int, expected: dict[str, set[str]]) -> None:
    pos = Position.from_tps(tps, half_komi=half_komi)
    assert not pos.is_over
    assert brute_force_threats(pos) == expected  # the hand derivation
    planes = v2_planes(pos.state[None])[0]
    ch = channels(pos.size)
    assert {name: squares_of(planes[ch[name]]) for name in THREATS} == expected
    # spread_road_origins on its own (the opponent's on the flipped copy); the state is restored
    state = pos.state.copy()
    bits = int(F.spread_road_origins(state, np.empty(core.num_actions(8), np.int64)))
    assert {square_name(sq, pos.size) for sq in range(pos.size**2) if bits >> sq & 1} == (
        expected["own_spread_road"]
    )
    assert np.array_equal(state, pos.state)


def test_golden_lines_span_and_flat_difference() -> None:
    # white (to move) a1-a4 and a wall on c3; black b5-e5
    pos = Position.from_tps("x,2,2,2,2/1,x4/1,x,1S,x2/1,x4/1,x4 1 6", half_komi=3)
    p = v2_planes(pos.state[None])[0]
    ch = channels(5)
    rank = np.arange(5)[:, None]
    file = np.arange(5)[None, :]
    # own road pieces in ranks 1-4 and file a (the wall on c3 does not count)
    assert np.array_equal(p[ch["own_lines"]], 0.5 * (rank < 4) + 0.5 * (file == 0))
    assert np.array_equal(p[ch["opp_lines"]], 0.5 * (rank == 4) + 0.5 * (file >= 1))
    span_own = np.zeros((5, 5), np.float32)
    span_own[0:4, 0] = 4 / 5  # one group over 4 ranks
    span_opp = np.zeros((5, 5), np.float32)
    span_opp[4, 1:5] = 4 / 5  # one group over 4 files
    assert np.array_equal(p[ch["own_group_span"]], span_own)
    assert np.array_equal(p[ch["opp_group_span"]], span_opp)
    # 4 flats each, komi 1.5 against white (to move): (2 * 0 - 3) / (2 * 5)
    assert np.allclose(p[ch["flat_diff"]], -3 / 10)
    # the 4x4 dragon position: black to move, 4 black flats to 3 white, half-komi 1 for black
    pos = Position.from_tps("12,x3/1,2,x2/1,2,x2/1,2,x2 2 6", half_komi=1)
    p = v2_planes(pos.state[None])[0]
    ch = channels(4)
    assert np.allclose(p[ch["flat_diff"]], (2 * (4 - 3) + 1) / 8)
    # black's groups: {a4} (its neighbours b4 and a3 are empty and white) and {b1, b2, b3}
    span = np.zeros((4, 4), np.float32)
    span[3, 0] = 1 / 4
    span[0:3, 1] = 3 / 4
    assert np.array_equal(p[ch["own_group_span"]], span)


def test_group_span_of_a_road_is_one() -> None:
    # a finished position (white road on rank 1) is encoded as if the game went on
    pos = Position.from_tps("x4/x4/2,2,x2/1,1,1,1 2 4")
    assert pos.is_over
    p = v2_planes(pos.state[None])[0]
    ch = channels(4)
    assert np.array_equal(p[ch["opp_group_span"], 0], np.ones(4, np.float32))


def test_opening_plies_have_no_threats() -> None:
    for size in (3, 4, 5, 6):
        state = core.new_state(size, *core.STANDARD_RESERVES[size])
        for ply in range(2):
            planes = v2_planes(state[None])[0]
            ch = channels(size)
            for name in THREATS:
                assert planes[ch[name]].max() == 0.0
            assert F.spread_road_origins(state.copy(), np.empty(core.num_actions(8), np.int64)) == 0
            core.make_move(state, core.make_placement(ply, core.FLAT))


@pytest.mark.parametrize("size", [3, 4, 5, 6, 7, 8])
def test_threat_planes_agree_with_playing_every_move(size: int) -> None:
    states = sample_states(size, 60, seed=size)
    planes = v2_planes(states)
    ch = channels(size)
    found = dict.fromkeys(THREATS, 0)
    for state, p in zip(states, planes, strict=True):
        if state[core.I_PLY] < 2:
            continue
        expected = brute_force_threats(Position(state.copy()))
        for name in THREATS:
            assert squares_of(p[ch[name]]) == expected[name], (name, Position(state).to_tps())
            found[name] += bool(expected[name])
    if size >= 4:  # random games make threats of every kind
        assert min(found.values()) >= 1, found


@pytest.mark.parametrize("size", [3, 4, 5, 6, 7, 8])
def test_equivariance_under_the_8_symmetries(size: int) -> None:
    states = sample_states(size, 48, seed=50 + size, half_komi=size - 4)
    planes = v2_planes(states)
    ch = channels(size)
    new = slice(ch["own_place_road"], ch["flat_diff"] + 1)
    assert planes[:, new].any(axis=(0, 2, 3)).sum() >= (9 if size >= 4 else 5)  # not all zero
    for t in range(8):
        moved = np.stack([A.transform_state(s, t) for s in states])
        assert np.array_equal(v2_planes(moved), A.transform_planes(planes, t)), t


def test_version_1_planes_are_unchanged() -> None:
    data = np.load(FIXTURE)
    assert int(data["source_feature_version"]) == 1
    for size in range(3, 9):
        states = data[f"states_{size}"]
        for key, layers in ((f"planes_{size}", F.default_layers(size)), (f"planes_{size}_l2", 2)):
            v1 = F.new_planes(len(states), size, layers, version=1)
            F.encode(states, v1, version=1)
            assert np.array_equal(v1, data[key]), key
            assert v1.tobytes() == data[key].tobytes()  # bit for bit, -0.0 included
            # version 2 starts with the version-1 channels
            v2 = v2_planes(states, layers)
            assert np.array_equal(v2[:, : v1.shape[1]], data[key]), key


def test_shipped_version_1_model_loads_and_plays() -> None:
    ev = Evaluator.from_checkpoint(SHIPPED, device="cpu")
    assert ev.feature_version == 1 and ev.layers == 7 and ev.in_channels == F.num_channels(7, 1)
    assert ev.config.feature_version == 1
    data = np.load(FIXTURE)
    priors, values, _ = ev.evaluate(data["model_states"])
    np.testing.assert_allclose(priors, data["model_priors"], rtol=0, atol=2e-6)
    np.testing.assert_allclose(values, data["model_values"], rtol=0, atol=2e-6)
    # it plays a legal move
    pos = Position.from_tps("x5/x2,2,x2/x,1,1C,2,x/x2,2,x2/x5 1 4")
    priors, _, _ = ev.evaluate(pos.state[None])
    move = A.action_to_move(int(np.argmax(priors[0])), 5)
    assert move in set(pos.legal_move_codes().tolist())
    pos.play(int(move))


def test_evaluator_reads_a_missing_version_as_1() -> None:
    model = TakNet(ModelConfig(size=4, channels=8, blocks=1, feature_version=1))
    meta = {"size": 4, "in_channels": model.config.in_channels}
    ev = Evaluator(model, device="cpu", metadata=meta)
    assert ev.feature_version == 1
    with pytest.raises(ValueError):
        Evaluator(model, device="cpu", metadata={**meta, "feature_version": 2})
    with pytest.raises(ValueError):
        Evaluator(model, device="cpu", metadata={**meta, "feature_version": 3})


def test_version_2_model_builds_trains_and_exports(tmp_path: Path) -> None:
    cfg = ModelConfig(size=5, channels=16, blocks=2)
    assert cfg.feature_version == F.FEATURE_VERSION == 2
    assert cfg.in_channels == F.num_channels(7, 2) == 38
    torch.manual_seed(0)
    model = TakNet(cfg)
    states = F.random_states(5, 16, seed=3, min_plies=4, max_plies=40)
    planes = v2_planes(states)
    mask = np.zeros((16, A.num_actions(5)), bool)
    A.legal_mask(states, mask)
    x, m = torch.from_numpy(planes), torch.from_numpy(mask)
    target = m.float() / m.float().sum(1, keepdim=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    before = [p.detach().clone() for p in model.parameters()]
    loss, _ = total_loss(model(x), m, target, torch.zeros(16))
    opt.zero_grad()
    loss.backward()
    opt.step()
    assert torch.isfinite(loss)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    # checkpoint and TorchScript round trips evaluate like the eager model
    eager = Evaluator(TakNet(cfg), device="cpu")
    eager.load_state_dict(model.state_dict())
    expected = eager.evaluate(states)
    ckpt = tmp_path / "v2.pt"
    torch.save(checkpoint_dict(model), ckpt)
    ts = tmp_path / "v2.ts"
    meta = export_torchscript(model, ts)
    assert meta["feature_version"] == 2 and meta["in_channels"] == 38
    for path in (ckpt, ts):
        ev = Evaluator.load(path, device="cpu")
        assert ev.feature_version == 2
        got = ev.evaluate(states)
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_allclose(a, b, atol=1e-5)
    # a version-1 model of the same shape takes fewer planes
    assert ModelConfig(size=5, feature_version=1).in_channels == 29
