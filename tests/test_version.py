"""takzero.io.version: the program's version names the code that runs, and the TEI engine's
``id name`` names its program and its network."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from takzero.io.version import PACKAGE_ROOT, file_sha256, program_version, source_digest
from takzero.protocols.tei.engine import TEIEngine


def test_the_source_digest_changes_with_any_source_file_and_only_with_them(tmp_path: Path) -> None:
    a = tmp_path / "a" / "takzero"
    (a / "sub").mkdir(parents=True)
    (a / "__init__.py").write_text("x = 1\n")
    (a / "sub" / "mod.py").write_text("y = 2\n")
    b = tmp_path / "b" / "takzero"
    shutil.copytree(a, b)
    assert source_digest(a) == source_digest(b)
    (b / "__pycache__").mkdir()
    (b / "__pycache__" / "mod.py").write_text("cached\n")
    (b / "notes.txt").write_text("not code\n")
    assert source_digest(a) == source_digest(b)  # caches and non-source files do not count
    (b / "sub" / "mod.py").write_text("y = 3\n")  # one edit of one module
    assert source_digest(a) != source_digest(b)
    shutil.copytree(a, tmp_path / "c" / "takzero")
    (tmp_path / "c" / "takzero" / "sub" / "mod.py").rename(tmp_path / "c" / "takzero" / "sub" / "mod2.py")
    assert source_digest(a) != source_digest(tmp_path / "c" / "takzero")  # a renamed module


def test_program_version_is_the_version_and_this_checkouts_digest() -> None:
    version = program_version()
    assert re.fullmatch(r"[0-9][0-9A-Za-z.]*\+src\.[0-9a-f]{8}", version), version
    assert version.endswith(source_digest(PACKAGE_ROOT)[:8])


def test_the_engine_names_its_program_player_and_network(tmp_path: Path, tiny_tei_model) -> None:
    model = tiny_tei_model(tmp_path)
    baseline = TEIEngine(out=lambda line: None, player="random")
    assert baseline.id_name() == f"takzero {program_version()} random"
    net = TEIEngine(out=lambda line: None, model=str(model))
    name = net.id_name()
    assert name.startswith(f"takzero {program_version()} ")
    assert name.endswith(f" model {file_sha256(model)[:8]} {net.backend}")
    lines: list[str] = []
    TEIEngine(out=lines.append, model=str(model)).handle("tei")
    assert lines[0] == f"id name {name}"


def _other_model(path: Path) -> Path:
    """A second tiny 4x4 network (other weights, the same run name as ``tiny_tei_model``'s)."""
    import torch

    from takzero.nn.model import ModelConfig, TakNet, checkpoint_dict
    from takzero.pipeline.export import export_checkpoint

    torch.manual_seed(1)
    ckpt = checkpoint_dict(TakNet(ModelConfig(size=4, channels=8, blocks=1)), generation=3, run_name="tiny",
                           half_komi=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    export_checkpoint(ckpt, path, warn=lambda _m: None)
    return path


def test_the_id_name_names_the_network_loaded_not_what_its_path_holds_later(tmp_path: Path, tiny_tei_model) -> None:
    """The network's digest is the file's as it was loaded: a file rewritten since (``best.pt`` at a
    promotion) or removed does not change the name, for ``--model`` and for ``setoption Model``."""
    model = tiny_tei_model(tmp_path)
    loaded = file_sha256(model)[:8]
    other = _other_model(tmp_path / "other" / "model.pt")
    engine = TEIEngine(out=lambda line: None, model=str(model))
    shutil.copyfile(other, model)  # the path now holds another network
    assert f" model {loaded} " in engine.id_name()
    model.unlink()  # and then none
    assert f" model {loaded} " in engine.id_name()
    engine.handle(f"setoption name Model value {other}")
    assert f" model {file_sha256(other)[:8]} " in engine.id_name()
    engine.handle("setoption name Model value <empty>")
    assert " model " not in engine.id_name()


def test_model_players_of_different_networks_announce_different_names(tmp_path: Path, tiny_tei_model) -> None:
    """A ``model:PATH`` player names its file's digest as ``--model`` does: two networks of the same
    run (the player is named after the run) are not announced as one."""
    a = tiny_tei_model(tmp_path / "a")
    b = _other_model(tmp_path / "b" / "model.pt")
    name_a = TEIEngine(out=lambda line: None, player=f"model:{a}:4").id_name()
    name_b = TEIEngine(out=lambda line: None, player=f"model:{b}:4").id_name()
    assert name_a != name_b
    assert name_a.endswith(f" model {file_sha256(a)[:8]} auto")
