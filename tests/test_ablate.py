"""scripts/ablate.py: the fixed-compute protocol's evaluation, counters and table rows."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location("ablate", ROOT / "scripts" / "ablate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tiny_model(path: Path, seed: int) -> None:
    from takzero.nn.model import ModelConfig, checkpoint_dict, model_from_config

    torch.manual_seed(seed)
    model = model_from_config(ModelConfig(size=4, channels=8, blocks=1))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint_dict(model), path)


def test_eval_only_appends_one_row_per_variant(tmp_path: Path) -> None:
    ablate = _load_script()
    from takzero.pipeline.checkpoints import atomic_torch_save

    ref = tmp_path / "ref.pt"
    _tiny_model(ref, 0)
    table = tmp_path / "ablations.md"
    table.write_text("# Ablations\n\nSome text above the table.\n")
    for name, seed in (("a", 1), ("b", 2)):
        run = tmp_path / "runs" / name
        _tiny_model(run / "best.pt", seed)
        atomic_torch_save({"step": 7 * seed, "run": {"positions": 100 * seed, "games": seed}},
                          run / "ckpt_000000007.pt")  # fmt: skip
        code = ablate.main([
            "--name", name, "--eval-only", "--config", "smoke", "--reference", str(ref),
            "--pairs", "1", "--simulations", "2", "--ply-limit", "12", "--root", str(tmp_path / "runs"),
            "--table", str(table), "--", "mcts.simulations=4",
        ])  # fmt: skip
        assert code == 0
        result = json.loads((run / "ablation.json").read_text())
        ev = result["evaluation"]
        assert ev["games"] == 2 and ev["wins"] + ev["draws"] + ev["losses"] == 2
        assert result["counters"] == {"positions": 100 * seed, "games": seed, "steps": 7 * seed}
        assert result["overrides"] == ["mcts.simulations=4"]
    text = table.read_text()
    assert text.startswith("# Ablations\n\nSome text above the table.\n")
    assert text.count("| variant | overrides |") == 1  # one header, however many rows
    rows = [line for line in text.splitlines() if line.startswith("| a ") or line.startswith("| b ")]
    assert len(rows) == 2
    assert "`mcts.simulations=4`" in rows[0] and "| 100 | 7 |" in rows[0] and "| 200 | 14 |" in rows[1]
    assert "python scripts/ablate.py --name a --config smoke" in rows[0]


def test_missing_best_model_and_bad_arguments(tmp_path: Path) -> None:
    ablate = _load_script()
    ref = tmp_path / "ref.pt"
    _tiny_model(ref, 0)
    assert ablate.main(["--name", "none", "--eval-only", "--reference", str(ref), "--root", str(tmp_path)]) == 1
    with pytest.raises(SystemExit):
        ablate.main(["--name", "x", "--minutes", "0", "--reference", str(ref)])
    with pytest.raises(SystemExit):
        ablate.main(["--name", "x", "--reference", str(tmp_path / "missing.pt")])
    with pytest.raises(SystemExit):
        ablate.main(["--name", "x", "--threads", "0", "--reference", str(ref)])
