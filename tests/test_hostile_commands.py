"""Commands under issue 58's hostile pass: one line instead of a traceback (Ray that cannot
start), messages that say what is true (a device is no missing file), no notes of onnxruntime on
stderr, no command writing over its own input, and a warning before ``export --convert`` runs a
file's pickle."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
import torch

from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict


def _good() -> dict:
    torch.manual_seed(0)
    return checkpoint_dict(TakNet(ModelConfig(size=4, channels=8, blocks=1)), half_komi=0)


# -- Ray -------------------------------------------------------------------------------------------


def test_ray_that_cannot_start_is_one_line_with_what_to_try(monkeypatch) -> None:
    """Under a memory limit ``ray.init`` raised a bare Exception, printed by Hydra as 'Error
    executing job' with a full traceback."""
    import ray

    from takzero.config import compose_preset, load_config
    from takzero.pipeline.placement import RayStartError, init_ray

    cfg = load_config(compose_preset("smoke"))

    def fail(*args, **kwargs):
        raise Exception("The current node timed out during startup.\nThis could happen because ...")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", fail)
    with pytest.raises(RayStartError) as err:
        init_ray(cfg)
    text = str(err.value)
    assert "\n" not in text and text.startswith("Ray could not start (The current node timed out")
    assert "ulimit -v" in text and "ray stop" in text


# -- messages --------------------------------------------------------------------------------------


def test_a_model_spec_naming_a_device_or_folder_says_so(tmp_path: Path) -> None:
    """``model:/dev/zero`` said 'model file not found: /dev/zero'; it exists."""
    from takzero.players.registry import check_spec

    for path in ("/dev/zero", str(tmp_path)):
        with pytest.raises(ValueError, match="not a regular file") as err:
            check_spec(f"model:{path}")
        assert "not found" not in str(err.value)
    with pytest.raises(ValueError, match="model file not found"):
        check_spec(f"model:{tmp_path / 'missing.pt'}")


def test_quantizing_leaves_no_onnxruntime_note_on_stderr(capfd) -> None:
    """onnxruntime's 'Please consider pre-processing before quantization' reached stderr (its
    quantizer logs it on the root logger); other warnings still show."""
    pytest.importorskip("onnxruntime")
    from takzero.nn.backends import quantize
    from takzero.nn.inference import Evaluator

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    for h in handlers:  # as a command line starts: no handler on the root logger
        root.removeHandler(h)
    try:
        quantize(Evaluator.from_checkpoint(_good(), device="cpu"))
        logging.warning("a warning of takzero's own")
        err = capfd.readouterr().err
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in handlers:
            root.addHandler(h)
        root.setLevel(level)
    assert "pre-processing" not in err, err
    assert "a warning of takzero's own" in err


# -- outputs that are inputs --------------------------------------------------------------------------


PTN = '[Size "4"]\n\n1. a1 d4 2. b1 c1\n'


def test_game_commands_never_write_over_their_input(tmp_path: Path, capsys) -> None:
    """``python -m takzero.game annotate F -o F`` replaced the record with its annotation."""
    from takzero.game.__main__ import main

    game = tmp_path / "g.ptn"
    game.write_text(PTN)
    link = tmp_path / "link.ptn"
    link.symlink_to(game)
    for out in (game, tmp_path / "." / "g.ptn", link):
        for argv in (["annotate", str(game), "-o", str(out)], ["show", "--ptn", str(game), "-o", str(out)]):
            assert main(argv) == 2
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "is the input file" in err, err
    assert game.read_text() == PTN
    assert main(["annotate", str(game), "-o", str(tmp_path / "out.ptn")]) == 0


def test_the_output_check_is_one_for_every_command(tmp_path: Path) -> None:
    from takzero.io.files import check_not_input

    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("x")
    os.link(a, b)
    for out in (a, b, tmp_path / "c" / ".." / "a"):
        with pytest.raises(ValueError, match="is the input file"):
            check_not_input(out, None, a)
    check_not_input(tmp_path / "new", a, None)  # no error


def test_match_refuses_an_openings_file_it_would_write_over(tmp_path: Path, capsys) -> None:
    from takzero.match import main

    out = tmp_path / "m"
    out.mkdir()
    (out / "games.ptn").write_text("a1\n")
    engine = f"{sys.executable} -m takzero.tei --model missing.pt"
    rc = main(["--engine", engine, "--engine", engine, "--openings", str(out / "games.ptn"), "--out", str(out),
               "--games", "2"])
    assert rc != 0
    assert "is the input file" in capsys.readouterr().err
    assert (out / "games.ptn").read_text() == "a1\n"


def test_convert_warns_in_one_line_before_running_a_pickle(tmp_path: Path, capsys) -> None:
    """``export --convert`` unpickles a file that is not weights-only (documented): now it says
    so first, on stderr; a weights-only file gets no warning."""
    import numpy as np

    from takzero.export import main

    odd = tmp_path / "odd.pt"
    torch.save({**_good(), "x": np.float64(1.5)}, odd)  # a numpy scalar: not weights-only
    plain = tmp_path / "plain.pt"
    torch.save(_good(), plain)
    assert main(["--convert", str(odd)]) == 0
    captured = capsys.readouterr()
    warning = [ln for ln in captured.err.splitlines() if ln.startswith("warning:")]
    assert len(warning) == 1 and f"{odd} is not weights-only" in warning[0] and "run" in warning[0]
    assert main(["--convert", str(plain)]) == 0
    assert "warning" not in capsys.readouterr().err
