"""Model files built to hurt (issue 58's hostile pass): a network whose weights are finite but
whose outputs are NaN, values whose repr is astronomically long or too deeply nested, a run name
of a megabyte with newlines and terminal escapes, a sparse weight. Each is refused, or shown, in
one line naming the file, in bounded time and memory."""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict

ROOT = Path(__file__).resolve().parents[1]
#: the address space of a subprocess that reads a hostile file (torch and takzero need ~1 GiB)
MEMORY_LIMIT = 3 * 2**30


def _net(size: int = 4) -> TakNet:
    torch.manual_seed(0)
    return TakNet(ModelConfig(size=size, channels=8, blocks=1))


def _good(**extra) -> dict:
    return checkpoint_dict(_net(), half_komi=0, generation=3, **extra)


def _negvar() -> dict:
    """Finite weights, NaN outputs: a BatchNorm running variance of -1 (sqrt of a negative)."""
    d = _good()
    key = next(k for k in d["model_state"] if k.endswith("running_var"))
    d["model_state"][key] = torch.full_like(d["model_state"][key], -1.0)
    return d


def _dag(levels: int = 60) -> list:
    """A list whose repr is 2**levels long: each level holds the one below twice."""
    y: list = [0]
    for _ in range(levels):
        y = [y, y]
    return y


def _tuple_dag(levels: int = 8) -> tuple:
    y: tuple = (0,)
    for _ in range(levels):
        y = (y, y)
    return y


def _deep(depth: int = 200_000) -> list:
    y: list = []
    for _ in range(depth):
        y = [y]
    return y


_MARK = "DEEPLY-NESTED-MARK"


def _save_deep(obj, path: Path, depth: int = 200_000) -> None:
    """``torch.save(obj, path)`` with the string :data:`_MARK` in ``obj`` made a list nested
    ``depth`` deep: Python's pickler cannot write one (it recurses), so the pickle's opcodes are
    written directly (``depth`` EMPTY_LISTs, then APPENDs)."""
    import io
    import zipfile

    torch.save(obj, path)
    token = b"X" + len(_MARK).to_bytes(4, "little") + _MARK.encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name.endswith("data.pkl"):
                assert token in data
                data = data.replace(token, b"]" * depth + b"a" * (depth - 1))
            zout.writestr(name, data)
    path.write_bytes(buf.getvalue())


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _bounded(args: list[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """``python args`` under :data:`MEMORY_LIMIT`; a hang fails the test at ``timeout``."""
    try:
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout,
                              cwd=ROOT, preexec_fn=_limit_memory, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args} did not end within {timeout} s")


def _one_line_naming(text: str, path: Path) -> None:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, text[-3000:]
    assert str(path) in lines[0] and "Traceback" not in text, text[-3000:]


# -- a network of NaN outputs -------------------------------------------------------------------------


def _loaders():
    from takzero.nn.inference import Evaluator

    return {
        "checkpoint": lambda p: Evaluator.load(p, device="cpu"),
        "dict": lambda p: Evaluator.from_checkpoint(torch.load(p, weights_only=True), device="cpu"),
    }


@pytest.mark.parametrize("fmt", ["checkpoint", "onnx", "torchscript"])
def test_a_network_of_finite_weights_and_nan_outputs_is_refused_at_load(tmp_path: Path, fmt: str) -> None:
    from takzero.nn.inference import Evaluator
    from takzero.nn.model_export import export_onnx, export_torchscript, model_metadata

    path = tmp_path / ("negvar.pt" if fmt != "onnx" else "negvar.onnx")
    d = _negvar()
    if fmt == "checkpoint":
        torch.save(d, path)
    else:
        net = _net()
        net.load_state_dict(d["model_state"])
        meta = model_metadata(net)
        if fmt == "onnx":
            pytest.importorskip("onnxruntime")
            export_onnx(net, path, metadata=meta)
        else:
            export_torchscript(net, path, metadata=meta)
    with pytest.raises(ValueError) as err:
        Evaluator.load(path, device="cpu")
    message = str(err.value)
    # an ONNX export folds the BatchNorm into its convolution: NaN weights, refused as such
    assert "outputs are not finite" in message or (fmt == "onnx" and "weights are not finite" in message)
    _one_line_naming(message, path)


def test_a_dict_checkpoint_of_nan_outputs_is_refused_too() -> None:
    from takzero.nn.inference import Evaluator

    with pytest.raises(ValueError, match="the checkpoint: its outputs are not finite"):
        Evaluator.from_checkpoint(_negvar(), device="cpu")


def test_a_sound_network_passes_the_output_check() -> None:
    from takzero.nn.inference import Evaluator, check_positions

    Evaluator.from_checkpoint(_good(), device="cpu")  # no error
    states = check_positions(4)
    assert len(states) == 9 and len({s.tobytes() for s in states}) == 9


class _NaNEvaluator:
    """An evaluator whose priors are NaN (or all zero) on every position."""

    size = 4
    metadata: dict = {}

    def __init__(self, value: float) -> None:
        self.value = value

    def evaluate(self, states: np.ndarray):
        from takzero.nn.actions import num_actions

        n = len(states)
        return np.full((n, num_actions(4)), self.value, np.float32), np.zeros(n, np.float32), np.zeros((n, 3))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), 0.0])
def test_the_calibration_games_give_up_on_unusable_priors(value: float) -> None:
    """The int8 calibration restarted a game on NaN priors, for ever: now a one-line
    QuantizeError after a bounded number of tries (which the play backends fall back from)."""
    from takzero.nn.quantize import QuantizeError, policy_games_states

    with pytest.raises(QuantizeError) as err:
        policy_games_states(_NaNEvaluator(value), positions=512)
    assert "\n" not in str(err.value) and "cannot be calibrated" in str(err.value)


@pytest.mark.timeout(300)
def test_the_tei_engine_refuses_a_network_of_nan_outputs_in_one_line(tmp_path: Path) -> None:
    """It hung before ``teiok``: the int8 calibration of the NaN network never ended."""
    path = tmp_path / "negvar.pt"
    torch.save(_negvar(), path)
    commands = tmp_path / "commands.txt"
    commands.write_text("tei\nisready\nquit\n")
    r = _bounded(["-m", "takzero.tei", "--model", str(path), "--commands", str(commands)], timeout=240)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert f"{path}: its outputs are not finite" in r.stderr, r.stderr[-2000:]


@pytest.mark.parametrize("case", ["negvar", "nan-weights"])
def test_export_refuses_a_network_that_cannot_play(tmp_path: Path, case: str, capsys) -> None:
    """It wrote a NaN network and said success."""
    from takzero.export import main

    path = tmp_path / f"{case}.pt"
    d = _negvar() if case == "negvar" else _good()
    if case == "nan-weights":
        key = next(k for k in d["model_state"] if k.endswith("weight"))
        d["model_state"][key] = torch.full_like(d["model_state"][key], float("nan"))
    torch.save(d, path)
    for fmt in ("onnx", "torchscript"):
        out = tmp_path / f"{case}.{fmt}"
        assert main([str(path), "-o", str(out), "--format", fmt]) == 1
        err = capsys.readouterr().err
        _one_line_naming(err, path)
        assert "not finite" in err and not out.exists()


# -- repr bombs and deep nesting -----------------------------------------------------------------------


def test_short_repr_is_bounded_whatever_the_value() -> None:
    from collections import OrderedDict

    from takzero.nn.quoting import short_repr, shown

    for value in (_dag(), OrderedDict(a=_dag()), {"k": _dag()}, (_dag(),), _deep(), 10**5000, "x" * 10**7,
                  b"y" * 10**7, torch.zeros(1000, 1000), {_tuple_dag(): 1}):
        text = short_repr(value)
        assert len(text) <= 60, text
    assert short_repr([1, "a", None]) == "[1, 'a', None]"
    assert shown("x\n\x1b[31mRED\x1b[0m" * 100_000, 80).endswith("(1,400,000 characters)")
    assert "\x1b" not in shown("\x1b[31m") and "\n" not in shown("a\nb") and shown("run-1") == "run-1"


_PLACES = {  # where a file's value reached a repr or str: the DAG and the deep list in each
    "lineage": lambda v: _good(lineage=v),
    "lineage-runs": lambda v: _good(lineage={"runs": v}),
    "lineage-minutes": lambda v: _good(lineage={"minutes": v}),
    "run_name": lambda v: _good(run_name=v),
    "gpool_every": lambda v: {**_good(), "model_config": {**_good()["model_config"], "gpool_every": v}},
    "channels": lambda v: {**_good(), "model_config": {**_good()["model_config"], "channels": v}},
    "trunk": lambda v: {**_good(), "model_config": {**_good()["model_config"], "trunk": v}},
    "heads": lambda v: {**_good(), "model_config": {**_good()["model_config"], "heads": [v]}},
    "half_komi": lambda v: _good() | {"half_komi": v},
}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("nesting", ["dag", "deep"])
def test_export_of_a_repr_bomb_is_one_line_in_bounded_time_and_memory(tmp_path: Path, nesting: str) -> None:
    """A self-referencing lineage (2**60 characters of repr) hung export; a list nested 200,000
    deep gave 'maximum recursion depth exceeded' without naming the file."""
    paths = []
    for place, make in _PLACES.items():
        path = tmp_path / f"{place}.pt"
        if nesting == "dag":
            torch.save(make(_dag()), path)
        else:
            _save_deep(make(_MARK), path)
        paths.append(path)
    code = textwrap.dedent(f"""
        import sys
        from takzero.export import main
        from takzero.nn.inference import Evaluator
        for p in {[str(p) for p in paths]!r}:
            assert main([p, "-o", p + ".onnx", "--format", "onnx"]) == 1, p
            try:  # the player's loader reads no lineage nor run name: those load
                Evaluator.load(p, device="cpu")
                print("LOAD ok", file=sys.stderr)
            except (ValueError, RuntimeError) as e:
                print("LOAD", e, file=sys.stderr)
    """)
    r = _bounded(["-c", code], timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2 * len(paths), r.stderr[-3000:]
    for path, (export_line, load_line) in zip(paths, zip(lines[::2], lines[1::2], strict=True), strict=True):
        assert export_line.startswith(f"export failed: {path}: "), export_line
        assert load_line == "LOAD ok" or load_line.startswith(f"LOAD {path}: "), load_line
        for line in (export_line, load_line):
            assert len(line) < 400 and "recursion" not in line, line


@pytest.mark.timeout(120)
def test_the_pipeline_readers_of_a_repr_bomb_answer_at_once() -> None:
    """Lineage, an owed check of the schedule, a model config: each one's error quotes the
    value, in bounded time (the repr of the DAG was built whole before it was cut)."""
    from takzero.pipeline.lineage import Lineage
    from takzero.pipeline.schedule import Check

    for value in (_dag(), _deep()):
        for bad in (value, {"minutes": value}, {"positions": value}, {"runs": value}, {"known": value}):
            with pytest.raises(ValueError, match="lineage: "):
                Lineage.from_dict(bad)
        with pytest.raises(ValueError, match="an owed check is"):
            Check.from_list(value)
        for key in ("gpool_every", "channels", "size"):
            with pytest.raises(ValueError, match=f"model config {key} must be a whole number"):
                ModelConfig.from_dict({**_net().config.to_dict(), key: value})
    assert Lineage(runs=("a\x1b[31m\n" * 10**5,)).describe().count("\n") == 0


# -- what is shown of a file ---------------------------------------------------------------------------


def test_export_shows_a_files_strings_cut_and_escaped(tmp_path: Path, capsys) -> None:
    from takzero.export import main

    name = "x\n\x1b[31mRED\x1b[0m" * 100_000
    path = tmp_path / "runname.pt"
    torch.save(_good(run_name=name, lineage={"runs": [name, "b"]}), path)
    assert main([str(path), "-o", str(tmp_path / "m.onnx"), "--format", "onnx"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "\x1b" not in out and len(out) < 1000, out[:2000]
    assert main([str(tmp_path / "m.onnx"), "--info"]) == 0
    info = capsys.readouterr().out
    assert "\x1b" not in info and len(info) < 5000 and "(1,400,000 characters)" in info


# -- weights that are not dense tensors ----------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sparse", "complex"])
def test_a_weight_that_is_not_a_dense_real_tensor_is_one_line(tmp_path: Path, kind: str) -> None:
    """A sparse weight gave torch's multi-line 'Error(s) in loading state_dict for TakNet'."""
    from takzero.nn.inference import Evaluator

    d = _good()
    key = next(k for k in d["model_state"] if k.endswith("weight"))
    w = d["model_state"][key]
    d["model_state"][key] = w.to_sparse() if kind == "sparse" else w.to(torch.complex64)
    path = tmp_path / f"{kind}.pt"
    torch.save(d, path)
    with pytest.raises(ValueError) as err:
        Evaluator.load(path, device="cpu")
    _one_line_naming(str(err.value), path)
    assert "dense real tensors" in str(err.value)
