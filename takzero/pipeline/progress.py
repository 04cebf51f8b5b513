"""What a training run tells its user: start-up lines, a live progress bar with the stop
condition and ETA, a log file in the run folder, and the summary at the end.

Every line goes to the console and to ``<run folder>/train.log`` (time-stamped, appended across
resumes), so a background run leaves its history. On a terminal the progress is a tqdm bar
(``rate`` and ETA of the stop condition that will end the run first) whose text is fitted to the
terminal's width field by field (:func:`fit_fields`: the stop condition and ETA are never cut)
and which is taken off before the summary; elsewhere, and in the log file, it is one plain line
with every field whole every ``log_every_s`` seconds. Each evaluation match prints one line when
its result lands (:func:`evaluation_line`), and the progress line carries the latest Elo against
the strongest baseline (:func:`strength_text`).

Rates (and so the ETA) are measured over the last ``RATE_WINDOW_S`` seconds of this session only,
each from the last report before its counter first moved, so neither counters restored at a
resume nor the wait for kernels and for ``replay.min_positions`` skew them.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from tqdm import tqdm

from takzero.matches.stats import elo_text

RATE_WINDOW_S = 300.0


def resume_command(argv: list[str], run_name: str) -> str:
    """The command that continues this run: ``python -m takzero.train`` with the same overrides
    and ``run_name`` pinned to the run's folder name."""
    args = [a for a in argv if not a.lstrip("+").startswith("run_name=")]
    return shlex.join([sys.executable.rsplit("/", 1)[-1], "-m", "takzero.train", *args,
                       f"run_name={run_name}"])


def kernels_cached(package_root: Path) -> bool:
    """Whether numba's on-disk cache already holds compiled search kernels (``*.nbi`` index files
    of ``takzero/search``), under ``NUMBA_CACHE_DIR`` when set, else beside the modules. False
    means the first self-play step compiles them (about a minute on a laptop)."""
    cache_dir = os.environ.get("NUMBA_CACHE_DIR")
    roots = [Path(cache_dir)] if cache_dir else [package_root / "search" / "__pycache__"]
    for root in roots:
        if root.is_dir() and any(p.name.startswith("steps.") for p in root.rglob("*.nbi")):
            return True
    return False


@dataclass
class StopRule:
    """The run's stop conditions (0 = not set): ``train.total_steps``, ``train.max_minutes``
    (training minutes over all sessions of the run), ``max_games``."""

    total_steps: int
    max_minutes: float = 0.0
    max_games: int = 0

    def describe(self) -> str:
        parts = [f"{self.total_steps} steps"]
        if self.max_minutes > 0:
            parts.append(f"{self.max_minutes:g} min")
        if self.max_games > 0:
            parts.append(f"{self.max_games} games")
        return "stops at " + " or ".join(parts) + (", whichever comes first" if len(parts) > 1 else "")

    def reason(self, step: int, minutes: float, games: int) -> str | None:
        """Why the run is done at this point, or None if it is not."""
        if step >= self.total_steps:
            return f"reached train.total_steps={self.total_steps}"
        if self.max_minutes > 0 and minutes >= self.max_minutes:
            return f"reached train.max_minutes={self.max_minutes:g}"
        if self.max_games > 0 and games >= self.max_games:
            return f"reached max_games={self.max_games}"
        return None


@dataclass
class Snapshot:
    """The numbers of one progress report (totals over the run, rates over this session)."""

    step: int
    generation: int
    games: int
    positions: int
    minutes: float  # training minutes over all sessions
    games_in_flight: int = 0
    positions_in_flight: int = 0
    replay_positions: int = 0
    reanalysed: int = -1  # Reanalyse: policy targets refreshed so far (-1: Reanalyse off)
    gating: str = "none yet"
    strength: str = ""  # latest Elo against the strongest baseline (strength_text), "" before
    #: the check running or waiting (``'eval gen 1: 6/8 games'``, ``'eval gen 2: waiting for the
    #: evaluator'``), "" when none is owed
    evaluation: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def evaluation_line(generation: int, record: dict[str, Any], decision: str | None = None) -> str:
    """The line of one evaluation match when its result lands: ``'evaluation: gen 8 vs uct:
    12-2-6 (W-D-L), score 0.650, Elo +107.5 [-20.3, +250.1] (95%, pentanomial score-test
    interval, 10 game pairs), 20 games, 35 s'``. ``record``: a
    :func:`takzero.pipeline.gating.match_record`; ``decision``: the gating decision of a gating
    match ('promote' or 'reject'), appended. A failed baseline (a
    :func:`~takzero.pipeline.gating.failed_record`: a ``tei:`` engine that failed): ``'evaluation:
    gen 8 vs tei-x-n200: FAILED after 3 s: <error>'``."""
    r = record
    what = f"{r['opponent']} (gating)" if r["kind"] == "gating" else r["opponent"]
    if r.get("error"):
        return f"evaluation: gen {generation} vs {what}: FAILED after {r['seconds']:.0f} s: {r['error']}"
    text = (f"evaluation: gen {generation} vs {what}: {r['wins']}-{r['draws']}-{r['losses']} (W-D-L), "
            f"score {r['score']:.3f}, Elo {r['elo_text']}, {r['games']} games, {r['seconds']:.0f} s")
    return text + (f": {decision}" if decision else "")


def tactics_line(generation: int, point: dict[str, Any]) -> str:
    """The line of one tactics-curve point when it lands: ``'tactics: gen 8 solved 41/100
    (41%): win_in_1 20/25, win_in_3 9/25, win_in_5 4/25, avoid_loss 8/25, 12 s'``. ``point``: a
    :meth:`takzero.pipeline.gating.GatingEvaluator.tactics_point` (and its 'unverified' ids,
    counted unsolved, named by number)."""
    solved, positions = point["solved"], point["positions"]
    kinds = ", ".join(f"{k} {solved[k]}/{positions[k]}" for k in positions if k != "all")
    text = (f"tactics: gen {generation} solved {solved['all']}/{positions['all']} "
            f"({100 * point['rates']['all']:.0f}%): {kinds}, {point['seconds']:.0f} s")
    unverified = point.get("unverified") or []
    return text + (f" ({len(unverified)} unverified, counted unsolved)" if unverified else "")


#: The phases of a run's start-up, in order, each between two of the wall-clock stamps that
#: :func:`startup_timings` reads: (phase, from stamp, to stamp).
STARTUP_PHASES = (
    ("launch", "process_started", "run_created"),  # Python, imports, Hydra (process_started)
    ("setup", "run_created", "ray_start"),  # run folder, checkpoint verified and loaded, trainer
    ("ray", "ray_start", "ray_ready"),  # ray.init
    ("to_pool", "ray_ready", "pool_created"),  # the actors created (processes start meanwhile)
    ("actors", "pool_created", "startup/actor_at"),  # worker processes started, modules imported
    ("worker_build", "startup/actor_at", "startup/built_at"),  # kernels (numba cache), network
    ("first_step", "startup/built_at", "startup/first_step_at"),  # the first search of all games
)


def startup_timings(stamps: dict[str, float]) -> dict[str, float]:
    """Seconds per phase of a run's start-up (:data:`STARTUP_PHASES`) from wall-clock stamps
    (``time.time()`` of the driver, and of the first self-play worker's first step:
    ``actors.STARTUP_KEYS``); 'total' from the run's creation to the first new self-play
    positions, 'replay_reload' (the replay actor's reload, ``stamps['replay_reload_s']``: in
    parallel with the worker start-up) and 'run_created_at' (the epoch of the first stamp, for a
    caller that times the process from its launch). A phase whose stamps are missing is left out."""
    out = {}
    for name, a, b in STARTUP_PHASES:
        if a in stamps and b in stamps:
            out[name] = round(stamps[b] - stamps[a], 2)
    if "run_created" in stamps and "startup/first_step_at" in stamps:
        out["total"] = round(stamps["startup/first_step_at"] - stamps["run_created"], 2)
    if "process_started" in stamps and "startup/first_step_at" in stamps:
        out["from_command"] = round(stamps["startup/first_step_at"] - stamps["process_started"], 2)
    if "replay_reload_s" in stamps:
        out["replay_reload"] = round(stamps["replay_reload_s"], 2)
    if "run_created" in stamps:
        out["run_created_at"] = stamps["run_created"]
    return out


def process_started() -> float | None:
    """When this process started (``time.time()`` seconds; Linux: ``/proc``), None where that
    cannot be read: the start-up timings count from the command, not from the run object."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # starttime, the 22nd field: clock ticks after the boot
        boot = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines()
                    if ln.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def startup_line(timings: dict[str, float], resumed: bool) -> str:
    """The console line when self-play's first positions are in, from :func:`startup_timings`:
    ``'self-play: under way, its first positions 21.3 s after the command (resume: launch 6.1,
    setup 1.2, ray 3.1, actors 4.0, worker_build 5.2, first_step 1.7 s)'``."""
    total = timings.get("from_command", timings.get("total"))
    since = "after the command" if "from_command" in timings else "after the start-up began"
    phases = ", ".join(f"{name} {timings[name]:.1f}" for name, *_ in STARTUP_PHASES if name in timings)
    what = "resume" if resumed else "new run"
    head = f"self-play: under way, its first positions {total:.1f} s {since}" if total is not None \
        else "self-play: under way"
    return f"{head} ({what}: {phases} s)" if phases else head


def kept_line(kept: dict[str, int]) -> str:
    """The summary's line of what the stop kept (``SelfPlayPool.finish`` and the run's
    ``unfinished_games.npz``): ``'kept: 3 games, 240 positions handed in at the stop; 61 games
    in play (4,810 positions) kept, the resume continues them'``; with games dropped
    (``selfplay.stop_grace_seconds=0``, a failed write): ``'...; 61 unfinished games (4,810
    positions) dropped'``; workers that did not answer the stop are named."""
    parts = [f"kept: {kept['kept_games']} games, {kept['kept_positions']} positions handed in at the stop"]
    stored = kept.get("stored_games", 0)
    if stored:
        parts.append(f"{stored} games in play ({kept.get('stored_positions', 0):,} positions) kept, "
                     "the resume continues them")
    if kept.get("unfinished_games", 0) or not stored:
        parts.append(f"{kept['unfinished_games']} unfinished games ({kept['unfinished_positions']:,} positions) "
                     "dropped")
    if kept.get("lost_workers", 0):
        parts.append(f"{kept['lost_workers']} worker(s) did not answer the stop: their games in play are lost")
    return "; ".join(parts)


def strength_text(generation: int, record: dict[str, Any]) -> str:
    """The progress line's field of the latest Elo against the strongest baseline:
    ``'Elo vs uct +108 [-20, +250] (gen 8)'``."""
    r = record
    return f"Elo vs {r['opponent']} {_elo(r['elo'], r['elo_lower'], r['elo_upper'])} (gen {generation})"


def _elo(elo: float, lower: float, upper: float) -> str:
    """:func:`takzero.matches.stats.elo_text` in whole Elo: ``'+108 [-20, +250]'``, a one-sided
    result as its bound (``'< +113'``, ``'> +46'``)."""
    return elo_text(float(elo), float(lower), float(upper), digits=0)


def fit_fields(fields: list[list[str]], order: list[int], width: int, sep: str = " | ") -> str:
    """Join the fields (each a list of variants, longest first; "" drops the field) with ``sep``
    in at most ``width`` characters: starting from every field's longest variant, the fields
    are shortened one at a time in ``order`` (each through its variants before the next one),
    so what matters most (the fields last in ``order`` or not in it) stays whole; only when
    everything is at its shortest is the line cut at ``width``."""
    pick = [0] * len(fields)

    def text() -> str:
        return sep.join(v for f, k in zip(fields, pick, strict=True) if (v := f[k]))

    for i in order:
        while len(text()) > width and pick[i] < len(fields[i]) - 1:
            pick[i] += 1
    return text()[: max(0, width)]


def _eta(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf") or seconds < 0:
        return "?"
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


class RunReporter:
    """Console and ``train.log`` output of one session of a run.

    Args:
        run_dir: the run folder (``train.log`` is appended there).
        stop: the stop conditions.
        start: the run's counters when this session began (restored from a checkpoint or zero).
        console: stream for the console (default stdout); a tqdm bar is shown when it is a
            terminal and ``bar`` is not False.
        columns: the console's width for the bar (default: the terminal's, read at each
            update); the bar's text is fitted into it field by field (:meth:`progress_text`),
            so the stop condition and ETA stay on any width from 80 columns.
    """

    #: Characters of the bar before its text: ``'  7%|████                | '``.
    BAR_PREFIX = 27

    def __init__(
        self,
        run_dir: Path,
        stop: StopRule,
        start: Snapshot,
        console: TextIO | None = None,
        bar: bool | None = None,
        columns: int | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.stop = stop
        self.start = start
        self.console = console or sys.stdout
        self.t0 = time.monotonic()
        self.log_file = open(self.run_dir / "train.log", "a", buffering=1)  # noqa: SIM115
        # takzero's own warnings (a corrupt replay shard, a lost worker) go to train.log as well
        # (Hydra writes no log file of its own: configs/train.yaml's hydra/job_logging is stdout).
        self._warnings = self.log_handler("warning")
        logging.getLogger("takzero").addHandler(self._warnings)
        use_bar = self.console.isatty() if bar is None else bar
        self.bar: tqdm | None = None
        self.columns = columns
        # The bar is drawn from the first update on: the start-up lines and whatever Ray prints
        # while it starts come before it, not spliced into it; never again after end_bar.
        self.use_bar = use_bar
        self.last: Snapshot = start
        self.history: deque[tuple[float, Snapshot]] = deque()
        self.min_positions = 0  # replay positions needed before training starts (for the text)

    # -- lines -------------------------------------------------------------------------------

    def line(self, text: str, console: bool = True) -> None:
        """One line to the console (above the bar) and to ``train.log``."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self.log_file.write(f"{stamp} {text}\n")
        if not console:
            return
        if self.bar is not None:
            self.bar.write(text, file=self.console)
        else:
            print(text, file=self.console, flush=True)

    def log_handler(self, prefix: str, level: int = logging.WARNING) -> logging.Handler:
        """A logging handler that writes each record of ``level`` or above to ``train.log``
        only, as ``'<prefix>: <message>'`` (the run attaches it to Ray's logger while Ray starts,
        so Ray's start-up warnings are kept with the run's history)."""
        reporter = self

        class _ToTrainLog(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                if not reporter.log_file.closed:
                    reporter.line(f"{prefix}: {record.getMessage()}", console=False)

        return _ToTrainLog(level)

    # -- progress ----------------------------------------------------------------------------

    def session_seconds(self) -> float:
        return time.monotonic() - self.t0

    def rates(self, snap: Snapshot, settled: bool = False) -> dict[str, float]:
        """Steps, games and positions per second over the last ``RATE_WINDOW_S`` seconds of this
        session (never over counters restored from a checkpoint), each counted from the last
        report before it first moved in this session: the trainer waits for
        ``replay.min_positions`` and self-play for its kernels, and that idle time would make
        the first ETAs many times too long.

        ``settled=True`` (what the ETA uses) also leaves out the report interval in which the
        counter first moved, since it holds the start-up (the trainer's first batch, the first
        searches); a counter that first moved since the last report then has rate 0 (unknown,
        so its ETA reads "?")."""
        now = time.monotonic()
        points = [(self.t0, self.start), *self.history]
        window_start = next((i for i, (t, _) in enumerate(points) if now - t <= RATE_WINDOW_S), 0)
        rates = {}
        for name, counter in (("steps_per_s", "step"), ("games_per_s", "games"),
                              ("positions_per_s", "positions")):
            first = getattr(self.start, counter)
            idle_end = max((i for i, (_, s) in enumerate(points) if getattr(s, counter) == first), default=0)
            since = max(window_start, idle_end + 1 if settled else idle_end)
            if since >= len(points):
                rates[name] = 0.0
                continue
            t_old, old = points[since]
            rates[name] = (getattr(snap, counter) - getattr(old, counter)) / max(now - t_old, 1e-9)
        return rates

    def fraction_and_eta(self, snap: Snapshot) -> tuple[float, float, str]:
        """(fraction done, seconds left, unit) of the stop condition that ends the run first,
        from the settled rates (``rates(snap, settled=True)``); seconds left is inf while no
        rate is known."""
        r = self.rates(snap, settled=True)
        options = [(snap.step / self.stop.total_steps,
                    (self.stop.total_steps - snap.step) / r["steps_per_s"] if r["steps_per_s"] > 0 else float("inf"),
                    "steps")]
        if self.stop.max_minutes > 0:
            options.append((snap.minutes / self.stop.max_minutes,
                            60 * (self.stop.max_minutes - snap.minutes), "minutes"))
        if self.stop.max_games > 0:
            left = (self.stop.max_games - snap.games) / r["games_per_s"] if r["games_per_s"] > 0 else float("inf")
            options.append((snap.games / self.stop.max_games, left, "games"))
        known = [o for o in options if o[1] != float("inf")]
        frac, left, unit = min(known or options, key=lambda o: (o[1], -o[0]))
        return min(1.0, max(0.0, frac)), left, unit

    def progress_fields(self, snap: Snapshot) -> list[list[str]]:
        """The fields of a progress line, each as its variants from the longest to the shortest
        ("" at the end of those that may go): stop condition with ETA (never shortened), the
        wait for replay positions, step and generation, the latest Elo, the check running or
        waiting (``'eval gen 1: 6/8 games'``), games, positions, replay and gating."""
        r = self.rates(snap)
        frac, left, unit = self.fraction_and_eta(snap)
        stop_at = {"steps": f"step {snap.step}/{self.stop.total_steps}",
                   "minutes": f"{snap.minutes:.1f}/{self.stop.max_minutes:g} min",
                   "games": f"games {snap.games}/{self.stop.max_games}"}[unit]
        waiting = [""]
        if snap.step == self.start.step and snap.replay_positions < self.min_positions:
            waiting = [f"training starts at {self.min_positions} replay positions",
                       f"waiting for {self.min_positions} positions", "waiting", ""]
        # 'Elo vs uct +108 [-20, +250] (gen 8)', then without the interval
        strength = [snap.strength, re.sub(r" \[[^]]*\]", "", snap.strength), ""] if snap.strength else [""]
        return [
            [f"{stop_at} ({100 * frac:.0f}%, ETA {_eta(left)})"],
            waiting,
            [f"step {snap.step} gen {snap.generation}", f"gen {snap.generation}", ""],
            strength,
            [snap.evaluation, re.sub(r" games.*| for the evaluator.*", "", snap.evaluation), ""]
            if snap.evaluation else [""],
            [f"games {snap.games} done, {snap.games_in_flight} playing", f"games {snap.games}", ""],
            [f"positions {snap.positions} done, {snap.positions_in_flight} in flight "
             f"({r['positions_per_s']:.1f}/s)", f"{r['positions_per_s']:.1f} pos/s", ""],
            [f"replay {snap.replay_positions}", ""],
            [f"gating: {snap.gating}", ""],
            [f"reanalysed {snap.reanalysed}", ""] if snap.reanalysed >= 0 else [""],
        ]

    #: The order in which the bar shortens the fields of :meth:`progress_fields` (Reanalyse
    #: first, then gating; the stop condition and ETA never).
    SHORTEN_ORDER = (9, 8, 7, 6, 5, 4, 2, 1, 3)

    def progress_text(self, snap: Snapshot, width: int | None = None) -> str:
        """The progress line: every field whole (the log file and a plain console), or fitted
        into ``width`` characters by :func:`fit_fields` (the bar)."""
        fields = self.progress_fields(snap)
        if width is None:
            return " | ".join(f[0] for f in fields if f[0])
        return fit_fields(fields, list(self.SHORTEN_ORDER), width)

    def update(self, snap: Snapshot) -> None:
        """Show the progress of ``snap``: the bar on a terminal, else a plain line; always a
        line in ``train.log``."""
        self.last = snap
        text = self.progress_text(snap)
        now = time.monotonic()
        self.history.append((now, snap))
        while self.history and now - self.history[0][0] > 2 * RATE_WINDOW_S:
            self.history.popleft()
        self.log_file.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n")
        if self.use_bar and self.bar is None:
            # the text goes in as the description: tqdm puts ", " before a postfix
            self.bar = tqdm(total=100.0, file=self.console, unit="%", ncols=self.columns,
                            dynamic_ncols=self.columns is None,
                            bar_format="{percentage:3.0f}%|{bar:20}| {desc}")
        if self.bar is not None:
            frac, _, _ = self.fraction_and_eta(snap)
            self.bar.n = round(100 * frac, 1)
            self.bar.set_description_str(self.progress_text(snap, self.bar_width()), refresh=True)
        else:
            print(text, file=self.console, flush=True)

    def bar_width(self) -> int:
        """Characters left for the bar's text: the console's columns (``columns``, else the
        terminal's) less :attr:`BAR_PREFIX` and one, so a line never wraps."""
        columns = self.columns or shutil.get_terminal_size((80, 24)).columns
        return max(0, columns - self.BAR_PREFIX - 1)

    def end_bar(self) -> None:
        """Take the bar off the console (before the summary: nothing is drawn after it); lines
        go on as plain prints."""
        self.use_bar = False
        if self.bar is not None:
            self.bar.leave = False
            self.bar.close()
            self.bar = None

    def close(self) -> None:
        logging.getLogger("takzero").removeHandler(self._warnings)
        self.end_bar()
        self.log_file.close()


def _later_generations(best: int, last: int) -> str:
    """'generation 5 was' or 'generations 4-6 were': those after the best, up to the last."""
    return f"generation {last} was" if last == best + 1 else f"generations {best + 1}-{last} were"


def summary_lines(
    *,
    reason: str,
    run_dir: Path,
    snap: Snapshot,
    best_generation: int,
    best_scores: dict[str, float],
    resume_cmd: str,
    finished: bool,
    session_seconds: float | None = None,
    best_results: dict[str, str] | None = None,
    not_measured: str = "",
    strength_points: list[list[float]] | None = None,
    strength_label: str = "",
    skipped: list[str] | None = None,
    owed_again: list[str] | None = None,
    init_from: str = "",
    lineage: str = "",
    reanalyse: str = "",
    kept: str = "",
) -> list[str]:
    """The end-of-run summary: why it stopped, the counters, the best generation and its last
    scores (``best_results``: the evaluation line of each baseline, else ``best_scores``, else
    why there are none: ``not_measured``), the last three points of the Elo curve against the
    strongest baseline (``strength_points``: ``[generation, elo, lower, upper]``, against
    ``strength_label``), the evaluations not run and why (``skipped``, the last five named),
    those a Ctrl-C cut that the next session runs (``owed_again``), the run's initial weights
    (``init_from``: ``train.init_from`` at its first start, "" for random ones), the training
    behind the weights over the warm-start chain (``lineage``: ``Lineage.describe``, "" for a
    run with no earlier training), the Reanalyse
    line (``reanalyse``: ``reanalyse.reanalyse_text``, "" when off), what the stop kept of the
    self-play games (``kept``: :func:`kept_line`, "" without workers), where everything is, and how
    to continue."""
    run_dir = Path(run_dir)
    if best_results:
        head = "  its last scores against the baselines:"
        if not_measured:
            head = (f"  generation {best_generation} not measured against the baselines ({not_measured}); "
                    "the last scores of a promoted generation:")
        score_lines = [head, *(f"    {best_results[k]}" for k in sorted(best_results))]
    else:
        scores = ", ".join(f"{k} {v:.2f}" for k, v in sorted(best_scores.items())) or (
            f"not measured for generation {best_generation}" + (f" ({not_measured})" if not_measured else "")
        )
        score_lines = [f"  its last scores against the baselines: {scores}"]
    curve = []
    if strength_points:
        points = ", ".join(f"gen {int(g)} {_elo(e, lo, hi)}" for g, e, lo, hi in strength_points[-3:])
        curve = [f"  Elo vs {strength_label}, last points: {points}"]
    skipped = list(skipped or [])
    not_run = []
    if skipped:
        not_run = [f"  evaluations not run: {len(skipped)}" + (" (the last five)" if len(skipped) > 5 else ""),
                   *(f"    {x}" for x in skipped[-5:])]
    lines = [
        "=" * 72,
        f"run {'finished' if finished else 'stopped'}: {reason}",
        f"  steps {snap.step}, generation {snap.generation}, self-play games {snap.games}, "
        f"positions {snap.positions}, training time {snap.minutes:.1f} min"
        + (f" (this session {session_seconds / 60:.1f} min)" if session_seconds is not None else ""),
        *([f"  initial weights (train.init_from): {init_from}"] if init_from else []),
        *([f"  lineage (the runs before this one, and this one): {lineage}"] if lineage else []),
        *([f"  {kept}"] if kept else []),
        f"  best model: generation {best_generation} (last gating: {snap.gating})",
        *([f"  {_later_generations(best_generation, snap.generation)} not promoted: rejected by "
           "gating, or made while the evaluator was busy or as the run stopped (never gated)"]
          if snap.generation > best_generation else []),
        *score_lines,
        *curve,
        *([f"  {reanalyse}"] if reanalyse else []),
        *not_run,
        *([f"  evaluations cut by the stop, run again when the run goes on: {', '.join(owed_again)}"]
          if owed_again else []),
        f"  run folder:  {run_dir}",
        f"  best model:  {run_dir / 'best.pt'}",
        f"  log:         {run_dir / 'train.log'}",
        f"  TensorBoard: tensorboard --logdir {run_dir / 'tb'}",
        f"  export:      python -m takzero.export {run_dir / 'best.pt'} -o model.pt",
    ]
    if finished:
        lines.append(f"  to train further: {resume_cmd}")
    else:
        lines.append(f"  to continue: {resume_cmd}")
    lines.append("=" * 72)
    return lines
