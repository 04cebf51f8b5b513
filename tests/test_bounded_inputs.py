"""Every input bounded (issue 58, item 4): the PTN readers, model files and the config values
that size an allocation. What reads a hostile input (a huge tag, ``/dev/zero``, a 1.6 KB model
file that claims 100,000 blocks) runs in a subprocess under a memory limit (``RLIMIT_AS``) and a
timeout, and must stop with one line naming the file and the bound."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from takzero.config import ConfigError, check_sizes, compose_preset
from takzero.game.ptn import (
    MAX_PTN_FILE_BYTES,
    MAX_PTN_PLIES,
    MAX_PTN_TAG_CHARS,
    PTNError,
    read_ptn,
    read_ptn_each,
    read_ptn_file,
)
from takzero.nn.model import (
    MAX_PARAMETERS,
    ModelConfig,
    TakNet,
    checkpoint_dict,
    model_from_checkpoint,
)
from takzero.nn.safe_load import check_model_file, load_weights_only

ROOT = Path(__file__).resolve().parent.parent
GIB = 2**30


def _limited(limit_bytes: int):
    def pre() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    return pre


def run_limited(args: list[str], limit_bytes: int, timeout: float, **kw) -> subprocess.CompletedProcess:
    """``python args`` under an address-space limit and a timeout (the test fails on either)."""
    return subprocess.run([sys.executable, *args], preexec_fn=_limited(limit_bytes), capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, **kw)


def _one_error_line(stderr: str, name: str) -> str:
    """The one line of ``stderr`` about the input (the replay summary aside): no traceback."""
    assert "Traceback" not in stderr and "MemoryError" not in stderr, stderr[-2000:]
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("replay: ")]
    assert len(lines) == 1, stderr[-2000:]
    assert name in lines[0]
    return lines[0]


# -- PTN -------------------------------------------------------------------------------------


def _long_tag_file(path: Path, chars: int) -> Path:
    path.write_text('[Size "5"]\n[Player1 "' + "x" * chars + '"]\n\n1. a1 e5\n')
    return path


def _long_game_file(path: Path) -> Path:
    path.write_text('[Size "5"]\n\n' + ("a1 " * 1000 + "\n") * (MAX_PTN_FILE_BYTES // 3010))
    return path


def _sparse_file(path: Path) -> Path:
    with open(path, "wb") as f:
        f.truncate(GIB)
    return path


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "make, bound",
    [
        (lambda tmp: "/dev/zero", "MAX_PTN_FILE_BYTES"),
        (lambda tmp: "/dev/urandom", "MAX_PTN_FILE_BYTES"),
        (lambda tmp: _sparse_file(tmp / "huge.ptn"), "MAX_PTN_FILE_BYTES"),
        (lambda tmp: _long_tag_file(tmp / "tag.ptn", 5_000_000), "MAX_PTN_LINE_CHARS"),
        (lambda tmp: _long_tag_file(tmp / "tag.ptn", 1_000_000), "MAX_PTN_TAG_CHARS"),
        (lambda tmp: _long_game_file(tmp / "long.ptn"), f"more than {MAX_PTN_PLIES} plies"),
    ],
    ids=["dev-zero", "dev-urandom", "1GB-file", "5MB-tag", "1MB-tag", "unnumbered-2.8M-plies"],
)
def test_replay_reads_a_bounded_amount_and_says_so_in_one_line(tmp_path: Path, make, bound: str) -> None:
    path = str(make(tmp_path))
    r = run_limited(["-m", "takzero.game", "replay", path], GIB, timeout=90)
    assert r.returncode == 1, r.stderr[-2000:]
    line = _one_error_line(r.stderr, path)
    assert bound in line


@pytest.mark.timeout(120)
def test_replay_of_an_endless_fifo_stops_at_the_bound(tmp_path: Path) -> None:
    fifo = tmp_path / "games.ptn"
    os.mkfifo(fifo)
    written = [0]

    def writer() -> None:  # writes up to 4 GiB; the reader must close the pipe long before
        chunk = b"a1 " * 100_000
        try:
            with open(fifo, "wb") as f:
                f.write(b'[Size "5"]\n')
                while written[0] < 4 * GIB:
                    f.write(chunk)
                    written[0] += len(chunk)
        except BrokenPipeError:
            pass

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    r = run_limited(["-m", "takzero.game", "replay", str(fifo)], GIB, timeout=90)
    assert r.returncode == 1
    line = _one_error_line(r.stderr, str(fifo))
    assert "not a regular file" in line and "MAX_PTN_FILE_BYTES" in line
    assert written[0] == 0  # refused before it was opened (test_file_trust.py): nothing was read
    os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # lets the writer's open() return
    t.join(30)


def test_each_reader_bound_is_one_ptn_error(tmp_path: Path) -> None:
    long_tag = '[Size "5"]\n[Event "' + "e" * (MAX_PTN_TAG_CHARS + 10) + '"]\n\n1. a1 e5\n'
    with pytest.raises(PTNError, match="MAX_PTN_TAG_CHARS") as err:
        read_ptn(long_tag)
    assert len(str(err.value)) < 300
    long_line = '[Size "5"]\n\n1. a1 e5 {' + "c" * (2**20 + 10) + "}\n"
    with pytest.raises(PTNError, match="MAX_PTN_LINE_CHARS"):
        read_ptn(long_line)
    with pytest.raises(PTNError, match="MAX_PTN_LINE_CHARS"):
        read_ptn_each(long_line)
    many = '[Size "5"]\n\n' + "\n".join(["a1 " * 1000] * (MAX_PTN_PLIES // 1000 + 1))
    with pytest.raises(PTNError, match=f"more than {MAX_PTN_PLIES} plies"):
        read_ptn(many, check=False)
    with pytest.raises(PTNError, match="a token of 5000 characters") as err:
        read_ptn('[Size "5"]\n\n1. ' + "a" * 5000)
    assert len(str(err.value)) < 300
    # the game after a game over a bound still reads
    out = read_ptn_each(long_tag + '\n[Size "5"]\n\n1. a1 e5\n')
    assert [type(g).__name__ for g in out] == ["RejectedGame", "PTNGame"]
    big = tmp_path / "big.ptn"
    big.write_text('[Size "5"]\n\n1. a1 e5\n' + " " * 1000)
    with pytest.raises(PTNError, match="over the reader's bound of 100 bytes") as err:
        read_ptn_file(big, max_bytes=100)
    assert str(err.value).startswith(str(big))
    assert len(read_ptn_file(big)) == 1


# -- model files -------------------------------------------------------------------------------


def _small_checkpoint(path: Path, **config) -> Path:
    """A real small checkpoint whose stored config says ``config`` (a lie when it is larger)."""
    ck = checkpoint_dict(TakNet(ModelConfig(size=5, channels=8, blocks=1)))
    ck["model_config"] = dict(ck["model_config"], **config)
    torch.save(ck, path)
    assert path.stat().st_size < 100_000
    return path


# Both loaders of a checkpoint file: the evaluator (tei, evaluate, match) and the model itself
# (export); each must refuse in one line, nothing allocated (the memory limit).
LOAD = ("import sys\nfrom takzero.nn.inference import Evaluator\n"
        "from takzero.nn.model import model_from_checkpoint\n"
        "for load in (lambda p: Evaluator.load(p, device='cpu'), model_from_checkpoint):\n"
        "    try:\n        load(sys.argv[1])\n"
        "    except (ValueError, RuntimeError, OSError) as e:\n"
        "        print(f'{type(e).__name__}: {e}', file=sys.stderr)\n"
        "sys.exit(2)\n")


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "config, words",
    [
        ({"blocks": 100_000}, "MAX_BLOCKS"),
        ({"channels": 10**7}, "MAX_CHANNELS"),
        ({"value_hidden": 10**8}, "MAX_VALUE_HIDDEN"),
        ({"blocks": 200, "channels": 1024}, "MAX_PARAMETERS"),
        ({"blocks": 150, "channels": 256}, "the weights do not fit the model config"),
    ],
    ids=["blocks", "channels", "value_hidden", "parameters", "weights-vs-config"],
)
def test_a_model_file_that_claims_a_huge_network_is_refused_before_allocating(
    tmp_path: Path, config: dict, words: str
) -> None:
    path = _small_checkpoint(tmp_path / "claims.pt", **config)
    r = run_limited(["-c", LOAD, str(path)], 2 * GIB, timeout=150)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and len(lines) == 2, r.stderr[-2000:]
    assert all(words in line for line in lines)
    assert str(path) in lines[1]  # (the evaluator's line names it once it passes the path on)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_as_model_path_is_refused_in_one_line(device: str) -> None:
    code = ("import sys\nfrom takzero.nn.safe_load import load_weights_only\n"
            "try:\n    load_weights_only(sys.argv[1])\nexcept ValueError as e:\n    print(e, file=sys.stderr)\n"
            "    sys.exit(2)\n")
    r = run_limited(["-c", code, device], 2 * GIB, timeout=100)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip() == f"{device}: not a regular file (a device, a pipe or a socket); a model is a file"


def test_a_model_file_over_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    path = _sparse_file(tmp_path / "huge.pt")
    bound = r"over the bound of 536,870,912 bytes of a model file \(MAX_MODEL_FILE_BYTES\)"
    with pytest.raises(ValueError, match=bound) as err:
        check_model_file(path, max_bytes=GIB // 2)
    assert str(err.value).startswith(str(path))
    with open(path, "r+b") as f:
        f.truncate(3 * GIB)
    with pytest.raises(ValueError, match="MAX_MODEL_FILE_BYTES"):
        load_weights_only(path)


def test_model_config_bounds_and_real_networks() -> None:
    big_real = ModelConfig(size=8, channels=256, blocks=40)
    assert big_real.estimated_parameters() < MAX_PARAMETERS
    for bad in ({"blocks": 10**5}, {"channels": 10**7}, {"policy_channels": 10**5}, {"layers": 10**4},
                {"gpool_channels": 10**6}, {"blocks": "6"}, {"channels": 64.0}):
        with pytest.raises(ValueError):
            ModelConfig(size=6, **bad)
    ck = checkpoint_dict(TakNet(ModelConfig(size=5, channels=8, blocks=1)))
    ck["model_config"] = dict(ck["model_config"], channels=16)
    with pytest.raises(RuntimeError, match="trunk.stem.*in the file.*by its model_config"):
        model_from_checkpoint(ck)


onnx = pytest.importorskip("onnx")


def _onnx_graph(path: Path, nodes, inits=(), outputs=("y",)) -> Path:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        list(nodes), "g", [helper.make_tensor_value_info("planes", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], initializer=list(inits),
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_check_onnx_file_refuses_huge_tensors_weights_and_external_data(tmp_path: Path) -> None:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from takzero.nn.safe_load import check_onnx_file

    shape = numpy_helper.from_array(np.array([10**9], np.int64), "shape")
    huge = _onnx_graph(tmp_path / "huge.onnx", [helper.make_node("ConstantOfShape", ["shape"], ["y"])], [shape])
    with pytest.raises(ValueError, match="MAX_ONNX_TENSOR_ELEMENTS") as err:
        check_onnx_file(huge)
    assert str(err.value).startswith(str(huge))
    w = numpy_helper.from_array(np.zeros((4, 1000), np.float32), "w")
    heavy = _onnx_graph(tmp_path / "heavy.onnx", [helper.make_node("MatMul", ["planes", "w"], ["y"])], [w])
    check_onnx_file(heavy)
    with pytest.raises(ValueError, match="MAX_ONNX_WEIGHT_BYTES"):
        check_onnx_file(heavy, max_weight_bytes=1000)
    ext = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 1000])
    ext.data_location = TensorProto.EXTERNAL
    entry = ext.external_data.add()
    entry.key, entry.value = "location", "weights.bin"
    external = _onnx_graph(tmp_path / "ext.onnx", [helper.make_node("MatMul", ["planes", "w"], ["y"])], [ext])
    with pytest.raises(ValueError, match="external data"):
        check_onnx_file(external)
    with pytest.raises(ValueError, match="not a regular file"):
        check_onnx_file("/dev/zero")


# -- config values that size an allocation ------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "override, key",
    [
        ("selfplay.games_per_worker=100000", "selfplay.games_per_worker"),
        ("mcts.simulations=1000000000", "mcts.simulations"),
        ("mcts.simulations=100000000000000000000", "mcts.simulations"),
        ("+mcts.node_budget=1000000000000000000", "mcts.node_budget"),
        ("+mcts.node_budget=100000000", "mcts.node_budget"),
        ("replay.top_k=1000000000", "replay.top_k"),
        ("replay.window_max=10000000000", "replay.window_max"),
        ("seed=18446744073709551616", "seed"),
        ("checkpoint_root=", "checkpoint_root"),
    ],
)
def test_config_values_that_size_an_allocation_are_checked_at_start_up(override: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        compose_preset("6x6", [override])
    assert str(err.value).startswith(f"{key}: ")
    assert "\n" not in str(err.value)


def test_the_memory_check_names_the_key_with_the_largest_share() -> None:
    cfg = compose_preset("6x6")
    cfg.replay.window_max, cfg.train.batch_size = 10_000_000, 1_000_000
    with pytest.raises(ConfigError, match=r"^train\.batch_size: needs about"):
        check_sizes(cfg, memory=64 * GIB)
    cfg = compose_preset("6x6")
    check_sizes(cfg, memory=4 * GIB)  # the shipped preset fits a small machine
    with pytest.raises(ConfigError, match=r"^replay\.window_max: the run's sizes need about"):
        check_sizes(cfg, memory=int(0.45 * GIB))


@pytest.mark.timeout(30)
def test_a_ray_address_where_nothing_answers_is_one_line_at_once() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConfigError, match=rf"^ray\.address: nothing answers at 127\.0\.0\.1:{port}"):
        compose_preset("6x6", [f"ray.address=127.0.0.1:{port}"])


@pytest.mark.timeout(180)
def test_train_refuses_a_huge_config_at_start_up_in_one_line(tmp_path: Path) -> None:
    r = run_limited(["-m", "takzero.train", "+config=6x6", "selfplay.games_per_worker=100000",
                     f"checkpoint_root={tmp_path}", "run_name=huge"], 3 * GIB, timeout=150)
    assert r.returncode != 0
    text = r.stdout + r.stderr
    assert "Traceback" not in text, text[-3000:]
    assert "selfplay.games_per_worker: needs about" in text
    assert not (tmp_path / "huge" / "replay").exists()
