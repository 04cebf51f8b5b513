"""The process-wide settings of the package (module globals that a function rebinds) are all
restored after each test by conftest's ``_restore_process_settings``; a test that sets one leaves
the default for the next."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import PROCESS_SETTINGS

PACKAGE = Path(__file__).resolve().parent.parent / "takzero"


def _rebound_globals() -> dict[str, set[str]]:
    """Module name -> the names its functions declare ``global``."""
    out: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        names = {name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Global)
                 for name in node.names}
        if names:
            module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
            out[module.removesuffix(".__init__")] = names
    return out


def test_every_rebound_global_of_the_package_is_restored_after_each_test() -> None:
    found = _rebound_globals()
    assert found, "the scan found no global statement: it is broken"
    listed = {module: set(names) for module, names in PROCESS_SETTINGS.items()}
    missing = {m: sorted(n - listed.get(m, set())) for m, n in found.items() if n - listed.get(m, set())}
    assert not missing, f"add these to tests/conftest.py PROCESS_SETTINGS: {missing}"


@pytest.mark.parametrize("step", ["set", "check"])
def test_a_backend_chosen_by_one_test_is_gone_in_the_next(step: str) -> None:
    """Run in this order in one process (``-n 0``, or one xdist worker by luck): the second finds
    the default whatever the first set. Either way the fixture's effect is checked directly."""
    from takzero.players import network

    assert network._backend_value == "auto"
    network.set_play_backend("torch")
    network.set_search_threads(3)
    assert network._backend_value == "torch"
