"""Ctrl-C keeps what it can (issue 58, item 2): at a stop the self-play workers play on for
``selfplay.stop_grace_seconds`` without starting new games, hand in the games that finish, and keep
the games still in play (``selfplay.UnfinishedGames``, an ``.npz`` read without pickle) for the next
start, which continues them under new game ids; the summary's ``kept:`` line says what was kept;
the first self-play positions are timed from the command. The Ray test (slow) sends a real SIGINT
to a smoke run, checks the summary against the shards on disk, resumes it and finds the kept games
finished with fresh ids."""

from __future__ import annotations

import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from smoke_config import smoke_config

from takzero.pipeline.progress import kept_line, process_started, startup_line, startup_timings
from takzero.pipeline.selfplay import GAME_COUNTER_BITS, SelfPlayWorker, UnfinishedGames
from tests.processes import kill_session, wait_for

ROOT = Path(__file__).resolve().parent.parent


def _tiny(tmp_path: Path, **extra: Any):
    return smoke_config(tmp_path, **{"board.size": 3, "selfplay.games_per_worker": 6, "mcts.simulations": 4,
                                     "selfplay.ply_limit": 30, "selfplay.resign_threshold": -1.0, **extra})


def _worker(cfg, stream: int) -> SelfPlayWorker:
    from takzero.nn.model import TakNet

    w = SelfPlayWorker.from_run(cfg, 0, device="cpu", stream=stream)
    w.set_weights(TakNet(cfg.model_config()).state_dict(), 1)
    return w


def _played(cfg, stream: int, steps: int) -> SelfPlayWorker:
    w = _worker(cfg, stream)
    for _ in range(steps):
        w.play_step()
    return w


def test_games_in_play_are_kept_and_continued_under_new_ids(tmp_path: Path, one_torch_thread) -> None:
    """A worker's games in play go to a file and back, into another worker (another stream):
    same moves, same recorded positions and targets, new game ids of the new stream; played to
    their end (no new games: the grace period's mode), their records start with the positions
    recorded before the stop."""
    cfg = _tiny(tmp_path)
    old = _played(cfg, stream=5, steps=5)
    kept = old.unfinished()
    assert kept.games == old.in_play() == 6 and kept.positions == sum(len(s.states) for s in old.slots) > 0
    path = tmp_path / "unfinished_games.npz"
    kept.save(path)
    back = UnfinishedGames.load(path, 3)
    new = _worker(cfg, stream=9)
    assert new.continue_games(back) == 6
    old_ids = {s.game_id for s in old.slots}
    for a, b in zip(old.slots, new.slots, strict=True):
        assert a is not None and b is not None
        assert b.game.moves == a.game.moves and b.plies == a.plies and b.movers == a.movers
        assert all(np.array_equal(x, y) for x, y in zip(a.states, b.states, strict=True))
        assert all(np.array_equal(x, y) for x, y in zip(a.actions, b.actions, strict=True))
        assert all(np.array_equal(x, y) for x, y in zip(a.probs, b.probs, strict=True))
        assert b.game_id >> GAME_COUNTER_BITS == 9 and b.game_id not in old_ids
        assert np.array_equal(new.mcts.root_state(new.slots.index(b)), a.game.position.state)
    # ids never repeat within the new stream either (the fresh games it made first took their own)
    ids = {s.game_id for s in new.slots if s is not None}
    assert len(ids) == 6 and min(ids) & 0xFFFFFFFF >= 6
    prefixes = {s.game_id: np.stack(s.states) for s in new.slots if s is not None and s.states}
    finished: list = []
    while new.in_play():
        records, stats, _ = new.play_step(new_games=False)
        assert stats["inflight/games"] == new.in_play()
        if records is not None:
            finished.append(records)
    assert all(s is None for s in new.slots) and not new.unfinished().games
    from takzero.pipeline.replay import Records, pack_states

    recs = Records.concat(finished)
    assert set(prefixes) <= set(np.unique(recs.game_id).tolist()) <= ids
    for gid, states in prefixes.items():
        rows = recs.board[recs.game_id == gid]
        assert np.array_equal(rows[: len(states)], pack_states(states, 3)), "the kept positions were not handed in"


def test_unfinished_games_split_and_concat(tmp_path: Path, one_torch_thread) -> None:
    cfg = _tiny(tmp_path)
    a = _played(cfg, 1, 3).unfinished()
    b = _played(cfg, 2, 4).unfinished()
    both = UnfinishedGames.concat([a, UnfinishedGames(), b])
    assert both.games == 12 and both.positions == a.positions + b.positions
    head, tail = both.split(6)
    for x, y in ((head, a), (tail, b)):
        for name, *_ in UnfinishedGames.ARRAYS:
            assert np.array_equal(getattr(x, name), getattr(y, name)), name
    none, rest = both.split(0)
    assert none.games == 0 and rest.games == 12


def test_a_bad_unfinished_games_file_is_refused_in_one_line(tmp_path: Path, one_torch_thread) -> None:
    """No pickle is read; another board size, missing or disagreeing arrays: a ValueError; a
    game whose moves do not replay is left out, the others go on."""
    cfg = _tiny(tmp_path)
    games = _played(cfg, 1, 4).unfinished()
    path = tmp_path / "u.npz"
    games.save(path)
    with pytest.raises(ValueError, match="board size"):
        UnfinishedGames.load(path, 5)
    pickled = tmp_path / "p.npz"
    pickled.write_bytes(pickle.dumps({"size": 3}))
    with pytest.raises(ValueError, match="not an unfinished-games file"):
        UnfinishedGames.load(pickled, 3)
    arrays = {name: getattr(games, name) for name, *_ in UnfinishedGames.ARRAYS}
    for broken in ({**arrays, "moves": arrays["moves"][:-1]}, {k: v for k, v in arrays.items() if k != "probs"},
                   {**arrays, "actions": arrays["actions"].astype(np.float64)}):
        bad = tmp_path / "bad.npz"
        np.savez(bad, size=np.int64(3), **broken)
        with pytest.raises(ValueError) as e:
            UnfinishedGames.load(bad, 3)
        assert "\n" not in str(e.value)
    # one game's first move made illegal (a stone on a square taken later: replay fails there)
    moves = arrays["moves"].copy()
    n0 = int(arrays["n_moves"][0])
    moves[:n0] = moves[n0 - 1]
    odd = UnfinishedGames(size=3, **{**arrays, "moves": moves})
    slots = odd.slots(_worker(cfg, 3).start, cfg.selfplay.ply_limit)
    assert slots[0] is None and all(s is not None for s in slots[1:])
    assert _worker(cfg, 4).continue_games(odd) == 5


class _Remote:
    def __init__(self, fn: Any) -> None:
        self.remote = fn


class _Coordinator:
    """Publishes weights at once, hands out ``carried`` games, says stop after ``steps`` calls."""

    def __init__(self, weights: dict, steps: int, carried: UnfinishedGames | None = None) -> None:
        from takzero.pipeline.actors import Coordinator

        self.real = Coordinator(7, carried)
        self.calls, self.steps, self.weights = 0, steps, weights
        self.new_stream = _Remote(self.real.new_stream)
        self.take_carried = _Remote(self.real.take_carried)
        self.exchange = _Remote(self._exchange)

    def _exchange(self, kind: str, known: int):
        self.calls += 1
        return self.calls > self.steps, ((1, [self.weights]) if known != 1 else None)


class _Replay:
    def __init__(self) -> None:
        self.got: list[tuple[Any, dict, bool]] = []
        self.submit = _Remote(lambda r, s, p=None, force=False: self.got.append((r, s, force)) or True)


@pytest.mark.parametrize("grace", [0.0, 30.0])
def test_the_stop_plays_out_the_grace_period_and_keeps_the_rest(tmp_path: Path, monkeypatch, one_torch_thread,
                                                                grace: float) -> None:
    """Grace > 0: after the stop no new game starts, the games that finish are handed in (forced:
    the trainer has stopped) and counted, the rest are kept ('carried', counted as stored);
    grace 0: the games in play are dropped, as before. A worker starts with the carried games."""
    import ray

    from takzero.nn.model import TakNet
    from takzero.pipeline.actors import SelfPlayActor

    monkeypatch.setattr(ray, "get", lambda x, timeout=None: x)
    from types import SimpleNamespace

    from takzero.pipeline import actors

    monkeypatch.setattr(actors, "time", SimpleNamespace(monotonic=_clock(limit_calls=40), time=time.time,
                                                        sleep=time.sleep))
    cfg = _tiny(tmp_path, **{"selfplay.stop_grace_seconds": grace})
    carried = _played(cfg, 2, 3).unfinished()
    coordinator = _Coordinator(TakNet(cfg.model_config()).state_dict(), steps=3, carried=carried)
    replay = _Replay()
    report = SelfPlayActor(cfg, 0).run(coordinator, replay)
    assert report["continued"] == 6 and coordinator.real.carried_left() is None
    after = [(r, s) for r, s, f in replay.got if f]
    if grace == 0:
        assert not after and report["stored_games"] == 0 and report["carried"] is None
        assert report["unfinished_games"] == 6
        return
    assert after, "nothing played in the grace period"
    handed = sum(int(s.get("count/games", 0)) for _, s in after)
    assert report["kept_games"] == handed and report["kept_positions"] == sum(len(r) for r, _ in after if r is not None)
    assert report["unfinished_games"] == 0
    left = report["carried"]
    assert report["stored_games"] == (left.games if left is not None else 0) == 6 - handed
    assert all(s["inflight/games"] <= 6 for _, s in after)
    assert report["stored_positions"] == (left.positions if left is not None else 0)


def _clock(limit_calls: int):
    """A monotonic clock that jumps an hour after ``limit_calls`` calls (the grace period ends
    after a bounded number of steps however slow the machine)."""
    calls = [0]

    def now() -> float:
        calls[0] += 1
        return time.perf_counter() + (3600.0 if calls[0] > limit_calls else 0.0)

    return now


def test_kept_line_says_what_was_kept_and_dropped() -> None:
    kept = {"kept_games": 4, "kept_positions": 120, "stored_games": 60, "stored_positions": 2410,
            "unfinished_games": 0, "unfinished_positions": 0}
    assert kept_line(kept) == ("kept: 4 games, 120 positions handed in at the stop; 60 games in play "
                               "(2,410 positions) kept, the resume continues them")
    both = {**kept, "unfinished_games": 2, "unfinished_positions": 30, "lost_workers": 1}
    assert kept_line(both).endswith("; 2 unfinished games (30 positions) dropped; 1 worker(s) did not answer "
                                    "the stop: their games in play are lost")


def test_startup_line_counts_from_the_command() -> None:
    started = process_started()
    assert started is not None and 0 < time.time() - started < 24 * 3600
    stamps = {"process_started": 90.0, "run_created": 100.0, "ray_start": 101.5, "ray_ready": 104.0,
              "pool_created": 104.5, "startup/actor_at": 108.0, "startup/built_at": 110.0,
              "startup/first_step_at": 111.0}
    t = startup_timings(stamps)
    assert t["launch"] == 10.0 and t["from_command"] == 21.0 and t["total"] == 11.0
    assert startup_line(t, True) == ("self-play: under way, its first positions 21.0 s after the command "
                                     "(resume: launch 10.0, setup 1.5, ray 2.5, to_pool 0.5, actors 3.5, "
                                     "worker_build 2.0, first_step 1.0 s)")


# -- over Ray: a real SIGINT, the summary against the disk, the resume --------------------------


def _rows_by_game(run: Path) -> dict[int, np.ndarray]:
    """Game id -> its packed boards, over every replay shard."""
    out: dict[int, list[np.ndarray]] = {}
    for path in sorted((run / "replay").glob("shard_*.npz")):
        with np.load(path) as z:
            ids, boards = z["game_id"], z["board"]
        for gid in np.unique(ids):
            out.setdefault(int(gid), []).append(boards[ids == gid])
    return {g: np.concatenate(v) for g, v in out.items()}


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_ctrl_c_keeps_the_games_in_play_and_the_resume_continues_them(tmp_path: Path) -> None:
    """A smoke run (one worker, 16 games at once) that never trains gets a real SIGINT once its
    games are under way: the summary's counts are the shards' (games, positions), the games in
    play are in unfinished_games.npz as the kept: line says; the resume (no grace this time, so
    it stops at once) continues each of them under a fresh game id of its own stream, whose
    records start with the kept positions; no game id is stored twice."""
    from takzero.pipeline.replay import pack_states
    from takzero.pipeline.resume import STREAMS_PER_LAUNCH

    run = tmp_path / "g"
    args = [sys.executable, "-m", "takzero.train", "+config=smoke", "run_name=g", f"checkpoint_root={tmp_path}",
            "replay.min_positions=1000000", "replay.shard_positions=20", "log_every_s=1",
            "evaluator.baseline_every=0"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def session(extra: list[str], ready) -> str:
        proc = subprocess.Popen([*args, *extra], cwd=ROOT, env=env, start_new_session=True, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            assert wait_for(lambda: ready() or proc.poll() is not None, 600), "the run never got there"
            assert proc.poll() is None, "the run exited before the Ctrl-C"
            os.killpg(proc.pid, signal.SIGINT)
            out, _ = proc.communicate(timeout=300)
        finally:
            kill_session(proc.pid)
        assert proc.returncode == 0 and "Traceback" not in out, out[-3000:]
        return out

    # 1: stopped once the first games have been handed in (shards) and more are under way; a
    # grace period of one step at most (a longer one finishes every 4x4 game here)
    out = session(["selfplay.stop_grace_seconds=0.01"], lambda: any((run / "replay").glob("shard_*.npz")))
    kept = re.search(r"kept: (\d+) games, (\d+) positions handed in at the stop; (\d+) games in play "
                     r"\(([\d,]+) positions\) kept, the resume continues them", out)
    assert kept is not None, out[-3000:]
    games_line = re.search(r"self-play games (\d+), positions (\d+)", out)
    assert games_line is not None
    rows = _rows_by_game(run)
    assert int(games_line.group(1)) == len(rows) and int(games_line.group(2)) == sum(len(r) for r in rows.values())
    assert int(kept.group(2)) <= sum(len(r) for r in rows.values())
    stored = UnfinishedGames.load(run / "unfinished_games.npz", 4)
    assert stored.games == int(kept.group(3)) > 0 and stored.positions == int(kept.group(4).replace(",", ""))
    first_ids = set(rows)
    assert all(g >> 32 == 0 for g in first_ids)  # launch 0's stream

    # 2: the resume takes them (the file goes once its workers exist) and plays them on
    worker = _worker(smoke_config(tmp_path, "g"), stream=1)
    slots = stored.slots(worker.start, worker.cfg.ply_limit)
    prefixes = [pack_states(np.stack(s.states), 4) for s in slots if s is not None and s.states]
    assert prefixes

    def continued() -> bool:
        new = {g: r for g, r in _rows_by_game(run).items() if g not in first_ids}
        done = sum(any(len(r) >= len(p) and np.array_equal(r[: len(p)], p) for r in new.values()) for p in prefixes)
        return done >= 1

    out2 = session(["selfplay.stop_grace_seconds=0"], continued)
    assert f"self-play: continuing the {stored.games} game(s) in play at the last stop" in out2
    assert re.search(r"self-play: under way, its first positions [\d.]+ s after the command \(resume: ", out2)
    assert re.search(r"kept: \d+ games, \d+ positions handed in at the stop; \d+ unfinished games", out2)
    assert not (run / "unfinished_games.npz").exists()
    rows2 = _rows_by_game(run)
    new_ids = set(rows2) - first_ids
    assert new_ids and all(g >> 32 >= STREAMS_PER_LAUNCH for g in new_ids)  # the resume's stream
    assert set(rows2) >= first_ids
