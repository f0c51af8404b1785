"""mosbench's micro tests side by side with will-it-scale's, same test, same tasks, interleaved rounds.

will-it-scale is not part of mosbench: build it yourself outside this tree (its Makefile needs
libhwloc-dev) and point --wis at the directory holding its `<test>_processes` and `<test>_threads`.

    .venv/bin/python benchmarks/vs_will_it_scale.py --wis ~/src/will-it-scale --rounds 5 [--json pairs.json]

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

A contended test may be bimodal: each run lands at one of two rates, so a median of a few rounds says
which mode the dice chose, not how the tools compare. Each tool's per-second counts are checked for two
separated groups (see `bimodality`); a pair where either tool has them gets the verdict "bimodal" with both
modes, never "within" or "apart" on its medians.

As a library (benchmarks/ on sys.path, `import vs_will_it_scale`): `compare(...)` measures and returns a
`Comparison` of `Pair`s, calling `on_pair` as each one ends and stopping before a pair that would pass a
monotonic deadline; `format_pair`, `HEADER`, `format_totals` and `pair_json` print and store them as
`main` does.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from mosbench import native  # noqa: E402

MODES = {"procs": "processes", "threads": "threads"}

# Bimodality rule (see `bimodality`): the gap between the groups must be this share of the median...
GAP_OF_MEDIAN = 0.25
# ...and this many times the interquartile range inside either group.
GAP_OVER_SPREAD = 3.0


@dataclass
class Round:
    """One tool's measurement in one round: the window's mean ops/s and its per-second counts."""

    rate: float
    samples: list[float] = field(default_factory=list)


# (test, mode, tasks, warmup, duration) -> Round: ours, theirs, or a stand-in a test injects.
Measure = Callable[[str, str, int, int, int], Round]


class ToolFailed(RuntimeError):
    """A tool that did not give a measurement (it exited, or printed too few per-second counts): that
    pair fails, the comparison goes on. `lines`: the last of what it printed, for the reader."""

    def __init__(self, message: str, lines: Sequence[str] = ()):
        super().__init__(message)
        self.lines = list(lines)


@dataclass
class FailedPair:
    """A pair `compare` could not measure: which, why, and the failing tool's last lines."""

    test: str
    mode: str
    tasks: int
    reason: str
    lines: list[str] = field(default_factory=list)


def theirs(wis: Path, test: str, mode: str, tasks: int, warmup: int, duration: int) -> Round:
    """Runs will-it-scale's test until warm-up plus window per-second lines have come; mean of the window."""
    before = set(Path("/tmp").glob("willitscale.*"))
    # setarch -R: address-space randomisation off, as will-it-scale's runtest.py runs it (ours does it itself).
    program = wis / f"{test}_{MODES[mode]}"
    # Its errors come with its output: a program that fails says why among the last lines kept.
    proc = subprocess.Popen(["setarch", "-R", "stdbuf", "-oL", str(program), "-t", str(tasks)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/tmp",
                            start_new_session=True)
    totals: list[int] = []
    said: list[str] = []  # the last lines that were not counts
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = re.match(r"min:\d+ max:\d+ total:(\d+)", line)
            if m:
                totals.append(int(m.group(1)))
                if len(totals) >= warmup + duration:
                    break
            elif line.strip():
                said = [*said[-4:], line.rstrip()]
    finally:
        # The group this script started: the test's tasks and partners (gone where the program failed early).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        # Tests killed before their cleanup leave their files; remove only the ones this run made.
        for path in set(Path("/tmp").glob("willitscale.*")) - before:
            subprocess.run(["rm", "-rf", str(path)], check=False)
    window = [float(t) for t in totals[warmup:warmup + duration]]
    if len(window) < duration:
        # It ended by itself (SIGKILL, ours, would read -9): its exit status says how.
        ended = f", exit {proc.returncode}" if proc.returncode >= 0 else ""
        raise ToolFailed(f"will-it-scale {program.name} gave {len(totals)} of {warmup + duration} samples{ended}",
                         said)
    return Round(sum(window) / len(window), window)


def ours(test: str, mode: str, tasks: int, warmup: int, duration: int) -> Round:
    """Runs mosbench-micro standalone; the SUMMARY's ops/s and the window's per-second counts.

    mosbench-micro prints `sample N total=T` once a second, T cumulative since the start gate, and its
    SUMMARY averages samples warmup+1 .. warmup+duration: the per-second counts are the differences.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if not 1 <= tasks <= len(cpus):
        # One task per CPU: more tasks than CPUs would silently run fewer on ours than on theirs.
        raise ValueError(f"{tasks} tasks on {len(cpus)} CPUs")
    proc = subprocess.run([str(native.binary("mosbench-micro")), "--test", test, "--mode", mode,
                           "--cpus", ",".join(map(str, cpus[:tasks])), "--warmup", str(warmup),
                           "--duration", str(duration), "--workdir", "/tmp"],
                          capture_output=True, text=True, check=False)
    m = re.search(r"ops_per_sec=(\d+)", proc.stdout)
    if proc.returncode or not m:
        raise ToolFailed(f"mosbench-micro {test} {mode} {tasks}: exit {proc.returncode}{'' if m else ', no SUMMARY'}",
                         proc.stderr.strip().splitlines()[-5:])
    totals = [0] + [int(t) for t in re.findall(r"^sample \d+ total=(\d+)", proc.stdout, re.MULTILINE)]
    per_second = [float(b - a) for a, b in itertools.pairwise(totals)]
    return Round(float(m.group(1)), per_second[warmup:warmup + duration])


def shared_tests(wis: Path) -> list[str]:
    out = subprocess.run([str(native.binary("mosbench-micro")), "--list"], capture_output=True, text=True,
                         check=True).stdout
    mine = {line.split("\t")[0] for line in out.splitlines()}
    return sorted(t for t in mine if (wis / f"{t}_processes").exists())


def spread(values: Sequence[float]) -> float:
    """Interquartile range over median, in percent."""
    q1, q3 = np.percentile(values, [25, 75])
    median = statistics.median(values)
    return 100 * float(q3 - q1) / median if median else 0.0


def ratio_interval(a: list[float], b: list[float]) -> tuple[float, float]:
    """95% percentile-bootstrap interval of median(a)/median(b); the rounds of each tool resampled apart."""
    res = stats.bootstrap((a, b), lambda x, y, axis: np.median(x, axis=axis) / np.median(y, axis=axis),
                          vectorized=True, method="percentile", n_resamples=4000, random_state=0)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


@dataclass
class Modes:
    """One tool's bimodality finding over a pair's rounds (see `bimodality`)."""

    bimodal: bool
    low: float | None = None  # the low group's median ops/s, when bimodal
    high: float | None = None
    rounds: int = 0
    rounds_high: int = 0  # rounds whose every per-second count is in the high group
    rounds_split: int = 0  # rounds with counts in both groups: the run switched modes inside the round
    values: str = "rounds"  # what was grouped: "seconds" (per-second counts) or "rounds" (round means)

    @property
    def settled(self) -> bool:
        """Two modes seen enough to name them: a round that switched between them, or two rounds wholly in
        each. One round alone at another rate may be a disturbed round: it is shown, not called a mode."""
        low_rounds = self.rounds - self.rounds_high - self.rounds_split
        return self.bimodal and (self.rounds_split > 0 or min(self.rounds_high, low_rounds) >= 2)

    def describe(self) -> str:
        if not self.bimodal:
            return "unimodal"
        if not self.settled:
            alone, rest = (self.high, self.low) if self.rounds_high == 1 else (self.low, self.high)
            return f"one round at {si(alone)}, the others at {si(rest)} (a mode or a disturbed round: more rounds tell)"
        split = f", {self.rounds_split} switching" if self.rounds_split else ""
        return f"bimodal: {si(self.low)} / {si(self.high)} ({self.rounds_high} of {self.rounds} rounds high{split})"


def si(x: float | None) -> str:
    """1.2M, 850k: short enough for a table's flag."""
    if x is None:
        return "-"
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def _iqr(values: Sequence[float]) -> float:
    q1, q3 = np.percentile(values, [25, 75])
    return float(q3 - q1)


def bimodality(rates: Sequence[float], samples: Sequence[Sequence[float]] | None = None) -> Modes:
    """Whether one tool's rounds fall into two separated groups, and what they are.

    The rule: pool the per-second counts of every round (the round means where any round has none),
    sort them, and look at the gaps between neighbours whose cut leaves at least one round's worth of
    values on each side (the shortest round's count of seconds; one value for round means). Take the
    largest. The values are bimodal when that gap is more than 25% of the pooled median AND more than
    3 times the interquartile range inside each side. The groups are reported by their medians, with
    how many rounds lie wholly in the high group and how many switched groups mid-round.

    Why seconds rather than round means: a run that switches modes inside a round averages to a rate
    neither mode has, and a steady outlying round shows as one round's worth of tightly grouped seconds
    where a disturbed one shows as scattered seconds (a large IQR that vetoes the split). With few
    rounds one steady outlying round still reads as a second mode: with three rounds an outlier cannot
    be told from a mode, and the counts in the finding say how thin the evidence is.
    """
    n = len(rates)
    per_round = [list(s) for s in samples] if samples and len(samples) == n and all(samples) else None
    values = sorted(v for s in per_round for v in s) if per_round else sorted(rates)
    side = min(len(s) for s in per_round) if per_round else 1
    kind = "seconds" if per_round else "rounds"
    if len(values) < 2 * side:
        return Modes(False, rounds=n, values=kind)
    cuts = range(side, len(values) - side + 1)  # a cut at i: values[:i] low, values[i:] high
    best = max(cuts, key=lambda i: values[i] - values[i - 1])
    gap = values[best] - values[best - 1]
    lo, hi = values[:best], values[best:]
    if not (gap > GAP_OF_MEDIAN * statistics.median(values)
            and gap > GAP_OVER_SPREAD * _iqr(lo) and gap > GAP_OVER_SPREAD * _iqr(hi)):
        return Modes(False, rounds=n, values=kind)
    cut = (lo[-1] + hi[0]) / 2
    groups = [[v > cut for v in s] for s in per_round] if per_round else [[r > cut] for r in rates]
    return Modes(True, statistics.median(lo), statistics.median(hi), n,
                 rounds_high=sum(all(g) for g in groups), rounds_split=sum(any(g) and not all(g) for g in groups),
                 values=kind)


def verdict(ratio: float, low: float, high: float, bimodal: bool = False) -> str:
    """"bimodal" when either tool is; else "within" ±5% on the medians' ratio, "apart" when the whole
    interval lies outside ±5%, "unclear" when it crosses a bound."""
    if bimodal:
        return "bimodal"
    if abs(ratio - 1) <= 0.05:
        return "within"
    if high < 0.95 or low > 1.05:
        return "apart"
    return "unclear"


@dataclass
class Pair:
    """One test, mode and task count measured by both tools in interleaved rounds."""

    test: str
    mode: str
    tasks: int
    ours: list[float]  # each round's ops/s (will-it-scale's too with same)
    theirs: list[float]
    ours_samples: list[list[float]]  # each round's per-second counts in the window
    theirs_samples: list[list[float]]
    first: list[str]  # which tool ran first in each round: "ours" or "theirs"
    ours_median: float
    theirs_median: float
    ratio: float  # ours_median / theirs_median
    low: float  # 95% bootstrap interval of the ratio
    high: float
    verdict: str  # within, apart, unclear or bimodal
    ours_spread: float  # IQR over median of the rounds, %
    theirs_spread: float
    ours_modes: Modes
    theirs_modes: Modes
    seconds: float  # wall time the pair took
    same: bool = False  # "ours" is will-it-scale too: the host's noise floor

    @classmethod
    def measured(cls, test: str, mode: str, tasks: int, a: list[Round], b: list[Round], first: list[str],
                 seconds: float, same: bool = False) -> Pair:
        ra, rb = [r.rate for r in a], [r.rate for r in b]
        ma, mb = statistics.median(ra), statistics.median(rb)
        ratio = ma / mb if mb else math.inf
        low, high = ratio_interval(ra, rb) if len(ra) > 1 and mb else (ratio, ratio)
        sa, sb = [r.samples for r in a], [r.samples for r in b]
        fa, fb = bimodality(ra, sa), bimodality(rb, sb)
        return cls(test, mode, tasks, ra, rb, sa, sb, first, ma, mb, ratio, low, high,
                   verdict(ratio, low, high, fa.settled or fb.settled), spread(ra), spread(rb), fa, fb,
                   seconds, same)

    @property
    def labels(self) -> tuple[str, str]:
        return ("theirs'", "theirs") if self.same else ("ours", "theirs")


@dataclass
class Comparison(Sequence[Pair]):
    """What `compare` measured: the pairs (the object is a sequence of them) and how the run went."""

    pairs: list[Pair]
    not_run: list[tuple[str, str, int]]  # (test, mode, tasks) not measured: left for the deadline or cut short
    steal_pct: float  # share of the machine's CPU time the host stole during the run
    seconds: float
    high_fds: list[int] = field(default_factory=list)  # descriptors >= 64 open in this process (see compare)
    interrupted: bool = False  # stopped by SIGINT (KeyboardInterrupt) rather than the deadline
    failed: list[FailedPair] = field(default_factory=list)  # a tool failed: neither in pairs nor in not_run

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i):  # type: ignore[override]  # int or slice, as a list's
        return self.pairs[i]

    def __iter__(self) -> Iterator[Pair]:
        return iter(self.pairs)


def cpu_ticks() -> tuple[int, int]:
    """(steal, all) ticks of the machine so far, from /proc/stat's cpu line."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[7], sum(fields[:8])


def high_fds() -> list[int]:
    """Descriptors of this process past the 64 a new process's descriptor table holds."""
    return sorted(fd for fd in (int(n) for n in os.listdir("/proc/self/fd")) if fd >= 64)


def close_inherited_fds() -> None:
    """Closes every descriptor above stderr, as `main` does before it measures.

    will-it-scale's tasks share the descriptor table of the process this script starts (in thread mode),
    and a forked child's table is sized by the highest descriptor open in its parent; ours get a fresh
    one from their supervisor. Contended descriptor tests swing 2x with the table's size (will-it-scale's
    dup1 at two threads: 2.4M ops/s with an unrelated fd 251 inherited, 4.3M without).
    """
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))


def compare(wis: Path, tests: Sequence[str], modes: Sequence[str], counts: Sequence[int], rounds: int = 5,
            warmup: int = 1, duration: int = 2, same: bool = False, deadline: float | None = None,
            on_pair: Callable[[Pair], None] | None = None, measure_ours: Measure | None = None,
            measure_theirs: Measure | None = None, round_estimate: float | None = None,
            on_failed: Callable[[FailedPair], None] | None = None) -> Comparison:
    """Every test × mode × task count, each a pair of `rounds` interleaved rounds (ours first in even rounds).

    `deadline` is a time.monotonic() value: a pair starts only when `rounds` times the longest round so far
    (before any, `round_estimate`, by default 2 × (warmup + duration + 0.5) s: both tools' seconds and
    their start) fits before it, and a round only when the longest round does; a pair cut short is
    dropped, never returned half measured, and listed in `not_run` with those never started. SIGINT
    (KeyboardInterrupt) stops the run the same way, returning what was measured with `interrupted`. `on_pair`
    sees each pair as it ends. A tool that fails (ToolFailed: it exited, or gave too few per-second counts)
    fails its pair alone: the pair goes to `failed` (and `on_failed`) and the next one runs.
    `measure_ours`/`measure_theirs` replace the tools (tests); with `same`, will-it-scale runs in both columns.

    Close stray descriptors first (`close_inherited_fds`) unless this process needs its own: a descriptor
    at 64 or above sizes will-it-scale's shared table in thread mode and moves the descriptor tests; the
    result lists any in `high_fds`, with a warning.
    """
    if rounds < 1 or duration < 1 or warmup < 0:
        raise ValueError("rounds and duration must be 1 or more, warmup 0 or more")
    if bad := [m for m in modes if m not in MODES]:
        raise ValueError(f"modes must be {' or '.join(MODES)}, not {', '.join(bad)}")

    def run_theirs(test: str, mode: str, tasks: int, w: int, d: int) -> Round:
        return theirs(wis, test, mode, tasks, w, d)

    tool_b = measure_theirs or run_theirs
    tool_a = tool_b if same else (measure_ours or ours)
    stray = high_fds()
    if stray:
        warnings.warn(f"descriptors {stray} are open: will-it-scale's thread-mode table will be larger than "
                      "ours (close_inherited_fds)", RuntimeWarning, stacklevel=2)
    planned = [(t, m, n) for t in tests for m in modes for n in counts]
    started = time.monotonic()
    steal_before, all_before = cpu_ticks()
    # Until a round is measured: each tool's warm-up and window, and half a second each to start.
    longest_round = round_estimate if round_estimate is not None else 2 * (warmup + duration + 0.5)
    measured_any = False
    pairs: list[Pair] = []

    def fits(seconds: float) -> bool:
        return deadline is None or time.monotonic() + seconds <= deadline

    def measure(test: str, mode: str, n: int) -> Pair | None:
        """The pair, or None where the deadline cut it short."""
        nonlocal longest_round, measured_any
        t0 = time.monotonic()
        a: list[Round] = []
        b: list[Round] = []
        first: list[str] = []
        for r in range(rounds):
            if not fits(longest_round):
                return None
            r0 = time.monotonic()
            order = ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")
            first.append(order[0])
            for which in order:
                if which == "ours":
                    a.append(tool_a(test, mode, n, warmup, duration))
                else:
                    b.append(tool_b(test, mode, n, warmup, duration))
            took = time.monotonic() - r0
            longest_round = max(longest_round, took) if measured_any else took
            measured_any = True
        return Pair.measured(test, mode, n, a, b, first, time.monotonic() - t0, same)

    interrupted = False
    failed: list[FailedPair] = []
    tried = 0  # pairs run in order: the ones from here on were not run
    try:
        for test, mode, n in planned:
            try:
                pair = measure(test, mode, n) if fits(rounds * longest_round) else None
            except ToolFailed as e:
                failed.append(FailedPair(test, mode, n, str(e), e.lines))
                tried += 1
                if on_failed:
                    on_failed(failed[-1])
                continue
            if pair is None:
                break
            pairs.append(pair)
            tried += 1
            if on_pair:
                on_pair(pair)
    except KeyboardInterrupt:
        # SIGINT ends the run as the deadline does (a caller's way to stop an overrunning run): the pair in
        # flight is dropped, its tools already stopped (theirs kills its group, subprocess.run its child).
        interrupted = True
    steal_after, all_after = cpu_ticks()
    steal = 100 * (steal_after - steal_before) / max(all_after - all_before, 1)
    # Pairs run in order and every one returned is whole: the rest are the planned ones past them.
    not_run = planned[tried:]
    return Comparison(pairs, not_run, steal, time.monotonic() - started, stray, interrupted, failed)


def _columns(first: str) -> str:
    return (f"{'test':18} {'mode':7} {'tasks':>5} {first + ' ops/s':>12} {'iqr%':>5} {'theirs ops/s':>12} "
            f"{'iqr%':>5} {'ratio':>6} {'95% interval':>13}")


# The table's header; .format(rounds=N). With --same the first column is will-it-scale's: `header`.
HEADER = _columns("ours") + "  ({rounds} interleaved rounds, medians)"


def header(rounds: int, same: bool = False) -> str:
    return _columns("theirs'" if same else "ours") + f"  ({rounds} interleaved rounds, medians)"


def format_pair(p: Pair) -> str:
    """The pair's table line; a flag at its end when it is not within ±5%, naming each bimodal tool."""
    found = "; ".join(f"{label} {m.describe()}" for label, m in zip(p.labels, (p.ours_modes, p.theirs_modes),
                                                                      strict=True) if m.bimodal)
    if p.verdict == "bimodal":
        flag = f"  <-- {found}"
    elif p.verdict in ("apart", "unclear"):
        flag = f"  <-- outside ±5%, {p.verdict}" + (f"; {found}" if found else "")
    else:
        flag = f"  ({found})" if found else ""
    return (f"{p.test:18} {p.mode:7} {p.tasks:5d} {p.ours_median:12.0f} {p.ours_spread:5.1f} "
            f"{p.theirs_median:12.0f} {p.theirs_spread:5.1f} {p.ratio:6.3f} {p.low:6.3f}–{p.high:6.3f}{flag}")


def format_failed(f: FailedPair) -> str:
    """A failed pair's table line: the reason, then the failing tool's last lines, indented."""
    return "\n".join([f"{f.test:18} {f.mode:7} {f.tasks:5d}  FAILED: {f.reason}", *(f"    {x}" for x in f.lines)])


def format_totals(c: Comparison) -> str:
    """The closing line: verdicts counted, ratios' median and range, the host's steal, the deadline's cut,
    the pairs that failed."""
    ratios = [p.ratio for p in c.pairs]
    verdicts = [p.verdict for p in c.pairs]
    why = "the interrupt" if c.interrupted else "the deadline"
    cut = f"; {len(c.not_run)} pairs not run before {why}" if c.not_run else ""
    cut += f"; {len(c.failed)} pairs FAILED" if c.failed else ""
    if not ratios:
        return f"no pair measured{cut}; steal {c.steal_pct:.2f}% of CPU time over the run"
    # A host that steals time moves lock-bound tests by tens of percent (docs/WORKLOADS.md): say how much.
    return (f"{verdicts.count('within')} of {len(ratios)} within ±5%, {verdicts.count('unclear')} unclear, "
            f"{verdicts.count('apart')} apart, {verdicts.count('bimodal')} bimodal; median ratio "
            f"{statistics.median(ratios):.3f}, range {min(ratios):.3f}–{max(ratios):.3f}; steal "
            f"{c.steal_pct:.2f}% of CPU time over the run{cut}")


def pair_json(p: Pair) -> dict:
    """The pair as JSON-ready data: every round's rate and per-second counts, the findings, the verdict."""
    return dataclasses.asdict(p)


def parse_tasks(spec: str, ncpu: int) -> list[int]:
    """`1,half,max`: max is every CPU this process may use, half max//2 (at least 1)."""
    counts = []
    for word in spec.split(","):
        word = word.strip()
        n = ncpu if word == "max" else max(1, ncpu // 2) if word == "half" else int(word) if word.isdigit() else 0
        if not 1 <= n <= ncpu:
            raise ValueError(f"--tasks: '{word}' is not max, half or 1..{ncpu}")
        counts.append(n)
    return counts


def write_json(path: Path, settings: dict, c: Comparison | None, pairs: list[Pair]) -> None:
    """Rewritten after every pair (a stopped run keeps what it measured), atomically."""
    data = {"settings": settings, "pairs": [pair_json(p) for p in pairs], "complete": c is not None and not c.not_run}
    if c is not None:
        data |= {"not_run": c.not_run, "steal_pct": c.steal_pct, "seconds": c.seconds, "high_fds": c.high_fds,
                 "interrupted": c.interrupted, "failed": [dataclasses.asdict(f) for f in c.failed]}
        data["complete"] = data["complete"] and not c.failed
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--wis", type=Path, required=True, help="a built will-it-scale tree")
    ap.add_argument("--tests", help="comma-separated (default: every test both have)")
    ap.add_argument("--modes", default="procs", help="procs,threads")
    ap.add_argument("--tasks", default="1,max",
                    help="task counts: numbers, max (every CPU this process may use), half (max//2)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--duration", type=int, default=2)
    ap.add_argument("--same", action="store_true",
                    help="will-it-scale against itself in place of ours: the host's noise floor")
    ap.add_argument("--json", type=Path, metavar="PATH", help="every pair, with all its rounds, as JSON")
    args = ap.parse_args(argv)
    close_inherited_fds()  # see close_inherited_fds: neither tool gets a table sized by the shell's descriptors
    ncpu = len(os.sched_getaffinity(0))
    try:
        counts = parse_tasks(args.tasks, ncpu)
    except ValueError as e:
        ap.error(str(e))
    tests = args.tests.split(",") if args.tests else shared_tests(args.wis)
    modes_ = args.modes.split(",")
    settings = {"wis": str(args.wis), "tests": tests, "modes": modes_, "counts": counts, "rounds": args.rounds,
                "warmup": args.warmup, "duration": args.duration, "same": args.same, "cpus": ncpu}
    total = len(tests) * len(modes_) * len(counts)
    print(header(args.rounds, args.same), flush=True)
    started = time.monotonic()
    done: list[Pair] = []

    def show(p: Pair) -> None:
        done.append(p)
        eta = (time.monotonic() - started) / len(done) * (total - len(done))
        print(f"{format_pair(p)}   [eta {eta / 60:.0f} min]", flush=True)
        if args.json:
            write_json(args.json, settings, None, done)

    c = compare(args.wis, tests, modes_, counts, args.rounds, args.warmup, args.duration, same=args.same,
                on_pair=show, on_failed=lambda f: print(format_failed(f), flush=True))
    if args.json:
        write_json(args.json, settings, c, c.pairs)
    print(format_totals(c))
    if c.interrupted:
        sys.exit(130)  # as a shell reports an interrupted command, after the totals and the JSON
    if c.failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
