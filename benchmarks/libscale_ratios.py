"""libscale, stock against scalable, side by side in one run: per-core throughput at max cores over 1 core.

Every form of every structure runs on 1 CPU and on all CPUs, round after round with the forms
interleaved, so drift and noise hit them alike; the median of the rounds is reported. The lock forms
also race our ticket and MCS locks against Concurrency Kit's. Each line reads: form, 1-core rate,
max-cores rate per core, and their ratio (1.0 = perfect scaling).
Environment: ROUNDS (default 3), DURATION seconds per measurement (default 2), WARMUP (default 1), ONLY (a
regular expression: the structure/form names to run, e.g. ONLY='^(tree|ranges|samerange)/').
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
from pathlib import Path

from mosbench.units import si

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "native" / "build" / "mosbench-scale"
ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = os.environ.get("DURATION", "2")
WARMUP = os.environ.get("WARMUP", "1")


def rate(test: str, cpus: str) -> float:
    out = subprocess.run([str(BINARY), "--test", test, "--mode", "threads", "--cpus", cpus, "--warmup", WARMUP,
                          "--duration", DURATION], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"ops_per_sec_per_task=(\d+)", out).group(1))


def main() -> None:
    only = re.compile(os.environ.get("ONLY", ""))
    listed = subprocess.run([str(BINARY), "--list"], check=True, capture_output=True, text=True).stdout
    tests = [name for line in listed.splitlines() if only.search(name := line.split("\t")[0])]
    cpus = sorted(os.sched_getaffinity(0))
    everything = ",".join(map(str, cpus))
    one: dict[str, list[float]] = {t: [] for t in tests}
    top: dict[str, list[float]] = {t: [] for t in tests}
    for r in range(ROUNDS):
        for t in tests:
            one[t].append(rate(t, str(cpus[0])))
            top[t].append(rate(t, everything))
        print(f"round {r + 1}/{ROUNDS} done", flush=True)
    med1 = {t: statistics.median(v) for t, v in one.items()}
    medn = {t: statistics.median(v) for t, v in top.items()}
    ratio = {t: medn[t] / med1[t] for t in tests}
    print(f"\nper-core throughput, 1 CPU against {len(cpus)} CPUs (median of {ROUNDS} rounds)")
    print(f"{'structure/form':22s} {'1 core/s':>10s} {f'{len(cpus)} cores/s/core':>18s} {'ratio':>7s}")
    for t in tests:
        print(f"{t:22s} {si(med1[t]):>10s} {si(medn[t]):>18s} {ratio[t]:7.3f}")
    print("\nours against Concurrency Kit (throughput ratio; above 1.0 ours is faster)")
    for ours, theirs in (("lock/stock", "lock/ck-ticket"), ("lock/scalable", "lock/ck-mcs")):
        if ours in med1 and theirs in med1:
            print(f"{ours} / {theirs}: 1 core {med1[ours] / med1[theirs]:.3f}, "
                  f"{len(cpus)} cores {medn[ours] / medn[theirs]:.3f}")
    print("SUMMARY cores " + str(len(cpus)) + " " + " ".join(f"{t}={ratio[t]:.3f}" for t in tests))


if __name__ == "__main__":
    main()
