"""The fixed-compute protocol of docs/ablations.md: train one variant for a fixed wall time, play it
against a fixed reference network on paired openings, append one row to the ablation table.

    python scripts/ablate.py --name baseline
    python scripts/ablate.py --name gumbel16 -- mcts.gumbel=true mcts.simulations=16
    python scripts/ablate.py --name gumbel16 --eval-only          # re-evaluate a finished run
    python scripts/ablate.py --name onnx --train-only -- selfplay.backend=onnx   # queue: train now,
    python scripts/ablate.py --name onnx --eval-only -- selfplay.backend=onnx    # evaluate later

Protocol (defaults): ``python -m takzero.train +config=5x5_cpu train.max_minutes=30`` with the
variant's overrides, in ``--root``/``--name`` (run it again with the same name to continue a
run that was stopped); then the run's ``best.pt`` plays ``--pairs`` random 2-ply openings, each
with both colours, at ``--simulations`` PUCT simulations per move against ``model:REFERENCE``
at the same simulations (``takzero.evaluate``: no noise, most visited move, tinuë checks at
both roots). The result is printed as one JSON line, saved as ``ablation.json`` in the run
folder, and appended to ``--table`` as a Markdown row: W-D-L, score with its Wilson 95%
interval, Elo with that interval mapped to Elo (``takzero.matches.stats``), positions and steps
the run made, and the command that reproduces the row.

Compare variants by their rows: each is measured against the same reference at the same wall
time, so a variant's gain over the plain config is the difference of the two Elo figures (the
intervals add up). Far more sensitive is a head-to-head: ``--eval-only --reference
ROOT/baseline/best.pt`` plays the variant against the baseline
run of the same machine speed, and ``--eval-seed N`` repeats it on other openings; such a row
names its reference ``baseline/best.pt`` and its openings' seed, its JSON goes to
``ablation_vs_baseline_best_<hash of its path>_seedN.json`` beside the protocol's
``ablation.json`` (the evaluation against the reference the run was trained for, on the training
seed's openings), and once two seeds against the same two networks are there the script prints
their pooled W-D-L and Elo. The row's command of such an evaluation keeps ``--eval-only``.

Run variants one at a time on a quiet machine: the protocol fixes wall time, so anything else on
the CPU takes compute from the variant. Evaluations are not timed, so
``--train-only`` lets the trainings of several variants run back to back while their
``--eval-only`` evaluations run later side by side. The training wall time, config and overrides
are kept in ``ablate_train.json`` in the run folder: ``--eval-only`` without overrides takes the
recorded ones, and other overrides than those the run was trained with are refused. Before a
training starts, everything that can be checked is (``preflight``): a bad override or value, a
reference network of another board size, a missing table folder stop it at once with status 2.

The machine's speed is part of a wall-time protocol, and this machine's is not constant: the same
plain training made 113,711 positions in 30 minutes one day and several times more on another.
So before and after each training a 20-second check (``machine_speed``: the same self-play
workload every time, untrained network, one thread) records positions per second in
``ablate_train.json`` and in the row ("machine 310/305 pos/s"). Compare a variant with the
baseline row measured at the same machine speed (in practice: in the same session), never
across speeds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TABLE_HEADER = (
    "| variant | overrides | training | positions | steps | vs reference | W-D-L | score [95% Wilson] "
    "| Elo [95%] | date | command |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|\n"
)


def train(args: argparse.Namespace, run_dir: Path) -> float:
    """Run (or continue) the variant's training in a subprocess, its output teed to
    ``run_dir/ablate_train.log``. Returns the wall time in seconds. Raises RuntimeError when the
    training exits with an error."""
    cmd = [
        sys.executable, "-m", "takzero.train", f"+config={args.config}",
        f"train.max_minutes={args.minutes}", f"checkpoint_root={args.root}", f"run_name={args.name}",
        f"seed={args.seed}", *args.overrides,
    ]
    run_dir.mkdir(parents=True, exist_ok=True)
    print(f"[ablate] training: {shlex.join(cmd)}", flush=True)
    t0 = time.monotonic()
    with open(run_dir / "ablate_train.log", "a") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
        code = proc.wait()
    if code != 0:
        raise RuntimeError(f"training exited with status {code}; see {run_dir / 'ablate_train.log'}")
    return time.monotonic() - t0


def machine_speed(config: str, seconds: float, seed: int = 0) -> float:
    """This machine's speed now, as self-play positions per second of a fixed workload: one
    ``SelfPlayWorker`` of the plain ``config`` preset (no overrides, an untrained network of fixed
    seed, PyTorch backend, one thread), two steps to warm up (numba), then as many steps as fit
    in ``seconds`` (at least one). The same work on every call, so two rows' figures say whether
    their trainings ran on a machine of the same speed: a wall-time protocol compares variants
    only on one. Returns positions searched and played per second (float). Raises ValueError
    for ``seconds`` <= 0."""
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    import torch

    from takzero.config import compose_preset
    from takzero.pipeline.selfplay import SelfPlayWorker

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = compose_preset(config, ["selfplay.backend=torch", f"seed={seed}"], run_name="speed")
        torch.manual_seed(seed)
        worker = SelfPlayWorker.from_run(cfg, worker_id=0, device="cpu")
        for _ in range(2):
            worker.play_step()
        positions, t0 = 0, time.perf_counter()
        while True:
            positions += int(worker.mcts.active_games().size)
            worker.play_step()
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds:
                return positions / elapsed
    finally:
        torch.set_num_threads(threads)


TRAIN_RECORD = "ablate_train.json"


#: Keys this script sets itself (from --name, --root, --minutes, --seed, --config): an override
#: of one would move the run elsewhere or change the fixed compute without the row saying so.
OWN_KEYS = {"run_name": "--name", "checkpoint_root": "--root", "train.max_minutes": "--minutes",
            "seed": "--seed", "config": "--config"}
#: Settings of a variant that its row describes; --eval-only takes the recorded ones when not given.
RECORDED = {"config": "5x5_cpu", "minutes": 30.0, "seed": 0, "overrides": []}
DEFAULT_REFERENCE = ROOT / "checkpoints/pretrained/5x5_v2.pt"
MAX_SEED = 2**32 - 1  # the training's and the openings' seeds


def reference_label(reference: str | Path) -> str:
    """How a row names its reference network: the file name, with the run folder in front for a
    run's ``best.pt`` or ``ckpt_*.pt`` (``baseline2/best.pt``), which would be ambiguous alone."""
    path = Path(reference)
    if path.name == "best.pt" or path.name.startswith("ckpt_"):
        return f"{path.parent.name}/{path.name}"
    return path.name


def result_name(args: argparse.Namespace, protocol_reference: str | Path) -> str:
    """The file in the run folder that keeps an evaluation's JSON: ``ablation.json`` for the
    protocol's own (``protocol_reference``, the one the run was trained for, on the training
    seed's openings), and ``ablation_vs_<reference>_<hash>_seed<N>.json`` for any other (a
    head-to-head against another run, or other openings). ``<reference>`` is
    :func:`reference_label` of the resolved path (at most 60 characters of ``[A-Za-z0-9._-]``) and
    ``<hash>`` the first 8 hex digits of SHA-1 of that resolved path, so that two references
    never share a file and a symlink names the file it points to."""
    ref = Path(args.reference).resolve()
    if ref == Path(protocol_reference).resolve() and args.eval_seed == args.seed:
        return "ablation.json"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", reference_label(ref).removesuffix(".pt"))[:60]
    digest = hashlib.sha1(str(ref).encode()).hexdigest()[:8]
    return f"ablation_vs_{slug}_{digest}_seed{args.eval_seed}.json"


RESULT_FILE = re.compile(r"ablation(_vs_[A-Za-z0-9._-]+_[0-9a-f]{8}_seed[0-9]+)?\.json")


def train_record(run_dir: Path) -> dict[str, Any]:
    """What earlier trainings of this script recorded in ``run_dir/ablate_train.json``: the
    training wall time ``train_wall_s`` (seconds, added up over a run stopped and continued), the
    ``config``, ``minutes``, ``seed``, ``overrides`` and the ``counters``; an empty dict when there is none.
    Raises ValueError naming the file when it is not a JSON object."""
    path = run_dir / TRAIN_RECORD
    if not path.is_file():
        return {}
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path} cannot be read ({e}); delete it to start the record again") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path} is not a JSON object; delete it to start the record again")
    kinds = {"config": (str,), "minutes": (int, float), "seed": (int,), "overrides": (list,),
             "reference": (str,), "train_wall_s": (int, float), "machine_speed": (list,)}
    for key, kind in kinds.items():
        value = record.get(key)
        if key in record and (isinstance(value, bool) or not isinstance(value, kind)):
            raise ValueError(f"{path}: {key} {value!r} is not a {' or '.join(k.__name__ for k in kind)}; "
                             "mend it or delete the file to start the record again")
    if "seed" in record and not 0 <= record["seed"] <= MAX_SEED:
        raise ValueError(f"{path}: seed {record['seed']} is not in 0..{MAX_SEED}")
    if not all(isinstance(o, str) for o in record.get("overrides", [])):
        raise ValueError(f"{path}: overrides must be a list of strings")
    if "seed" not in record:  # written before the seed was recorded: the run's own config has it
        seed = _config_seed(run_dir)
        if seed is not None:
            record["seed"] = seed
    return record


def _config_seed(run_dir: Path) -> int | None:
    """The ``seed`` of the run's saved ``config.yaml`` (written by ``takzero.train``), None when
    the file or the key is missing or unreadable."""
    import yaml

    try:
        seed = yaml.safe_load((run_dir / "config.yaml").read_text()).get("seed")
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError):
        return None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def preflight(args: argparse.Namespace) -> None:
    """Everything that can be checked before a 30-minute training: the variant name as a run
    folder, the overrides (no key this script sets itself; the composed config passes
    ``takzero.config``'s checks), the evaluation's numbers (``takzero.matches.evaluation``'s bounds), the
    reference network (loads, plays the config's board size) and the table's folder. Raises
    ValueError with the problem."""
    from takzero.config import ConfigError, check_run_folder, compose_preset, unknown_override_keys
    from takzero.matches.evaluation import MAX_PAIRS, MAX_PLY_LIMIT, MAX_SIMULATIONS, MAX_THREADS
    from takzero.players.registry import make_player

    if not (math.isfinite(args.minutes) and args.minutes > 0):
        raise ValueError(f"--minutes must be a number > 0, got {args.minutes}")
    if not 0 <= args.speed_seconds <= 600:  # also refuses nan
        raise ValueError(f"--speed-seconds must be in 0..600, got {args.speed_seconds}")
    for flag, value in (("--seed", args.seed), ("--eval-seed", args.eval_seed)):
        if not 0 <= value <= MAX_SEED:
            raise ValueError(f"{flag} must be in 0..{MAX_SEED}, got {value}")
    for flag, value, top in (("--pairs", args.pairs, MAX_PAIRS), ("--simulations", args.simulations, MAX_SIMULATIONS),
                             ("--ply-limit", args.ply_limit, MAX_PLY_LIMIT), ("--threads", args.threads, MAX_THREADS)):
        if not 1 <= value <= top:
            raise ValueError(f"{flag} must be in 1..{top}, got {value}")
    try:
        check_run_folder(args.root, args.name)
    except ConfigError as e:
        raise ValueError(f"--name/--root: {e}") from None
    for o in args.overrides:
        if "=" not in o:
            raise ValueError(f"override {o!r} is not key=value")
        key = o.lstrip("+~").split("=", 1)[0]
        if key in OWN_KEYS:
            raise ValueError(f"override {o!r}: set it with {OWN_KEYS[key]}, which the row records")
    unknown = unknown_override_keys(list(args.overrides))
    if unknown:
        raise ValueError("; ".join(unknown))
    try:
        cfg = compose_preset(args.config, [*args.overrides, f"train.max_minutes={args.minutes}",
                                           f"seed={args.seed}"], run_name=args.name)
    except Exception as e:  # noqa: BLE001 - Hydra/OmegaConf raise many types for a bad override or preset
        raise ValueError(f"config: {e}") from None
    if Path(args.reference).resolve().is_relative_to((Path(args.root) / args.name).resolve()):
        raise ValueError(f"--reference {args.reference} is the variant's own network ({args.name}): "
                         "give a baseline run's best.pt or a fixed network")
    reference = make_player(f"model:{args.reference}:{args.simulations}")
    if not args.train_only:  # the evaluation runs the reference on --eval-backend: try it now
        from takzero.nn.backends import with_backend

        try:
            with_backend(reference.evaluator, args.eval_backend, 1)
        except (ImportError, ValueError) as e:
            raise ValueError(f"--reference {args.reference} on --eval-backend {args.eval_backend}: {e} "
                             "(give --eval-backend torch)") from None
    size = getattr(reference, "model_size", None)
    if size is not None and int(size) != cfg.board.size:
        raise ValueError(f"--reference {args.reference} plays {size}x{size}, but --config {args.config} "
                         f"trains {cfg.board.size}x{cfg.board.size}")
    table = Path(args.table)
    if not args.no_table and (table.is_dir() or not table.parent.is_dir()):
        raise ValueError(f"--table {table}: " + ("is a folder" if table.is_dir() else f"no folder {table.parent}"))


def write_json(path: Path, obj: dict[str, Any]) -> None:
    """Write ``obj`` as indented JSON to ``path`` through a temp file and a rename."""
    from takzero.io.files import atomic_write_text

    atomic_write_text(path, json.dumps(obj, indent=1) + "\n")


def run_counters(run_dir: Path) -> dict[str, int]:
    """Positions, games and trainer steps of the run's latest checkpoint (zeros when none)."""
    from takzero.pipeline.checkpoints import load_latest

    latest = load_latest(run_dir)
    if latest is None:
        return {"positions": 0, "games": 0, "steps": 0}
    _, state = latest
    run = state.get("run", {})  # written by takzero.pipeline.run.Run._checkpoint
    return {
        "positions": int(run.get("positions", 0)),
        "games": int(run.get("games", 0)),
        "steps": int(state.get("step", 0)),
    }


def evaluate(args: argparse.Namespace, model: Path) -> dict[str, Any]:
    """Play ``model`` against ``model:REFERENCE:SIMULATIONS``; the summary dict of
    :func:`takzero.matches.evaluation.evaluate_model`."""
    import torch

    from takzero.matches.evaluation import evaluate_model

    torch.set_num_threads(1)
    spec = f"model:{args.reference}:{args.simulations}"
    print(f"[ablate] evaluating {model} against {spec}, {args.pairs} pairs, openings seed {args.eval_seed}",
          flush=True)
    (summary,) = evaluate_model(
        str(model), [spec], pairs=args.pairs, simulations=args.simulations, ply_limit=args.ply_limit,
        seed=args.eval_seed, threads=args.threads, backend=args.eval_backend,
    )
    return summary


def pooled_seeds(run_dir: Path, result: dict[str, Any]) -> str | None:
    """The variant's evaluations kept in ``run_dir`` (files named as :func:`result_name` names
    them) that played the same two networks as ``result`` (``model_sha256``, ``reference_sha256``)
    with the same pairs, simulations, ply limit and move choice (``select_q_fraction``), one per
    openings' seed, pooled: "seeds 0, 1:
    182-40-178 (W-D-L), Elo +3 [-31, +38]" (Wilson, :func:`_fmt_elo`); None when there is one
    seed only. A file that cannot be read, or holds counts that are not whole numbers >= 0, is
    left out: the evaluation that just ended never fails on an older file."""
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        ev = r["evaluation"]
        # a result without select_q_fraction was played with the most visited move (before 2026-12-06)
        return (r["model_sha256"], r["reference_sha256"], ev["pairs"], ev["simulations"], r["ply_limit"],
                ev.get("select_q_fraction", 0.0))

    want = key(result)
    found: dict[int, tuple[int, int, int]] = {}
    for path in sorted(run_dir.iterdir()):
        if not RESULT_FILE.fullmatch(path.name):
            continue
        try:
            r = json.loads(path.read_text())
            seed, ev = r["eval_seed"], r["evaluation"]
            counts = tuple(ev[k] for k in ("wins", "draws", "losses"))
            whole = all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)
            if key(r) == want and whole and type(seed) is int and sum(counts) > 0:
                found[seed] = counts  # type: ignore[assignment]
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError):
            continue
    if len(found) < 2:
        return None
    wins, draws, losses = (sum(c[i] for c in found.values()) for i in range(3))
    seeds = ", ".join(str(k) for k in sorted(found))
    return (f"seeds {seeds}: {wins}-{draws}-{losses} (W-D-L), "
            f"Elo {_fmt_elo({'wins': wins, 'draws': draws, 'losses': losses})}")


def _fmt_elo(s: dict[str, Any]) -> str:
    """Elo with its 95% interval from the W-D-L counts: the Wilson score interval mapped to Elo
    (:func:`takzero.matches.stats.elo_wilson`, honest at 0% and 100%), a one-sided result as its
    bound (:func:`takzero.matches.stats.elo_text`: ``'> +687'``)."""
    from takzero.matches.stats import elo_text, elo_wilson

    if not all(k in s for k in ("wins", "draws", "losses")):
        return "?"
    est = elo_wilson(int(s["wins"]), int(s["draws"]), int(s["losses"]))
    return elo_text(est.elo, est.lower, est.upper, digits=0)


def table_row(args: argparse.Namespace, result: dict[str, Any]) -> str:
    """One Markdown row of the ablation table for ``result`` (the JSON this script writes)."""
    s = result["evaluation"]
    wdl = f"{s.get('wins', '?')}-{s.get('draws', '?')}-{s.get('losses', '?')}"
    score = (
        f"{100 * s['score']:.1f}% [{100 * s['score_wilson_lower']:.1f}, {100 * s['score_wilson_upper']:.1f}]"
        if "score" in s
        else "?"
    )
    overrides = " ".join(args.overrides) or "(none)"
    minutes = f"{args.config}, {args.minutes:g} min"
    openings = f", openings seed {args.eval_seed}" if args.eval_seed != args.seed else ""
    if result.get("machine_speed"):  # the checks before and after each training session
        minutes += ", machine " + "/".join(f"{s:.0f}" for s in result["machine_speed"]) + " pos/s"
    return (
        f"| {args.name} | `{overrides}` | {minutes} | {result['counters']['positions']:,} | "
        f"{result['counters']['steps']:,} | {reference_label(args.reference)}, {2 * args.pairs} games at "
        f"{args.simulations} sims{openings} | {wdl} | {score} | {_fmt_elo(s)} | {result['date']} | "
        f"`{result['command']}` |\n"
    )


def append_row(table: Path, row: str) -> None:
    """Append ``row`` to the table in ``table`` (created with its header when missing), written to
    a temp file and renamed."""
    text = table.read_text() if table.exists() else ""
    if TABLE_HEADER.splitlines()[0] not in text:
        text += ("\n" if text and not text.endswith("\n") else "") + "\n" + TABLE_HEADER
    text += row
    from takzero.io.files import atomic_write_text

    atomic_write_text(table, text)


def _command_args(argv: list[str], no_overrides: bool) -> list[str]:
    """The arguments of the row's command: ``argv`` without ``--eval-only``/``--train-only``,
    the paths of ``--root``, ``--reference`` and ``--table`` made absolute (the command works
    from any folder), and a bare ``--`` dropped when no override follows it (the recorded ones
    are added after their own ``--``)."""
    out: list[str] = []
    paths = ("--root", "--reference", "--table")
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--" and no_overrides:
            i += 1
            continue
        if a == "--":
            return out + argv[i:]
        if a in paths and i + 1 < len(argv):
            out += [a, str(Path(argv[i + 1]).resolve())]
            i += 2
            continue
        flag, eq, value = a.partition("=")
        if eq and flag in paths:
            a = f"{flag}={Path(value).resolve()}"
        if a not in ("--eval-only", "--train-only"):
            out.append(a)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)  # the row's command names every option in full
    ap.add_argument("--name", required=True, help="variant name: the run folder under --root and the table row")
    ap.add_argument("--config", default=None, help="named config under configs/config/ (default 5x5_cpu)")
    ap.add_argument("--minutes", type=float, default=None, help="training wall time (train.max_minutes; default 30)")
    ap.add_argument("--reference", default=None,
                    help="fixed network to play (default: the one the run was trained for, else "
                         f"{DEFAULT_REFERENCE}, the 60-minute 5x5_cpu network of 2026-11-30); another "
                         "run's best.pt plays a head-to-head")
    ap.add_argument("--pairs", type=int, default=100,
                    help="openings, each played with both colours (default %(default)s)")
    ap.add_argument("--simulations", type=int, default=200,
                    help="simulations per move, both sides (default %(default)s)")
    ap.add_argument("--ply-limit", type=int, default=150, help="draw after this many plies (default %(default)s)")
    ap.add_argument("--seed", type=int, default=None,
                    help="seed of the training (default 0; --eval-only takes the recorded one)")
    ap.add_argument("--eval-seed", type=int, default=None,
                    help="seed of the evaluation's openings (default: --seed); another seed plays "
                         "other openings, to repeat a close call")
    ap.add_argument("--threads", type=int, default=2,
                    help="torch threads of the evaluation (both networks' batched calls; default %(default)s)")
    ap.add_argument("--root", default=str(ROOT / "checkpoints/ablations"),
                    help="folder of the runs (default %(default)s)")
    ap.add_argument("--table", default=str(ROOT / "docs/ablations.md"),
                    help="Markdown file the row is appended to (default %(default)s)")
    ap.add_argument("--eval-only", action="store_true", help="do not train; evaluate the run's best.pt")
    ap.add_argument("--train-only", action="store_true",
                    help="train, record the wall time in the run folder, do not evaluate (queue the "
                         "trainings of several variants, evaluate them later with --eval-only)")
    ap.add_argument("--no-table", action="store_true", help="print the row, do not append it")
    from takzero.nn.backends import EVAL_BACKENDS

    ap.add_argument("--eval-backend", choices=EVAL_BACKENDS, default="onnx",
                    help="CPU inference backend of the evaluation (takzero.evaluate --backend; the "
                         "same networks up to float rounding, onnx is faster; default %(default)s)")
    ap.add_argument("--speed-seconds", type=float, default=20.0,
                    help="seconds of the machine-speed check (machine_speed) before and after each "
                         "training; 0: none (default %(default)s)")
    ap.add_argument("overrides", nargs="*", help="key=value config overrides of the variant (after --)")
    args = ap.parse_args(argv)
    if args.eval_only and args.train_only:
        ap.error("--eval-only and --train-only exclude each other")
    if args.train_only and args.eval_seed is not None:
        ap.error("--eval-seed sets the evaluation's openings: it has no use with --train-only")
    args.root = str(Path(args.root).resolve())  # the training runs from the repository root
    run_dir = Path(args.root) / args.name
    this = _command_args(argv if argv is not None else sys.argv[1:], no_overrides=not args.overrides)
    try:
        record = train_record(run_dir) if args.name and "/" not in args.name else {}
    except ValueError as e:
        ap.error(str(e))
    if args.reference is None:
        args.reference = record.get("reference", str(DEFAULT_REFERENCE))
        if args.reference != str(DEFAULT_REFERENCE):
            this = ["--reference", args.reference, *this]
    if not Path(args.reference).is_file():
        ap.error(f"--reference {args.reference} is not a file")
    args.reference = str(Path(args.reference).resolve())
    protocol_reference = record.get("reference", args.reference if not args.eval_only else str(DEFAULT_REFERENCE))
    # The row must describe the run that was trained: a setting not given is the recorded one
    # (or the default for a new run); a given one that differs from the record is refused.
    for key, default in RECORDED.items():
        given = getattr(args, key) if key != "overrides" else (args.overrides or None)
        if key in record and given is not None and record[key] != given:
            ap.error(f"{run_dir} was trained with {key} {record[key]!r}, not {given!r} "
                     f"(give the same {key}, or another --name)")
        if given is None:
            value = record.get(key, default)
            setattr(args, key, list(value) if key == "overrides" else value)
            if key in record and record[key] != default:  # the row's command must reproduce it
                if key == "overrides":
                    this += ["--", *args.overrides]
                else:
                    this = [f"--{key}", str(record[key]), *this]
    if args.eval_seed is None:
        args.eval_seed = args.seed
    try:
        preflight(args)
    except ValueError as e:
        ap.error(str(e))
    wall = float(record.get("train_wall_s", 0.0))
    speeds: list[float] = list(record.get("machine_speed", []))
    def speed_check(when: str) -> None:
        if args.speed_seconds > 0:
            speeds.append(round(machine_speed(args.config, args.speed_seconds, args.seed), 1))
            print(f"[ablate] machine speed {when} training: {speeds[-1]:.1f} positions/s", flush=True)

    if not args.eval_only:
        speed_check("before")
        try:
            wall += train(args, run_dir)
        except RuntimeError as e:
            print(f"[ablate] {e}", file=sys.stderr)
            return 1
        speed_check("after")
        write_json(run_dir / TRAIN_RECORD, {
            "train_wall_s": round(wall, 1), "config": args.config, "minutes": args.minutes,
            "seed": args.seed, "overrides": args.overrides, "reference": protocol_reference,
            "counters": run_counters(run_dir), "machine_speed": speeds,
        })
        if args.train_only:
            print(f"[ablate] trained {args.name} for {wall:.0f} s; evaluate it with --eval-only", flush=True)
            return 0
    best = run_dir / "best.pt"
    if not run_dir.is_dir():
        print(f"[ablate] no run folder {run_dir}: train it first (without --eval-only), or give the "
              "--root it was trained in", file=sys.stderr)
        return 1
    if not best.is_file():
        print(f"[ablate] {best} does not exist: the run made no generation", file=sys.stderr)
        return 1
    from takzero.matches.evaluation import _finite_or_none
    from takzero.pipeline.checkpoints import file_sha256

    t0 = time.monotonic()
    try:
        summary = evaluate(args, best)
    except (OSError, ValueError) as e:
        print(f"[ablate] evaluation of {best} failed: {e}", file=sys.stderr)
        return 1
    result = {
        "variant": args.name,
        "overrides": args.overrides,
        "config": args.config,
        "minutes": args.minutes,
        "seed": args.seed,
        "reference": args.reference,
        "reference_sha256": file_sha256(args.reference),
        "model_sha256": file_sha256(best),
        "eval_seed": args.eval_seed,
        "ply_limit": args.ply_limit,
        "train_wall_s": round(wall, 1),
        "machine_speed": speeds,
        "eval_wall_s": round(time.monotonic() - t0, 1),
        "counters": run_counters(run_dir),
        "evaluation": _finite_or_none(summary),  # infinite Elo as null: strict JSON
        "date": dt.date.today().isoformat(),
    }
    name = result_name(args, protocol_reference)
    if name != "ablation.json":  # an evaluation of a trained run: the command must not train it again
        this = ["--eval-only", *this]
    result["command"] = "python scripts/ablate.py " + shlex.join(this)
    write_json(run_dir / name, result)
    print(json.dumps(result), flush=True)
    pooled = pooled_seeds(run_dir, result)
    if pooled is not None:
        print(f"[ablate] {args.name} against {reference_label(args.reference)}, pooled over the openings' {pooled}",
              flush=True)
    row = table_row(args, result)
    if args.no_table:
        print(row, end="")
    else:
        append_row(Path(args.table), row)
        print(f"[ablate] row appended to {args.table}; run folder {run_dir}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
