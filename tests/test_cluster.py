"""A training run on a two-node Ray cluster made on one machine (``ray.cluster_utils.Cluster``):
placement by role (what writes the run folder runs on the driver's node, self-play where a custom
resource says), weights put once per generation, and a worker node lost mid-run.

Where each actor ran comes from Ray's actor table in the GCS (``ray._private.state.actors``: the
table ``ray.util.state.list_actors`` serves, which itself needs the dashboard, and tests run
without it). Which process wrote or read which file comes from a Python audit hook installed in
every Ray worker process of the test's job (``runtime_env`` ``worker_process_setup_hook``): it
logs each open/rename/remove/mkdir under the watched folders with the process's node id.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import ray
from ray import cloudpickle
from ray.cluster_utils import Cluster
from smoke_config import smoke_config

from takzero.config import ConfigError, TrainConfig
from takzero.pipeline.checkpoints import list_checkpoints, load_checked
from takzero.pipeline.placement import PlacementError, check_resources
from takzero.pipeline.replay import ReplayBuffer
from takzero.pipeline.run import Run

ROOT = Path(__file__).resolve().parent.parent

# The audit hook travels to the workers by value (this test module is not importable there).
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _cfg(root: Path, **overrides: object) -> TrainConfig:
    """The smoke config made smaller still (4x4, 8 games per worker, 8 simulations)."""
    tiny = {
        "device": "cpu", "log_every_s": 1.0,
        "mcts.simulations": 8, "selfplay.games_per_worker": 8, "selfplay.ply_limit": 40,
        "replay.min_positions": 100, "replay.shard_positions": 60, "replay.samples_per_position": 2.0,
        "train.batch_size": 32, "train.total_steps": 10, "train.checkpoint_every": 5,
        "train.warmup_steps": 2, "evaluator.games": 2, "evaluator.baseline_every": 0,
        "evaluator.simulations": 4,
    }
    return smoke_config(root, "c", **{**tiny, **overrides})


# ---------------------------------------------------------------------------------------------
# Audit of file access in Ray worker processes
# ---------------------------------------------------------------------------------------------

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _audit_setup(log_dir: str, watched: list[str]):
    """A ``worker_process_setup_hook``: every open/rename/remove/mkdir of a path under
    ``watched`` is logged as ``node_id <TAB> event <TAB> 1 if a write <TAB> path`` to
    ``log_dir/<pid>.log``."""

    def setup() -> None:
        import os
        import sys

        import ray

        node = ray.get_runtime_context().get_node_id()
        out = open(os.path.join(log_dir, f"{os.getpid()}.log"), "a", buffering=1)  # noqa: SIM115
        busy = [False]

        def paths(event: str, args: tuple) -> tuple[list, bool]:
            if event == "open":
                path, mode, flags = args
                write = any(c in (mode or "") for c in "wax+") or bool((flags or 0) & _WRITE_FLAGS)
                return [path], write
            if event == "os.rename":
                return [args[0], args[1]], True
            if event in ("os.remove", "os.mkdir", "os.rmdir", "os.truncate", "shutil.rmtree"):
                return [args[0]], True
            return [], False

        def hook(event: str, args: tuple) -> None:
            if busy[0]:
                return
            busy[0] = True
            try:
                found, write = paths(event, args)
                for p in found:
                    if isinstance(p, bytes):
                        p = p.decode(errors="replace")
                    if not isinstance(p, str | os.PathLike):
                        continue
                    p = os.path.abspath(os.fspath(p))
                    if any(p.startswith(w) for w in watched):
                        out.write(f"{node}\t{event}\t{int(write)}\t{p}\n")
            except Exception:  # noqa: BLE001 - an audit hook must never break the worker
                pass
            finally:
                busy[0] = False

        sys.addaudithook(hook)

    return setup


def _audit_entries(log_dir: Path) -> list[tuple[str, str, bool, str]]:
    out = []
    for f in log_dir.glob("*.log"):
        for line in f.read_text().splitlines():
            node, event, write, path = line.split("\t")
            out.append((node, event, write == "1", path))
    return out


def _actors_of_this_job() -> list[dict]:
    """This job's actors from the GCS actor table: class name, node id, state, restarts."""
    from ray._private import state

    job = ray.get_runtime_context().get_job_id()
    return [
        {"cls": a["ActorClassName"], "node": a["Address"]["NodeID"], "state": a["State"],
         "restarts": a["NumRestarts"], "id": actor_id}
        for actor_id, a in state.actors().items()
        if a["JobID"] == job
    ]


def _start_cluster(
    temp_dir: str, runtime_env: dict | None = None, **worker_node_args: object
) -> tuple[Cluster, object]:
    """A head node (1 CPU) with the driver (this process) attached to it, then a second node
    (1 CPU). The driver connects before the second node exists: on one machine every node has the
    same IP and the driver would otherwise attach to either. Ray's files go to ``temp_dir``
    (short: Unix socket paths), so the cluster's address file does not replace the one in /tmp/ray
    that other Ray sessions of this machine use."""
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "temp_dir": temp_dir})
    try:
        ray.init(address=cluster.address, log_to_driver=False, runtime_env=runtime_env)
        assert ray.get_runtime_context().get_node_id() == cluster.head_node.node_id
        node = cluster.add_node(num_cpus=1, temp_dir=temp_dir, **worker_node_args)
    except BaseException:
        ray.shutdown()
        cluster.shutdown()
        raise
    return cluster, node


@pytest.fixture
def ray_temp_dir():
    path = tempfile.mkdtemp(prefix="tzc", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_placement_by_role_on_two_nodes(tmp_path: Path, ray_temp_dir: str) -> None:
    """Self-play forced onto the second node by a custom resource; the replay actor and the
    coordinator on the driver's node; every write to the run folder from a driver-node process;
    no worker-node process opens anything under the run folder, configs/ or checkpoints/; one
    ``ray.put`` per published state dict."""
    audit = tmp_path / "audit"
    audit.mkdir()
    runs = tmp_path / "runs"
    watched = [str(runs), str(ROOT / "configs"), str(ROOT / "checkpoints")]
    hook = {"worker_process_setup_hook": _audit_setup(str(audit), watched)}
    cluster, worker_node = _start_cluster(ray_temp_dir, hook, resources={"selfplay_node": 1})
    try:
        driver_node = ray.get_runtime_context().get_node_id()
        assert worker_node.node_id != driver_node
        with pytest.raises(PlacementError, match=r"ray.selfplay_resources.gpu_node: no node"):
            check_resources("ray.selfplay_resources", {"gpu_node": 1})
        with pytest.raises(PlacementError, match=r"ray.selfplay_resources.selfplay_node: .* 2"):
            check_resources("ray.selfplay_resources", {"selfplay_node": 2})
        run = Run(_cfg(runs, **{"ray.selfplay_resources": {"selfplay_node": 1}}))
        run_dir = run.run()
        actors = _actors_of_this_job()
    finally:
        ray.shutdown()
        cluster.shutdown()

    last = load_checked(list_checkpoints(run_dir)[-1])
    assert last["step"] == 10 and last["generation"] == 2
    by_cls: dict[str, set[str]] = {}
    for a in actors:
        by_cls.setdefault(a["cls"], set()).add(a["node"])
    assert by_cls["ReplayActor"] == {driver_node}
    assert by_cls["Coordinator"] == {driver_node}
    assert by_cls["SelfPlayActor"] == {worker_node.node_id}
    assert "EvaluatorActor" in by_cls
    # The weights: one put per state dict published (the two at start, one per generation; a
    # promotion reuses the candidate's reference), however many workers and evaluations asked.
    assert run.weights.puts == 2 + last["generation"]

    entries = _audit_entries(audit)
    run_writes = [e for e in entries if e[2] and e[3].startswith(str(run_dir))]
    assert any("/replay/shard_" in e[3] for e in run_writes), "the replay actor's writes were not seen"
    assert {e[0] for e in run_writes} == {driver_node}, run_writes
    on_worker_node = [e for e in entries if e[0] == worker_node.node_id]
    assert on_worker_node == [], on_worker_node[:5]


def _streams_of(streams: dict[int, int], worker: int) -> list[int]:
    """The streams that ``worker`` took (from ``Coordinator.streams``), in the order of its starts."""
    return sorted(st for st, w in streams.items() if w == worker)


@pytest.mark.slow
def test_worker_node_lost_mid_run(tmp_path: Path, ray_temp_dir: str) -> None:
    """Two self-play workers, one per node. After the first checkpoint the second node is removed
    (its worker dies with its game in flight); self-play goes on with the other worker; a new node
    joins and the lost worker restarts there with a new random stream (``Coordinator.new_stream``)
    and hands in games. The run then
    stops and its counters agree with the replay buffer exactly."""
    runs = tmp_path / "runs"
    cfg = _cfg(runs, **{"selfplay.workers": 2, "train.total_steps": 100_000})
    cluster, node_b = _start_cluster(ray_temp_dir)
    seen: dict[str, object] = {}

    def control(run: Run) -> None:
        """Main thread (Ray's Cluster must add nodes from it); the run plays in another."""
        try:
            end = time.monotonic() + 240
            while not list_checkpoints(runs / "c") and time.monotonic() < end and not done.is_set():
                time.sleep(0.5)
            lost = [a for a in _actors_of_this_job() if a["cls"] == "SelfPlayActor" and a["node"] == node_b.node_id]
            seen["lost_actor"] = lost[0]["id"] if len(lost) == 1 else None
            ids = [w._actor_id.hex() for w in run.pool.workers]
            seen["lost_worker"] = ids.index(seen["lost_actor"])
            seen["before"] = ray.get(run.replay.positions_by_source.remote())
            cluster.remove_node(node_b, allow_graceful=False)
            seen["removed"] = True
            time.sleep(3)
            seen["while_down"] = ray.get(run.replay.positions_by_source.remote())
            # Until the other worker hands in more (it was a fixed 5 s: on a loaded machine the
            # worker's next game may take longer), at most 240 s.
            other_first = _streams_of(ray.get(run.pool.coordinator.streams.remote()), 1 - seen["lost_worker"])[0]
            seen["later_down"] = seen["while_down"]
            end = time.monotonic() + 240
            while time.monotonic() < end and not done.is_set():
                seen["later_down"] = ray.get(run.replay.positions_by_source.remote())
                if seen["later_down"].get(other_first, 0) > seen["while_down"].get(other_first, 0):
                    break
                time.sleep(0.5)
            node_c = cluster.add_node(num_cpus=1, temp_dir=ray_temp_dir)
            seen["node_c"] = node_c.node_id
            end = time.monotonic() + 240  # each wait its own deadline: a slow one does not eat the next's
            while time.monotonic() < end and not done.is_set():
                later = _streams_of(ray.get(run.pool.coordinator.streams.remote()), seen["lost_worker"])[1:]
                by_stream = ray.get(run.replay.positions_by_source.remote())
                if any(by_stream.get(st, 0) > 0 for st in later):
                    seen["replacement_played"] = True
                    break
                time.sleep(0.5)
        except Exception as e:  # noqa: BLE001 - reported by the asserts below
            import traceback

            seen["error"] = f"{e!r}\n{traceback.format_exc()}"
        finally:
            try:  # stream -> worker id of every worker start so far (the coordinator goes at the end)
                seen["streams"] = ray.get(run.pool.coordinator.streams.remote())
            finally:
                run.stop_requested = True

    done = threading.Event()
    outcome: dict[str, object] = {}

    def play(run: Run) -> None:
        try:
            outcome["run_dir"] = run.run()
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
            outcome["error"] = e
        finally:
            done.set()

    try:
        run = Run(cfg)
        started = threading.Event()
        run.on_started = started.set
        player = threading.Thread(target=play, args=(run,), daemon=True)
        player.start()
        while not started.wait(0.5) and not done.is_set():
            pass
        if not done.is_set():
            control(run)
        player.join(timeout=300)
        actors = _actors_of_this_job()
    finally:
        ray.shutdown()
        cluster.shutdown()

    if "error" in outcome:
        raise outcome["error"]
    run_dir = outcome["run_dir"]
    assert "error" not in seen, seen["error"]
    assert seen.get("removed") and seen.get("replacement_played"), {k: v for k, v in seen.items() if k != "before"}
    lost = seen["lost_worker"]
    other = 1 - lost
    streams = seen["streams"]
    # Self-play went on while the node was down: the other worker kept handing in positions.
    other_first = _streams_of(streams, other)[0]
    assert seen["later_down"].get(other_first, 0) > seen["while_down"].get(other_first, 0), seen
    restarted = [a for a in actors if a["id"] == seen["lost_actor"]]
    assert restarted and restarted[0]["restarts"] >= 1 and restarted[0]["node"] == seen["node_c"]

    # Counters: the final checkpoint's game and position counts are exactly the buffer's.
    last = load_checked(list_checkpoints(run_dir)[-1])
    counted = last["run"]
    assert counted["positions"] == last["replay"]["total_added"] > 0
    assert counted["games"] == last["replay"]["games_added"] == counted["counters"]["count/games"]
    buf = ReplayBuffer(cfg.replay, cfg.board.size, shard_dir=run_dir / "replay")
    assert buf.load(last["replay"]) == last["replay"]["total_added"]
    # Game ids are (stream << 32) | n, one stream per worker start, never repeated: the buffer
    # holds games of the lost worker's first and later start and of the other worker.
    pairs = set()
    for st in np.unique(buf.data.game_id >> 32).tolist():
        worker = streams[st]
        pairs.add((worker, _streams_of(streams, worker).index(st)))
    assert {(lost, 0), (lost, 1), (other, 0)} <= pairs, pairs
    # Every game is whole: each game id's records are consecutive plies of one game.
    for gid in np.unique(buf.data.game_id):
        plies = buf.data.ply[buf.data.game_id == gid]
        assert (np.diff(plies) > 0).all()


def test_placement_keys_are_checked(tmp_path: Path) -> None:
    """Custom-resource keys: built-in resource names and amounts <= 0 are refused, naming the key."""
    with pytest.raises(ConfigError, match=r"ray.selfplay_resources.GPU"):
        _cfg(tmp_path, **{"ray.selfplay_resources": {"GPU": 1}})
    with pytest.raises(ConfigError, match=r"ray.evaluator_resources.big_node"):
        _cfg(tmp_path, **{"ray.evaluator_resources": {"big_node": 0}})
    cfg = _cfg(tmp_path, **{"ray.selfplay_resources": {"gpu_node": 0.5}})
    assert cfg.ray.selfplay_resources == {"gpu_node": 0.5}


def test_model_baselines_travel_as_bytes(tmp_path: Path) -> None:
    """A ``model:PATH`` baseline is read on the driver and rebuilt from its bytes in a private
    folder where the evaluator runs, under the same file name (same label); other specs pass."""
    from takzero.pipeline.evaluator_actor import localize_model_specs, model_spec_files
    from takzero.players.registry import model_spec_path, spec_label

    model = tmp_path / "g5.pt"
    model.write_bytes(b"weights")
    specs = ["uct", f"model:{model}:30", f"model:{model}"]
    files = model_spec_files(specs)
    assert files == {str(model): b"weights"}
    local = localize_model_specs(specs, files)
    assert local[0] == "uct" and local[1].endswith(":30")
    for original, copy in zip(specs[1:], local[1:], strict=True):
        path = Path(model_spec_path(copy))
        assert path != model and not path.is_relative_to(tmp_path)
        assert path.read_bytes() == b"weights" and path.name == model.name
        assert spec_label(copy) == spec_label(original)
    assert model_spec_path("uct:20") is None
