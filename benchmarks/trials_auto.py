"""What `--trials auto` costs and saves against a fixed `--trials 5`, for the same decisions.

The quick suite's micro tests at 1..max cores, run twice in one store: `--trials 5` and `--trials auto`
(3 trials, then rounds until each point's 95% interval is ±2%, at most 10). Printed: each run's
trials and wall time, and for each test and variant the decision both runs make of it: does its
per-core throughput at max cores differ from one core's (Welch's t-test, p < 0.05), and by how much.
Run order alternates (fixed first, then auto first) over ROUNDS pairs so a drift falls on both.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mosbench.analysis.cells import counted_by_point  # noqa: E402
from mosbench.analysis.decide import State, decide  # noqa: E402
from mosbench.store.db import Store  # noqa: E402

TESTS = os.environ.get("TESTS", "getppid1,page_fault1,mmap1,open1,context_switch1,dup1").split(",")
ROUNDS = int(os.environ.get("ROUNDS", "1"))
WINDOW = ["--warmup", "0.5", "--duration", "1.5", "--interval", "0"]


def measure(store: Path, trials: str) -> tuple[int, float]:
    argv = [sys.executable, "-m", "mosbench", "run", *(f"micro/{t}" for t in TESTS), "--cores", "1..max",
            "--trials", trials, *WINDOW, "--label", f"trials {trials}", "--store", str(store)]
    start = time.monotonic()
    subprocess.run(argv, cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
    return Store(str(store)).run("latest")["id"], time.monotonic() - start


def decisions(db: Store, run_id: int) -> dict[tuple[str, str], tuple[str, float | None, int]]:
    """(test, variant) → (differ/no difference, max-cores/1-core ratio, trials at max cores)."""
    by_point = counted_by_point(db.points(run_id, with_samples=False))
    out = {}
    for key, values in by_point.items():
        if key.cores == 1:
            continue
        d = decide(key, by_point.get(dataclasses.replace(key, cores=1), []), values, 0.0)
        out[(key.test, key.variant)] = ("differ" if d.state == State.DIFFER else "no difference", d.ratio, len(values))
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "auto.sqlite"
        kinds = ("5", "auto")
        runs: dict[str, list[tuple[int, float]]] = {k: [] for k in kinds}
        for r in range(ROUNDS):
            for kind in (kinds if r % 2 == 0 else kinds[::-1]):
                runs[kind].append(measure(store, kind))
                print(f"round {r + 1}/{ROUNDS}: --trials {kind} took {runs[kind][-1][1] / 60:.1f} min", flush=True)
        db = Store(str(store))
        for kind in kinds:
            points = [p for run_id, _ in runs[kind] for p in db.points(run_id, with_samples=False)]
            cells = {(p["test"], p["variant"], p["cores"]) for p in points}
            wall = sum(s for _, s in runs[kind])
            print(f"--trials {kind}: {len(points)} trials over {len(cells)} points "
                  f"({len(points) / len(cells):.1f} a point), {wall / 60:.1f} min")
        fixed, auto = decisions(db, runs["5"][-1][0]), decisions(db, runs["auto"][-1][0])
        agree = 0
        for key in sorted(fixed):
            f, a = fixed[key], auto.get(key, ("missing", None, 0))
            agree += f[0] == a[0]
            print(f"{key[0]:16s} {key[1]:8s} fixed: {f[0]:13s} {f[1] or 0:.3f}× ({f[2]} trials)   "
                  f"auto: {a[0]:13s} {a[1] or 0:.3f}× ({a[2]} trials)")
        print(f"SUMMARY same_decisions {agree}/{len(fixed)} rounds {ROUNDS} cores {os.cpu_count()}")


if __name__ == "__main__":
    main()
