"""Where the actors of a training run go on a Ray cluster (one machine or many).

Roles (``docs/cluster.md``):

* **driver side**: the coordinator and the replay buffer run on the driver's node, pinned with
  Ray's hard node affinity (``NodeAffinitySchedulingStrategy(node_id=<driver node>,
  soft=False)``). Together with the driver process (trainer, checkpoints, TensorBoard, PTN
  samples, ``best.pt``) they are the only processes that write the run folder, so on a cluster
  without a shared disk every file of the run lands on the driver's disk and a resume finds it.
* **anywhere**: self-play workers and the evaluator. They read nothing from disk (the config comes
  as an object, weights through Ray's object store, model baselines as file bytes) and write
  nothing to the run folder (games and statistics go to the replay actor, evaluation results back
  to the driver). ``ray.selfplay_resources`` / ``ray.evaluator_resources`` (Ray custom resources,
  e.g. ``{gpu_node: 1}`` with ``ray start --resources='{"gpu_node": 1}'`` on the chosen nodes)
  restrict them to some nodes.

Failures: a self-play worker or the evaluator whose process or node dies is restarted by Ray
(``max_restarts=-1``) on any node that has its resources, at once or when such a node joins; the
game in flight on a lost worker is lost, nothing else (records and statistics of a finished game
reach the replay actor in one call). The driver's node dying ends the run: run the same command
again to resume from the last checkpoint.
"""

from __future__ import annotations

from typing import Any

from takzero.config import TrainConfig

#: Ray's own resource names; custom-resource keys must not use them (num_cpus, num_gpus and
#: ray.worker_gpu_share set those).
BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


class PlacementError(RuntimeError):
    """A placement setting the cluster cannot satisfy (the message names the config key)."""


class RayStartError(RuntimeError):
    """Ray did not start (a local instance) or could not be joined (``ray.address``): one line
    saying why, as Ray said it, and what to try."""


def _ray_start_error(e: BaseException, cfg: TrainConfig) -> RayStartError:
    """The one-line :class:`RayStartError` of ``ray.init``'s exception ``e``."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    why = lines[0][:300] if lines else type(e).__name__
    if cfg.ray.address and cfg.ray.address != "local":
        hint = f"check that a Ray cluster runs at ray.address={cfg.ray.address} (ray status there)"
    else:
        hint = ("Ray's processes need a few GB of memory and address space: check free memory and "
                "any 'ulimit -v', and that no stale Ray processes are left ('ray stop')")
    return RayStartError(f"Ray could not start ({why}); {hint}")


def init_ray(cfg: TrainConfig) -> None:
    """Start Ray for a run (nothing if it is already initialised in this process).

    ``ray.address`` unset or ``"local"``: always a new local instance with ``ray.num_cpus`` /
    ``ray.num_gpus``, never a cluster that ``ray start`` left running on this machine (``ray.init()``
    without an address would join the latest one); task events (for Ray's dashboard and state API,
    which a run does not use) are off, so the GCS does not grow with the remote calls of a long run
    (issue 16: 18 MB/min with them), and its workers (self-play, evaluator) run at
    ``ray.worker_niceness`` above the driver (Ray's default is 15: the trainer in the driver
    would take the CPU from self-play). Otherwise joins the cluster at ``ray.address`` (its
    workers' niceness is the cluster's: ``RAY_worker_niceness`` at ``ray start``).
    ``ray.runtime_env`` is passed on, with ``PYTHONWARNINGS`` silencing deprecation warnings.

    Raises RayStartError (one line: why, and what to try) when Ray fails to start or join.
    """
    import ray

    if ray.is_initialized():
        return
    extra = dict(cfg.ray.runtime_env or {})
    env_vars = {"PYTHONWARNINGS": "ignore::DeprecationWarning", **extra.pop("env_vars", {})}
    runtime_env = {**extra, "env_vars": env_vars}
    try:
        _ray_init(ray, cfg, runtime_env)
    except (KeyboardInterrupt, RayStartError):
        raise
    except Exception as e:  # noqa: BLE001 - Ray raises bare Exception, ConnectionError, ...
        raise _ray_start_error(e, cfg) from None


def _ray_init(ray: Any, cfg: TrainConfig, runtime_env: dict[str, Any]) -> None:
    if cfg.ray.address and cfg.ray.address != "local":
        ray.init(address=cfg.ray.address, runtime_env=runtime_env, log_to_driver=True)
    else:
        ray.init(
            address="local",
            num_cpus=cfg.ray.num_cpus,
            num_gpus=cfg.ray.num_gpus,
            include_dashboard=False,
            runtime_env=runtime_env,
            log_to_driver=True,
            _system_config={"task_events_report_interval_ms": 0, "enable_timeline": False,
                            "worker_niceness": cfg.ray.worker_niceness},
        )


def driver_node_id() -> str:
    """The Ray node id (hex) of the calling process's node (the driver's, when the driver asks)."""
    import ray

    return ray.get_runtime_context().get_node_id()


def on_node(node_id: str) -> dict[str, Any]:
    """Actor options that pin an actor to ``node_id`` (hard node affinity: never placed elsewhere,
    and it dies with that node)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)}


def check_resources(key: str, wanted: dict[str, float]) -> None:
    """Check at start-up that some node of the connected cluster offers every custom resource in
    ``wanted`` in at least the amount one actor asks for (``key``: the config key, e.g.
    ``ray.selfplay_resources``, named in the error). Raises PlacementError; nothing is created."""
    import ray

    if not wanted:
        return
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    offered: dict[str, float] = {}
    for n in nodes:
        for name, amount in n.get("Resources", {}).items():
            offered[name] = max(offered.get(name, 0.0), float(amount))
    for name, amount in wanted.items():
        if name not in offered:
            custom = sorted(k for k in offered if k not in BUILTIN_RESOURCES and not k.startswith("node:"))
            raise PlacementError(
                f"{key}.{name}: no node of the Ray cluster offers the resource '{name}' "
                f"(custom resources offered: {custom or 'none'}); start the nodes meant for it "
                f"with ray start --resources='{{\"{name}\": N}}'"
            )
        if offered[name] < amount:
            raise PlacementError(
                f"{key}.{name}: each actor asks for {amount:g} but no node offers more than "
                f"{offered[name]:g}"
            )


def cluster_gpus() -> float:
    """GPUs in the connected cluster (all nodes, alive ones)."""
    import ray

    return float(ray.cluster_resources().get("GPU", 0.0))


def selfplay_options(
    resources: dict[str, float], gpu_share: float
) -> dict[str, Any]:
    """Ray actor options of a self-play worker: one CPU, ``gpu_share`` of a GPU, the custom
    ``resources`` (``ray.selfplay_resources``); restarted without limit with its ``run`` task
    retried on the new process (a lost node's workers come back when a node with room joins)."""
    opts: dict[str, Any] = {
        "num_cpus": 1,
        "num_gpus": gpu_share,
        "max_restarts": -1,
        "max_task_retries": -1,
    }
    if resources:
        opts["resources"] = dict(resources)
    return opts


def evaluator_options(resources: dict[str, float]) -> dict[str, Any]:
    """Ray actor options of the evaluator: no CPU reserved (it runs between generations), the
    custom ``resources`` (``ray.evaluator_resources``), restarted without limit; an evaluation
    whose actor died fails (the driver drops it and evaluates the next generation)."""
    opts: dict[str, Any] = {"num_cpus": 0, "max_restarts": -1, "max_task_retries": 0}
    if resources:
        opts["resources"] = dict(resources)
    return opts


__all__ = [
    "BUILTIN_RESOURCES",
    "PlacementError",
    "RayStartError",
    "check_resources",
    "cluster_gpus",
    "driver_node_id",
    "evaluator_options",
    "on_node",
    "selfplay_options",
]
