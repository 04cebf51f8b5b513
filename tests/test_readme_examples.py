"""README's match, evaluate, play and TEI examples run as written, for both shipped sizes, each
shortened by appending fewer games and simulations (and UCT baselines searching 20 simulations
instead of 1000): ``model.pt`` stands for each shipped network (5x5 komi 0, 6x6 komi 2), and a
line naming the shipped 5x5 network runs with the 6x6 one too (``5x5_v2.pt``, its yardstick, as
``6x6_v1.pt``). Each plays at the model's own board size and komi, with no komi warning.

The commands are read from README.md, so an example that stops working, or a new one, is found
here. One command line per test, each a process (slow)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRETRAINED = ROOT / "checkpoints" / "pretrained"

#: The shipped networks: size and komi (points).
SHIPPED = {"5x5": (5, 0.0), "6x6": (6, 2.0)}

#: What is appended to each tool's example to make it short (argparse keeps the last value).
SHORTER = {
    "match": ["--games", "2", "--nodes", "16"],
    "evaluate": ["--pairs", "1", "--simulations", "16", "--tinue-nodes", "0"],
    "play": ["--simulations", "8"],
    "tei": ["--nodes", "8"],
}

#: What each tool reads on stdin (the terminal game and the TEI engine are interactive).
STDIN = {"play": "quit\n", "tei": "tei\nisready\nposition startpos\ngo nodes 8\nquit\n"}


def readme_commands() -> list[str]:
    """The ``python -m takzero.{match,evaluate,play,tei}`` lines of README.md's bash blocks, with
    their continuation lines joined and their comments dropped (``--websocket``, a server, is
    left out)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            argv = shlex.split(line, comments=True)
            if argv[:2] == ["python", "-m"] and argv[2] in ("takzero.match", "takzero.evaluate",
                                                           "takzero.play", "takzero.tei"):
                if "--websocket" not in argv:
                    commands.append(shlex.join(argv))
    return commands


def cases() -> list[tuple[str, str, str]]:
    """(tool, command, size) for each example and each shipped size it stands for."""
    out = []
    for command in readme_commands():
        tool = command.split()[2].split(".")[1]
        if "model.pt" in command:
            for size in SHIPPED:
                out.append((tool, command.replace("model.pt", f"checkpoints/pretrained/{size}.pt"), size))
        elif "checkpoints/pretrained/5x5.pt" in command:
            out.append((tool, command, "5x5"))
            six = command.replace("pretrained/5x5_v2.pt", "pretrained/6x6_v1.pt").replace("pretrained/5x5.pt",
                                                                                            "pretrained/6x6.pt")
            out.append((tool, six, "6x6"))
        else:  # the play examples without a model: the shipped network of the size they ask for
            size = re.search(r"--size (\d)", command)
            out.append((tool, command, f"{size.group(1)}x{size.group(1)}" if size else "6x6"))
    return out


def test_readme_has_the_examples() -> None:
    tools = {tool for tool, _, _ in cases()}
    assert tools == {"match", "evaluate", "play", "tei"}, tools
    assert len(cases()) >= 12


@pytest.mark.slow  # a process per example, each loads a network and plays
@pytest.mark.timeout(600)
@pytest.mark.parametrize(("tool", "command", "size"), cases(), ids=[f"{s}: {c[18:70]}" for _, c, s in cases()])
def test_readme_example_runs_as_written(tmp_path: Path, tool: str, command: str, size: str) -> None:
    n, komi = SHIPPED[size]
    argv = shlex.split(command)
    # shorter: fewer games and simulations; the UCT baselines at 20 simulations
    argv = [a.replace("uct:1000", "uct:20").replace("nodes=1000", "nodes=20") for a in argv]
    argv += SHORTER[tool]
    if tool == "evaluate" and "--baselines" not in argv:
        argv += ["--baselines", "random", "greedy", "uct:20"]  # the default list, shorter
    # the model paths are the repository's: run from a scratch folder with them made absolute
    argv = [a.replace("checkpoints/pretrained/", f"{PRETRAINED}/") for a in argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "default"}
    proc = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, env=env, input=STDIN.get(tool, ""),
                          capture_output=True, text=True, timeout=540)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said[-3000:]
    assert "Traceback" not in said, said[-3000:]
    assert "warning: komi" not in said and "KomiMismatchWarning" not in said, said[-3000:]  # its own komi
    if tool == "match":
        ptn = (tmp_path / "match" / "games.ptn").read_text()
        assert f'[Size "{n}"]' in ptn and f'[Komi "{komi:g}"]' in ptn, ptn[:400]
    elif tool == "evaluate":
        lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
        assert lines and all(r["size"] == n and r["half_komi"] == int(2 * komi) for r in lines), lines
    elif tool == "play":
        assert f"{n}x{n}, komi {komi:g}" in proc.stdout, proc.stdout[-2000:]
    else:
        assert "bestmove" in proc.stdout and "warning" not in proc.stderr.lower(), said[-2000:]
