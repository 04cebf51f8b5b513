"""Atomic writes (``takzero.io.files``): a failed write never destroys an earlier file, at the
helper and at every user-facing writer of the package and its scripts."""

from __future__ import annotations

import ast
import importlib.util
import os
import resource
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from takzero.game.__main__ import main as game_main
from takzero.game.position import Position
from takzero.game.ptn import read_ptn_file
from takzero.io.files import (
    atomic_open,
    atomic_write_bytes,
    atomic_write_text,
    check_writable_folder,
    free_names,
    write_ptn_file,
)

ROOT = Path(__file__).resolve().parent.parent
GAME_FILE = ROOT / "tests" / "data" / "games" / "engine_selfplay_6x6.ptn"
OLD = "the earlier file\n" * 400  # 6800 bytes


@contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Files of this process cannot grow past ``limit`` bytes (``ulimit -f``): a write past it
    fails with EFBIG (Python ignores SIGXFSZ). Print only to captured (in-memory) streams here."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def _no_temp_files(folder: Path) -> bool:
    return not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_atomic_open_keeps_the_old_file_when_the_write_fails(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text(OLD)
    with pytest.raises(RuntimeError), atomic_open(path) as f:
        f.write("half")
        raise RuntimeError("the writer failed")
    assert path.read_text() == OLD and _no_temp_files(tmp_path)
    with file_size_limit(100), pytest.raises(OSError):
        atomic_write_text(path, "x" * 5000)
    assert path.read_text() == OLD and _no_temp_files(tmp_path)


def test_atomic_writes_replace_the_file_with_the_usual_mode(tmp_path: Path) -> None:
    path = tmp_path / "out.bin"
    path.write_text(OLD)
    atomic_write_bytes(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    atomic_write_text(path, "é\n")
    assert path.read_text(encoding="utf-8") == "é\n"
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask
    assert _no_temp_files(tmp_path)
    with pytest.raises(ValueError):
        with atomic_open(path, "a"):
            pass
    (tmp_path / "dir").mkdir()
    with pytest.raises(OSError):
        atomic_write_text(tmp_path / "dir", "x")
    assert _no_temp_files(tmp_path)


def test_check_writable_folder_touches_no_file(tmp_path: Path) -> None:
    (tmp_path / "games.ptn").write_text(OLD)
    assert check_writable_folder(tmp_path) == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["games.ptn"]
    assert (tmp_path / "games.ptn").read_text() == OLD
    assert check_writable_folder(tmp_path / "new" / "sub").is_dir()
    with pytest.raises(NotADirectoryError):
        check_writable_folder(tmp_path / "games.ptn")


@pytest.mark.slow  # every writer, each failing
def test_writers_keep_the_old_file_when_the_write_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """annotate -o, write_ptn_file, show -o and scripts/plot_run.py, each with the disk 'full'."""
    game = read_ptn_file(GAME_FILE, check=False, strict_numbers=False)[0]
    one = tmp_path / "one.ptn"
    write_ptn_file(one, game)
    assert game_main(["annotate", str(one), "-o", str(tmp_path / "warm.ptn"), "--nodes", "5"]) == 0  # JIT
    out = tmp_path / "out.ptn"
    out.write_text(OLD)
    (tmp_path / "old.png").write_text(OLD)
    with file_size_limit(300):
        assert game_main(["annotate", str(one), "-o", str(out), "--nodes", "5"]) == 2
        with pytest.raises(OSError):
            write_ptn_file(out, [game, game])
        assert game_main(["show", "--tps", Position.start(5).to_tps(), "-o", str(tmp_path / "b.png")]) == 2
        assert game_main(["show", "--tps", Position.start(5).to_tps(), "-o", str(tmp_path / "old.png")]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert out.read_text() == OLD and (tmp_path / "old.png").read_text() == OLD
    assert not (tmp_path / "b.png").exists() and _no_temp_files(tmp_path)


def test_plot_run_keeps_old_figures_when_the_write_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "run" / "tb"))
    for step in range(3):
        writer.add_scalar("loss/total", 3.0 - step, step, walltime=100.0 + step)
    writer.close()
    spec = importlib.util.spec_from_file_location("plot_run", ROOT / "scripts" / "plot_run.py")
    plot_run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot_run)
    plots = tmp_path / "plots"
    plots.mkdir()
    (plots / "run_loss.png").write_text(OLD)
    scalars = plot_run.load_scalars(tmp_path / "run" / "tb")
    clock = plot_run.TrainingClock(scalars["loss/total"][0], 120.0)
    with file_size_limit(300), pytest.raises(OSError):
        plot_run.plot_losses(scalars, clock, plots / "run_loss.png", "t")
    assert (plots / "run_loss.png").read_text() == OLD and _no_temp_files(plots)


#: Writes that are atomic in their own way (a temp file then os.replace, or a fresh private
#: folder), or are logs appended to on purpose. (file, call text) pairs; anything else that
#: writes a file must go through takzero.io.files.
ALLOWED_DIRECT_WRITES = {
    ("takzero/io/files.py", "open"),  # the helper itself
    ("takzero/numba_cache.py", "open"),  # the lock file of the cache guard (the stamp: temp file, then os.replace)
    ("takzero/pipeline/checkpoints.py", "open"),  # sidecar temp file, then os.replace
    ("takzero/pipeline/run_checkpoints.py", "write_text"),  # config temp file, then os.replace
    ("takzero/pipeline/resume.py", "write_text"),  # launch counter temp file, then os.replace
    ("takzero/pipeline/evaluator_actor.py", "write_bytes"),  # a fresh mkdtemp folder of model copies
    ("takzero/nn/quantize.py", "write_bytes"),  # the float32 graph into a fresh TemporaryDirectory for quantize_static
    ("scripts/gpu_suite_run.py", "open"),  # nvidia-smi samples and the run's console, streamed as they come
    ("takzero/protocols/tei/client.py", "open"),  # the engines' stderr logs, appended on purpose
    ("takzero/pipeline/replay.py", "open"),  # replay buffer snapshot: mkstemp, then os.replace
    # logs, appended to on purpose (an append keeps what was there):
    ("takzero/pipeline/progress.py", "open"),  # train.log
    ("takzero/pipeline/run_actors.py", "open"),  # the run's append-only logs (selfplay.ptn)
    ("scripts/ablate.py", "open"),  # ablate_train.log
    ("scripts/bench_tei_stop.py", "open"),  # a pipe, not a file
}


def _direct_writes(path: Path) -> set[tuple[str, str]]:
    """(file, call) for each call in ``path`` that writes a file without the atomic helper:
    ``.write_text``, ``.write_bytes``, ``.savefig`` to a path, ``open``/``fdopen`` for writing."""
    rel = path.relative_to(ROOT).as_posix()
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in ("write_text", "write_bytes"):
            found.add((rel, name))
        elif name == "savefig":
            # to a file object opened by atomic_open is fine: only a str/Path first argument counts
            target = node.args[0] if node.args else None
            if not (isinstance(target, ast.Name) and target.id == "f"):
                found.add((rel, name))
        elif name in ("open", "fdopen"):
            mode = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "mode"), None)
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax"):
                found.add((rel, "open"))
    return found


def test_every_user_facing_write_is_atomic() -> None:
    files = sorted((ROOT / "takzero").rglob("*.py")) + sorted((ROOT / "scripts").glob("*.py"))
    found = set().union(*(_direct_writes(p) for p in files))
    assert found - ALLOWED_DIRECT_WRITES == set(), "write these through takzero.io.files"
    assert ALLOWED_DIRECT_WRITES - found == set(), "an allowed write is gone: drop it from the list"


def _not_regular_targets(tmp_path: Path) -> list[Path]:
    """A FIFO, a folder and a symbolic link to the FIFO, made in ``tmp_path``."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    link = tmp_path / "link"
    link.symlink_to(fifo)
    return [fifo, folder, link]


def _kinds(paths: list[Path]) -> list[tuple[bool, bool, bool]]:
    return [(p.is_symlink(), stat.S_ISFIFO(p.lstat().st_mode), p.is_dir()) for p in paths]


def test_atomic_writers_refuse_a_target_that_is_not_a_regular_file(tmp_path: Path) -> None:
    """A device, FIFO, socket or folder is never replaced by a plain file (``save /dev/full``
    turned the device into a text file as root): refused in one line before anything is written."""
    targets = _not_regular_targets(tmp_path)
    before = _kinds(targets)
    game = read_ptn_file(GAME_FILE, check=False, strict_numbers=False)[0]
    writers = [
        lambda p: atomic_write_text(p, "x"),
        lambda p: atomic_write_bytes(p, b"x"),
        lambda p: write_ptn_file(p, game),
    ]
    for target in targets:
        for write in writers:
            with pytest.raises(OSError, match="not a regular file") as err:
                write(target)
            assert "\n" not in str(err.value) and str(target) in str(err.value)
        entered = []
        with pytest.raises(OSError, match="not a regular file"), atomic_open(target) as f:
            entered.append(f)  # never reached: refused before the temp file is made
        assert not entered
    assert _kinds(targets) == before and _no_temp_files(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "folder", "link"]
    assert list((tmp_path / "folder").iterdir()) == []
    assert atomic_write_text(tmp_path / "new.txt", "ok") is None  # a new name is still written


def test_commands_refuse_an_output_that_is_not_a_regular_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """annotate -o, show -o and play's save, with a FIFO or a folder as the output: one line,
    the target left as it was."""
    from takzero.players import RandomPlayer
    from takzero.protocols.terminal import PlaySession

    fifo, folder, _ = _not_regular_targets(tmp_path)
    one = tmp_path / "one.ptn"
    write_ptn_file(one, read_ptn_file(GAME_FILE, check=False, strict_numbers=False)[0])
    for target in (fifo, folder):
        capsys.readouterr()
        assert game_main(["annotate", str(one), "-o", str(target), "--nodes", "1"]) == 2
        assert game_main(["show", "--ptn", str(one), "--ply", "0", "-o", str(target)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 2 and all("not a regular file" in ln for ln in err)
        out: list[str] = []
        lines = iter(["a1", f"save {target}", "quit"])
        PlaySession(RandomPlayer(seed=1), Position.start(3), human=0,
                    input_fn=lambda _p, it=lines: next(it), print_fn=out.append).run()
        assert any("not a regular file" in ln for ln in out) and not any(ln.startswith("saved") for ln in out)
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and folder.is_dir() and list(folder.iterdir()) == []
    assert _no_temp_files(tmp_path)


def test_free_names_numbers_a_run_whose_files_exist(tmp_path: Path) -> None:
    a, b = tmp_path / "vs_a.ptn", tmp_path / "vs_b.ptn"
    assert free_names([a, b]) == [a, b]
    b.write_text("x")
    assert free_names([a, b]) == [tmp_path / "vs_a_2.ptn", tmp_path / "vs_b_2.ptn"]
    (tmp_path / "vs_a_2.ptn").mkdir()  # a folder is taken too
    assert free_names([a, b]) == [tmp_path / "vs_a_3.ptn", tmp_path / "vs_b_3.ptn"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vs_a_2.ptn", "vs_b.ptn"]  # nothing made
