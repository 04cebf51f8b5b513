"""No model or checkpoint file runs code: a file whose pickle calls ``os.system`` (or ``open``)
when unpickled is refused, with one line naming it, by every way takzero loads a model: the
library loaders, the command lines (play, export, evaluate and its model baselines, tei and its
``setoption name Model``, the playtak bot) and the resume of a run folder. The shipped models and
a run folder written by the code before weights-only loads (70b5039) still load, unchanged."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch
from smoke_config import smoke_config

from takzero.nn.model import (
    ModelConfig,
    TakNet,
    checkpoint_dict,
    model_from_checkpoint,
)
from takzero.nn.safe_load import (
    UnsafeFileError,
    dumps_weights_only,
    load_trusted,
    load_weights_only,
    to_plain,
)
from takzero.pipeline.checkpoints import atomic_torch_save, file_sha256, load_checked

ROOT = Path(__file__).resolve().parent.parent
PRETRAINED = sorted((ROOT / "checkpoints" / "pretrained").glob("*.pt"))
OLD_RUN = ROOT / "tests" / "data" / "run_70b5039"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


class SystemCall:
    """Unpickled, runs ``touch MARKER`` through ``os.system``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch '{self.marker}'",))


class OpenCall:
    """Unpickled, creates MARKER through ``open`` (no shell)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _model(size: int = 4) -> TakNet:
    torch.manual_seed(0)
    return TakNet(ModelConfig(size=size, channels=8, blocks=1))


def _evil(folder: Path, name: str = "evil.pt", kind: type = SystemCall) -> tuple[Path, Path]:
    """A real, loadable checkpoint of a 4x4 network with a code-running object beside it
    (``torch.save({"model": Evil(), ...})``); returns (file, the marker its code would make)."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / f"MARKER-{name}"
    path = folder / name
    torch.save({**checkpoint_dict(_model(), half_komi=0), "model": kind(marker)}, path)
    return path, marker


def _one_clear_line(text: str, path: Path) -> None:
    text = text.strip()
    assert "\n" not in text, text
    assert str(path) in text and "not a weights-only file" in text, text
    assert "python -m takzero.export --convert" in text, text


@pytest.fixture()
def evil(tmp_path: Path) -> tuple[Path, Path]:
    path, marker = _evil(tmp_path)
    yield path, marker
    assert not marker.exists(), "the file's code ran"


# -- the malicious file is really malicious ---------------------------------------------------


@pytest.mark.parametrize("kind", [SystemCall, OpenCall])
def test_the_malicious_file_runs_code_when_fully_unpickled(tmp_path: Path, kind: type) -> None:
    """The test file is what it claims: the old loader (``weights_only=False``) runs its code,
    so every test below would see the marker if a loader still unpickled fully."""
    path, marker = _evil(tmp_path, kind=kind)
    torch.load(path, weights_only=False)
    assert marker.exists()
    marker.unlink()
    with pytest.raises(UnsafeFileError) as err:
        load_weights_only(path)
    _one_clear_line(str(err.value), path)
    assert not marker.exists()


# -- every library load path --------------------------------------------------------------------


def _load_paths():
    from takzero.nn.inference import Evaluator
    from takzero.pipeline.export import export_checkpoint, load_checkpoint, read_metadata
    from takzero.players.network import NetworkPlayer
    from takzero.players.registry import make_player

    return {
        "Evaluator.load": lambda p, tmp: Evaluator.load(p, device="cpu"),
        "Evaluator.from_checkpoint": lambda p, tmp: Evaluator.from_checkpoint(p, device="cpu"),
        "model_from_checkpoint": lambda p, tmp: model_from_checkpoint(str(p)),
        "export.load_checkpoint": lambda p, tmp: load_checkpoint(p),
        "export.export_checkpoint": lambda p, tmp: export_checkpoint(p, tmp / "out.pt"),
        "export.read_metadata": lambda p, tmp: read_metadata(p),
        "NetworkPlayer.load": lambda p, tmp: NetworkPlayer.load(str(p), simulations=8),
        "make_player model:PATH": lambda p, tmp: make_player(f"model:{p}:8"),
        "load_checked": lambda p, tmp: load_checked(p),
    }


@pytest.mark.parametrize("name", list(_load_paths()))
def test_every_library_loader_refuses_the_file(evil, tmp_path: Path, name: str) -> None:
    path, marker = evil
    with pytest.raises(ValueError if name != "load_checked" else RuntimeError) as err:
        _load_paths()[name](path, tmp_path)
    _one_clear_line(str(err.value), path)
    assert not marker.exists()
    assert not (tmp_path / "out.pt").exists()


def test_evaluate_refuses_the_model_and_a_model_baseline(evil) -> None:
    from takzero.matches.evaluation import evaluate_model

    path, _ = evil
    good = PRETRAINED[0]
    for model, baselines in ((str(path), ["random"]), (str(good), [f"model:{path}:8"])):
        with pytest.raises(ValueError) as err:
            evaluate_model(model, baselines, pairs=1, simulations=2, ply_limit=4, say=lambda *_: None)
        _one_clear_line(str(err.value), path)


def test_tei_engine_refuses_the_model_option_and_keeps_playing(evil) -> None:
    """``setoption name Model value evil.pt`` (a GUI can send it) is refused with one info line;
    the engine keeps its player and answers ``go``."""
    from takzero.protocols.tei.engine import TEIEngine

    path, _ = evil
    lines: list[str] = []
    engine = TEIEngine(out=lines.append, player="random")
    engine.run(io.StringIO(f"tei\nsetoption name Model value {path}\nteinewgame 4\n"
                           "position startpos\ngo nodes 1\nquit\n"))
    refused = [ln for ln in lines if "not a weights-only file" in ln]
    assert len(refused) == 1 and refused[0].startswith("info string"), lines
    _one_clear_line(refused[0], path)
    assert any(ln.startswith("bestmove ") for ln in lines), lines
    with pytest.raises(ValueError) as err:
        TEIEngine(out=lambda _s: None, model=str(path))
    _one_clear_line(str(err.value), path)


def test_playtak_bot_refuses_the_model_before_connecting(evil, capsys) -> None:
    from takzero.playtak import main

    path, _ = evil
    status = main(["--model", str(path), "--guest", "--seek", "4", "60", "0",
                   "--server", "localhost:1"])
    err = capsys.readouterr().err
    assert status == 2
    _one_clear_line(err, path)


# -- the command lines, in their own processes --------------------------------------------------


def _cli(args: list[str], stdin: str = "", cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], input=stdin, capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=ENV)


@pytest.mark.parametrize(
    "args",
    [
        ["takzero.export", "{evil}", "-o", "{tmp}/out.pt"],
        ["takzero.evaluate", "{evil}", "--pairs", "1", "--baselines", "random"],
        ["takzero.evaluate", "{good}", "--pairs", "1", "--baselines", "model:{evil}:8"],
        ["takzero.play", "--model", "{evil}"],
        ["takzero.tei", "--model", "{evil}"],
        ["takzero.playtak", "--model", "{evil}", "--guest", "--seek", "4", "60", "0",
         "--server", "localhost:1"],
    ],
    ids=["export", "evaluate", "evaluate-baseline", "play", "tei", "playtak"],
)
@pytest.mark.slow  # command-line processes or whole games: ~3-20 s, run by .ci/run's slow pass
def test_command_lines_refuse_the_file_in_one_line(evil, tmp_path: Path, args: list[str]) -> None:
    path, marker = evil
    fill = {"evil": str(path), "good": str(PRETRAINED[0]), "tmp": str(tmp_path)}
    proc = _cli([a.format(**fill) for a in args], stdin="quit\n", cwd=tmp_path)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    _one_clear_line(proc.stderr, path)
    assert not marker.exists()
    assert not (tmp_path / "out.pt").exists()


@pytest.mark.slow  # command-line processes or whole games: ~3-20 s, run by .ci/run's slow pass
def test_tei_setoption_model_in_a_real_engine(evil, tmp_path: Path) -> None:
    path, marker = evil
    proc = _cli(["takzero.tei", "--player", "random"],
                stdin=f"tei\nsetoption name Model value {path}\nisready\nquit\n", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    refused = [ln for ln in proc.stdout.splitlines() if "not a weights-only file" in ln]
    assert len(refused) == 1, proc.stdout
    _one_clear_line(refused[0], path)
    assert "readyok" in proc.stdout
    assert not marker.exists()


# -- resume of a run folder holding the file ----------------------------------------------------


_cfg = smoke_config


def _plant(path: Path, marker: Path) -> None:
    """A malicious checkpoint with a matching sidecar (whoever wrote the one wrote the other)."""
    torch.save({"step": 99, "generation": 9, "x": SystemCall(marker)}, path)
    Path(str(path) + ".sha256").write_text(file_sha256(path) + "\n")


def test_resume_skips_a_malicious_newest_checkpoint_and_says_so(tmp_path: Path) -> None:
    from takzero.pipeline.resume import find_resume_checkpoint, set_aside_rejected
    from takzero.pipeline.run import Run, RunDirError

    cfg = _cfg(tmp_path)
    run_dir = tmp_path / "r"
    marker = tmp_path / "MARKER"
    from takzero.pipeline.resume import RunCounters
    from takzero.pipeline.trainer import Trainer

    trainer = Trainer(cfg.train, cfg.model_config(), device="cpu", seed=1)
    trainer.step, trainer.generation = 20, 1
    good = trainer.state_dict()  # a whole checkpoint: one with missing entries is set aside too
    good["run"] = RunCounters(games=20).to_checkpoint()
    good["promoted"] = (0, {k: v.clone() for k, v in trainer.model.state_dict().items()})
    atomic_torch_save(good, run_dir / "ckpt_000000020.pt")
    _plant(run_dir / "ckpt_000000040.pt", marker)
    point = find_resume_checkpoint(cfg, run_dir)
    assert point.path.name == "ckpt_000000020.pt" and point.state["step"] == 20
    assert [p.name for p, _ in point.rejected] == ["ckpt_000000040.pt"]
    (line,) = set_aside_rejected(point)
    assert "ckpt_000000040.pt: not a weights-only file" in line
    assert "resuming from the older ckpt_000000020.pt" in line
    assert "ckpt_000000040.pt.rejected" in line
    assert (run_dir / "ckpt_000000040.pt.rejected").exists()
    assert not (run_dir / "ckpt_000000040.pt").exists()
    # Only malicious checkpoints: nothing to resume, refused with their reason, nothing moved.
    (run_dir / "ckpt_000000020.pt").unlink()
    _plant(run_dir / "ckpt_000000060.pt", marker)
    with pytest.raises(RunDirError) as err:
        Run(cfg, command="x")._check_run_dir()
    assert "not a weights-only file" in str(err.value) and "\n" not in str(err.value)
    assert (run_dir / "ckpt_000000060.pt").exists()
    assert not marker.exists()


def test_a_malicious_best_pt_is_set_aside_and_rebuilt_from_gated_weights(tmp_path: Path) -> None:
    from takzero.pipeline.run import Run
    from takzero.pipeline.trainer import Trainer

    cfg = _cfg(tmp_path)
    run = Run(cfg, command="x")
    trainer = Trainer(cfg.train, cfg.model_config(), device="cpu", seed=1)
    gated = {k: torch.full_like(v, 0.25) if v.is_floating_point() else v
             for k, v in trainer.model.state_dict().items()}
    marker = tmp_path / "MARKER"
    _plant(run.run_dir / "best.pt", marker)
    gen, weights = run._load_best(trainer, 3, {"promoted": (3, gated)})
    assert gen == 3 and all(torch.equal(weights[k], v) for k, v in gated.items())
    assert load_checked(run.run_dir / "best.pt", require_checksum=True)["generation"] == 3
    assert (run.run_dir / "best.pt.rejected").exists()
    assert not marker.exists()


# -- what must still load ---------------------------------------------------------------------


@pytest.mark.parametrize("path", PRETRAINED, ids=[p.name for p in PRETRAINED])
def test_shipped_models_load_with_bit_identical_outputs(path: Path) -> None:
    from takzero.nn.inference import Evaluator

    trusted = model_from_checkpoint(torch.load(path, map_location="cpu", weights_only=False)).eval()
    safe = Evaluator.load(path, device="cpu")
    for k, v in trusted.state_dict().items():
        assert torch.equal(safe.model.state_dict()[k], v), k
    planes = torch.randn(8, trusted.config.in_channels, trusted.config.size, trusted.config.size,
                         generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        for a, b in zip(trusted(planes), safe.model(planes), strict=True):
            assert torch.equal(a, b)
    assert int(safe.metadata["half_komi"]) == int(load_trusted(path)["half_komi"])


def test_a_run_folder_written_before_weights_only_loads_resumes(tmp_path: Path) -> None:
    """``tests/data/run_70b5039``: the last checkpoint and best.pt of a smoke run made by the code
    of 70b5039 (``torch.load(weights_only=False)`` everywhere). They resume as they are, with the
    same contents as a full unpickling gives."""
    from takzero.pipeline.resume import RunCounters, find_resume_checkpoint
    from takzero.pipeline.run import Run
    from takzero.pipeline.trainer import Trainer

    shutil.copytree(OLD_RUN, tmp_path / "r")
    cfg = _cfg(tmp_path)
    point = find_resume_checkpoint(cfg, tmp_path / "r")
    assert point.path.name == "ckpt_000000040.pt" and not point.rejected
    full = load_trusted(point.path)
    _assert_same(point.state, full)
    trainer = Trainer(cfg.train, cfg.model_config(), device="cpu", seed=0)
    trainer.load_state_dict(point.state)
    assert trainer.step == 40 and trainer.generation == 2
    counters = RunCounters.from_checkpoint(point.state)
    assert counters.games == 192 and counters.promoted_generation == 1
    gen, weights = Run(cfg, command="x")._load_best(trainer, counters.promoted_generation, point.state)
    assert gen == 1
    for k, v in load_trusted(OLD_RUN / "best.pt")["model_state"].items():
        assert torch.equal(weights[k], v)


def _assert_same(a, b, where: str = "") -> None:
    assert type(a) is type(b), where
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            _assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    else:
        assert a == b, where


def test_checkpoints_written_now_hold_plain_values_only(tmp_path: Path) -> None:
    """numpy values slipping into a checkpoint (a statistic, a counter) are written as numbers,
    so the file reads back weights-only; something that cannot be made plain fails at the write,
    named with its place, not at the next resume."""
    state = {"run": {"counters": {"count/games": np.float64(3.0)}, "games": np.int64(7)},
             "table": np.arange(4, dtype=np.int32)}
    atomic_torch_save(state, tmp_path / "ckpt_000000001.pt")
    back = load_checked(tmp_path / "ckpt_000000001.pt", require_checksum=True)
    assert back["run"]["counters"]["count/games"] == 3.0 and type(back["run"]["games"]) is int
    assert torch.equal(back["table"], torch.arange(4, dtype=torch.int32))
    with pytest.raises(TypeError, match=r"\['run'\]\['bad'\]"):
        atomic_torch_save({"run": {"bad": range(2)}}, tmp_path / "ckpt_000000002.pt")
    assert not (tmp_path / "ckpt_000000002.pt").exists()


def test_to_plain_keeps_state_dicts_as_they_are() -> None:
    sd = _model().state_dict()
    assert isinstance(sd, OrderedDict) and hasattr(sd, "_metadata")
    assert to_plain(sd) is sd
    mixed = OrderedDict(sd)
    mixed._metadata = sd._metadata
    mixed["n"] = np.int64(3)
    out = to_plain(mixed)
    assert type(out) is OrderedDict and out._metadata is sd._metadata and out["n"] == 3
    model = _model()
    model.load_state_dict({k: v for k, v in out.items() if k != "n"})
    with pytest.raises(TypeError, match="not a plain value"):
        to_plain({"x": object()})


# -- the one-time conversion of a trusted file --------------------------------------------------


def _old_style(path: Path, sidecar: bool) -> dict:
    """A trusted checkpoint that is not weights-only: numpy values, as another tool writes."""
    state = {**checkpoint_dict(_model(), half_komi=np.int64(4)), "generation": np.int32(2),
             "stats": {"loss": np.float32(0.5)}, "table": np.arange(3)}
    torch.save(state, path)
    if sidecar:
        Path(str(path) + ".sha256").write_text(file_sha256(path) + "\n")
    return state


@pytest.mark.slow  # command-line processes or whole games: ~3-20 s, run by .ci/run's slow pass
def test_convert_command_makes_a_trusted_file_weights_only(tmp_path: Path) -> None:
    path = tmp_path / "old.pt"
    before = _old_style(path, sidecar=False)
    with pytest.raises(UnsafeFileError) as err:
        load_weights_only(path)
    _one_clear_line(str(err.value), path)
    proc = _cli(["takzero.export", "--convert", str(path)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "converted to a weights-only file" in proc.stdout
    after = load_weights_only(path)
    assert after["half_komi"] == 4 and after["generation"] == 2 and after["stats"]["loss"] == 0.5
    assert torch.equal(after["table"], torch.from_numpy(before["table"]))
    for k, v in before["model_state"].items():
        assert torch.equal(after["model_state"][k], v)
    assert not Path(str(path) + ".sha256").exists()  # no sidecar made for a file without one
    again = _cli(["takzero.export", "--convert", str(path)], cwd=tmp_path)
    assert again.returncode == 0 and "already weights-only" in again.stdout


def test_convert_a_run_folder_in_place_keeps_checksums(tmp_path: Path) -> None:
    from takzero.pipeline.export import convert_paths

    run = tmp_path / "r"
    run.mkdir()
    _old_style(run / "ckpt_000000010.pt", sidecar=True)
    _old_style(run / "best.pt", sidecar=True)
    lines = convert_paths(run)
    assert len(lines) == 2 and all("converted" in ln for ln in lines)
    for name in ("ckpt_000000010.pt", "best.pt"):
        assert load_checked(run / name, require_checksum=True)["generation"] == 2
    # A damaged file is not converted (its checksum does not match).
    _old_style(run / "ckpt_000000020.pt", sidecar=True)
    data = bytearray((run / "ckpt_000000020.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (run / "ckpt_000000020.pt").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum mismatch.*not converted"):
        convert_paths(run)


def test_dumps_weights_only_names_what_cannot_be_converted() -> None:
    with pytest.raises(TypeError, match=r"old.pt: cannot be made weights-only: .*\['x'\]"):
        dumps_weights_only({"x": object()}, "old.pt")
    assert torch.load(io.BytesIO(dumps_weights_only({"a": np.float64(1)})), weights_only=True) == {"a": 1.0}


# -- the other ways a loader can fail: each one line naming the file ------------------------------


def test_unreadable_files_are_one_line_naming_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good.pt"
    torch.save(checkpoint_dict(_model()), good)
    cases = {
        "garbage.pt": b"damaged",
        "truncated.pt": good.read_bytes()[:300],
        "empty.pt": b"",
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError) as err:
            load_weights_only(tmp_path / name)
        msg = str(err.value)
        assert str(tmp_path / name) in msg and "\n" not in msg and len(msg) < 400, msg
        assert not isinstance(err.value, UnsafeFileError)
    script = torch.jit.script(torch.nn.Linear(2, 2))
    script.save(str(tmp_path / "script.pt"))
    with pytest.raises(ValueError, match="a TorchScript archive, not a checkpoint"):
        load_weights_only(tmp_path / "script.pt")
    with pytest.raises(FileNotFoundError, match="missing.pt: no such file"):
        load_weights_only(tmp_path / "missing.pt")
    with pytest.raises(FileNotFoundError, match="missing.pt: no such file"):
        load_trusted(tmp_path / "missing.pt")
    with pytest.raises(ValueError, match="garbage.pt: cannot be read: not a torch.save file"):
        load_trusted(tmp_path / "garbage.pt")


def test_export_and_convert_errors_name_what_is_wrong(tmp_path: Path, capsys) -> None:
    from takzero.export import main
    from takzero.pipeline.export import convert_paths, export_checkpoint
    from takzero.players.registry import make_player

    good = tmp_path / "good.pt"
    torch.save(checkpoint_dict(_model()), good)
    with pytest.raises(ValueError, match=r"format must be one of \('torchscript', 'onnx', 'onnx-int8'\), got 'tflite'"):
        export_checkpoint(good, tmp_path / "x", fmt="tflite")
    with pytest.raises(ValueError, match="is a folder: it is converted in place"):
        convert_paths(tmp_path, out=tmp_path / "x.pt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty: no ckpt_\\*.pt or best.pt to convert"):
        convert_paths(tmp_path / "empty")
    assert main(["--convert", str(tmp_path / "missing.pt")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"export failed: {tmp_path / 'missing.pt'}: no such file"
    (tmp_path / "junk.pt").write_bytes(b"junk")
    assert main(["--convert", str(tmp_path / "junk.pt")]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "junk.pt: cannot be read: not a torch.save file" in err
    with pytest.raises(ValueError, match="'model' needs a path: model:PATH or model:PATH:N"):
        make_player("model:")


def test_a_pickle_dressed_as_torchscript_is_refused_without_running(evil, tmp_path: Path) -> None:
    """``Evaluator.load`` sends a zip with ``code/`` entries to ``torch.jit.load``: the malicious
    pickle dressed up so is read by TorchScript's own unpickler, which knows no Python
    callables, and refused in one line naming the file."""
    import pickle
    import zipfile

    from takzero.nn.inference import Evaluator

    path, marker = evil
    with zipfile.ZipFile(path, "a") as z:
        root = z.namelist()[0].split("/")[0]
        z.writestr(f"{root}/code/__torch__.py", "")
        z.writestr(f"{root}/constants.pkl", pickle.dumps((), protocol=2))
    with pytest.raises(ValueError) as err:
        Evaluator.load(path, device="cpu")
    msg = str(err.value)
    assert msg.startswith(f"{path}: cannot be read as a TorchScript archive") and "\n" not in msg, msg
    assert not marker.exists()


def test_convert_to_another_file_and_what_cannot_be_converted(tmp_path: Path) -> None:
    from takzero.pipeline.export import convert_file

    src = tmp_path / "old.pt"
    _old_style(src, sidecar=True)
    before = src.read_bytes()
    line = convert_file(src, tmp_path / "new.pt")
    assert line == f"{src}: converted to a weights-only file {tmp_path / 'new.pt'}"
    assert src.read_bytes() == before  # the source is left as it was
    assert load_checked(tmp_path / "new.pt", require_checksum=True)["generation"] == 2
    odd = tmp_path / "odd.pt"
    torch.save({"model_state": {}, "tags": range(3)}, odd)
    data = odd.read_bytes()
    with pytest.raises(ValueError, match=r"odd.pt: cannot be made weights-only: builtins.range at \['tags'\]"):
        convert_file(odd)
    assert odd.read_bytes() == data


def test_to_plain_keeps_exactly_what_a_weights_only_load_rebuilds() -> None:
    """Each value :func:`to_plain` keeps reads back weights-only; each it refuses, torch refuses."""
    kept = {"n": None, "b": True, "i": 2**70, "f": 1.5, "c": 1 + 2j, "s": "x", "by": b"x",
            "ba": bytearray(b"x"), "set": {1, 2}, "t": (1, [2]), "dtype": torch.float16,
            "dev": torch.device("cpu"), "size": torch.Size([2]), "p": torch.nn.Parameter(torch.ones(1))}
    assert to_plain(kept) is kept
    buf = io.BytesIO()
    torch.save(kept, buf)
    assert torch.load(io.BytesIO(buf.getvalue()), weights_only=True).keys() == kept.keys()
    for bad in (frozenset([1]), range(2), slice(1), object()):
        with pytest.raises(TypeError):
            to_plain({"x": bad})
        buf = io.BytesIO()
        torch.save({"x": bad}, buf)
        with pytest.raises(Exception):  # noqa: B017 - torch's UnpicklingError
            torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    assert to_plain({np.int64(1): {np.float32(2.0)}}) == {1: {2.0}}


@pytest.mark.parametrize("kind", ["checkpoint", "torchscript", "onnx"])
@pytest.mark.parametrize("damage", ["truncated", "junk"])
def test_a_damaged_model_file_is_named_in_one_line_by_every_loader(tmp_path, kind, damage) -> None:
    """A cut-off or garbage model file of each format: the loader raises ValueError naming the
    file (torch's zip reader raises an unnamed OSError(EINVAL) for a truncated archive, and
    onnxruntime its own exception types), never a bare errno or a library's message."""
    from takzero.nn.inference import Evaluator
    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
    from takzero.nn.model_export import export_onnx, export_torchscript
    from takzero.nn.safe_load import load_weights_only

    net = TakNet(ModelConfig(size=4, channels=8, blocks=1))
    good = tmp_path / f"good.{'onnx' if kind == 'onnx' else 'pt'}"
    if kind == "checkpoint":
        torch.save(checkpoint_dict(net), good)
    elif kind == "torchscript":
        export_torchscript(net, good, metadata={"half_komi": 0})
    else:
        pytest.importorskip("onnxruntime")
        export_onnx(net, good, metadata={"half_komi": 0})
    data = good.read_bytes()
    bad = tmp_path / f"bad{good.suffix}"
    bad.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"\x07not a model" * 100)
    load = load_weights_only if kind == "checkpoint" else Evaluator.load
    with pytest.raises(ValueError) as info:
        load(bad)
    message = str(info.value)
    assert str(bad) in message and "\n" not in message, message
    assert "Errno" not in message.split("(")[0], message
