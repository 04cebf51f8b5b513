"""int8 networks (takzero.nn.quantize): calibrated on game positions, deterministic, close to the
float32 network, refused in one line where they cannot be made, and used by self-play and the
players through the ``int8`` backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from takzero.config import load_config
from takzero.game.core import I_PLY, STATE_LEN
from takzero.nn.backends import quantize, with_backend
from takzero.nn.inference import Evaluator
from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
from takzero.nn.model_export import export_onnx, export_torchscript
from takzero.nn.quantize import (
    CALIBRATION_KEY,
    QuantizeError,
    calibration_states_of,
    policy_games_states,
)
from takzero.pipeline.selfplay import SelfPlayWorker

pytest.importorskip("onnxruntime")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _net(size: int = 5, channels: int = 16, blocks: int = 2, seed: int = 0) -> TakNet:
    """A small network with trained-looking batch-norm statistics (not an identity)."""
    torch.manual_seed(seed)
    model = TakNet(ModelConfig(size=size, channels=channels, blocks=blocks))
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return model.eval()


@pytest.fixture(scope="module")
def net5() -> TakNet:
    return _net()


def test_policy_games_are_real_positions_and_deterministic(net5: TakNet) -> None:
    ev = with_backend(Evaluator(net5, device="cpu"), "onnx")
    a = policy_games_states(ev, positions=200, games=8, seed=3)
    b = policy_games_states(ev, positions=200, games=8, seed=3)
    c = policy_games_states(ev, positions=200, games=8, seed=4)
    assert a.shape == (200, STATE_LEN) and a.dtype == np.int64
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a[:, I_PLY].max() > 10  # games, not 200 start positions
    assert len({row.tobytes() for row in a}) > 150


def test_int8_is_deterministic_and_close_to_float32(net5: TakNet) -> None:
    ev = Evaluator(net5, device="cpu")
    states = policy_games_states(with_backend(ev, "onnx"), positions=256, seed=0)
    q1, seconds = quantize(ev, states)
    q2, _ = quantize(ev, states)
    assert seconds > 0
    assert q1.metadata["precision"] == "int8" and q1.metadata["calibration_positions"] == 256
    assert q1.onnx_bytes == q2.onnx_bytes  # the same network and positions: the same int8 graph
    test = policy_games_states(with_backend(ev, "onnx"), positions=128, seed=9)
    p1, v1, _ = q1.evaluate(test)
    p2, v2, _ = q2.evaluate(test)
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(v1, v2)
    pf, vf, _ = ev.evaluate(test)
    assert np.abs(v1 - vf).mean() < 0.05
    assert (p1.argmax(1) == pf.argmax(1)).mean() > 0.8
    assert not np.array_equal(p1, pf)  # it is a different (quantized) network
    # the priors are still a distribution over the legal moves only
    np.testing.assert_allclose(p1.sum(1), 1.0, atol=1e-4)
    assert ((pf > 0) == (p1 > 0)).all() or ((p1 > 0) <= (pf > 0)).all()


def test_a_checkpoint_carries_its_calibration_positions(tmp_path: Path, net5: TakNet) -> None:
    states = policy_games_states(with_backend(Evaluator(net5, device="cpu"), "onnx"), positions=96, seed=1)
    path = tmp_path / "m.pt"
    torch.save(checkpoint_dict(net5, half_komi=0, **{CALIBRATION_KEY: torch.from_numpy(states)}), path)
    ev = Evaluator.load(path, device="cpu")
    np.testing.assert_array_equal(ev.calibration_states, states)
    a = with_backend(ev, "int8")
    b = with_backend(Evaluator.load(path, device="cpu"), "int8")
    assert a.metadata["calibration_positions"] == 96 and a.metadata["half_komi"] == 0
    assert a.onnx_bytes == b.onnx_bytes
    # without positions in the file: the network's own games, the same on every load
    plain = tmp_path / "plain.pt"
    torch.save(checkpoint_dict(net5, half_komi=0), plain)
    c = with_backend(Evaluator.load(plain, device="cpu"), "int8")
    d = with_backend(Evaluator.load(plain, device="cpu"), "int8")
    assert c.onnx_bytes == d.onnx_bytes and c.onnx_bytes != a.onnx_bytes


def test_an_onnx_file_quantizes_and_keeps_its_thread_count(tmp_path: Path, net5: TakNet) -> None:
    path = tmp_path / "m.onnx"
    export_onnx(net5, path, metadata={"half_komi": 0})
    ev = Evaluator.load(path, threads=1)
    assert ev.threads == 1
    two = with_backend(ev, "onnx", threads=2)
    assert two.threads == 2 and two._session.get_session_options().intra_op_num_threads == 2
    assert ev._session.get_session_options().intra_op_num_threads == 1
    q = with_backend(ev, "int8", threads=1)
    assert q.metadata["precision"] == "int8"
    with pytest.raises(QuantizeError, match="already int8"):
        quantize(q)


def test_what_cannot_be_quantized_is_refused_in_one_line(tmp_path: Path, net5: TakNet) -> None:
    ts = tmp_path / "m.ts"
    export_torchscript(net5, ts)
    with pytest.raises(ValueError, match="TorchScript") as info:
        with_backend(Evaluator.load(ts, device="cpu"), "int8")
    assert "\n" not in str(info.value)
    ev = Evaluator(net5, device="cpu")
    other_size = policy_games_states(with_backend(Evaluator(_net(size=4), device="cpu"), "onnx"), 16)
    with pytest.raises(QuantizeError, match="size 5"):
        quantize(ev, other_size)
    with pytest.raises(QuantizeError, match=CALIBRATION_KEY):
        calibration_states_of({CALIBRATION_KEY: np.zeros((3, 5), np.int64)})
    with pytest.raises(QuantizeError, match="could not quantize") as info:
        from takzero.nn.quantize import quantize_onnx_bytes

        quantize_onnx_bytes(b"not an onnx graph", np.zeros((1, 1, 5, 5), np.float32))
    assert "\n" not in str(info.value)


def test_selfplay_worker_with_int8_backend_calibrates_on_its_newest_positions() -> None:
    cfg = load_config(
        {
            "board": {"size": 4, "komi": 0.0},
            "model": {"channels": 8, "blocks": 1},
            "mcts": {"simulations": 4},
            "selfplay": {"games_per_worker": 8, "backend": "int8"},
            "device": "cpu",
        }
    )
    worker = SelfPlayWorker.from_run(cfg, worker_id=0, device="cpu")
    assert worker.backend == "int8" and worker.evaluator.metadata["precision"] == "int8"
    assert worker.quantize_seconds > 0
    done = 0
    for _ in range(40):
        recs, stats, _ = worker.play_step()
        done += 0 if recs is None else len(recs)
        assert stats["selfplay/quantize_seconds"] > 0
    assert done > 0 and worker._recent_count >= 64
    torch.manual_seed(7)
    worker.set_weights(TakNet(cfg.model_config()).state_dict(), generation=1)
    assert worker.evaluator.metadata["precision"] == "int8"
    assert worker.evaluator.metadata["calibration_positions"] == min(worker._recent_count, 512)


def test_every_convolution_of_a_fresh_network_runs_in_int8(tmp_path: Path) -> None:
    """A fresh network's folded convolution biases are all equal (zeros), which the exporter
    shares through Identity nodes; left so, the quantizer kept those convolutions in float and
    the "int8" network ran slower than the float32 one (bench_pipeline at generation 0)."""
    import collections

    import onnxruntime as ort

    torch.manual_seed(0)
    fresh = TakNet(ModelConfig(size=5, channels=16, blocks=2)).eval()
    q, _ = quantize(Evaluator(fresh, device="cpu"), threads=1)
    opts = ort.SessionOptions()
    opts.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(q.onnx_bytes, opts, providers=["CPUExecutionProvider"])
    import onnx

    ops = collections.Counter(n.op_type for n in onnx.load(str(tmp_path / "optimized.onnx")).graph.node)
    assert ops["Conv"] == 0 and ops["QLinearConv"] >= 5, ops


def test_the_process_backend_reaches_registry_players(tmp_path: Path, net5: TakNet, monkeypatch) -> None:
    """``takzero.play --backend`` / ``takzero.playtak --backend`` (set_play_backend): every
    network player loaded without a backend of its own, ``model:PATH`` specs included."""
    import takzero.players.network as network
    from takzero.players.registry import make_player

    monkeypatch.setattr(network, "_backend_value", "auto")
    path = tmp_path / "m.pt"
    torch.save(checkpoint_dict(net5, half_komi=0), path)
    assert network.NetworkPlayer.load(str(path)).backend == "auto"
    network.set_play_backend("int8")
    player = make_player(f"model:{path}:16")
    assert player.backend == "int8" and player.evaluator.metadata["precision"] == "int8"
    with pytest.raises(ValueError, match="backend must be one of"):
        network.set_play_backend("fp16")


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_checkpoint_with_weights_that_are_not_finite_is_refused_naming_it(tmp_path: Path, value: float) -> None:
    """A network of NaN or inf weights played its first legal move every time (hostile pass)."""
    torch.manual_seed(0)
    net = TakNet(ModelConfig(size=4, channels=8, blocks=1))
    with torch.no_grad():
        next(iter(net.parameters())).fill_(value)
    path = tmp_path / "bad.pt"
    torch.save(checkpoint_dict(net, half_komi=0), path)
    with pytest.raises(ValueError, match=r"bad\.pt: its weights are not finite") as info:
        Evaluator.load(path, device="cpu")
    assert "\n" not in str(info.value)


def test_auto_plays_int8_an_int8_file_as_it_is_and_float32_where_int8_is_refused(
    tmp_path: Path, net5: TakNet, monkeypatch
) -> None:
    """The ``auto`` play backend (the default of TEI, play, playtak and evaluate) quantizes a
    checkpoint or a float32 ONNX file; an int8 ONNX file runs as it is; a network the quantizer
    refuses plays in float32 onnxruntime with a warning naming why, instead of failing."""
    import takzero.nn.backends as backends
    from takzero.nn.model_export import set_onnx_metadata
    from takzero.players.network import AUTO_PLAY_BACKEND, play_evaluator

    assert AUTO_PLAY_BACKEND == "int8"
    ev = Evaluator(net5, device="cpu")
    auto = play_evaluator(ev, "auto", 1)
    assert auto.metadata["precision"] == "int8" and auto._session is not None
    import onnx

    proto = onnx.load_from_string(auto.onnx_bytes)
    set_onnx_metadata(proto, auto.metadata)  # as `export --format onnx-int8` writes it
    int8_file = tmp_path / "m.int8.onnx"
    int8_file.write_bytes(proto.SerializeToString())
    from_file = Evaluator.load(int8_file)
    again = play_evaluator(from_file, "auto", 1)
    assert again.metadata["precision"] == "int8"
    states = policy_games_states(with_backend(ev, "onnx"), positions=16, seed=1)
    np.testing.assert_array_equal(again.evaluate(states)[0], auto.evaluate(states)[0])

    def refuse(*_a, **_k):
        raise QuantizeError("onnxruntime could not quantize this graph")

    monkeypatch.setattr(backends, "quantize", refuse)
    with pytest.warns(UserWarning, match="int8 refused .*could not quantize"):
        fallback = play_evaluator(Evaluator(net5, device="cpu"), "auto", 1)
    assert fallback._session is not None and fallback.metadata.get("precision") != "int8"
