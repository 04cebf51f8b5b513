"""The Hydra options a user may set on ``python -m takzero.train``: ``hydra.run.dir``,
``hydra.job.chdir``, ``hydra.output_subdir`` work, with a relative ``checkpoint_root`` (and a
relative ``model:PATH`` baseline) meaning the folder the command was started in, in all of them;
multirun (``-m`` with two values, ``--multirun``, ``hydra.mode=MULTIRUN``) is refused at start-up
with one line naming it, before anything is made; Hydra's own flags that README documents
(``--help``, ``--hydra-help``, ``--cfg job|hydra|all``, ``--resolve``, ``--package``, ``--info``,
``--version``) work before and after the overrides; Hydra writes no log file of its own. The real
command line runs, with the training itself replaced by a note of where it would run (no Ray)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent

#: ``python -m takzero.train`` with ``run_training`` replaced: it writes where the run would go.
HARNESS = """
import json, os, sys
from pathlib import Path
import takzero.train as t
def note(cfg, command, on_accepted=None):
    on_accepted()
    Path(os.environ["NOTE"]).write_text(json.dumps({
        "run_dir": str((Path(cfg.checkpoint_root) / cfg.run_name).resolve()),
        "cwd": os.getcwd(), "baselines": list(cfg.evaluator.baselines)}))
    return Path(cfg.checkpoint_root) / cfg.run_name
t.run_training = note
sys.argv = ["takzero.train", *sys.argv[1:]]
t.main()
"""


def _train(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    note = tmp_path.parent / f"{tmp_path.name}-note.json"
    note.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NOTE": str(note)}
    proc = subprocess.run([sys.executable, "-c", HARNESS, "+config=smoke", "run_name=r", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return proc, (json.loads(note.read_text()) if note.exists() else None)


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


@pytest.mark.slow  # six whole command-line launches
@pytest.mark.parametrize(
    "args,hydra_files",
    [
        ([], "checkpoints/r/hydra"),
        (["hydra.job.chdir=true"], "checkpoints/r/hydra"),
        (["hydra.run.dir=elsewhere"], "elsewhere"),
        (["hydra.run.dir=elsewhere", "hydra.job.chdir=true"], "elsewhere"),
        (["hydra.output_subdir=sub"], "checkpoints/r/hydra/sub"),
        (["hydra.output_subdir=null"], None),
    ],
    ids=["default", "chdir", "run.dir", "run.dir+chdir", "output_subdir", "no output_subdir"],
)
def test_hydra_options_keep_the_run_folder_and_relative_paths(
    tmp_path: Path, args: list[str], hydra_files: str | None
) -> None:
    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict

    torch.save(checkpoint_dict(TakNet(ModelConfig(size=4, channels=8, blocks=1))),
               tmp_path / "m.pt")
    proc, note = _train(tmp_path, "evaluator.baselines=[random,model:m.pt]", *args)
    assert proc.returncode == 0, proc.stderr
    assert note is not None, proc.stderr
    assert note["run_dir"] == str((tmp_path / "checkpoints" / "r").resolve())
    assert note["cwd"] == str(tmp_path)  # model:m.pt and checkpoint_root: the launch folder
    assert "model:m.pt" in note["baselines"]
    files = _files(tmp_path)
    if hydra_files is None:
        assert not any(f.endswith(("hydra.yaml", "overrides.yaml")) for f in files), files
    else:
        assert {f"{hydra_files}/hydra.yaml", f"{hydra_files}/overrides.yaml"} <= files, files
    # nothing of Hydra's lands elsewhere (no checkpoints/r/hydra/checkpoints/..., no outputs/)
    assert all(f.startswith(("checkpoints/r/hydra", "elsewhere")) or f == "m.pt" for f in files), files


@pytest.mark.slow  # the command line as a process
@pytest.mark.parametrize(
    "args",
    [["-m", "mcts.simulations=16,32"], ["--multirun", "mcts.simulations=16"],
     ["hydra.mode=MULTIRUN", "mcts.simulations=16,32"]],
    ids=["-m", "--multirun", "hydra.mode"],
)
def test_multirun_is_refused_at_start_up_naming_it(tmp_path: Path, args: list[str]) -> None:
    proc, note = _train(tmp_path, *args)
    assert proc.returncode == 2 and note is None
    lines = proc.stderr.strip().splitlines()
    assert lines == [lines[0]] and lines[0].startswith("config error: multirun (-m, --multirun, "
                                                       "hydra.mode=MULTIRUN) is not supported")
    assert not list(tmp_path.iterdir())  # no multirun/ sweep folder, no run folder


def test_multirun_check_reads_only_the_multirun_switches() -> None:
    from takzero.train import multirun_problem

    assert multirun_problem(["+config=smoke", "mcts.simulations=16"]) is None
    assert multirun_problem(["run_name=-m"]) is None
    assert multirun_problem(["hydra.mode=RUN"]) is None
    assert multirun_problem(["-m"]) is not None and multirun_problem(["hydra.mode=multirun"]) is not None


def test_a_refused_launch_leaves_the_runs_hydra_files_as_they_were(tmp_path: Path) -> None:
    """Hydra writes its config.yaml, hydra.yaml and overrides.yaml before the run's checks; they
    go to a staging folder first, so a launch refused by a config error or by the run folder
    (here resume=false on a folder with a checkpoint: RunDirError before Ray) does not overwrite
    the record of how the run was started."""
    from takzero.pipeline.checkpoints import atomic_torch_save

    hydra_dir = tmp_path / "checkpoints" / "r" / "hydra"
    hydra_dir.mkdir(parents=True)
    original = {name: f"original {name}\n" for name in ("config.yaml", "hydra.yaml", "overrides.yaml")}
    for name, text in original.items():
        (hydra_dir / name).write_text(text)
    atomic_torch_save({"step": 7}, tmp_path / "checkpoints" / "r" / "ckpt_000000007.pt")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args, said in ((["resume=false"], "run folder error:"), (["mcts.simulations=-1"], "config error:")):
        proc = subprocess.run([sys.executable, "-m", "takzero.train", "+config=smoke", "run_name=r", *args],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
        assert {name: (hydra_dir / name).read_text() for name in original} == original
        assert not (hydra_dir / ".pending").exists()


def test_staging_moves_only_the_output_subdir() -> None:
    from takzero.train import stage_hydra_files

    assert stage_hydra_files(["+config=smoke", "run_name=r"]) == ["+config=smoke", "run_name=r",
                                                                   "hydra.output_subdir=.pending"]
    assert stage_hydra_files(["hydra.output_subdir=sub/", "x=1"]) == ["x=1", "hydra.output_subdir=sub/.pending"]
    assert stage_hydra_files(["hydra.output_subdir=null"]) == ["hydra.output_subdir=null"]  # nothing written


#: Hydra's flags as README documents them, each with what its output shows of ``+config=5x5
#: run_name=r`` (so that the overrides were applied, wherever they stood) and what it must not.
DOCUMENTED_FLAGS = {
    "--help": (["--help"], ["takzero training run", "size: 5"], []),
    "-h": (["-h"], ["takzero training run", "size: 5"], []),
    "--hydra-help": (["--hydra-help"], ["Hydra (", "--cfg"], []),
    "--cfg job": (["--cfg", "job"], ["run_name: r", "size: 5"], ["hydra:"]),
    "-c job": (["-c", "job"], ["run_name: r", "size: 5"], ["hydra:"]),
    "--cfg=job": (["--cfg=job"], ["run_name: r", "size: 5"], ["hydra:"]),
    "--cfg hydra": (["--cfg", "hydra"], ["hydra:", "output_subdir: .\n", "- +config=5x5"], [".pending"]),
    "--cfg all": (["--cfg", "all"], ["hydra:", "size: 5", "run_name: r"], [".pending"]),
    "--resolve": (["--cfg", "job", "--resolve"], ["size: 5", "channels:"], ["${"]),
    "--package": (["--cfg", "job", "--package", "board"], ["# @package board", "size: 5"], ["run_name"]),
    "-p": (["-c", "job", "-p", "board"], ["# @package board", "size: 5"], ["run_name"]),
    "--info": (["--info"], ["Installed Hydra Plugins", "Defaults List", "size: 5"], []),
    "--info defaults": (["--info", "defaults"], ["Defaults List", "config/5x5"], []),
    "-i searchpath": (["-i", "searchpath"], ["Config search path"], []),
    "--version": (["--version"], ["Hydra 1.3"], []),
}


def test_hydras_flags_reach_hydra_before_the_overrides_wherever_they_were_typed() -> None:
    """What the launcher hands Hydra parses, in Hydra's own parser, as the flags typed first: the
    same flags and values, the same overrides (staged unless a flag only shows something)."""
    from hydra._internal.utils import get_args_parser

    from takzero.train import HYDRA_STAGING, hydra_command_line, shows_only, split_hydra_argv

    overrides = ["+config=5x5", "run_name=r"]
    for name, (flag, _, _) in DOCUMENTED_FLAGS.items():
        if name == "--version":  # argparse prints and exits at once: nothing more to compare
            continue
        want = vars(get_args_parser().parse_args([*flag, "--", *overrides]))  # (bare --info: "all")
        for argv in ([*flag, *overrides], [*overrides, *flag], [overrides[0], *flag, overrides[1]]):
            got = vars(get_args_parser().parse_args(hydra_command_line(argv)))
            if name == "--hydra-help":  # Hydra's help composes no run config: no overrides
                want["overrides"] = []
            assert got == want, (name, argv)
            assert shows_only(split_hydra_argv(argv)[0]), name
    run = ["+config=5x5", "--run", "hydra.job.chdir=true"]
    assert hydra_command_line(run) == ["--run", "+config=5x5", "hydra.job.chdir=true",
                                       f"hydra.output_subdir={HYDRA_STAGING}"]
    assert split_hydra_argv(["a=1", "--info", "b=2"]) == (["--info=all"], ["a=1", "b=2"])
    assert split_hydra_argv(["--", "--x=1"]) == ([], ["--x=1"])
    assert split_hydra_argv(["a=1", "--no-such-flag"]) == (["--no-such-flag"], ["a=1"])  # Hydra refuses it


@pytest.mark.slow  # thirty whole command-line launches
@pytest.mark.parametrize("order", ["flag first", "flag last"])
@pytest.mark.parametrize("name", list(DOCUMENTED_FLAGS))
def test_each_documented_hydra_flag_works_before_and_after_the_overrides(
    tmp_path: Path, name: str, order: str
) -> None:
    flag, shown, not_shown = DOCUMENTED_FLAGS[name]
    overrides = ["+config=5x5", "run_name=r"]
    argv = [*flag, *overrides] if order == "flag first" else [*overrides, *flag]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "takzero.train", *argv], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "unrecognized arguments" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    for text in shown:
        assert text in out, (text, out[:2000])
    for text in not_shown:
        assert text not in out, (text, out[:2000])
    assert out.count("Defaults List") <= 1  # each line once (not also through the run's logging)
    assert not list(tmp_path.iterdir())  # showing makes no run folder


def test_hydra_writes_no_log_file_of_its_own(tmp_path: Path) -> None:
    """The run folder has one log, train.log (written by the run); Hydra's job log would be an
    empty hydra/train.log beside it."""
    proc, note = _train(tmp_path)
    assert proc.returncode == 0 and note is not None, proc.stderr
    files = _files(tmp_path)
    assert "checkpoints/r/hydra/config.yaml" in files
    assert not [f for f in files if f.endswith(".log")], files
