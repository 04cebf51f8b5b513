"""scripts/plot_run.py: plots from a run's TensorBoard logs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_script(name: str = "plot_run"):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plot_run_writes_both_figures(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "myrun"
    writer = SummaryWriter(str(run / "tb"))
    for step in range(0, 100, 10):
        writer.add_scalar("loss/total", 3.0 - step / 100, step, walltime=1000.0 + step)
        writer.add_scalar("loss/policy", 2.5 - step / 100, step, walltime=1000.0 + step)
    for k, score in enumerate((0.25, 0.5, 1.0)):
        writer.add_scalar("score/vs_uct", score, 30 * k, walltime=1060.0 + 60 * k)
        writer.add_scalar("elo/vs_uct", [-190.8, 0.0, 1000.0][k], 30 * k, walltime=1060.0 + 60 * k)
    writer.close()
    plot_run = _load_script()
    assert plot_run.main([str(run), "--out", str(tmp_path / "docs")]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert [Path(x["file"]).name for x in lines] == ["myrun_elo.png", "myrun_loss.png"]
    assert lines[0]["score_vs_uct"] == 1.0 and lines[0]["elo_vs_uct"] == 1000.0
    assert lines[1]["loss_total"] < 3.0  # smoothed, after the loss fell
    for x in lines:
        assert Path(x["file"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Without --out the figures go into the run folder, never the repository's docs/.
    assert plot_run.main([str(run)]) == 0
    assert sorted(p.name for p in (run / "plots").iterdir()) == ["myrun_elo.png", "myrun_loss.png"]


def test_plot_run_needs_logs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    plot_run = _load_script()
    with pytest.raises(SystemExit) as exc:
        plot_run.main([str(tmp_path)])
    assert exc.value.code == 2 and "no TensorBoard event files" in capsys.readouterr().err


def test_smooth_is_debiased() -> None:
    import numpy as np

    plot_run = _load_script()
    assert np.allclose(plot_run.smooth(np.full(5, 2.0)), 2.0)


def test_plot_run_draws_losses_before_any_evaluation(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "early" / "tb"))
    for step in range(3):
        writer.add_scalar("loss/total", 3.0 - step, step, walltime=100.0 + step)
    writer.close()
    plot_run = _load_script()
    assert plot_run.main([str(tmp_path / "early"), "--out", str(tmp_path / "o")]) == 0
    out = capsys.readouterr()
    assert "skipped early_elo.png: no elo/vs_* scalars" in out.err
    assert json.loads(out.out)["file"].endswith("early_loss.png")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit) as exc:
        plot_run.main([str(tmp_path / "early"), "--out", str(tmp_path / "afile")])
    assert exc.value.code == 2 and "cannot use --out" in capsys.readouterr().err


def test_training_clock_removes_the_pause_between_sessions() -> None:
    import numpy as np

    plot_run = _load_script()
    # Session 1 logs every 10 s for 30 min; session 2 starts 27 min later and logs for 30 min.
    first = 1000.0 + np.arange(0, 1800.0 + 1, 10.0)
    second = first[-1] + 27 * 60 + np.arange(0, 1800.0 + 1, 10.0)
    clock = plot_run.TrainingClock(np.concatenate([second, first]), max_gap_s=120.0)
    assert clock(np.array([first[0]]))[0] == 0.0
    assert np.isclose(clock(np.array([first[-1]]))[0], 30.0)
    assert np.isclose(clock(np.array([second[0]]))[0], 30.0)  # the pause counts as nothing
    assert np.isclose(clock(np.array([second[-1]]))[0], 60.0)
    assert np.all(np.diff(clock(np.concatenate([first, second]))) >= 0)
    # Gaps up to max_gap_s are training time (a slow logging interval, not a pause).
    slow = plot_run.TrainingClock(np.array([0.0, 100.0, 200.0]), max_gap_s=120.0)
    assert np.allclose(slow(np.array([0.0, 100.0, 200.0])), [0.0, 100 / 60, 200 / 60])


def test_plot_run_rejects_a_bad_max_gap(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "r" / "tb"))
    writer.add_scalar("loss/total", 1.0, 0, walltime=1000.0)
    writer.close()
    plot_run = _load_script()
    with pytest.raises(SystemExit) as exc:
        plot_run.main([str(tmp_path / "r"), "--max-gap", "0"])
    assert exc.value.code == 2 and "--max-gap must be > 0" in capsys.readouterr().err


def test_plot_run_names_a_missing_or_wrong_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    plot_run = _load_script()
    (tmp_path / "afile").write_text("x")
    for arg, says in ((tmp_path / "missing" / "folder", "run folder not found"), (tmp_path / "afile", "not a folder")):
        with pytest.raises(SystemExit) as exc:
            plot_run.main([str(arg)])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and says in err and "no TensorBoard event files" not in err


def test_plot_run_reads_only_regular_files_as_event_files(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A folder named like an event file is not one: alone it means no logs; beside a real
    event file it is ignored."""
    from torch.utils.tensorboard import SummaryWriter

    plot_run = _load_script()
    tb = tmp_path / "r" / "tb"
    (tb / "events.out.tfevents.1.d").mkdir(parents=True)
    with pytest.raises(SystemExit) as exc:
        plot_run.main([str(tmp_path / "r")])
    assert exc.value.code == 2 and "no TensorBoard event files" in capsys.readouterr().err
    writer = SummaryWriter(str(tb))
    for step in range(3):
        writer.add_scalar("loss/total", 3.0 - step, step, walltime=100.0 + step)
    writer.close()
    assert plot_run.main([str(tmp_path / "r")]) == 0
    assert json.loads(capsys.readouterr().out)["file"].endswith("r_loss.png")


def test_plot_ablations_overlays_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """One line per run in each panel; the JSON gives each run's last values; a run that never
    logged a tag is left out of that panel; bad arguments are refused naming them."""
    from torch.utils.tensorboard import SummaryWriter

    for name, rate in (("baseline", 100), ("ownership", 150)):
        writer = SummaryWriter(str(tmp_path / name / "tb"))
        for step in range(0, 100, 10):
            writer.add_scalar("selfplay/positions_total", rate * step, step, walltime=1000.0 + step)
            writer.add_scalar("loss/value", 1.0 - step / 200, step, walltime=1000.0 + step)
            if name == "ownership":
                writer.add_scalar("loss/policy", 2.0, step, walltime=1000.0 + step)
        writer.close()
    plot = _load_script("plot_ablations")
    out = tmp_path / "figs" / "abl.png"
    assert plot.main([str(tmp_path / "baseline"), str(tmp_path / "ownership"), "--out", str(out)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert [x["run"] for x in lines] == ["baseline", "ownership"]
    assert lines[0]["selfplay_positions_total"] == 9000 and lines[1]["selfplay_positions_total"] == 13500
    assert "loss_policy" not in lines[0] and lines[1]["loss_policy"] == pytest.approx(2.0)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for bad, message in (
        ([str(tmp_path / "nosuch")], "no TensorBoard event files"),
        ([str(tmp_path / "baseline"), "--out", str(tmp_path / "x.txt")], "--out must be a .png file"),
        ([str(tmp_path / "baseline"), str(tmp_path / "baseline")], "two runs are named baseline"),
        ([str(tmp_path / "baseline"), "--max-gap", "0"], "--max-gap must be > 0"),
    ):
        with pytest.raises(SystemExit):
            plot.main(bad)
        assert message in capsys.readouterr().err


def test_plot_ablations_odd_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NaN loss does not blank the smoothed curve and prints as null; '.' is named after its
    folder; an empty event file or a run without any panel's tag is refused before any folder
    is made."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "nanrun" / "tb"))
    for step, v in enumerate((1.0, float("nan"), 0.8, 0.7)):
        writer.add_scalar("loss/value", v, step, walltime=1000.0 + step)
    writer.add_scalar("elo/vs_uct", float("inf"), 3, walltime=1003.0)
    writer.close()
    writer = SummaryWriter(str(tmp_path / "other" / "tb"))
    writer.add_scalar("train/lr", 0.1, 0, walltime=1000.0)
    writer.close()
    (tmp_path / "zero" / "tb").mkdir(parents=True)
    (tmp_path / "zero" / "tb" / "events.out.tfevents.0.x").write_bytes(b"")
    plot = _load_script("plot_ablations")
    monkeypatch.chdir(tmp_path / "nanrun")
    assert plot.main([".", "--out", str(tmp_path / "a.png")]) == 0
    (line,) = [json.loads(x) for x in capsys.readouterr().out.strip().splitlines()]
    assert line["run"] == "nanrun" and line["elo_vs_uct"] is None
    assert 0.7 < line["loss_value"] < 1.0  # smoothed over the finite values only
    for bad, message in (([str(tmp_path / "zero")], "no scalars"),
                         ([str(tmp_path / "other")], "none of the runs logged")):
        with pytest.raises(SystemExit):
            plot.main([*bad, "--out", str(tmp_path / "made" / "x.png")])
        assert message in capsys.readouterr().err
        assert not (tmp_path / "made").exists()


def test_smooth_skips_non_finite_values() -> None:
    import math

    out = _load_script().smooth(np.array([1.0, math.nan, 1.0, math.inf]))
    assert out[0] == 1.0 and math.isnan(out[1]) and out[2] == pytest.approx(1.0) and math.isinf(out[3])


def test_a_one_point_series_sits_on_the_run_time_axis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture) -> None:
    """The first evaluation is a series of one point: the x axis runs from 0 to the run's last
    event (here 10 minutes), not over a few hundredths of a minute around the point."""
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "one"
    writer = SummaryWriter(str(run / "tb"))
    for k in range(61):  # 10 minutes of losses, every 10 s
        writer.add_scalar("loss/total", 3.0, k, walltime=1000.0 + 10 * k)
    writer.add_scalar("elo/vs_uct", 40.0, 30, walltime=1000.0 + 240.0)  # one point at 4 min
    writer.add_scalar("score/vs_uct", 0.56, 30, walltime=1000.0 + 240.0)
    writer.close()
    plot_run = _load_script()
    limits = {}

    def keep(fig, path: Path) -> None:
        limits[path.name] = [ax.get_xlim() for ax in fig.axes]

    monkeypatch.setattr(plot_run, "save_figure", keep)
    assert plot_run.main([str(run), "--out", str(tmp_path / "o")]) == 0
    for name in ("one_elo.png", "one_loss.png"):
        for lo, hi in limits[name]:
            assert lo == 0.0 and 10.0 <= hi <= 10.5, (name, lo, hi)
    capsys.readouterr()
