"""What a long history adds to `mosbench show` and `mosbench report` (issue 46 §3: within 2× of their time on
a store of one run).

Both commands show the run's machine's history up to it (PELT and the merge over every series of the run's
tests, the History section's tables, and in the report its figures). Two stores are built in a temporary
directory through mosbench/testing/history_stores.py, the same run in both (50 micro tests × 4 core counts,
one trial each: 200 points): one holds that run alone, which has no history; the other 500 nightly runs of it
(100,000 points, two changes planted). Then `python -m mosbench show` and `report` run on the newest run of
each as their own processes, one store then the other within each round, ROUNDS times; the table gives each
one's median wall time over the rounds, the round count and the ratio of the medians, 500 runs over one.

ROUNDS=1 COMMANDS=show to try it quickly (a report draws about a hundred figures: a minute or more a round).
"""

from __future__ import annotations

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

RUNS = 500
ROUNDS = int(os.environ.get("ROUNDS", "3"))
COMMANDS = os.environ.get("COMMANDS", "show,report").split(",")
TARGET = 2.0


def timed(args: list[str]) -> float:
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mosbench", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "80"})
    if done.returncode != 0:
        sys.exit(f"mosbench {' '.join(args)} failed: {done.stderr.strip()}")
    return time.monotonic() - start


def build(path: Path, runs: int) -> None:
    start = time.monotonic()
    fill(Store(str(path)), runs, [Planted(runs // 2, 0.8, cores=(8,), tests=("t3",)),
                                  Planted(runs * 3 // 4, 1.25, tests=("t7",))], seed=1, tests=50, trials=1)
    print(f"store: {runs} run{'s' if runs != 1 else ''} × 200 points built in {time.monotonic() - start:.1f} s")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        stores = {1: Path(tmp) / "one.sqlite", RUNS: Path(tmp) / "long.sqlite"}
        for runs, path in stores.items():
            build(path, runs)
        times: dict[tuple[str, int], list[float]] = {(c, n): [] for c in COMMANDS for n in stores}
        for _ in range(ROUNDS):
            for command in COMMANDS:
                for runs, path in stores.items():
                    extra = ["-o", str(Path(tmp) / f"report{runs}" / "report.html")] if command == "report" else []
                    times[command, runs].append(timed([command, *extra, "--store", str(path)]))
        for command in COMMANDS:
            one, long = (statistics.median(times[command, n]) for n in stores)
            ratio = long / one
            print(f"{command:7} 1 run {one:6.2f} s, {RUNS} runs {long:6.2f} s (medians over {ROUNDS} rounds): "
                  f"{ratio:.2f}× ({'within' if ratio <= TARGET else 'OVER'} the {TARGET:g}× target)")


if __name__ == "__main__":
    main()
