"""Files a user hands to takzero (issue 58, "trust under load and under attack"): each bad one is
refused in one line naming it, and none makes a command hang or play nonsense.

* an ONNX model whose weights hold NaN or inf is refused at load, as a checkpoint's are;
* a checkpoint that is a list, a bare tensor, a dict without ``model_state`` or
  ``model_config``, or whose ``half_komi`` / ``generation`` is not an integer: one line naming
  the file and what is wrong, from every loader;
* a PTN (or openings, or tactics) path that is not a regular file (a FIFO with no writer, a
  device, a folder) is refused before it is opened, by every command that reads one;
* ``python -m takzero.game link`` says when a link is longer than browsers reliably accept.
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict

ROOT = Path(__file__).resolve().parent.parent


def _net() -> TakNet:
    torch.manual_seed(0)
    return TakNet(ModelConfig(size=4, channels=8, blocks=1))


def _one_line_naming(message: str, path: Path) -> None:
    assert "\n" not in message.strip() and str(path) in message and len(message) < 400, message


# -- ONNX weights that are not finite ------------------------------------------------------------


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_an_onnx_model_with_non_finite_weights_is_refused_at_load(tmp_path: Path, value: float) -> None:
    pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import numpy_helper

    from takzero.nn.inference import Evaluator
    from takzero.nn.model_export import export_onnx

    good = tmp_path / "good.onnx"
    export_onnx(_net(), good, metadata={"half_komi": 0})
    Evaluator.load(good)  # the untouched file loads
    proto = onnx.load(str(good))
    floats = [t for t in proto.graph.initializer if numpy_helper.to_array(t).dtype == np.float32]
    weight = max(floats, key=lambda t: numpy_helper.to_array(t).size)
    values = numpy_helper.to_array(weight).copy()
    values.flat[values.size // 2] = value
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    bad = tmp_path / "bad.onnx"
    onnx.save(proto, str(bad))
    with pytest.raises(ValueError, match="weights are not finite") as err:
        Evaluator.load(bad)
    _one_line_naming(str(err.value), bad)
    assert weight.name in str(err.value)


def test_an_onnx_constant_may_be_minus_inf_but_not_nan(tmp_path: Path) -> None:
    """A node's constant of -inf is a mask's fill (legitimate); a NaN one is not."""
    onnx = pytest.importorskip("onnx")
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from takzero.nn.safe_load import check_onnx_file

    def graph(path: Path, fill: float) -> Path:
        const = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.full(4, fill, np.float32)))
        add = helper.make_node("Add", ["planes", "c"], ["y"])
        g = helper.make_graph([const, add], "g", [helper.make_tensor_value_info("planes", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
        return path

    check_onnx_file(graph(tmp_path / "mask.onnx", -np.inf))
    nan = graph(tmp_path / "nan.onnx", np.nan)
    with pytest.raises(ValueError, match="not finite") as err:
        check_onnx_file(nan)
    _one_line_naming(str(err.value), nan)


# -- malformed checkpoints --------------------------------------------------------------------------


def _good() -> dict:
    return checkpoint_dict(_net(), half_komi=0, generation=3)


MALFORMED = {
    "list": (lambda: [1, 2, 3], "holds a list"),
    "tensor": (lambda: torch.zeros(3), "holds a tensor"),
    "string": (lambda: "model", "holds a str"),
    "empty-dict": (lambda: {}, "no model_config and no model_state"),
    "no-model_state": (lambda: {k: v for k, v in _good().items() if k != "model_state"}, "no model_state"),
    "no-model_config": (lambda: {k: v for k, v in _good().items() if k != "model_config"}, "no model_config"),
    "half_komi-nan": (lambda: {**_good(), "half_komi": math.nan}, "half_komi is nan"),
    "half_komi-inf": (lambda: {**_good(), "half_komi": math.inf}, "half_komi is inf"),
    "half_komi-1.5": (lambda: {**_good(), "half_komi": 1.5}, "half_komi is 1.5"),
    "half_komi-str": (lambda: {**_good(), "half_komi": "4"}, "half_komi is a str"),
    "half_komi-bool": (lambda: {**_good(), "half_komi": True}, "half_komi is a bool"),
    "half_komi-None": (lambda: {**_good(), "half_komi": None}, "half_komi is a NoneType"),
    "half_komi-huge": (lambda: {**_good(), "half_komi": 10**6}, "outside -200..200"),
    "half_komi-tensor": (lambda: {**_good(), "half_komi": torch.tensor(2)}, "half_komi is a tensor"),
    "generation-nan": (lambda: {**_good(), "generation": math.nan}, "generation is nan"),
    "generation-negative": (lambda: {**_good(), "generation": -1}, "generation is -1"),
    "generation-str": (lambda: {**_good(), "generation": "3"}, "generation is a str"),
}


def _loaders():
    from takzero.nn.inference import Evaluator
    from takzero.nn.model import model_from_checkpoint
    from takzero.pipeline.export import load_checkpoint

    return {
        "Evaluator.load": lambda p: Evaluator.load(p, device="cpu"),
        "model_from_checkpoint": lambda p: model_from_checkpoint(str(p)),
        "export.load_checkpoint": load_checkpoint,
    }


@pytest.mark.parametrize("loader", ["Evaluator.load", "model_from_checkpoint", "export.load_checkpoint"])
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_checkpoint_is_one_line_naming_the_file(tmp_path: Path, case: str, loader: str) -> None:
    make, what = MALFORMED[case]
    path = tmp_path / f"{case}.pt"
    torch.save(make(), path)
    with pytest.raises(ValueError) as err:
        _loaders()[loader](path)
    message = str(err.value)
    _one_line_naming(message, path)
    assert "not a takzero checkpoint" in message and what in message, message


def test_a_whole_checkpoint_with_an_integral_float_komi_still_loads(tmp_path: Path) -> None:
    """What the check lets through: ``half_komi`` 4.0 (an integer written as a float), no
    ``generation`` or a None one (``export`` writes None when it does not know)."""
    from takzero.nn.inference import Evaluator

    path = tmp_path / "ok.pt"
    torch.save({**_good(), "half_komi": 4.0, "generation": None}, path)
    assert int(Evaluator.load(path, device="cpu").metadata["half_komi"]) == 4


def test_the_tei_engine_refuses_a_nan_komi_checkpoint_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "nan_komi.pt"
    torch.save({**_good(), "half_komi": math.nan}, path)
    commands = tmp_path / "commands.txt"
    commands.write_text("tei\nisready\nquit\n")
    r = subprocess.run([sys.executable, "-m", "takzero.tei", "--model", str(path), "--commands", str(commands)],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert f"{path}: not a takzero checkpoint: its half_komi is nan" in r.stderr, r.stderr[-2000:]


# -- paths that are not regular files ----------------------------------------------------------------


def _game_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "takzero.game", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, stdin=subprocess.DEVNULL)


COMMANDS = {
    "replay": lambda p, out: ["replay", p],
    "link": lambda p, out: ["link", p],
    "annotate": lambda p, out: ["annotate", p],
    "show": lambda p, out: ["show", "--ptn", p, "-o", str(out / "x.png")],
}


def _not_regular(tmp_path: Path, kind: str) -> tuple[str, str]:
    """(a path of ``kind``, the words the refusal uses for it)."""
    if kind == "fifo":
        fifo = tmp_path / "games.ptn"
        os.mkfifo(fifo)  # no writer: an open() for reading waits for ever
        return str(fifo), "a FIFO or pipe"
    if kind == "folder":
        (tmp_path / "games").mkdir()
        return str(tmp_path / "games"), "a folder"
    return "/dev/zero", "a device"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", ["fifo", "folder", "device"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_game_commands_refuse_a_path_that_is_not_a_regular_file(tmp_path: Path, command: str, kind: str) -> None:
    path, words = _not_regular(tmp_path, kind)
    try:
        r = _game_cli(*COMMANDS[command](path, tmp_path))
    except subprocess.TimeoutExpired:
        pytest.fail(f"'{command} {path}' ({kind}) hung")
    assert r.returncode in (1, 2), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("replay: ")]
    assert len(lines) == 1 and path in lines[0] and f"not a regular file ({words})" in lines[0], r.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("reader", ["openings", "tactics"])
def test_openings_and_tactics_files_refuse_a_fifo_before_opening_it(tmp_path: Path, reader: str) -> None:
    fifo, _ = _not_regular(tmp_path, "fifo")
    call = (f"from takzero.matches.openings import load_openings as f; f({fifo!r}, 5, 0)" if reader == "openings"
            else f"from takzero.matches.tactics_set import load_entries as f; f([{fifo!r}])")
    try:
        r = subprocess.run([sys.executable, "-c", call], capture_output=True, text=True, timeout=60, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {reader} reader hung on a FIFO")
    assert r.returncode == 1
    assert f"ValueError: {fifo}: not a regular file (a FIFO or pipe)" in r.stderr, r.stderr[-2000:]


def test_a_redirected_stdin_is_a_regular_file_and_still_reads(tmp_path: Path) -> None:
    game = tmp_path / "g.ptn"
    game.write_text('[Size "5"]\n\n1. a1 e5\n')
    with open(game) as f:
        r = subprocess.run([sys.executable, "-m", "takzero.game", "replay", "/dev/stdin"], stdin=f,
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0 and "game 1 (line 1): *" in r.stdout, r.stderr


# -- PTN Ninja links over the length browsers accept ---------------------------------------------


def _long_game(path: Path, plies: int = 800) -> Path:
    """A legal 5x5 game of ``plies`` + 4 plies (two flats walking to and fro) with a 150-character
    random comment every other ply: its link is some 50,000 characters (random text does not
    compress)."""
    rng = random.Random(1)
    walk = ["c3>", "c4>", "d3<", "d4<"]
    lines = ['[Size "5"]', "", "1. a1 e5", "2. c3 c4"]
    for k in range(plies // 2):
        note = "".join(rng.choice("0123456789abcdef") for _ in range(150))
        lines.append(f"{k + 3}. {walk[(2 * k) % 4]} {{{note}}} {walk[(2 * k + 1) % 4]}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_link_says_when_a_link_is_over_the_length_browsers_accept(tmp_path: Path) -> None:
    from takzero.io.ptn_ninja import MAX_LINK_CHARS, read_ptn_ninja_url

    big = _long_game(tmp_path / "big.ptn")
    r = _game_cli("link", str(big))
    assert r.returncode == 0, r.stderr
    link = r.stdout.strip()
    assert len(link) > MAX_LINK_CHARS and "\n" not in link  # still written, whole
    assert "c3>" in read_ptn_ninja_url(link)[0]
    warning = r.stderr.strip()
    assert "\n" not in warning and warning.startswith(f"{big}: warning: game 1: ")
    assert f"{len(link):,} characters" in warning and "MAX_LINK_CHARS" in warning
    small = _long_game(tmp_path / "small.ptn", plies=10)
    r = _game_cli("link", str(small))
    assert r.returncode == 0 and r.stderr == "" and r.stdout.startswith("https://ptn.ninja/")


def test_link_length_problem_is_none_up_to_the_bound() -> None:
    from takzero.io.ptn_ninja import MAX_LINK_CHARS, link_length_problem

    assert link_length_problem("x" * MAX_LINK_CHARS) is None
    problem = link_length_problem("x" * (MAX_LINK_CHARS + 1))
    assert problem is not None and f"{MAX_LINK_CHARS + 1:,} characters" in problem
