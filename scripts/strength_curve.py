"""Strength per CPU-hour: each weight snapshot of a run (or of a chain of warm-started runs)
played against one fixed network, as an Elo curve over the training behind it.

    python scripts/strength_curve.py RUN/snapshots [MORE.pt ...] \\
        --reference checkpoints/pretrained/6x6_v1.pt --pairs 50 --out curve.jsonl --plot curve.png

Inputs are model files (``snapshot_*.pt`` of ``train.snapshot_minutes``, a ``best.pt``, a shipped
network) or folders of them (their ``*.pt``), read weights-only; each is placed by its lineage
(``takzero.pipeline.lineage``: the training minutes, positions and steps of the whole warm-start
chain behind it; a file without one counts its own run only). Each plays ``--pairs`` random 2-ply
openings with both colours at ``--simulations`` PUCT simulations a side against
``model:REFERENCE`` (``takzero.matches.evaluation.evaluate_model``: no noise, the players' move
choice (``DEFAULT_SELECT_Q_FRACTION``; a line without ``select_q_fraction`` was measured with the
most visited move), the default tinuë checks at both roots), and one JSON line per file goes to stdout and is appended
to ``--out``: its lineage, W-D-L, score, the Elo with its pentanomial 95% interval on the game
pairs and the Wilson one (infinite Elo as null). A file already in ``--out`` with the same bytes,
reference, pairs, simulations, ply limit, seed and move choice is not played again (its line is reused), so a
curve grows session by session. ``--plot`` draws Elo over training hours (intervals as bars,
clipped to +-800, W-D-L beside each point) and writes the PNG atomically.

``--ladder``: the files, in order of their lineage, also play each the one before (the first the
first file: only the reference), and every line of ``--out`` and of this call among these files
and the reference, at these settings, is pooled into one Elo scale by a Bradley-Terry fit
(:func:`bradley_terry`: maximum likelihood over all pairs played, draws as half wins, the
reference fixed at 0, 95% intervals from the observed information): one more JSON line per file
(``"fit": "bradley-terry"``), and the plot draws that scale. A reference that is one of the
files is not played against itself. ``--movetime MS`` instead of ``--simulations N``: both
networks search for MS milliseconds a move (the network player's time limit,
``takzero.players.network.NetworkPlayer(seconds=...)``, the one TEI's ``go movetime`` uses; one
game at a time, so a network's speed counts as much as its judgement; run it on a quiet core,
e.g. ``taskset -c 0``). Ladder, e.g. the long 6x6 run against link 7 at 0.1 s a move:

    python scripts/strength_curve.py checkpoints/long6x6/link1_r6_gumbel32.pt \
        checkpoints/long6x6/link{2,3,4,5,6,7}.pt --ladder --reference checkpoints/long6x6/link7.pt \
        --movetime 100 --pairs 10 --out ladder.jsonl --plot curve.png

Exit status: 0, or 2 for bad arguments (a missing file, a file that is no model, a reference of
another board size: named before any game).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plot_run import ELO_CLIP, plt, save_figure  # noqa: E402

from takzero.io.files import atomic_write_text  # noqa: E402
from takzero.pipeline.checkpoints import CheckpointError, file_sha256, load_checked  # noqa: E402
from takzero.pipeline.lineage import Lineage  # noqa: E402
from takzero.players.network import DEFAULT_SELECT_Q_FRACTION  # noqa: E402

#: the keys of a JSON line that must agree for an earlier line to stand for a new evaluation
SAME = ("model_sha256", "reference_sha256", "pairs", "simulations", "movetime_ms", "ply_limit", "seed",
        "select_q_fraction")
#: what a line written before a key existed was measured with (the move choice: the most visited;
#: simulations, not a time limit)
OLD_DEFAULTS = {"select_q_fraction": 0.0, "movetime_ms": None}
#: the settings a pooled fit needs all its lines to share (not the pairs: more games are welcome)
FIT_SAME = ("simulations", "movetime_ms", "ply_limit", "select_q_fraction")
#: Elo per natural-log unit of the Bradley-Terry strength: 400 / ln 10
ELO_PER_NAT = 400.0 / math.log(10.0)


def bradley_terry(
    results: list[tuple[int, int, float, float, float]],
    players: int,
    anchor: int = 0,
    confidence_z: float = 1.959964,
    prior_draws: float = 0.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ratings on one Elo scale from the results of every pair played: the Bradley-Terry model
    (Bradley and Terry 1952; Zermelo 1929), P(i beats j) = 1 / (1 + 10^((R_j - R_i) / 400)),
    fitted by maximum likelihood (Newton's method on the concave log-likelihood), a draw counted
    as half a win for each side (as Elo and BayesElo's default do), ``anchor``'s rating fixed at 0.

    Args:
        results: (i, j, wins of i, draws, losses of i) per match; i != j in 0..players-1; counts
            >= 0 (floats allowed). Matches of the same pair add up.
        players: the number of players.
        anchor: the player rated 0.
        confidence_z: the normal quantile of the intervals (1.96: 95%).
        prior_draws: virtual draws added to every pair that played (0: the plain maximum
            likelihood; > 0 keeps ratings finite when a player won or lost all its games).

    Returns:
        (ratings, lower, upper): float64 arrays of shape (players,), in Elo; the interval is
        rating -+ z * standard error from the observed information (the inverse of the negative
        Hessian of the log-likelihood with the anchor held fixed; draws counted as half wins
        make it somewhat wide where draws are many). The anchor's interval is [0, 0].

    Raises:
        ValueError: bad input; a player who played no one linked to the anchor (no scale); or
            no finite maximum (Ford's condition fails: some group of players never scored against,
            or never conceded to, the rest), naming the players, when ``prior_draws`` is 0.
    """
    if players < 1 or not 0 <= anchor < players:
        raise ValueError(f"need players >= 1 and 0 <= anchor < players, got {players}, {anchor}")
    n = np.zeros((players, players))  # games between i and j
    s = np.zeros((players, players))  # i's score against j
    for i, j, w, d, lost in results:
        if not (0 <= i < players and 0 <= j < players) or i == j:
            raise ValueError(f"a match must be between two players of 0..{players - 1}, got ({i}, {j})")
        if min(w, d, lost) < 0 or not all(math.isfinite(x) for x in (w, d, lost)):
            raise ValueError(f"counts must be finite and >= 0, got {w}-{d}-{lost} for ({i}, {j})")
        n[i, j] += w + d + lost
        n[j, i] += w + d + lost
        s[i, j] += w + d / 2
        s[j, i] += lost + d / 2
    if prior_draws < 0:
        raise ValueError(f"prior_draws must be >= 0, got {prior_draws}")
    played = n > 0
    n = n + prior_draws * played
    s = s + prior_draws / 2 * played
    reach = {anchor}
    frontier = [anchor]
    while frontier:  # the players linked to the anchor by games
        k = frontier.pop()
        for m in np.flatnonzero(played[k]):
            if int(m) not in reach:
                reach.add(int(m))
                frontier.append(int(m))
    if len(reach) < players:
        raise ValueError(f"players {sorted(set(range(players)) - reach)} played no one linked to player {anchor}")
    if prior_draws == 0:
        beats = s > 0  # i -> j: i scored against j; a finite maximum needs every i to reach every j
        for start in range(players):
            seen = {start}
            frontier = [start]
            while frontier:
                k = frontier.pop()
                for m in np.flatnonzero(beats[k]):
                    if int(m) not in seen:
                        seen.add(int(m))
                        frontier.append(int(m))
            if len(seen) < players:
                raise ValueError(f"no finite ratings: players {sorted(set(range(players)) - seen)} never lost a "
                                 f"point to players {sorted(seen)} (give prior_draws > 0)")
    free = np.array([k for k in range(players) if k != anchor], dtype=np.int64)
    r = np.zeros(players)

    def loglik(r: np.ndarray) -> float:
        diff = r[:, None] - r[None, :]
        return float(np.sum(s * -np.logaddexp(0.0, -diff)))  # s_ij log sigmoid(r_i - r_j)

    def info(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = 1.0 / (1.0 + np.exp(-(r[:, None] - r[None, :])))
        grad = np.sum(s - n * p, axis=1)
        w = n * p * (1.0 - p)
        fisher = np.diag(w.sum(axis=1)) - w  # the negative Hessian (a weighted graph Laplacian)
        return grad[free], fisher[np.ix_(free, free)]

    for _ in range(100):
        grad, fisher = info(r)
        step = np.linalg.solve(fisher, grad) if len(free) else grad
        t, before = 1.0, loglik(r)
        while t > 1e-6:  # halve the step until the likelihood does not fall
            trial = r.copy()
            trial[free] += t * step
            if loglik(trial) >= before - 1e-12:
                break
            t /= 2
        r = trial
        if len(free) == 0 or np.max(np.abs(t * step)) < 1e-10:
            break
    _, fisher = info(r)
    se = np.zeros(players)
    if len(free):
        se[free] = np.sqrt(np.diag(np.linalg.inv(fisher)))
    elo = r * ELO_PER_NAT
    half = confidence_z * se * ELO_PER_NAT
    return elo, elo - half, elo + half


def model_files(paths: list[str]) -> list[Path]:
    """The model files named: files as given, folders as their ``*.pt`` (sorted), no repeats.

    Raises:
        ValueError: a path that does not exist, or a folder with no ``*.pt``.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("*.pt"))
            if not found:
                raise ValueError(f"{p}: a folder with no *.pt model files")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise ValueError(f"{p}: no such file or folder")
    seen: set[Path] = set()
    return [p for p in out if not (p.resolve() in seen or seen.add(p.resolve()))]


def read_model(path: Path) -> tuple[int, int, Lineage]:
    """(board size, generation, lineage) of a model or checkpoint file, read weights-only; its
    network is built and its weights loaded, so a file that cannot play is refused here.

    Raises:
        ValueError: naming the file: it cannot be read or verified, holds no model, its network
            cannot be built from its weights, or its generation or lineage is malformed.
    """
    from takzero.nn.model import model_from_checkpoint

    try:
        d = load_checked(path)
    except CheckpointError as e:
        raise ValueError(f"{path}: cannot be loaded: {e}") from None
    if not isinstance(d, dict) or not isinstance(d.get("model_config"), dict) or "model_state" not in d:
        raise ValueError(f"{path}: holds no model_config and model_state (not a takzero model file)")
    generation = d.get("generation", -1)
    if isinstance(generation, bool) or not isinstance(generation, int):
        raise ValueError(f"{path}: its generation must be a whole number, got {generation!r:.40}")
    try:
        net = model_from_checkpoint(d, source=str(path))
    except Exception as e:  # noqa: BLE001 - any way the weights fail to build a network
        raise ValueError(f"{path}: its weights do not build a network ({type(e).__name__}: {e})") from None
    try:
        lineage = Lineage.of_file(d)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None
    return int(net.config.size), generation, lineage


#: the keys a line of --out must have to stand for an evaluation (and to be drawn)
LINE_KEYS = (*(k for k in SAME if k != "movetime_ms"), "minutes", "wins", "draws", "losses")


def earlier_lines(out: Path | None) -> list[dict[str, Any]]:
    """The evaluations already in ``out`` (none when it does not exist). Lines that are not JSON
    objects with :data:`LINE_KEYS` (minutes a number) are skipped with a warning on stderr.

    Raises:
        ValueError: ``out`` is not a UTF-8 text file.
    """
    if out is None or not out.is_file():
        return []
    try:
        text = out.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"--out {out}: not a JSON lines file (not UTF-8 text)") from None
    lines = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            print(f"[strength_curve] {out}:{n}: not a JSON line ({e.msg}); ignored", file=sys.stderr)
            continue
        missing = [k for k in LINE_KEYS if k not in row] if isinstance(row, dict) else list(LINE_KEYS)
        if missing or isinstance(row["minutes"], bool) or not isinstance(row["minutes"], int | float):
            print(f"[strength_curve] {out}:{n}: not an evaluation line (missing or bad: "
                  f"{', '.join(missing) or 'minutes'}); ignored", file=sys.stderr)
            continue
        lines.append(row)
    return lines


def check_output(option: str, path: Path | None) -> None:
    """Refuse an output path before any game: a folder, an empty name, a missing parent folder.

    Raises:
        ValueError: naming ``option``.
    """
    if path is None:
        return
    if path.name in ("", ".", ".."):
        raise ValueError(f"{option} {str(path)!r}: not a file name")
    if path.is_dir():
        raise ValueError(f"{option} {path}: is a folder, not a file")
    if not path.parent.is_dir():
        raise ValueError(f"{option} {path}: no such folder {path.parent}")


def _finite(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def play_movetime(path: Path, opponent: Path, args: argparse.Namespace) -> dict[str, Any]:
    """``path`` against ``opponent`` with ``args.movetime`` ms a move each (the network player's
    time limit; simulations unbounded), ``args.pairs`` random 2-ply openings with both colours,
    one game at a time, komi the model's own. Returns what :func:`evaluate_file` reads of
    ``evaluate_model``'s summary: wins, draws, losses, score, the Elo with its interval and its
    model, the Wilson interval in Elo, select_q_fraction."""
    from takzero.game.position import Position
    from takzero.matches.evaluation import MAX_SIMULATIONS
    from takzero.matches.games import play_match
    from takzero.matches.openings import random_openings
    from takzero.matches.stats import elo_wilson
    from takzero.players.network import NetworkPlayer

    seconds = args.movetime / 1000.0
    players = [NetworkPlayer.load(str(f), simulations=MAX_SIMULATIONS, seconds=seconds, threads=args.threads,
                                  seed=args.seed + k, name=f"{tag}{f.name}")
               for k, (f, tag) in enumerate(((path, ""), (opponent, "ref:")))]
    start = Position.start(players[0].model_size, half_komi=int(players[0].model_half_komi or 0))
    openings = random_openings(start, args.pairs, plies=2, seed=args.seed)

    def heard(so_far: Any, record: Any) -> None:
        if args.verbose:
            print(f"game {so_far.num_games}/{2 * args.pairs}: {record.white} - {record.black} {record.result} "
                  f"({record.plies} plies); {so_far.tally()}", file=sys.stderr, flush=True)

    match = play_match(players[0], players[1], start, openings, args.ply_limit, seed=args.seed, on_game=heard)
    out = dict(match.summary())
    wilson = elo_wilson(match.wins, match.draws, match.losses)
    out.update(elo_wilson_lower=wilson.lower, elo_wilson_upper=wilson.upper,
               select_q_fraction=players[0].config.select_q_fraction)
    return out


def evaluate_file(path: Path, lineage: Lineage, generation: int, args: argparse.Namespace,
                  reference_sha: str, opponent: Path | None = None) -> dict[str, Any]:
    """Play ``path`` against ``opponent`` (default ``args.reference``, whose file hash is
    ``reference_sha``) at ``args.simulations`` simulations (``model:OPPONENT:SIMULATIONS``) or
    ``args.movetime`` ms a move (:func:`play_movetime`); the curve's JSON line."""
    from takzero.matches.evaluation import evaluate_model

    opponent = Path(args.reference) if opponent is None else opponent
    t0 = time.monotonic()
    if args.movetime is not None:
        s = play_movetime(path, opponent, args)
    else:
        (s,) = evaluate_model(
            str(path), [f"model:{opponent}:{args.simulations}"], pairs=args.pairs,
            simulations=args.simulations, ply_limit=args.ply_limit, seed=args.seed, threads=args.threads,
            say=lambda line: None,
            progress=(lambda line: print(line, file=sys.stderr, flush=True)) if args.verbose else None,
        )
    return {
        "model": str(path),
        "model_sha256": file_sha256(path),
        "generation": generation,
        "reference": str(opponent),
        "reference_sha256": reference_sha,
        "pairs": args.pairs,
        "simulations": None if args.movetime is not None else args.simulations,
        "movetime_ms": args.movetime,
        "ply_limit": args.ply_limit,
        "seed": args.seed,
        "select_q_fraction": s["select_q_fraction"],
        "minutes": round(lineage.minutes, 2),
        "hours": round(lineage.minutes / 60, 3),
        "positions": lineage.positions,
        "games_selfplay": lineage.games,
        "steps": lineage.steps,
        "runs": list(lineage.runs),
        "lineage_known": lineage.known,  # False: the counters are lower bounds (a file without lineage)
        "wins": s["wins"],
        "draws": s["draws"],
        "losses": s["losses"],
        "score": s.get("score"),
        "elo": _finite(s.get("elo")),
        "elo_lower": _finite(s.get("elo_lower")),
        "elo_upper": _finite(s.get("elo_upper")),
        "elo_model": s.get("elo_model"),
        "elo_wilson_lower": _finite(s.get("elo_wilson_lower")),
        "elo_wilson_upper": _finite(s.get("elo_wilson_upper")),
        "eval_seconds": round(time.monotonic() - t0, 1),
    }


def budget_text(points: list[dict[str, Any]]) -> str:
    """What each side searched in ``points``: ``'200 simulations a side'``, ``'100 ms a move'``."""
    times = sorted({int(r["movetime_ms"]) for r in points if r.get("movetime_ms") is not None})
    sims = sorted({int(r["simulations"]) for r in points if r.get("movetime_ms") is None and r.get("simulations")})
    parts = ([f"{'/'.join(map(str, sims))} simulations a side"] if sims else []) + (
        [f"{'/'.join(map(str, times))} ms a move"] if times else [])
    return ", ".join(parts)


def plot_curve(points: list[dict[str, Any]], reference: str, path: Path, title: str | None = None) -> None:
    """Elo against ``reference`` over training hours, one point per line of ``points`` (its
    interval as a bar, clipped to +-ELO_CLIP, its W-D-L beside it); written atomically.
    ``title``: the figure's title (default: games a point and the search budget)."""
    pts = sorted(points, key=lambda r: r["minutes"])
    fig, ax = plt.subplots(figsize=(7.5, 4.2))

    def clip(x: Any, default: float) -> float:
        v = x if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) else default
        return max(-ELO_CLIP, min(ELO_CLIP, float(v)))

    hours = [r["minutes"] / 60 for r in pts]
    elo = [clip(r.get("elo"), ELO_CLIP if (r.get("score") or 0) > 0.5 else -ELO_CLIP) for r in pts]
    lo = [e - clip(r.get("elo_lower"), -ELO_CLIP) for e, r in zip(elo, pts, strict=True)]
    hi = [clip(r.get("elo_upper"), ELO_CLIP) - e for e, r in zip(elo, pts, strict=True)]
    ax.errorbar(hours, elo, yerr=[lo, hi], marker="o", capsize=3)
    for h, e, r in zip(hours, elo, pts, strict=True):
        ax.annotate(f"{r['wins']}-{r['draws']}-{r['losses']}", (h, e), textcoords="offset points",
                    xytext=(5, -12), fontsize=8)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("training hours (over the warm-start chain)")
    ax.set_ylabel(f"Elo vs {Path(reference).name}")
    if title is None:
        games = {2 * int(r["pairs"]) for r in pts}
        title = f"strength per CPU-hour: {'/'.join(map(str, sorted(games)))} games a point, {budget_text(pts)}"
    ax.set_title(title)
    ax.grid(alpha=0.3)
    save_figure(fig, path)


def pooled_fit(rows: list[dict[str, Any]], models: list[tuple[Path, str, int, Lineage]], reference: Path,
               reference_sha: str) -> list[dict[str, Any]]:
    """One Bradley-Terry scale (:func:`bradley_terry`, the reference at 0) over ``rows``, the
    evaluation lines between ``models`` ((file, sha256, generation, lineage)) and the reference:
    one JSON-able dict per model, with 'elo', 'elo_lower', 'elo_upper' (95%, observed
    information), its games and W-D-L over all its matches, 'matches' and 'prior_draws' (0, or 1
    virtual draw per pair played when a plain maximum does not exist: a file that won or lost
    all its games)."""
    index = {reference_sha: 0}
    for _, sha, _, _ in models:
        index.setdefault(sha, len(index))
    results = [(index[r["model_sha256"]], index[r["reference_sha256"]], float(r["wins"]), float(r["draws"]),
                float(r["losses"])) for r in rows]
    prior = 0.0
    try:
        elo, lower, upper = bradley_terry(results, len(index))
    except ValueError as e:
        if "no finite ratings" not in str(e):
            raise
        prior = 1.0
        print(f"[strength_curve] Bradley-Terry: {e}; fitted with 1 virtual draw per pair played",
              file=sys.stderr)
        elo, lower, upper = bradley_terry(results, len(index), prior_draws=prior)
    out = []
    for f, sha, generation, lineage in models:
        k = index[sha]
        wdl = [0, 0, 0]
        matches = 0
        for i, j, w, d, lost in results:
            if k in (i, j) and i != j:
                matches += 1
                mine = (w, d, lost) if i == k else (lost, d, w)
                wdl = [a + int(b) for a, b in zip(wdl, mine, strict=True)]
        games = sum(wdl)
        out.append({
            "fit": "bradley-terry", "model": str(f), "model_sha256": sha, "generation": generation,
            "reference": str(reference), "reference_sha256": reference_sha,
            "minutes": round(lineage.minutes, 2), "hours": round(lineage.minutes / 60, 3),
            "elo": round(float(elo[k]), 1), "elo_lower": round(float(lower[k]), 1),
            "elo_upper": round(float(upper[k]), 1), "wins": wdl[0], "draws": wdl[1], "losses": wdl[2],
            "games": games, "score": (wdl[0] + wdl[1] / 2) / games if games else None, "matches": matches,
            "prior_draws": prior,
        })
    return out


def _append(out: Path | None, row: dict[str, Any]) -> None:
    if out is not None:
        text = out.read_text() if out.is_file() else ""
        if text and not text.endswith("\n"):
            text += "\n"
        atomic_write_text(out, text + json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> int:
    """``python scripts/strength_curve.py PATH [...] --reference REF``: the curve's JSON lines."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("paths", nargs="+", help="model files or folders of them (e.g. RUN/snapshots)")
    p.add_argument("--reference", required=True, help="the fixed network every file plays")
    p.add_argument("--pairs", type=int, default=50, help="openings, each with both colours (default 50)")
    p.add_argument("--simulations", type=int, default=200, help="simulations per move, both sides")
    p.add_argument("--movetime", type=int, metavar="MS",
                   help="milliseconds per move, both sides, instead of --simulations (one game at a time)")
    p.add_argument("--ladder", action="store_true",
                   help="each file also plays the one before it; one Bradley-Terry Elo scale over all pairs")
    p.add_argument("--ply-limit", type=int, default=150, help="draw after this many plies")
    p.add_argument("--seed", type=int, default=0, help="seed of the openings")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of the networks (default 1)")
    p.add_argument("--out", type=Path, help="JSON lines file: appended to, and read to skip files done")
    p.add_argument("--plot", type=Path, help="PNG of the curve (every line of --out and of this call)")
    p.add_argument("--verbose", action="store_true", help="a line per finished game on stderr")
    args = p.parse_args(argv)
    from takzero.matches.evaluation import MAX_PAIRS, MAX_PLY_LIMIT, MAX_SIMULATIONS, MAX_THREADS

    for name, value, top in (("--pairs", args.pairs, MAX_PAIRS), ("--simulations", args.simulations, MAX_SIMULATIONS),
                             ("--ply-limit", args.ply_limit, MAX_PLY_LIMIT), ("--threads", args.threads, MAX_THREADS),
                             ("--movetime", args.movetime, 3_600_000)):
        if value is not None and not 1 <= value <= top:
            p.error(f"{name} must be in 1..{top}, got {value}")
    try:
        check_output("--out", args.out)
        check_output("--plot", args.plot)
        files = model_files(args.paths)
        ref_size, _, _ = read_model(Path(args.reference))
        models = [(f, *read_model(f)) for f in files]
        done = earlier_lines(args.out)
    except ValueError as e:
        p.error(str(e))
    for f, size, _, _ in models:
        if size != ref_size:
            p.error(f"{f} plays {size}x{size}, the reference {args.reference} plays {ref_size}x{ref_size}")
    reference = Path(args.reference)
    reference_sha = file_sha256(reference)
    simulations = None if args.movetime is not None else args.simulations
    ordered = [(f, file_sha256(f), generation, lineage)
               for f, _, generation, lineage in sorted(models, key=lambda m: m[3].minutes)]
    points: list[dict[str, Any]] = []
    for k, (f, sha, generation, lineage) in enumerate(ordered):
        opponents = [(reference, reference_sha)]
        if args.ladder and k > 0:
            opponents.append((ordered[k - 1][0], ordered[k - 1][1]))
        for opponent, opponent_sha in opponents:
            if opponent_sha == sha:
                continue  # the reference itself, or a link equal to the one before: no match
            key = {"model_sha256": sha, "reference_sha256": opponent_sha, "pairs": args.pairs,
                   "simulations": simulations, "movetime_ms": args.movetime, "ply_limit": args.ply_limit,
                   "seed": args.seed, "select_q_fraction": DEFAULT_SELECT_Q_FRACTION}
            old = next((r for r in done if all(r.get(k, OLD_DEFAULTS.get(k)) == key[k] for k in SAME)), None)
            if old is None and args.ladder and any(all(_flipped(r).get(k, OLD_DEFAULTS.get(k)) == key[k] for k in SAME)
                                                   for r in done):
                print(f"[strength_curve] {f}: played against {opponent} the other way round already; "
                      "not played again", file=sys.stderr)
                continue
            if old is not None:
                where = f"in {args.out}" if args.out is not None else f"played above as {old['model']}"
                print(f"[strength_curve] {f}: the same bytes, opponent and settings are already {where}; "
                      "not played again", file=sys.stderr)
                print(json.dumps(old), flush=True)
                points.append(old)
                continue
            print(f"[strength_curve] {f}: {lineage.describe()}; {2 * args.pairs} games against "
                  f"{opponent}", file=sys.stderr, flush=True)
            row = evaluate_file(f, lineage, generation, args, opponent_sha, opponent=opponent)
            print(json.dumps(row), flush=True)
            _append(args.out, row)
            points.append(row)
            done.append(row)
    if args.ladder:
        shas = {reference_sha} | {sha for _, sha, _, _ in ordered}
        here = {k: v for k, v in (("simulations", simulations), ("movetime_ms", args.movetime),
                                  ("ply_limit", args.ply_limit), ("select_q_fraction", DEFAULT_SELECT_Q_FRACTION))}
        rows = [r for r in done if r["model_sha256"] in shas and r["reference_sha256"] in shas
                and r["model_sha256"] != r["reference_sha256"]
                and all(r.get(k, OLD_DEFAULTS.get(k)) == v for k, v in here.items())]
        fit = pooled_fit(rows, ordered, reference, reference_sha)
        for line in fit:
            print(json.dumps(line), flush=True)
        if args.plot is not None:
            games = sorted({2 * int(r["pairs"]) for r in rows})
            title = (f"one Bradley-Terry scale over {len(rows)} matches ({'/'.join(map(str, games))} games each), "
                     f"{budget_text(rows)}")
            plot_curve(fit, args.reference, args.plot, title=title)
            print(f"[strength_curve] pooled curve of {len(fit)} points: {args.plot}", file=sys.stderr)
    elif args.plot is not None:
        shown = {r["model_sha256"]: r for r in done if all(r.get(k, OLD_DEFAULTS.get(k)) == v for k, v in
                 (("reference_sha256", reference_sha), ("simulations", simulations),
                  ("movetime_ms", args.movetime)))}
        plot_curve(list(shown.values()), args.reference, args.plot)
        print(f"[strength_curve] curve of {len(shown)} points: {args.plot}", file=sys.stderr)
    print(f"[strength_curve] {len(points)} evaluations against {args.reference}"
          + (" and the ladder" if args.ladder else "")
          + (f"; lines in {args.out}" if args.out else ""), file=sys.stderr)
    return 0


def _flipped(row: dict[str, Any]) -> dict[str, Any]:
    """The keys of an evaluation line seen from its opponent's side (the two files swapped)."""
    return {**row, "model_sha256": row["reference_sha256"], "reference_sha256": row["model_sha256"]}


if __name__ == "__main__":
    sys.exit(main())
