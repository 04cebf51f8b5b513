"""Every training command the documentation shows composes and passes the config checks, and every
search setting can be overridden on the command line without Hydra's ``+``.

The second test exists because docs/ablations.md once gave ``mcts.gumbel=true``, which Hydra refused
("Key 'gumbel' is not in struct"): a key of :class:`takzero.search.SearchConfig` that
``configs/train.yaml`` did not list could only be added with ``+mcts.gumbel=true``."""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from takzero.config import compose_config
from takzero.search import SearchConfig

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Set by the run itself, not by the user: max_plies from selfplay.ply_limit; node_budget sized to
# the board unless given (so it must stay out of train.yaml, where it would always count as given).
NOT_IN_YAML = {"max_plies", "node_budget"}
COMMAND = re.compile(r"python -m takzero\.train\b|python scripts/ablate\.py\b")


def documented_commands() -> list[tuple[str, list[str]]]:
    """``(where, overrides)`` of every ``python -m takzero.train`` and ``python scripts/ablate.py``
    command in README.md and docs/*.md (backslash continuations joined; ablate's overrides are
    the words after ``--`` plus its ``+config=5x5_cpu``). Commands with placeholders (``<...>``,
    ``$VAR``, ``[key=value ...]``) or options other than overrides (``--help``) are left out."""
    found = []
    for path in DOCS:
        lines, start, joined = [], 0, ""
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            start = start or number
            joined += raw[:-1] + " " if raw.endswith("\\") else raw
            if not raw.endswith("\\"):
                lines.append((start, joined))
                start, joined = 0, ""
        for lineno, line in lines:
            for m in COMMAND.finditer(line):
                rest = re.split(r"`|\s#\s|\s\|\s|&&|;|\)", line[m.end():])[0]
                try:
                    words = shlex.split(rest)
                except ValueError:
                    continue
                if "ablate" in m.group(0):
                    if "--" not in words:
                        continue
                    words = ["+config=5x5_cpu", *words[words.index("--") + 1:]]
                if not words or any(w.startswith(("-", "[")) or "<" in w or "$" in w or "..." in w for w in words):
                    continue
                found.append((f"{path.relative_to(ROOT)}:{lineno}", words))
    return found


def test_every_search_setting_is_in_train_yaml() -> None:
    listed = set(OmegaConf.load(ROOT / "configs/train.yaml").mcts.keys())
    fields = {f.name for f in dataclasses.fields(SearchConfig)}
    assert listed <= fields, f"train.yaml lists unknown mcts keys: {sorted(listed - fields)}"
    missing = fields - NOT_IN_YAML - listed
    assert not missing, f"add these SearchConfig fields to configs/train.yaml's mcts: {sorted(missing)}"
    assert not listed & NOT_IN_YAML


def test_the_parser_finds_the_ablation_commands() -> None:
    commands = documented_commands()
    where = [w for w, _ in commands]
    assert any(w.startswith("docs/ablations.md") for w in where)
    assert any(w.startswith("README.md") for w in where)
    gumbel = [o for w, o in commands if w.startswith("docs/ablations.md") and "mcts.gumbel=true" in o]
    assert gumbel and all(o[0] == "+config=5x5_cpu" for o in gumbel)


@pytest.mark.parametrize(("where", "overrides"), documented_commands(), ids=lambda x: x if isinstance(x, str) else "")
def test_documented_command_composes_and_passes_the_checks(where: str, overrides: list[str]) -> None:
    compose_config(overrides, run_name="docs-check")  # the default ${now:...} needs Hydra's run-time resolver
