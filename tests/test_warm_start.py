"""``train.init_from``: a new run starts from another run's weights (optimiser, steps and replay
fresh), is refused before Ray starts when the file does not fit the config's network (the keys
named), and a run that resumes ignores it. The run is driven through its set-up without Ray:
``Run._start_actors`` is replaced by a stub that keeps the trainer and writes best.pt the way
the real start-up does (``Run._load_best``), then stops."""

from __future__ import annotations

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
                       "run_name": "src", "half_komi": 0}, path)  # fmt: skip
    return path, net.eval()


def _run_setup(cfg) -> tuple[Run, dict[str, Any]]:
    """Run set-up and start-up up to the actors (no Ray): returns the run and what the stub kept
    (the trainer, the promoted weights it published)."""
    kept: dict[str, Any] = {}

    def start_actors(self: Run, trainer: Trainer, state: dict[str, Any] | None) -> bool:
        kept["trainer"] = trainer
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
                      Path(cfg.checkpoint_root) / "warm" / "best.pt")  # fmt: skip
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
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "config error: train.init_from: another network" in proc.stderr
    assert "board.size: file 4, config 5" in proc.stderr
    assert not (root / "five").exists(), "a refused warm start left a run folder"
