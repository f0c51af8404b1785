"""What `--profile` costs throughput, side by side.

The same points with and without `--profile` (perf record -g on the point's CPUs over the window),
interleaved round by round so drift hits both alike: a kernel-heavy test (`micro/open1`), a
user-space one (`micro/getppid1`, a call a few hundred nanoseconds long, so a sample's interrupt is
a large share of it) and a server (`memcached`, where the client shares the CPUs on a small machine),
each at max cores. Prints each test's median per-core throughput both ways, the median ratio and the
number of rounds; the goal is profiled/plain ≥ 0.95 at the default sampling rate.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mosbench.store.db import Store  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "5"))
# (selection, variant): one run each, so each names its own workload's variant.
TESTS = [tuple(t.split(":")) for t in os.environ.get(
    "TESTS", "micro/getppid1:procs,micro/open1:procs,memcached:per-core").split(",")]
WARMUP, DURATION = 1, 3


def run(store: Path, selection: str, variant: str, profiled: bool) -> float | None:
    """Per-core throughput of one point, or None where it failed."""
    argv = [sys.executable, "-m", "mosbench", "run", selection, "--variant", variant, "--cores", "max",
            "--trials", "1", "--warmup", str(WARMUP), "--duration", str(DURATION), "--store", str(store)]
    subprocess.run(argv + (["--profile"] if profiled else []), cwd=ROOT, check=False, capture_output=True)
    db = Store(str(store), create=False)
    ok = [p for p in db.points(db.run("latest")["id"], with_samples=False) if p["status"] == "ok"]
    return ok[0]["throughput"] / ok[0]["cores"] if ok else None


def main() -> None:
    results: dict[tuple[str, bool], list[float]] = {}
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "overhead.sqlite"
        for r in range(ROUNDS):
            for selection, variant in TESTS:
                for profiled in ((True, False) if r % 2 == 0 else (False, True)):
                    if (value := run(store, selection, variant, profiled)) is not None:
                        results.setdefault((f"{selection} {variant}", profiled), []).append(value)
            print(f"round {r + 1}/{ROUNDS} done", flush=True)
    for name in sorted({n for n, _ in results}):
        on, off = results.get((name, True), []), results.get((name, False), [])
        if not on or not off:
            print(f"{name}: measured one way only")
            continue
        ratio = statistics.median(on) / statistics.median(off)
        print(f"{name:28s} profiled median {statistics.median(on):.4g}, plain median {statistics.median(off):.4g} "
              f"/s/core over {len(on)} rounds: profiled/plain {ratio:.3f}")
        print(f"SUMMARY {name.replace(' ', ':')} profiled_over_plain {ratio:.4f} rounds {len(on)} "
              f"cores {os.cpu_count()}")


if __name__ == "__main__":
    main()
