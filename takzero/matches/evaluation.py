"""A model against the baselines on paired openings (:func:`evaluate_model`): the match logic of
``python -m takzero.evaluate`` (:mod:`takzero.evaluate` parses its arguments and calls this) and of
``scripts/ablate.py``.

The model is searched as a batched network side (:func:`takzero.matches.games.play_match`); the
baselines are player specs (``takzero.players.registry``). The statistics come from
:mod:`takzero.matches.stats`. The evaluator used during training (gating, baselines by
generation) is ``takzero.pipeline.gating.GatingEvaluator``.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from takzero.game.position import Position
from takzero.game.tinue import DEFAULT_TINUE_NODES
from takzero.io.files import atomic_write_text, check_writable_folder, free_names
from takzero.io.ptn_ninja import ptn_ninja_url
from takzero.matches.games import NetSide, komi_override_warning, play_match
from takzero.matches.openings import random_openings
from takzero.matches.results import GameRecord, MatchInterrupted, MatchResult
from takzero.matches.spec import MatchSpec
from takzero.matches.stats import score_interval, wilson_interval
from takzero.nn.backends import EVAL_BACKENDS, with_backend
from takzero.nn.inference import Evaluator
from takzero.nn.quoting import short_repr
from takzero.players.base import BasePlayer, PlayerFailed, close_player, is_integer
from takzero.players.network import DEFAULT_SELECT_Q_FRACTION, play_evaluator, player_search
from takzero.players.registry import ModelFileError, make_player, spec_label
from takzero.players.tactics import check_flat_endgame_nodes, check_tinue_nodes
from takzero.search import SearchConfig

__all__ = ["MAX_PAIRS", "MAX_PLY_LIMIT", "MAX_SIMULATIONS", "MAX_THREADS", "evaluate", "evaluate_model", "model_search"]

#: Upper bounds of the evaluation CLI's numbers (beyond them a run cannot finish sensibly).
MAX_PAIRS = 10_000
MAX_SIMULATIONS = 1_000_000
MAX_PLY_LIMIT = 10_000
MAX_THREADS = 1024


#: The largest Gumbel m accepted (more than any board's legal moves: 6x6 has 9,036 actions).
MAX_GUMBEL_M = 100_000


def evaluate_model(
    model: str,
    baselines: list[str],
    pairs: int,
    simulations: int,
    ply_limit: int,
    seed: int = 0,
    komi: float | None = None,
    opening_plies: int = 2,
    tinue_nodes: int = DEFAULT_TINUE_NODES,
    gumbel_m: int = 0,
    select_q_fraction: float = DEFAULT_SELECT_Q_FRACTION,
    flat_endgame_nodes: int = 0,
    **io: Any,
) -> list[dict[str, Any]]:
    """:func:`evaluate` with the match and the model's search given as loose numbers (the form
    the tests and ``scripts/ablate.py`` / ``scripts/strength_curve.py`` call): ``pairs`` openings
    of ``opening_plies`` random plies, each played with both colours, ``ply_limit``, ``seed``,
    ``komi`` in points (None: the model's) make the :class:`~takzero.matches.spec.MatchSpec`;
    ``simulations``, ``tinue_nodes``, ``gumbel_m`` (>= 1: the Gumbel root over that many moves,
    0: PUCT), ``select_q_fraction`` and ``flat_endgame_nodes`` the ``SearchConfig`` (:func:`model_search`); ``io`` are
    :func:`evaluate`'s keywords. Raises ValueError as :func:`evaluate` does, and for a value out
    of these ranges (pairs 1..:data:`MAX_PAIRS`, simulations 1..:data:`MAX_SIMULATIONS`, ply
    limit 1..:data:`MAX_PLY_LIMIT`, gumbel_m 0..:data:`MAX_GUMBEL_M`, select_q_fraction in
    [0, 1], tinue_nodes >= 0, komi a multiple of 0.5)."""
    if not 1 <= pairs <= MAX_PAIRS:
        raise ValueError(f"pairs must be in 1..{MAX_PAIRS}, got {pairs}")
    if not 1 <= ply_limit <= MAX_PLY_LIMIT:
        raise ValueError(f"ply limit must be in 1..{MAX_PLY_LIMIT}, got {ply_limit}")
    search = model_search(simulations, tinue_nodes=tinue_nodes, gumbel_m=gumbel_m,
                          select_q_fraction=select_q_fraction, flat_endgame_nodes=flat_endgame_nodes)
    match = MatchSpec.from_pairs(pairs, komi=komi, ply_limit=ply_limit, seed=seed, opening_plies=opening_plies)
    return evaluate(model, baselines, match, search, **io)


def model_search(
    simulations: int,
    tinue_nodes: int = DEFAULT_TINUE_NODES,
    gumbel_m: int = 0,
    select_q_fraction: float = DEFAULT_SELECT_Q_FRACTION,
    flat_endgame_nodes: int = 0,
) -> SearchConfig:
    """The model's search of an evaluation from the command line's numbers (``--simulations``,
    ``--tinue-nodes``, ``--gumbel M``, ``--select-q``, ``--flat-endgame-nodes``): the players' search
    (``takzero.players.network.player_search``) with these fields, the Gumbel root when
    ``gumbel_m`` >= 1. Raises ValueError (one line naming the value) for simulations outside
    1..:data:`MAX_SIMULATIONS`, gumbel_m outside 0..:data:`MAX_GUMBEL_M`, select_q_fraction
    outside [0, 1], tinue_nodes or flat_endgame_nodes out of range."""
    if not is_integer(simulations) or not 1 <= simulations <= MAX_SIMULATIONS:
        raise ValueError(f"simulations must be in 1..{MAX_SIMULATIONS}, got {simulations}")
    if not is_integer(gumbel_m) or not 0 <= gumbel_m <= MAX_GUMBEL_M:
        raise ValueError(f"gumbel_m must be an integer in 0..{MAX_GUMBEL_M} (0: the PUCT root), got {gumbel_m!r}")
    if isinstance(select_q_fraction, bool) or not isinstance(select_q_fraction, numbers.Real) or not (
        0.0 <= select_q_fraction <= 1.0
    ):
        raise ValueError(f"select_q_fraction must be in [0, 1] (0: the most visited move), got {select_q_fraction!r}")
    return player_search(
        simulations=int(simulations), tinue_nodes=check_tinue_nodes(tinue_nodes), gumbel=gumbel_m > 0,
        gumbel_m=max(1, int(gumbel_m)), select_q_fraction=float(select_q_fraction),
        flat_endgame_nodes=check_flat_endgame_nodes(flat_endgame_nodes),
    )


def evaluate(
    model: str,
    baselines: list[str],
    match: MatchSpec,
    search: SearchConfig,
    *,
    device: str = "cpu",
    ptn_dir: str | None = None,
    say: Any = print,
    progress: Any = None,
    threads: int = 0,
    links: bool = False,
    backend: str = "auto",
    make_baseline: Callable[..., BasePlayer] = make_player,
) -> list[dict[str, Any]]:
    """Play ``model`` (an exported model or a checkpoint) searching with ``search`` (a
    ``SearchConfig``, its ``evaluation()`` copy: no noise; ``simulations`` a move; the move of
    highest Q among those with at least ``select_q_fraction`` of the most visits, the network
    players' rule, 0: the most visited move; with ``gumbel`` the Gumbel root of
    ``takzero.search.gumbel`` instead, Sequential Halving over the ``gumbel_m`` moves of highest
    prior, no Gumbel noise, the halving's winner played; ``tinue_nodes``: the model's tinuë
    checks at its root, ``takzero.players.tactics``, 0: off, the baselines keep their own;
    :func:`model_search` makes it from the command line's numbers) against each baseline spec
    (``takzero.players.registry``: ``random``, ``greedy``, ``uct[:N]``, ``model:PATH[:N]``) under
    ``match`` (:class:`~takzero.matches.spec.MatchSpec`: an even number of ``games``, ``pairs``
    random openings of ``opening_plies`` plies, each played once with each colour, ``ply_limit``,
    ``seed``; ``size`` None or the model's). Komi: ``match.half_komi``, or the model's own
    (``half_komi`` in its metadata), else 0; one that is not the model's gives one warning line
    before any game
    (:func:`~takzero.matches.games.komi_override_warning`, to ``progress``, else a
    ``warnings.warn``). Returns one
    summary dict per baseline (see :meth:`takzero.matches.results.MatchResult.summary`, plus
    'seconds', 'gumbel_m' (the model's root rule, 0: PUCT), 'select_q_fraction', 'tinue_nodes',
    'flat_endgame_nodes' (the model's root checks),
    'baseline_simulations' for a network baseline (its own ``:N``, default 400, always the
    players' default search: PUCT, :data:`~takzero.players.network.DEFAULT_SELECT_Q_FRACTION`),
    the score's 95% score-test interval on the game pairs
    ('score_lower'/'score_upper', :func:`takzero.matches.stats.elo_pentanomial`), the Wilson interval
    ('score_wilson_lower'/'score_wilson_upper') and the same mapped to Elo
    ('elo_wilson_lower'/'elo_wilson_upper', games taken as independent;
    :func:`takzero.matches.stats.elo_wilson`)); each is also printed with ``say`` as a JSON line
    (infinite Elo as null). ``progress`` (e.g. ``print`` to stderr) gets a line per finished game
    with the tally so far (W-D-L), and the Elo line of each baseline: its tally, score and the
    JSON's interval with its model named (:meth:`MatchResult.describe_elo`). Writes the games as PTN
    into ``ptn_dir`` when
    given (``vs_<baseline>.ptn``; when one of those exists, an earlier run's, this run's files
    are all numbered, ``vs_random_2.ptn``, and ``progress`` says so: nothing earlier is replaced).
    ``links``: before each baseline's summary, one JSON line
    per game with ``say``: 'baseline', 'game' (1-based), 'white', 'black', 'result', 'plies' and
    'ptn_ninja' (a link that opens the game in PTN Ninja, ``takzero.io.ptn_ninja``).
    ``threads``: torch threads (0: as they are). ``backend``: the CPU inference backend of the
    model and of the network baselines (``takzero.nn.backends.with_backend``: 'torch', or
    'onnx' for onnxruntime with ``threads`` threads, or torch's default thread count when 0;
    an ``.onnx`` file keeps its own session; the same networks up to float rounding); 'auto'
    (the default, as the network player's): onnx where onnxruntime is installed, the model is
    on the CPU and it is a checkpoint or an ONNX file, else torch, per network. The JSON's
    ``backend`` is the model's resolved one.

    ``make_baseline(spec, seed=...)`` builds each baseline (default
    ``takzero.players.registry.make_player``; the command line passes
    ``takzero.protocols.tei.player.make_baseline``, which also builds ``tei:`` engines, started at
    their first game and closed after their match, whatever happens). A baseline whose player
    fails (:class:`~takzero.players.base.PlayerFailed`: an engine that does not start, refuses
    the size, crashes, hangs or plays an illegal move) fails alone: its dict (and JSON line) is
    ``{'baseline', 'error', 'seconds'}``, ``progress`` gets ``vs SPEC: FAILED: ...``, and the
    other baselines are played.

    Ctrl-C: the games of the baseline in progress that are finished are summarised (a JSON line
    with ``"interrupted": true``, and the Elo line) and written as PTN, then
    :class:`~takzero.matches.results.MatchInterrupted` is raised. Raises ValueError for a bad
    spec, a baseline network of another board size than the model's (it cannot play the
    model's games), an odd number of games, more than :data:`MAX_PAIRS` pairs, no ply limit or
    one over :data:`MAX_PLY_LIMIT`, a ``match.size`` that is not the model's, ``match.openings``
    (an evaluation draws its own); ModelFileError (a ValueError) for a model or model baseline file
    that cannot be loaded
    (unreadable, not a model, or not weights-only)."""
    if match.games % 2:
        raise ValueError(f"an evaluation plays each opening with both colours: games must be even, got {match.games}")
    pairs, ply_limit, seed = match.pairs, match.ply_limit, match.seed
    if pairs > MAX_PAIRS:
        raise ValueError(f"pairs must be in 1..{MAX_PAIRS}, got {pairs}")
    if ply_limit is None or not 1 <= ply_limit <= MAX_PLY_LIMIT:
        raise ValueError(f"ply limit must be in 1..{MAX_PLY_LIMIT}, got {ply_limit}")
    if match.openings is not None:
        raise ValueError("an evaluation draws its own openings (match.opening_plies); match.openings is for TEI "
                         "matches")
    if len(set(baselines)) != len(baselines):
        raise ValueError(f"a baseline is given twice: {' '.join(baselines)}")
    search = replace(search.evaluation(), max_plies=ply_limit)
    simulations = search.simulations
    gumbel_m = search.gumbel_m if search.gumbel else 0
    select_q_fraction = search.select_q_fraction
    if backend not in (*EVAL_BACKENDS, "auto"):
        raise ValueError(f"backend must be one of auto, {', '.join(EVAL_BACKENDS)}, got {backend!r}")
    ort_threads = threads or torch.get_num_threads()  # before a model baseline sets one thread
    players = [make_baseline(spec, seed=seed) for spec in baselines]  # bad specs fail before loading
    if threads:  # after the players: a model baseline sets one thread when it loads
        torch.set_num_threads(threads)
    given_half_komi = match.half_komi
    try:
        net = Evaluator.load(model, device=device)
    except Exception as e:  # noqa: BLE001 - torch/zip/pickle raise many types for a bad file
        raise ModelFileError(f"cannot load model {model}: {e}") from None
    size = net.size  # checked by the loader (an ONNX file's model_config is neither needed nor trusted)
    if match.size is not None and match.size != size:
        raise ValueError(f"the model {model} plays {size}x{size}, not the match's {match.size}x{match.size}")
    model_half_komi = _metadata_half_komi(net.metadata, model)
    for spec, player in zip(baselines, players, strict=True):
        other = getattr(player, "model_size", None)
        if other is not None and int(other) != size:
            raise ValueError(f"baseline {spec} plays {other}x{other}, not the model's {size}x{size}")
    requested = backend
    if backend == "auto":
        net = play_evaluator(net, "auto", ort_threads)
        if getattr(net, "_session", None) is None:
            backend = "torch"
        else:  # what auto chose: int8 where the network was quantized (or the file is int8)
            backend = "int8" if net.metadata.get("precision") == "int8" else "onnx"
    elif backend != "torch":
        net = _on_backend(net, backend, ort_threads, f"model {model}")
    for spec, player in zip(baselines, players, strict=True):
        use_backend = getattr(player, "use_backend", None)  # a model:PATH baseline
        if use_backend is not None:
            _on_backend(player, requested, ort_threads, f"baseline {spec}")
    half_komi = (model_half_komi or 0) if given_half_komi is None else given_half_komi
    if model_half_komi is not None and model_half_komi != half_komi:  # one line, before any game
        warning = komi_override_warning(model, model_half_komi, half_komi, "--komi")
        if progress is not None:
            progress(warning)
        else:
            warnings.warn(warning, stacklevel=2)
    start = Position.start(size, half_komi=half_komi)
    side = NetSide(name=f"takzero:{Path(model).name}", evaluator=net, config=search, simulations=simulations)
    openings = random_openings(start, pairs, plies=match.opening_plies, seed=seed)
    ptn_files: list[Path] = []
    if ptn_dir is not None:  # checked before any game; an earlier run's files are never replaced
        folder = check_writable_folder(ptn_dir)
        ptn_files = [folder / f"vs_{spec_label(spec)}.ptn" for spec in baselines]
        for path in ptn_files:
            if path.is_dir():
                raise IsADirectoryError(f"{path} is a folder, not a PTN file")
        wanted, ptn_files = ptn_files, free_names(ptn_files)
        if ptn_files != wanted:
            note = (f"{', '.join(p.name for p in wanted if os.path.lexists(p))} in {folder} "
                    f"kept (an earlier run): this run's games go to {', '.join(p.name for p in ptn_files)}")
            if progress is not None:
                progress(note)
            else:
                warnings.warn(note, stacklevel=2)
    out: list[dict[str, Any]] = []
    for k, (spec, player) in enumerate(zip(baselines, players, strict=True)):
        t0 = time.perf_counter()
        total = 2 * len(openings)

        def finished(so_far: MatchResult, record: GameRecord, spec: str = spec, total: int = total) -> None:
            if progress is not None:
                why = f"{record.reason}, " if record.reason else ""
                progress(f"vs {spec}: game {so_far.num_games}/{total}: {record.white} - {record.black} "
                         f"{record.result} ({why}{record.plies} plies); {side.name} {so_far.tally()}")

        try:
            played = play_match(side, player, start, openings, ply_limit, seed=seed, threefold=match.threefold,
                               on_game=finished)
        except PlayerFailed as err:  # a tei: engine: this baseline fails, not the others
            failed = {"baseline": spec, "error": " ".join(str(err).split()),
                      "seconds": round(time.perf_counter() - t0, 1)}
            out.append(failed)
            say(json.dumps(failed))
            if progress is not None:
                progress(f"vs {spec}: FAILED: {failed['error']}")
            continue
        except MatchInterrupted as stop:
            partial = stop.result
            if partial.num_games:
                summary = _summary(spec, partial, t0)
                summary.update(size=size, half_komi=half_komi, simulations=simulations, pairs=pairs,
                               seed=seed, tinue_nodes=search.tinue_nodes,
                               flat_endgame_nodes=search.flat_endgame_nodes, backend=backend,
                               gumbel_m=int(gumbel_m), select_q_fraction=float(select_q_fraction),
                               interrupted=True)
                say(json.dumps(_finite_or_none(summary)))
                if ptn_files:
                    atomic_write_text(ptn_files[k], "\n".join(g.to_ptn() for g in partial.games))
            if progress is not None:
                progress(f"interrupted: vs {spec} after {partial.num_games} of {total} games; "
                         f"{_elo_line(partial)}")
            raise
        finally:
            close_player(player)  # a tei: engine's process, always (nothing for in-process players)
        summary = _summary(spec, played, t0)
        summary.update(
            size=size, half_komi=half_komi, simulations=simulations, pairs=pairs, seed=seed,
            tinue_nodes=search.tinue_nodes, flat_endgame_nodes=search.flat_endgame_nodes, backend=backend,
            gumbel_m=int(gumbel_m),
            select_q_fraction=float(select_q_fraction),
        )
        if getattr(player, "model_size", None) is not None:  # a model:PATH[:N] baseline: its own N
            summary["baseline_simulations"] = getattr(player, "simulations", None)  # a NetworkPlayer's
        out.append(summary)
        if links:
            for i, g in enumerate(played.games, 1):
                game = {"baseline": spec, "game": i, "white": g.white, "black": g.black, "result": g.result}
                say(json.dumps({**game, "plies": g.plies, "ptn_ninja": ptn_ninja_url(g.to_ptn())}))
        say(json.dumps(_finite_or_none(summary)))
        if progress is not None:
            progress(f"vs {spec}: {_elo_line(played)}")
        if ptn_files:
            atomic_write_text(ptn_files[k], "\n".join(g.to_ptn() for g in played.games))
            if progress is not None:
                progress(f"vs {spec}: games written to {ptn_files[k]}")
    return out


def _metadata_half_komi(metadata: dict[str, Any], model: str) -> int | None:
    """The half-komi a model file says it was trained for (None when it says none). Raises
    ModelFileError (one line, the value quoted short) for one that is not an integer in
    -200..200: a file's metadata is read, not trusted."""
    value = metadata.get("half_komi")
    if value is None:
        return None
    if not is_integer(value) or not -200 <= int(value) <= 200:
        raise ModelFileError(f"cannot load model {model}: its metadata's half_komi {short_repr(value, 40)} "
                             "is not an integer in -200..200")
    return int(value)


def _on_backend(ev, backend: str, threads: int, what: str):
    """:func:`with_backend` of an evaluator, or ``use_backend`` of a network player (a
    ``model:PATH`` baseline), with errors that name the network (``what``) and the way out.
    Raises ValueError."""
    try:
        use_backend = getattr(ev, "use_backend", None)
        if use_backend is not None:
            # a baseline plays batched matches, not one pipelined search: every thread to the network
            ev.set_pipeline(False)
            use_backend(backend, threads, check=True)
            return ev
        return with_backend(ev, backend, threads)
    except ImportError as e:
        raise ValueError(f"--backend {backend} needs onnxruntime ({e}): pip install -e '.[onnx]', "
                         "or use --backend torch") from None
    except ValueError as e:
        raise ValueError(f"{what}: {e}; use --backend torch for it") from None


def _summary(spec: str, match: MatchResult, t0: float) -> dict[str, Any]:
    """The summary dict of one baseline's games (see :func:`evaluate_model`)."""
    summary: dict[str, Any] = {"baseline": spec, **match.summary()}
    summary["score_lower"], summary["score_upper"] = score_interval(match.elo())
    summary["score_wilson_lower"], summary["score_wilson_upper"] = wilson_interval(
        match.score, match.num_games
    )
    wilson = match.elo(model="wilson")
    summary["elo_wilson_lower"], summary["elo_wilson_upper"] = wilson.lower, wilson.upper
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    return summary


def _elo_line(match: MatchResult) -> str:
    """``'3-1-0 (W-D-L), score 0.875, Elo +338.0 [...] (95%, pentanomial score-test interval, 2
    game pairs)'``: the numbers of the baseline's JSON line ('elo', 'elo_lower', 'elo_upper',
    'elo_model'), for stderr."""
    score = f"{match.score:.3f}" if match.num_games else "-"
    return f"{match.tally()}, score {score}, Elo {match.describe_elo()}"


def _finite_or_none(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with infinite or NaN floats as None, so that the JSON line is strict JSON."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}
