"""`mosbench history`'s cost on a short and a long history: 20 and 500 nightly runs × 200 points (issue 39:
under 10 s on 500; issue 48: under 1 s on a small store, most of which is start-up).

Each store is built in a temporary directory through mosbench/testing/history_stores.py (50 micro tests × 4 core
counts, one trial each, so 200 points a run and 100,000 in all at 500 runs; two changes planted, one at
the most cores and one at every core count), then `python -m mosbench history` runs as its own process
ROUNDS times, interleaved with `--json` and with `--help` (the start-up alone: Python, click and the
command's imports), and each one's wall time is taken. The table gives the median over the rounds and the
round count, and the changes it found.

RUNS=100 ROUNDS=1 to try it quickly (RUNS takes a comma-separated list; default 20,500).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mosbench.store.db import Store  # noqa: E402
from mosbench.testing.history_stores import Planted, fill  # noqa: E402

RUNS = [int(n) for n in os.environ.get("RUNS", "20,500").split(",")]
ROUNDS = int(os.environ.get("ROUNDS", "3"))
TARGET_S = 10.0
SMALL_TARGET_S = 1.0


def timed(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mosbench", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "80"})
    return time.monotonic() - start, done


def measure(runs: int, tmp: str) -> None:
    path = Path(tmp) / f"history{runs}.sqlite"
    start = time.monotonic()
    fill(Store(str(path)), runs, [Planted(runs // 2, 0.8, cores=(8,), tests=("t3",)),
                                  Planted(runs * 3 // 4, 1.25, tests=("t7",))], seed=1, tests=50, trials=1)
    print(f"store: {runs} runs × 200 points built in {time.monotonic() - start:.1f} s")
    times: dict[str, list[float]] = {"history": [], "history --json": [], "history --help": []}
    last = None
    for _ in range(ROUNDS):
        for name in times:
            took, done = timed([*name.split(), "--store", str(path)])
            if done.returncode != 0:
                sys.exit(f"{name} failed: {done.stderr.strip()}")
            times[name].append(took)
            if name.endswith("--json"):
                last = json.loads(done.stdout)
    for name, samples in times.items():
        median = statistics.median(samples)
        target = TARGET_S if runs >= 100 else SMALL_TARGET_S
        print(f"{runs:4} runs  {name:16} median {median:5.2f} s over {len(samples)} rounds "
              f"({'within' if median < target else 'OVER'} the {target:g} s target)")
    assert last is not None
    for change in last["changes"]:
        print(f"found: {change['workload']}/{change['test']} at run #{change['after_run']} ({change['kind']})")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for runs in RUNS:
            measure(runs, tmp)


if __name__ == "__main__":
    main()
