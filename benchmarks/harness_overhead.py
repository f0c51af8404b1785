"""How much the harness's sampling costs the work it measures: getppid at max cores, side by side.

Three forms, interleaved round by round so drift hits them alike:
  sampled   mosbench run with per-second sampling (counters, /proc/stat, cgroup) as it runs by default;
  ends      mosbench run reading only the window's two ends (--interval 0);
  alone     the native driver by itself, no harness at all.
Prints each form's per-core throughput and the ratios. The target is sampled/alone >= 0.99.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mosbench.store.db import Store  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
WARMUP, DURATION = 1, 5


def harness(store: Path, interval: str) -> float:
    subprocess.run([sys.executable, "-m", "mosbench", "run", "micro/getppid1", "--cores", "max", "--variant", "procs",
                    "--trials", "1", "--warmup", str(WARMUP), "--duration", str(DURATION), "--interval", interval,
                    "--store", str(store)], cwd=ROOT, check=True, capture_output=True)
    db = Store(str(store), create=False)
    last = max(db.points(db.run("latest")["id"], with_samples=False), key=lambda p: p["id"])
    return last["throughput"] / last["cores"]


def alone() -> float:
    cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))))
    out = subprocess.run([str(ROOT / "native/build/mosbench-micro"), "--test", "getppid1", "--mode", "procs",
                          "--cpus", cpus, "--warmup", str(WARMUP), "--duration", str(DURATION)],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"ops_per_sec_per_task=(\d+)", out).group(1))


def main() -> None:
    results: dict[str, list[float]] = {"sampled": [], "ends": [], "alone": []}
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "overhead.sqlite"
        for r in range(ROUNDS):
            results["sampled"].append(harness(store, "1"))
            results["ends"].append(harness(store, "0"))
            results["alone"].append(alone())
            print(f"round {r + 1}/{ROUNDS}: " + ", ".join(f"{k} {v[-1] / 1e6:.3f}M" for k, v in results.items()),
                  flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    for k, v in results.items():
        print(f"{k:8s} median {med[k] / 1e6:.3f}M getppid/s/core  (min {min(v) / 1e6:.3f}M, max {max(v) / 1e6:.3f}M)")
    print(f"sampled/alone = {med['sampled'] / med['alone']:.4f}   sampled/ends = {med['sampled'] / med['ends']:.4f}")
    print(f"SUMMARY sampled_over_alone {med['sampled'] / med['alone']:.4f} "
          f"sampled_over_ends {med['sampled'] / med['ends']:.4f} cores {len(os.sched_getaffinity(0))}")


if __name__ == "__main__":
    main()
