"""How fast the TEI engine answers ``stop`` and ``isready`` during a search, per player: one JSON
line per player with the latencies (ms) over ``--trials`` searches.

Each trial: ``position`` (a few plies into a game), ``go nodes 100000000`` (a search that would
run for hours), a wait of ``--wait`` seconds, ``isready`` (timed to ``readyok``), another wait,
then ``stop`` (timed to ``bestmove``). The engine runs in-process on a thread, fed through a pipe,
as ``python -m takzero.tei`` reads stdin.

    python scripts/bench_tei_stop.py                                  # UCT baseline
    python scripts/bench_tei_stop.py --model checkpoints/pretrained/5x5.pt --trials 5
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

from takzero.protocols.tei.engine import TEIEngine


class PipedEngine:
    """An engine on a thread reading a pipe; output lines collected with their times."""

    def __init__(self, **kwargs) -> None:
        self.lines: list[tuple[float, str]] = []
        self.engine = TEIEngine(out=lambda s: self.lines.append((time.perf_counter(), s)), **kwargs)
        r, w = os.pipe()
        self.reader, self.writer = os.fdopen(r, "r"), os.fdopen(w, "w")
        self.thread = threading.Thread(target=self.engine.run, args=(self.reader,), daemon=True)
        self.thread.start()

    def send(self, text: str) -> float:
        t = time.perf_counter()
        self.writer.write(text + "\n")
        self.writer.flush()
        return t

    def wait_for(self, prefix: str, after: float, timeout: float = 600.0) -> float:
        end = time.perf_counter() + timeout
        while time.perf_counter() < end:
            for t, line in list(self.lines):
                if t >= after and line.startswith(prefix):
                    return t
            time.sleep(0.0005)
        raise TimeoutError(f"no {prefix!r} within {timeout} s")

    def close(self) -> None:
        self.send("quit")
        self.thread.join(30)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", help="exported model (default: the UCT baseline, --player)")
    ap.add_argument("--player", default="uct:200")
    ap.add_argument("--size", type=int, default=5)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--wait", type=float, default=0.5, help="seconds of search before each command")
    args = ap.parse_args()
    if args.model:
        import torch

        torch.set_num_threads(1)
    eng = PipedEngine(model=args.model, player=args.player)
    t = eng.send(f"teinewgame {args.size}")
    eng.send("isready")
    eng.wait_for("readyok", t)
    ready_ms, stop_ms = [], []
    for i in range(args.trials):
        moves = ["a1", "e5", "c3", "b2", "d4"][: i % 5]
        eng.send(f"position startpos moves {' '.join(moves)}".rstrip())
        eng.send("go nodes 100000000")
        time.sleep(args.wait)
        t = eng.send("isready")
        ready_ms.append((eng.wait_for("readyok", t) - t) * 1000)
        time.sleep(args.wait)
        t = eng.send("stop")
        stop_ms.append((eng.wait_for("bestmove", t) - t) * 1000)
    eng.close()
    print(
        json.dumps(
            {
                "bench": "tei_stop",
                "player": args.model or args.player,
                "size": args.size,
                "trials": args.trials,
                "isready_ms_max": round(max(ready_ms), 1),
                "isready_ms_median": round(sorted(ready_ms)[len(ready_ms) // 2], 1),
                "stop_ms_max": round(max(stop_ms), 1),
                "stop_ms_median": round(sorted(stop_ms)[len(stop_ms) // 2], 1),
            }
        )
    )


if __name__ == "__main__":
    main()
