"""mosbench's micro tests side by side with will-it-scale's, same test, same tasks, interleaved rounds.

will-it-scale is not part of mosbench: build it yourself outside this tree (its Makefile needs
libhwloc-dev) and point --wis at the directory holding its `<test>_processes` and `<test>_threads`.

    .venv/bin/python benchmarks/vs_will_it_scale.py --wis ~/src/will-it-scale --rounds 5

Both tools run with the same task counts, pinned one task per CPU in the same order, with files in
the same directory (/tmp, will-it-scale's), address-space randomisation off (will-it-scale's runtest.py
uses setarch -R; mosbench-micro turns it off itself) and no descriptor inherited from the shell. Each
round runs ours and theirs back to back, alternating which goes first; each measurement skips the
warm-up seconds and averages the next seconds of per-second counts (will-it-scale prints them as it
goes; it is stopped by its process group once enough have come). Prints every test's median ops/s for
each tool and ours/theirs, with the rounds; at the end, how many pairs are within ±5% and how much of
the CPU time the host stole meanwhile.

A ratio outside ±5% may still be noise: beside it the script prints each tool's spread over its rounds
(interquartile range over median) and a 95% bootstrap interval of the ratio of medians. A pair is
"apart" only when the whole interval lies outside ±5%; "unclear" when the interval crosses a bound.
`--same` runs will-it-scale against itself, the noise floor of this host at these settings.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from mosbench import native  # noqa: E402

MODES = {"procs": "processes", "threads": "threads"}


def theirs(wis: Path, test: str, mode: str, tasks: int, warmup: int, duration: int) -> float:
    """Runs will-it-scale's test until warm-up plus window per-second lines have come; mean of the window."""
    before = set(Path("/tmp").glob("willitscale.*"))
    # setarch -R: address-space randomisation off, as will-it-scale's runtest.py runs it (ours does it itself).
    proc = subprocess.Popen(["setarch", "-R", "stdbuf", "-oL", str(wis / f"{test}_{MODES[mode]}"), "-t", str(tasks)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd="/tmp",
                            start_new_session=True)
    totals: list[int] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = re.match(r"min:\d+ max:\d+ total:(\d+)", line)
            if m:
                totals.append(int(m.group(1)))
                if len(totals) >= warmup + duration:
                    break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this script started: the test's tasks and partners
        proc.wait()
        # Tests killed before their cleanup leave their files; remove only the ones this run made.
        for path in set(Path("/tmp").glob("willitscale.*")) - before:
            subprocess.run(["rm", "-rf", str(path)], check=False)
    window = totals[warmup:warmup + duration]
    if len(window) < duration:
        raise RuntimeError(f"will-it-scale {test} {mode} gave {len(totals)} samples")
    return sum(window) / len(window)


def ours(test: str, mode: str, tasks: int, warmup: int, duration: int) -> float:
    cpus = ",".join(map(str, sorted(os.sched_getaffinity(0))[:tasks]))
    out = subprocess.run([str(native.binary("mosbench-micro")), "--test", test, "--mode", mode, "--cpus", cpus,
                          "--warmup", str(warmup), "--duration", str(duration), "--workdir", "/tmp"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"ops_per_sec=(\d+)", out)
    if not m:
        raise RuntimeError(f"mosbench-micro {test} {mode}: no SUMMARY")
    return float(m.group(1))


def shared_tests(wis: Path) -> list[str]:
    out = subprocess.run([str(native.binary("mosbench-micro")), "--list"], capture_output=True, text=True,
                         check=True).stdout
    mine = {line.split("\t")[0] for line in out.splitlines()}
    return sorted(t for t in mine if (wis / f"{t}_processes").exists())


def spread(values: list[float]) -> float:
    """Interquartile range over median, in percent."""
    q1, q3 = np.percentile(values, [25, 75])
    return 100 * (q3 - q1) / statistics.median(values)


def ratio_interval(a: list[float], b: list[float]) -> tuple[float, float]:
    """95% percentile-bootstrap interval of median(a)/median(b); the rounds of each tool resampled apart."""
    res = stats.bootstrap((a, b), lambda x, y, axis: np.median(x, axis=axis) / np.median(y, axis=axis),
                          vectorized=True, method="percentile", n_resamples=4000, random_state=0)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def verdict(ratio: float, low: float, high: float) -> str:
    if abs(ratio - 1) <= 0.05:
        return ""
    if high < 0.95 or low > 1.05:
        return "apart"
    return "unclear"


def cpu_ticks() -> tuple[int, int]:
    """(steal, all) ticks of the machine so far, from /proc/stat's cpu line."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[7], sum(fields[:8])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wis", type=Path, required=True, help="a built will-it-scale tree")
    ap.add_argument("--tests", help="comma-separated (default: every test both have)")
    ap.add_argument("--modes", default="procs", help="procs,threads")
    ap.add_argument("--tasks", default="1,max", help="task counts; max = every CPU this process may use")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--duration", type=int, default=2)
    ap.add_argument("--same", action="store_true",
                    help="will-it-scale against itself in place of ours: the host's noise floor")
    args = ap.parse_args()
    # will-it-scale's tasks share the descriptor table of the process this script starts (in thread
    # mode), and a forked child's table is sized by and keeps every descriptor open in its parent; ours
    # get a fresh one from their supervisor. Contended descriptor tests swing 2x with the table's state
    # (will-it-scale's dup1 at two threads: 2.4M ops/s with an unrelated fd 251 inherited, 4.3M without),
    # so descriptors inherited from whatever started this script are closed before either tool runs.
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    ncpu = len(os.sched_getaffinity(0))
    tests = args.tests.split(",") if args.tests else shared_tests(args.wis)
    counts = [ncpu if t == "max" else int(t) for t in args.tasks.split(",")]
    modes = args.modes.split(",")
    started = time.monotonic()
    total = len(tests) * len(modes) * len(counts)
    first = "theirs'" if args.same else "ours"
    print(f"{'test':18} {'mode':7} {'tasks':>5} {first + ' ops/s':>12} {'iqr%':>5} {'theirs ops/s':>12} {'iqr%':>5} "
          f"{'ratio':>6} {'95% interval':>13}  ({args.rounds} interleaved rounds, medians)", flush=True)
    done = 0
    ratios: list[float] = []
    verdicts: list[str] = []
    steal_before, all_before = cpu_ticks()
    for test in tests:
        for mode in modes:
            for n in counts:
                a: list[float] = []
                b: list[float] = []
                for r in range(args.rounds):
                    order = (0, 1) if r % 2 == 0 else (1, 0)
                    for which in order:
                        if which == 0 and args.same:
                            a.append(theirs(args.wis, test, mode, n, args.warmup, args.duration))
                        elif which == 0:
                            a.append(ours(test, mode, n, args.warmup, args.duration))
                        else:
                            b.append(theirs(args.wis, test, mode, n, args.warmup, args.duration))
                ratio = statistics.median(a) / statistics.median(b)
                low, high = ratio_interval(a, b) if args.rounds > 1 else (ratio, ratio)
                ratios.append(ratio)
                verdicts.append(verdict(ratio, low, high))
                done += 1
                eta = (time.monotonic() - started) / done * (total - done)
                flag = f"  <-- outside ±5%, {verdicts[-1]}" if verdicts[-1] else ""
                print(f"{test:18} {mode:7} {n:5d} {statistics.median(a):12.0f} {spread(a):5.1f} "
                      f"{statistics.median(b):12.0f} {spread(b):5.1f} {ratio:6.3f} {low:6.3f}–{high:6.3f}"
                      f"{flag}   [eta {eta / 60:.0f} min]", flush=True)

    steal_after, all_after = cpu_ticks()
    within = sum(abs(r - 1) <= 0.05 for r in ratios)
    steal = 100 * (steal_after - steal_before) / max(all_after - all_before, 1)
    # A host that steals time moves lock-bound tests by tens of percent (docs/WORKLOADS.md): say how much.
    print(f"{within} of {len(ratios)} within ±5%, {verdicts.count('unclear')} unclear, "
          f"{verdicts.count('apart')} apart; median ratio {statistics.median(ratios):.3f}, range "
          f"{min(ratios):.3f}–{max(ratios):.3f}; steal {steal:.2f}% "
          "of CPU time over the run")


if __name__ == "__main__":
    main()
