"""``train.init_from``: a new run starts from another run's weights (optimiser, steps and replay
fresh), is refused before Ray starts when the file does not fit the config's network (the keys
named), and a run that resumes ignores it. The run is driven through its set-up without Ray:
``Run._start_actors`` is replaced by a stub that keeps the trainer and writes best.pt the way
the real start-up does (``Run._load_best``), then stops."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from smoke_config import smoke_raw

from takzero.config import ConfigError, load_config
from takzero.nn.features import encode, num_channels
from takzero.nn.model import ModelConfig, TakNet
from takzero.pipeline.checkpoints import atomic_torch_save, load_checked
from takzero.pipeline.run import Run
from takzero.pipeline.trainer import Trainer

ROOT = Path(__file__).resolve().parent.parent


def _raw(tmp_path: Path, **overrides: Any):
    return smoke_raw(tmp_path / "runs", "warm", **overrides)

def _source_file(tmp_path: Path, mc: ModelConfig, name: str = "source.pt") -> tuple[Path, torch.nn.Module]:
    """A model file like a run's best.pt, with weights unlike any fresh network's."""
    torch.manual_seed(1234)
    net = TakNet(mc)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.05 * torch.randn_like(p))
    path = tmp_path / name
    atomic_torch_save({"model_config": mc.to_dict(), "model_state": net.state_dict(), "generation": 7,
                       "run_name": "src", "half_komi": 0}, path)
    return path, net.eval()


def _run_setup(cfg) -> tuple[Run, dict[str, Any]]:
    """Run set-up and start-up up to the actors (no Ray): returns the run and what the stub kept
    (the trainer, the promoted weights it published)."""
    kept: dict[str, Any] = {}

    def start_actors(self: Run, state: dict[str, Any] | None) -> bool:
        trainer = kept["trainer"] = self._make_trainer(state)
        kept["promoted"] = self._load_best(trainer, self.c.promoted_generation, state) if state is None else None
        return False  # stop here, as a Ctrl-C during start-up does

    run = Run(cfg, command="test")
    run._start_actors = start_actors.__get__(run)  # type: ignore[method-assign]
    run.run()
    return run, kept


def _planes(mc: ModelConfig, n: int = 6) -> torch.Tensor:
    from takzero.game.position import Game, Position

    rng = np.random.default_rng(0)
    states = []
    for _ in range(n):
        g = Game(Position.start(mc.size, komi=0))
        for _ in range(int(rng.integers(0, 12))):
            codes = g.position.legal_move_codes()
            g.play(int(codes[rng.integers(len(codes))]))
            if g.result.over:
                break
        states.append(g.position.state.copy())
    st = np.stack(states)
    planes = np.zeros((n, num_channels(mc.layers, mc.feature_version), mc.size, mc.size), np.float32)
    encode(st, planes, mc.layers, mc.feature_version)
    return torch.from_numpy(planes)


def test_init_from_loads_the_weights_with_a_fresh_optimiser(tmp_path: Path) -> None:
    """The trainer's network gives the source network's outputs exactly; the optimiser has no
    state, step and generation are 0; generation 0's promoted weights (best.pt, what self-play
    starts with) are the loaded ones, also over a best.pt an earlier start left; the start-up
    lines, config.yaml and the run counters record the file."""
    cfg0 = load_config(_raw(tmp_path))
    src, net = _source_file(tmp_path, cfg0.model_config())
    cfg = load_config(_raw(tmp_path, **{"train.init_from": str(src)}))
    # an earlier start of the run that was killed before its first checkpoint left a best.pt
    # of its own generation 0 (random weights): the warm start replaces it
    stale = TakNet(cfg.model_config()).state_dict()
    atomic_torch_save({"model_config": cfg.model_config().to_dict(), "model_state": stale, "generation": 0},
                      Path(cfg.checkpoint_root) / "warm" / "best.pt")
    run, kept = _run_setup(cfg)
    trainer: Trainer = kept["trainer"]
    trainer.model.eval()
    x = _planes(cfg.model_config())
    with torch.no_grad():
        for a, b in zip(trainer.model(x), net(x), strict=True):
            assert torch.equal(a, b)
    fresh = Trainer(cfg.train, cfg.model_config(), device="cpu", seed=cfg.seed)  # without init_from
    with torch.no_grad():
        assert not torch.equal(fresh.model.eval()(x)[0], net(x)[0])  # the check can fail
    assert trainer.optimizer.state_dict()["state"] == {}
    assert trainer.step == 0 and trainer.generation == 0
    gen, promoted = kept["promoted"]
    assert gen == 0
    for k, v in net.state_dict().items():
        assert torch.equal(promoted[k], v), k
    best = load_checked(run.run_dir / "best.pt", require_checksum=True)
    assert best["generation"] == 0
    for k, v in net.state_dict().items():
        assert torch.equal(best["model_state"][k], v), k
    log = (run.run_dir / "train.log").read_text()
    assert f"warm start: weights from {src} (run src, generation 7)" in log
    assert OmegaConf.load(run.run_dir / "config.yaml").train.init_from == str(src)
    assert run.c.init_from == f"{src} (run src, generation 7)"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"size": 5, "layers": None}, r"board\.size: file 5, config 4"),
        ({"feature_version": 1}, r"model\.feature_version: file 1, config 2"),
        ({"channels": 8, "blocks": 2}, r"model\.blocks: file 2, config 1, model\.channels: file 8, config 16"),
    ],
)
def test_init_from_refuses_another_network_naming_the_keys(tmp_path: Path, change: dict, named: str) -> None:
    """Another board size, feature version or tower: refused at set-up (before Ray starts, no
    train.log), the message naming train.init_from and each differing key with both values."""
    import ray

    cfg0 = load_config(_raw(tmp_path))
    other = ModelConfig(**{**cfg0.model_config().to_dict(), **change})
    src, _ = _source_file(tmp_path, other)
    cfg = load_config(_raw(tmp_path, **{"train.init_from": str(src)}))
    with pytest.raises(ConfigError, match=r"^train\.init_from: another network .*" + named):
        Run(cfg, command="test").run()
    assert not ray.is_initialized()
    assert not (Path(cfg.checkpoint_root) / "warm" / "train.log").exists()


def test_init_from_refuses_a_file_without_a_model(tmp_path: Path) -> None:
    path = tmp_path / "not_a_model.pt"
    atomic_torch_save({"step": 3}, path)
    with pytest.raises(ConfigError, match="train.init_from: holds no model_state"):
        Run(load_config(_raw(tmp_path, **{"train.init_from": str(path)})), command="test").run()
    with pytest.raises(ConfigError, match="train.init_from: must be a model or checkpoint file"):
        load_config(_raw(tmp_path, **{"train.init_from": str(tmp_path / "missing.pt")}))


def test_resume_ignores_init_from(tmp_path: Path) -> None:
    """A run folder with a checkpoint resumes from it: the weights are the checkpoint's, not the
    file's, its step and optimiser state continue, and train.log says init_from was ignored."""
    cfg0 = load_config(_raw(tmp_path))
    src, net = _source_file(tmp_path, cfg0.model_config())
    trainer = Trainer(cfg0.train, cfg0.model_config(), device="cpu", seed=5)
    trainer.optimizer.state[next(iter(trainer.model.parameters()))]["momentum_buffer"] = torch.ones(1)
    state = trainer.state_dict()
    state.update(step=10, generation=0, run={"minutes": 0.5})
    run_dir = Path(cfg0.checkpoint_root) / "warm"
    atomic_torch_save(state, run_dir / "ckpt_000000010.pt")
    cfg = load_config(_raw(tmp_path, **{"train.init_from": str(src)}))
    run, kept = _run_setup(cfg)
    resumed: Trainer = kept["trainer"]
    assert resumed.step == 10 and resumed.optimizer.state_dict()["state"]
    for k, v in trainer.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[k], v), k
    assert any(not torch.equal(resumed.model.state_dict()[k], v) for k, v in net.state_dict().items())
    log = (run.run_dir / "train.log").read_text()
    assert f"train.init_from={src} ignored: the run folder has checkpoints" in log
    assert "warm start: weights from" not in log
    assert run.c.init_from == ""


@pytest.mark.slow  # the command line as a process
def test_cli_refuses_a_file_of_another_board_size_before_making_the_run_folder(tmp_path: Path) -> None:
    import subprocess
    import sys

    cfg0 = load_config(_raw(tmp_path))
    src, _ = _source_file(tmp_path, cfg0.model_config())
    root = tmp_path / "runs"
    proc = subprocess.run(
        [sys.executable, "-m", "takzero.train", "+config=smoke", "run_name=five", "board.size=5",
         f"checkpoint_root={root}", f"train.init_from={src}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "config error: train.init_from: another network" in proc.stderr
    assert "board.size: file 4, config 5" in proc.stderr
    assert not (root / "five").exists(), "a refused warm start left a run folder"


# -- lineage: the training behind the weights, carried over the warm-start chain ---------------


def test_lineage_counts_add_up_and_round_trip() -> None:
    from takzero.pipeline.lineage import Lineage

    a = Lineage().plus(30.5, 1000, 20, 400, "first")
    b = a.plus(15.0, 500, 10, 100, "second")
    assert b == Lineage(45.5, 1500, 30, 500, ("first", "second"))
    assert b.plus(1.0, 1, 1, 1, "second").runs == ("first", "second")  # the same run: named once
    assert Lineage.from_dict(b.to_dict()) == b
    assert Lineage.from_dict(None) == Lineage() == Lineage.from_dict({})
    assert "45.5 min, 1,500 positions, 30 games, 500 steps over 2 runs (first, second)" == b.describe()
    for bad in ({"minutes": -1}, {"positions": "many"}, {"minutes": float("nan")}, {"runs": "a"}, "abc", [1],
                {"minutes": 10**400}, {"positions": float("inf")}, {"positions": 1.9}, {"steps": True},
                {"runs": [None]}, {"minutes": 1e308}, {"positions": "12"}):
        with pytest.raises(ValueError, match="lineage"):
            Lineage.from_dict(bad)


def test_lineage_of_a_file_model_checkpoint_or_bare() -> None:
    """A model file gives its entry; a checkpoint its run's counters on top of the run's own
    earlier lineage; a bare model file unknown training (zero counters as lower bounds) and its
    run name."""
    from takzero.pipeline.lineage import Lineage

    entry = Lineage(10.0, 100, 5, 50, ("a",))
    assert Lineage.of_file({"lineage": entry.to_dict()}) == entry
    ckpt = {"step": 70, "run_name": "b",
            "run": {"minutes": 12.0, "positions": 300, "games": 9, "earlier": entry.to_dict()}}
    assert Lineage.of_file(ckpt) == Lineage(22.0, 400, 14, 120, ("a", "b"))
    assert Lineage.of_file({"step": 3, "run_name": "c", "run": {"minutes": 1.0}}) == Lineage(1.0, 0, 0, 3, ("c",))
    assert Lineage.of_file({"run_name": "v1"}) == Lineage(runs=("v1",), known=False)  # unknown, not 0 min
    assert Lineage.of_file({}) == Lineage(known=False)
    for bad in ({"run": {"minutes": None}}, {"run": {"earlier": "x"}}, {"run": {"minutes": -5}},
                {"run": {}, "step": -7}, {"run": "x"}):
        with pytest.raises(ValueError, match="lineage"):
            Lineage.of_file(bad)


def _with_lineage(path: Path, lineage: dict[str, Any]) -> None:
    d = load_checked(path)
    d["lineage"] = lineage
    atomic_torch_save(d, path)


def test_a_warm_start_carries_the_files_lineage_into_its_model_files(tmp_path: Path) -> None:
    """The source's lineage is the run's earlier training (counters, start-up line); best.pt
    carries it plus the run's own, with the run's name appended; the checkpoint's counters carry
    it to the next start."""
    from takzero.pipeline.resume import RunCounters

    cfg0 = load_config(_raw(tmp_path))
    src, _ = _source_file(tmp_path, cfg0.model_config())
    _with_lineage(src, {"minutes": 45.0, "positions": 200_000, "games": 3000, "steps": 4000, "runs": ["r6"]})
    run, _ = _run_setup(load_config(_raw(tmp_path, **{"train.init_from": str(src)})))
    assert run.c.earlier == {"minutes": 45.0, "positions": 200_000, "games": 3000, "steps": 4000, "runs": ["r6"]}
    best = load_checked(run.run_dir / "best.pt", require_checksum=True)
    lin = best["lineage"]
    assert lin["runs"] == ["r6", "warm"] and lin["positions"] == 200_000 and lin["steps"] == 4000
    assert 45.0 <= lin["minutes"] < 46.0
    log = (run.run_dir / "train.log").read_text()
    assert "the training behind it: 45.0 min, 200,000 positions, 3,000 games, 4,000 steps over 1 run (r6)" in log
    back = RunCounters.from_checkpoint({"run": run.c.to_checkpoint()})
    assert back.earlier == run.c.earlier and back.snapshot_minutes_at == 45.0


def test_a_bad_lineage_in_the_file_is_refused_naming_init_from(tmp_path: Path) -> None:
    cfg0 = load_config(_raw(tmp_path))
    src, _ = _source_file(tmp_path, cfg0.model_config())
    _with_lineage(src, {"minutes": -5})
    with pytest.raises(ConfigError, match=r"^train\.init_from: lineage: counts must be finite and >= 0"):
        Run(load_config(_raw(tmp_path, **{"train.init_from": str(src)})), command="test").run()


def test_weight_snapshots_at_each_multiple_of_the_chains_minutes(tmp_path: Path) -> None:
    """With train.snapshot_minutes=60 and 45 minutes behind the initial weights, the first
    snapshot is due once the chain passes 60 minutes, the next past 120 (not at 61 or 119);
    each is a model file with its lineage that the player table loads; 0 writes none."""
    from takzero.players.registry import make_player

    cfg0 = load_config(_raw(tmp_path))
    src, _ = _source_file(tmp_path, cfg0.model_config())
    _with_lineage(src, {"minutes": 45.0, "positions": 10, "games": 1, "steps": 5, "runs": ["r6"]})
    run, kept = _run_setup(load_config(_raw(tmp_path, **{"train.init_from": str(src),
                                                        "train.snapshot_minutes": 60})))
    run.reporter = None  # closed by the stop; the snapshot's line goes to train.log only through it
    state = {k: v.clone() for k, v in kept["trainer"].model.state_dict().items()}
    written = []
    for own_minutes, generation in ((10.0, 1), (15.5, 2), (16.0, 3), (70.0, 4), (76.0, 5), (500.0, 6)):
        run.c.minutes, run.started = own_minutes, time.monotonic()
        path = run._weights_snapshot(generation, state)
        if path is not None:
            written.append((generation, path))
    assert [g for g, _ in written] == [2, 5, 6]  # 60.5, 121, 545 minutes: one per multiple passed
    for _generation, path in written:
        assert path.parent == run.run_dir / "snapshots" and path.name.startswith("snapshot_")
        d = load_checked(path, require_checksum=True)
        assert d["lineage"]["runs"] == ["r6", "warm"] and d["lineage"]["minutes"] >= 60
        assert d["generation"] == _generation
    assert written[0][1].name == "snapshot_00060.5min_gen0002.pt"
    player = make_player(f"model:{written[0][1]}:2")
    assert player is not None
    run.cfg.train.snapshot_minutes = 0.0
    assert run._weights_snapshot(7, state) is None


def test_snapshot_minutes_must_be_finite_and_not_negative(tmp_path: Path) -> None:
    for bad in (-1.0, float("inf")):
        with pytest.raises(ConfigError, match=r"train\.snapshot_minutes: must be >= 0 and finite"):
            load_config(_raw(tmp_path, **{"train.snapshot_minutes": bad}))


def test_init_from_takes_a_file_with_the_older_parameter_names(tmp_path: Path) -> None:
    """A file written before the trunk moved under ``trunk.`` (the shipped 5x5.pt) warm-starts a
    run as ``model_from_checkpoint`` reads it: the same weights under today's names."""
    from takzero.pipeline.warm_start import load_init_weights

    cfg = load_config(_raw(tmp_path))
    mc = cfg.model_config()
    path, net = _source_file(tmp_path, mc)
    d = torch.load(path, weights_only=True)
    d["model_state"] = {k.removeprefix("trunk."): v for k, v in d["model_state"].items()}
    assert not any(k.startswith("trunk.") for k in d["model_state"])
    atomic_torch_save(d, path)
    init = load_init_weights(load_config(_raw(tmp_path, **{"train.init_from": str(path)})))
    fresh = TakNet(mc)
    fresh.load_state_dict(init.model_state)
    fresh.eval()
    with torch.no_grad():
        x = _planes(mc)
        assert torch.equal(fresh(x)[0], net(x)[0])
