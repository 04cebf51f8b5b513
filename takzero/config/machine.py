"""The checks of a run's configuration that look at the machine or its file system: the run
folder (:func:`check_run_folder`), the memory the sizes imply (:func:`implied_memory`,
:func:`check_sizes`) and the Ray address (:func:`check_ray_address`); ``takzero.config.validate``
runs them at start-up.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from takzero.config.sections import MAX_NODE_BUDGET, MAX_SIMULATIONS, _check
from takzero.io.machine import machine_memory
from takzero.nn.actions import num_actions

if TYPE_CHECKING:
    from takzero.config import TrainConfig

#: Seconds ``ray.address``'s host:port is given to answer at start-up.
RAY_CONNECT_TIMEOUT_S = 5.0


#: The longest folder name (bytes) of the usual file systems (ext4, XFS, APFS, NTFS in UTF-16 units).
NAME_MAX = 255


def check_run_folder(checkpoint_root: str, run_name: str) -> None:
    """Check ``checkpoint_root`` and ``run_name`` before anything is created: the name is one
    plain folder name, the root is (or can become) a folder, and the run folder is not a file.
    Raises ConfigError naming the key. ``takzero.train`` calls it before Hydra makes its output
    folder, so a refused name leaves nothing behind."""
    _check(
        bool(run_name) and re.fullmatch(r"[\w.\-]+", run_name) is not None and run_name not in (".", ".."),
        "run_name", "must be a plain folder name (letters, digits, '.', '_', '-')", run_name,
    )
    _check(len(run_name.encode()) <= NAME_MAX, "run_name",
           f"must be at most {NAME_MAX} bytes long (a folder name), not {len(run_name.encode())}", run_name)
    _check(bool(checkpoint_root.strip()), "checkpoint_root",
           "must name a folder (empty: the run's files would go to the filesystem root)", checkpoint_root)
    root = Path(checkpoint_root)
    blocker = next((p for p in (root, *root.parents) if p.exists()), None)
    _check(blocker is None or blocker.is_dir(), "checkpoint_root",
           f"must be a folder, but {blocker} is a file", checkpoint_root)
    run_dir = root / run_name
    _check(not run_dir.exists() or run_dir.is_dir(), "run_name",
           f"{run_dir} exists and is not a folder", run_name)


def implied_memory(c: TrainConfig) -> list[tuple[str, int, str]]:
    """The memory the sizes of ``c`` imply, one row per key that sizes an allocation:
    ``(key, bytes, what)``. Rough upper estimates, in the order of the allocations they stand for:

    * ``selfplay.games_per_worker``: the search trees of every self-play worker on this machine
      (all of them unless ``ray.address`` joins a cluster): workers x games x node budget x
      ``BYTES_PER_NODE``; ``mcts.node_budget`` when it was given;
    * ``mcts.simulations``: each worker's visit schedule, games x simulations x 4 bytes;
    * ``replay.window_max`` (or ``replay.fixed_window``): the replay window, positions x (packed
      board, ``replay.top_k`` policy entries of 6 bytes, targets), twice (a window is copied when
      positions are added);
    * ``train.batch_size``: a batch's input planes, policy target and mask, and the activations
      kept for the backward pass (some 8 tensors of the trunk's planes per block)."""
    from takzero.search.config import BYTES_PER_NODE

    n = c.board.size
    nsq = n * n
    actions = num_actions(n)
    local = c.ray.address in (None, "local")
    workers = c.selfplay.workers if local else 1
    games = c.selfplay.games_per_worker
    search = c.mcts
    budget = search.node_budget if "node_budget" in c.mcts_keys_given() else min(
        200_000, max(actions + 1, 300 * (search.max_simulations + 1)))
    tree_key = "mcts.node_budget" if "node_budget" in c.mcts_keys_given() else "selfplay.games_per_worker"
    rows = [
        (tree_key, workers * games * budget * BYTES_PER_NODE,
         f"{workers} workers x {games} games x {budget} nodes x {BYTES_PER_NODE} bytes of search trees"),
        ("mcts.simulations", workers * games * search.max_simulations * 4,
         f"{workers} workers x {games} games x {search.max_simulations} simulations of visit schedule"),
    ]
    r = c.replay
    window = min(r.window_max, r.fixed_window) if r.fixed_window > 0 else r.window_max
    board_bytes = 16 + 2 * nsq + 8 * (2 if n >= 7 else 1) * nsq  # pipeline.replay.board_record_len
    position = board_bytes + 6 * r.top_k + 6 * c.replay_opponent_top_k() + nsq + 24
    window_key = "replay.fixed_window" if r.fixed_window > 0 and r.fixed_window <= r.window_max else "replay.window_max"
    rows.append((window_key, 2 * window * position,
                 f"a replay window of {window} positions x {position} bytes, twice"))
    mc = c.model_config()
    sample = 4 * mc.in_channels * nsq + 5 * actions + 64 + 4 * mc.channels * nsq * (8 * mc.blocks + 8)
    rows.append(("train.batch_size", c.train.batch_size * sample,
                 f"{c.train.batch_size} samples x {sample} bytes of inputs, targets and activations"))
    return rows


def check_sizes(c: TrainConfig, memory: int | None = None) -> None:
    """Check the values of ``c`` that size an allocation, at start-up: the integers in their
    ranges (``replay.top_k`` up to the board's action count, simulations up to
    :data:`MAX_SIMULATIONS`, ``mcts.node_budget`` up to :data:`MAX_NODE_BUDGET`), then the memory
    they imply (:func:`implied_memory`), each and together, against ``memory`` bytes (default:
    :func:`machine_memory`). Raises ConfigError naming the key (the largest share when only the
    sum is too much)."""
    a = num_actions(c.board.size)
    _check(c.replay.top_k <= a, "replay.top_k",
           f"must be at most the {a} actions of a {c.board.size}x{c.board.size} board", c.replay.top_k)
    m = c.mcts
    for key, value in (("mcts.simulations", m.simulations), ("mcts.full_sims", m.full_sims),
                       ("mcts.cheap_sims", m.cheap_sims), ("evaluator.simulations", c.evaluator.simulations),
                       ("evaluator.uct_simulations", c.evaluator.uct_simulations)):
        if value is not None:
            _check(value <= MAX_SIMULATIONS, key, f"must be at most {MAX_SIMULATIONS:,} (MAX_SIMULATIONS)", value)
    _check(m.node_budget <= MAX_NODE_BUDGET, "mcts.node_budget",
           f"must be at most {MAX_NODE_BUDGET:,} (the trees index nodes with int32)", m.node_budget)
    _check(c.selfplay.games_per_worker <= 2**20, "selfplay.games_per_worker", "must be at most 2**20",
           c.selfplay.games_per_worker)
    memory = machine_memory() if memory is None else memory
    gib = 2**30
    rows = implied_memory(c)
    for key, need, what in rows:
        _check(need <= memory, key, f"needs about {need / gib:,.1f} GiB ({what}), more than the "
               f"{memory / gib:.1f} GiB of memory of this machine", getattr_key(c, key))
    total = sum(need for _, need, _ in rows)
    key, need, what = max(rows, key=lambda row: row[1])
    _check(total <= memory, key, f"the run's sizes need about {total / gib:,.1f} GiB together, more than the "
           f"{memory / gib:.1f} GiB of memory of this machine; the largest share is {key}: {what}",
           getattr_key(c, key))


def getattr_key(c: TrainConfig, key: str) -> Any:
    """The value of the dotted ``key`` of ``c`` (``replay.top_k``)."""
    obj: Any = c
    for part in key.split("."):
        obj = getattr(obj, part)
    return obj


def check_ray_address(address: str | None, timeout: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """A ``host:port`` (or ``ray://host:port``) ``ray.address`` must answer a TCP connection within
    ``timeout`` seconds, so that a wrong address is one line at start-up rather than a long wait
    in ``ray.init``; ``auto``, ``local`` and None are left to Ray. Raises ConfigError."""
    import socket

    if address is None or address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as e:
        reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
        _check(False, "ray.address", f"nothing answers at {host}:{port} within {timeout:g} s ({reason}); "
               "start the cluster's head (ray start --head) or fix the address", address)
