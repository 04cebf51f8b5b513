"""Hydra entry point of a training run: ``python -m takzero.train +config=6x6 [key=value ...]``.

Composes ``configs/train.yaml`` with the preset and the overrides, checks every key
(``takzero.config``), and runs :func:`takzero.pipeline.run.run_training`; see
``takzero.pipeline.run`` for what lands in ``checkpoints/<run_name>/`` and how a run resumes.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

from omegaconf import DictConfig

from takzero.config import (
    CONFIG_DIR,
    ConfigError,
    check_run_folder,
    load_config,
    unknown_override_keys,
)
from takzero.pipeline.checkpoints import CheckpointWriteError, root_problem
from takzero.pipeline.placement import PlacementError, RayStartError
from takzero.pipeline.progress import resume_command
from takzero.pipeline.run import DISK_FULL, NonFiniteError, RunDirError, StopNow, run_training
from takzero.pipeline.warm_start import check_init_from


def _hydra_output_dir() -> Path | None:
    """The folder Hydra writes its files to in this run (``checkpoint_root/run_name/hydra`` unless
    ``hydra.run.dir`` is overridden); None outside a Hydra run."""
    from hydra.core.hydra_config import HydraConfig

    try:
        return Path(HydraConfig.get().runtime.output_dir)
    except ValueError:
        return None


#: The sub-folder of Hydra's output sub-folder that its files (config.yaml, hydra.yaml,
#: overrides.yaml) are written to first: they replace the run's copies only once the run folder
#: is accepted (``promote_hydra_files``), so a launch that is refused (a config error, a resume
#: of another network) leaves the run's own record of how it was started as it was.
HYDRA_STAGING = ".pending"


#: Hydra's flags that only show something (help, the config, Hydra's information, its version):
#: with one of them nothing runs and nothing is written, so the overrides are not staged.
SHOW_FLAGS = frozenset({"--help", "--hydra-help", "--cfg", "--info", "--version", "--shell-completion"})


def _hydra_flag_actions() -> dict[str, argparse.Action]:
    """Hydra's own command-line flags (every spelling: ``--cfg``, ``-c``) and their argparse
    actions, read from Hydra's parser, so that a flag Hydra adds is known here too."""
    from hydra._internal.utils import get_args_parser

    return {flag: action for action in get_args_parser()._actions for flag in action.option_strings}


def _action_of(flag: str, actions: dict[str, argparse.Action]) -> argparse.Action | None:
    """The action of a flag as argparse reads it (``--cfg=job``: ``--cfg``; a long flag by a
    prefix that names one flag only: ``--hydra-h``); None for an unknown flag."""
    name = flag.partition("=")[0]
    if name in actions:
        return actions[name]
    matches = {actions[f] for f in actions if name.startswith("--") and f.startswith(name)}
    return matches.pop() if len(matches) == 1 else None


def split_hydra_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """The command line split into Hydra's flags, each with its value (``['--cfg', 'job']``,
    ``['--info=all']``), and the overrides (``key=value``, ``+key=value``, ``~key``), each in the
    order given. Hydra's parser takes its flags only before the overrides (its overrides are one
    positional list: ``+config=6x6 --cfg job`` would leave the overrides after the flag
    unrecognised); :func:`hydra_command_line` puts them there, so every flag works before or after
    the overrides. A flag's value is the next argument (``--cfg job``, ``-p board``) or follows
    ``=`` (``--cfg=job``); ``--info``'s value is optional and taken only when it is one of its
    choices (a bare ``--info`` becomes ``--info=all``, Hydra's own default, so that it cannot take
    the first override as its value); a long flag may be shortened as argparse allows (``--hydra-h``).
    An unknown flag is kept among the flags for Hydra to refuse; ``--`` ends the flags."""
    actions = _hydra_flag_actions()
    flags: list[str] = []
    overrides: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            overrides.extend(argv[i:])
            break
        if not arg.startswith("-"):
            overrides.append(arg)
            continue
        action = _action_of(arg, actions)
        if action is None or "=" in arg or action.nargs == 0:
            flags.append(arg)
        elif action.nargs == "?":
            if i < len(argv) and action.choices is not None and argv[i] in action.choices:
                flags.append(f"{arg}={argv[i]}")
                i += 1
            else:
                flags.append(f"{arg}={action.const}")
        elif i < len(argv) and not argv[i].startswith("-"):
            flags += [arg, argv[i]]
            i += 1
        else:
            flags.append(arg)  # its value is missing: Hydra says so
    return flags, overrides


def shows_only(flags: list[str]) -> bool:
    """Whether the flags (:func:`split_hydra_argv`) ask Hydra only to show something
    (:data:`SHOW_FLAGS`, any spelling): then no run starts and Hydra writes no file."""
    actions = _hydra_flag_actions()
    shown = [actions[f] for f in SHOW_FLAGS if f in actions]
    return any(_action_of(flag, actions) in shown for flag in flags)


def hydra_command_line(argv: list[str]) -> list[str]:
    """The arguments handed to Hydra for the user's ``argv``: Hydra's flags first (with their
    values), then the overrides (:func:`split_hydra_argv`), the overrides staged
    (:func:`stage_hydra_files`) unless a flag only shows something (:func:`shows_only`: the help,
    ``--cfg hydra`` and ``--info`` then show the user's own ``hydra.output_subdir``), and none
    with ``--hydra-help`` (Hydra's help composes its own config only, where a run's key such as
    ``run_name=`` could not be set)."""
    flags, overrides = split_hydra_argv(argv)
    actions = _hydra_flag_actions()
    if any(_action_of(f, actions) is actions.get("--hydra-help") for f in flags):
        return flags  # Hydra's own help composes no run config: overrides would not apply
    return [*flags, *(overrides if shows_only(flags) else stage_hydra_files(overrides))]


def stage_hydra_files(argv: list[str]) -> list[str]:
    """``argv`` (the overrides) with ``hydra.output_subdir`` (``.`` unless given; ``null``: Hydra
    writes nothing, ``argv`` is returned as it is) moved into its :data:`HYDRA_STAGING`
    sub-folder."""
    subdir = "."
    rest = []
    for a in argv:
        if a.lstrip("+").startswith("hydra.output_subdir="):
            subdir = a.split("=", 1)[1]
        else:
            rest.append(a)
    if subdir.strip().lower() in ("null", "~", ""):
        return argv
    staged = HYDRA_STAGING if subdir.strip() in (".", "./") else f"{subdir.rstrip('/')}/{HYDRA_STAGING}"
    return [*rest, f"hydra.output_subdir={staged}"]


def _hydra_staging_dir() -> Path | None:
    """Where Hydra wrote its files in this launch, when :func:`stage_hydra_files` staged them."""
    from hydra.core.hydra_config import HydraConfig

    out = _hydra_output_dir()
    if out is None:
        return None
    subdir = HydraConfig.get().output_subdir
    return out / subdir if subdir is not None and Path(subdir).name == HYDRA_STAGING else None


def promote_hydra_files() -> None:
    """Move Hydra's staged files over the run's copies (each ``os.replace``: atomic)."""
    staged = _hydra_staging_dir()
    if staged is None or not staged.is_dir():
        return
    for f in staged.iterdir():
        os.replace(f, staged.parent / f.name)
    staged.rmdir()


def discard_hydra_files() -> None:
    """Remove Hydra's staged files of a refused launch (the run's copies stay as they were)."""
    import shutil

    staged = _hydra_staging_dir()
    if staged is not None:
        shutil.rmtree(staged, ignore_errors=True)


#: Why ``-m`` is refused (``multirun_problem``).
MULTIRUN_REFUSED = (
    "multirun (-m, --multirun, hydra.mode=MULTIRUN) is not supported: the jobs of a sweep would "
    "share one run folder and one Ray instance; start one command per setting, each with its own "
    "run_name (e.g. run_name=sims32 mcts.simulations=32)"
)


def multirun_problem(argv: list[str]) -> str | None:
    """:data:`MULTIRUN_REFUSED` when the command line asks Hydra for a multirun (``-m``,
    ``--multirun`` or ``hydra.mode=MULTIRUN``), checked before Hydra makes its sweep folder;
    None otherwise."""
    for a in argv:
        if a in ("-m", "--multirun") or a.replace(" ", "").lower().lstrip("+") in (
            "hydra.mode=multirun", "hydra.mode=runmode.multirun"
        ):
            return MULTIRUN_REFUSED
    return None


def back_to_launch_folder() -> None:
    """Undo ``hydra.job.chdir=true`` (Hydra's change into its output folder): every relative
    path of the config (``checkpoint_root``, ``model:PATH`` baselines) keeps meaning the folder
    the command was started in, whatever ``hydra.run.dir`` and ``hydra.job.chdir`` say.
    Outside a Hydra run nothing happens."""
    from hydra.core.hydra_config import HydraConfig

    try:
        launch = HydraConfig.get().runtime.cwd
    except ValueError:
        return
    if launch and os.getcwd() != launch:
        os.chdir(launch)


def pin_run_name(dcfg: DictConfig, hydra_out: Path | None) -> None:
    """Set ``run_name`` to the folder Hydra already made (``hydra_out`` = ``checkpoint_root /
    name / 'hydra'``). ``run_name`` defaults to a time stamp (``${now:...}``) that Hydra's config
    and the run's config resolve separately: across a second boundary they differ and the run
    would land beside its own ``hydra/`` folder. Nothing changes when ``hydra.run.dir`` points
    elsewhere."""
    if hydra_out is None or hydra_out.name != "hydra":
        return
    root = Path(str(dcfg.checkpoint_root))
    if hydra_out.parent.parent.resolve() == root.resolve():
        dcfg.run_name = hydra_out.parent.name


def _remove_empty_run_dir(checkpoint_root: str) -> None:
    """After a rejected config, remove the run folder Hydra made if it holds only Hydra's files,
    and the folders above it that this left empty, up to ``checkpoint_root`` (a name that
    resolves to ``a/b``, e.g. ``${now:%H/%M}``, makes two)."""
    import shutil

    out = _hydra_output_dir()
    if out is None:
        return
    run_dir = out.parent
    if out.name == "hydra" and run_dir.exists() and [p.name for p in run_dir.iterdir()] == ["hydra"]:
        shutil.rmtree(run_dir, ignore_errors=True)
        root = Path(checkpoint_root).resolve()
        parent = run_dir.parent.resolve()
        while parent != root and root in parent.parents and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent


def precheck(argv: list[str]) -> list[str]:
    """Problems found in the command-line overrides before Hydra runs (Hydra would otherwise
    answer a mistyped key with its ``+key=`` detour, and create the run folder of a bad
    ``run_name`` or under a ``checkpoint_root`` that is a file): unknown keys with a close match,
    and the run folder's keys. Returns the messages (empty: all well)."""
    problems = unknown_override_keys(argv)
    given = dict(a.lstrip("+").split("=", 1) for a in argv if "=" in a and not a.startswith("-"))
    config = given.get("config")
    if config is not None and not (CONFIG_DIR / "config" / f"{config}.yaml").is_file():
        from takzero.nn.presets import NETWORK_PRESETS

        named = sorted(p.stem for p in (CONFIG_DIR / "config").glob("*.yaml"))
        hint = f"; {config} is a network preset: model.preset={config}" if config in NETWORK_PRESETS else ""
        problems.append(f"config={config}: no such run config (configs/config/: {', '.join(named)}){hint}")
    root, name = given.get("checkpoint_root"), given.get("run_name")
    unwritable = root_problem(root if root is not None else "checkpoints")  # before Hydra's mkdir
    if unwritable is not None:
        return [*problems, unwritable]
    if root is not None or name is not None:
        try:
            # ${...} interpolations (the default time-stamped name) are checked after composing.
            check_run_folder(root or "checkpoints", "x" if name is None or "${" in name else name)
        except ConfigError as e:
            problems.append(str(e))
    return problems


def main() -> None:
    """Console entry: Hydra composes ``configs/train.yaml`` + overrides, then the run starts."""
    import hydra

    argv = sys.argv[1:]
    problems = precheck(split_hydra_argv(argv)[1])
    multirun = multirun_problem(argv)
    if multirun is not None:
        problems.append(multirun)
    if problems:
        for p in problems:
            print(f"config error: {p}", file=sys.stderr)
        sys.exit(2)
    hydra_argv = hydra_command_line(argv)
    if not shows_only(split_hydra_argv(argv)[0]):  # (Hydra's --info prints through its own logger)
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config_dir = str(CONFIG_DIR)

    @hydra.main(config_path=config_dir, config_name="train", version_base="1.3")
    def _entry(dcfg: DictConfig) -> None:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if HydraConfig.get().mode == RunMode.MULTIRUN:  # set where the command line did not say
            print(f"config error: {MULTIRUN_REFUSED}", file=sys.stderr)
            sys.exit(2)
        back_to_launch_folder()
        try:
            pin_run_name(dcfg, _hydra_output_dir())
            cfg = load_config(dcfg)
            check_init_from(cfg)  # a file that does not fit: refused before any folder is made
        except ConfigError as e:
            print(f"config error: {e}", file=sys.stderr)
            discard_hydra_files()
            _remove_empty_run_dir(str(dcfg.get("checkpoint_root", "checkpoints")))
            sys.exit(2)
        try:
            run_training(cfg, resume_command(argv, cfg.run_name), on_accepted=promote_hydra_files)
        except RunDirError as e:
            print(f"run folder error: {e}", file=sys.stderr)
            discard_hydra_files()
            sys.exit(2)
        except PlacementError as e:
            print(f"placement error: {e}", file=sys.stderr)
            sys.exit(2)
        except RayStartError as e:  # the run folder is kept: the same command resumes it
            print(str(e), file=sys.stderr)
            sys.exit(1)
        except NonFiniteError as e:  # the run has stopped and said so, with its last good checkpoint
            print(f"stopped, training went non-finite: {e}", file=sys.stderr)
            sys.exit(1)
        except OSError as e:
            if e.errno not in DISK_FULL and not isinstance(e, CheckpointWriteError):
                raise
            # the run has stopped and said what failed and how to resume (train.log)
            print(f"stopped, a write failed: {e}", file=sys.stderr)
            sys.exit(1)

    sys.argv = [sys.argv[0], *hydra_argv]  # Hydra reads sys.argv
    try:
        _entry()
    except KeyboardInterrupt as e:
        # Before the run installs its own handler (config composition), or a second Ctrl-C or
        # SIGTERM (StopNow): the exit status is 128 + the signal's number, as a shell's.
        print("interrupted: stopped at once; the last checkpoint on disk (if any) is kept, and "
              "running the same command with the same run_name resumes from it", file=sys.stderr)
        sys.exit(128 + (e.signum if isinstance(e, StopNow) else signal.SIGINT))


if __name__ == "__main__":
    main()
