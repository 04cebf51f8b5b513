"""The package's rooms depend downward only, and no module imports itself back through others.

Reads every module's imports with ``ast`` (imports inside functions included: a delayed import
hides a cycle from Python but not from this test) and checks:

* the floors: ``numba_cache`` (the cache guard) and ``game`` import nothing else of takzero;
  ``io`` (files, links, pictures) only ``game``, and ``nn`` and ``search`` do not import it; ``nn``
  only ``game``; ``search`` only ``game`` and ``nn``; ``players``, ``matches``, ``protocols`` and
  ``pipeline`` only the floors below them (and ``config``), never a command-line module;
  ``config`` nothing above ``players``;
* no import cycle between modules (imports under ``if TYPE_CHECKING:``, for annotations only,
  never run and are left out of this check; the floors count them).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "takzero"

#: Command-line modules (and a room's ``__main__``): the top floor; nothing below imports them.
CLI_MODULES = {
    "train", "play", "tei", "tei_websocket", "match", "evaluate", "export", "playtak", "game.__main__",
}

#: Which rooms each room may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "numba_cache": set(),  # run by takzero/__init__.py before anything else: imports nothing
    "game": set(),
    "nn": {"game"},
    "search": {"game", "nn"},
    "io": {"game"},
    "players": {"game", "nn", "search", "io"},
    "config": {"game", "nn", "search", "players", "io"},
    "matches": {"game", "nn", "search", "players", "io"},
    "protocols": {"game", "nn", "search", "players", "matches", "io"},
    "pipeline": {"game", "nn", "search", "players", "matches", "protocols", "config", "io"},
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _room(module: str) -> str:
    """``takzero.search.mcts`` -> ``search``; ``takzero.train`` -> ``train``; a room's
    ``__main__`` (``python -m takzero.game``) is a command line: ``takzero.game.__main__`` ->
    ``game.__main__``, on the top floor with the other command-line modules."""
    parts = module.split(".")
    if len(parts) > 2 and parts[-1] == "__main__":
        return f"{parts[1]}.__main__"
    return parts[1] if len(parts) > 1 else ""


def _type_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks (imports for annotations only,
    which never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
            (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
            or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")
        ):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _imports(path: Path, run_only: bool = False) -> set[str]:
    """The takzero modules ``path`` imports (``from takzero.x import y`` counts as ``takzero.x``
    and, when ``takzero.x.y`` is a module, as that too); with ``run_only``, without those under
    ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _type_only(tree) if run_only else set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("takzero"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith("takzero"):
                continue
            out.add(node.module)
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if _exists(sub):
                    out.add(sub)
    return out


def _exists(module: str) -> bool:
    base = PACKAGE.parent.joinpath(*module.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


def _graph(run_only: bool = False) -> dict[str, set[str]]:
    graph = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        graph[_module_name(path)] = {m for m in _imports(path, run_only) if _exists(m)}
    return graph


#: Every import (the floors are checked on these, type-only ones included) ...
GRAPH = _graph()
#: ... and those that run (cycles are checked on these: a module may name its importer's types
#: under ``if TYPE_CHECKING:``, as ``nn/trunks.py`` and ``nn/heads.py`` name ``ModelConfig``).
RUN_GRAPH = _graph(run_only=True)


def test_graph_is_read() -> None:
    # The test sees the package: the rooms and the command-line modules are all there.
    rooms = {_room(m) for m in GRAPH}
    assert {"game", "io", "nn", "search", "players", "matches", "protocols", "pipeline"} <= rooms
    assert CLI_MODULES <= rooms
    assert any(GRAPH[m] for m in GRAPH)


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _room(m) in ALLOWED))
def test_imports_go_downward(module: str) -> None:
    room = _room(module)
    bad = sorted(m for m in GRAPH[module] if _room(m) not in ALLOWED[room] | {room, ""})
    assert not bad, f"{module} ({room}) imports {bad}; {room} may import only {sorted(ALLOWED[room])}"


def test_no_import_cycle() -> None:
    # Depth-first search over the module graph; a back edge is a cycle.
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(RUN_GRAPH.get(m, ())):
            if n == m or n == "takzero":
                continue
            # A package's __init__ importing its own submodules is not a cycle through the room.
            if m.startswith(n + ".") or n.startswith(m + "."):
                continue
            if state.get(n) == 1:
                cycles.append(path[path.index(n):] + [n])
            elif n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in sorted(RUN_GRAPH):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_check_catches_an_upward_import(tmp_path: Path) -> None:
    # The reader sees an import inside a function (the kind that hid the train <-> selfplay cycle).
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from takzero.train import main\n    return main\n")
    assert "takzero.train" in _imports(src)


def test_type_only_imports_count_for_the_floors_not_for_cycles(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from takzero.train import main\n"
                   "import takzero.game\n")
    assert {"takzero.train", "takzero.game"} <= _imports(src)
    assert "takzero.train" not in _imports(src, run_only=True) and "takzero.game" in _imports(src, run_only=True)
