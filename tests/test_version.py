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
