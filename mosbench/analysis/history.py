"""A machine's runs as one series per point, and the changes in that series: where, how large, of what kind.

A kernel developer runs the same suite on every release or every night and asks where a number changed
and why. Each (workload, test, variant, cores) becomes a series over the machine's runs, in time, kernel
version or commit order. Candidate changes come from PELT (ruptures) on the runs' mean per-core
throughputs, scaled by the series' median so that one penalty fits every test; the penalty is a BIC
(2σ² ln n) with σ the series' own run-to-run noise, read robustly from its successive differences so
that the step itself does not inflate it. The newest run is also a candidate on its own (it may begin a
change that has one run so far: the CI gate's case), which PELT's two-run minimum segment cannot find.

A candidate is kept only where the two sides differ by Welch's t-test, as `compare` decides: between
the runs' means where each side has three runs or more (the runs are the replicates, so run-to-run
noise counts), otherwise between the trials. The p-values of all candidates of all series are corrected
together, in two steps. PELT chose each boundary because the two sides looked different there, so its
p-value is first multiplied by the positions PELT could have chosen in that stretch (Bonferroni over the
split points: without it 13% of unchanged series showed a change); the newest run's candidate has one
position. Then every series' candidates together (Holm, family-wise at ALPHA): a suite of hundreds of
series tests hundreds of candidates, and uncorrected 5% would find changes every night.

The changes of one test and variant at one boundary are one shift. A shift that moved one core too is a
cost every core pays; one that left one core alone and moved the higher counts changed scalability (the
per-core ratio itself). A shift names the other tests that shifted at the same boundary and the
environment's differences across it (kernel, its options, THP, mitigations, cgroups, microcode, the
servers' packages).
"""

from __future__ import annotations

import math
import re
import statistics
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import ruptures
from scipy import stats

from mosbench.analysis.cells import counts
from mosbench.analysis.compare import environment_differences, welch
from mosbench.errors import UserError
from mosbench.workloads.base import test_name

ALPHA = 0.05
# Runs a side needs before the runs themselves, not their trials, are the replicates.
RUNS_AS_REPLICATES = 3
# The least run-to-run noise assumed (relative): below it a perfectly steady series would call a 0.1%
# step a change.
NOISE_FLOOR = 0.005
# A series needs this many measured runs before changes are looked for in it.
FEWEST_RUNS = 4
# Environment facts that differ between any two runs and explain nothing.
TRANSIENT_FACTS = ("harness_scheduling", "profiling", "merged_from", "ab", "bisect", "hostname")


class Order(Enum):
    TIME = "time"
    KERNEL = "kernel"
    COMMIT = "commit"


@dataclass(frozen=True)
class RunInfo:
    """A stored run as history orders and labels it."""

    id: int
    label: str | None
    started_at: Any
    kernel: str  # the release (`uname -r`), the guest's where it ran in one
    commit: str | None  # the kernel's commit, where it is known
    environment: dict[str, Any]

    @property
    def name(self) -> str:
        return f"#{self.id}"

    @classmethod
    def of(cls, row: dict[str, Any]) -> RunInfo:
        env = row["environment"] or {}
        bisected = env.get("bisect")
        commit = env.get("kernel_commit") or (bisected.get("commit") if isinstance(bisected, dict) else None)
        return cls(row["id"], row["label"], row["started_at"], env.get("kernel_release") or env.get("kernel") or "?",
                   commit, env)


@dataclass(frozen=True)
class Machine:
    hostname: str
    topology: str

    def describe(self) -> str:
        return f"{self.hostname} ({self.topology})"


def machine_of(env: dict[str, Any]) -> Machine:
    return Machine(str(env.get("hostname") or "?"), str(env.get("topology_summary") or "?"))


@dataclass(frozen=True)
class SeriesKey:
    """One curve of one test: a workload's test in one variant (its core counts are the curve's points)."""

    workload: str
    test: str
    variant: str

    @property
    def name(self) -> str:
        return f"{test_name(self.workload, self.test)} {self.variant}"


@dataclass
class PointSeries:
    """One point over the runs: the usable trials' per-core throughputs of each run, in the history's order
    (an empty tuple where the run did not measure it, or measured it failed or interfered)."""

    key: SeriesKey
    cores: int
    trials: list[tuple[float, ...]]

    def measured(self) -> list[int]:
        """The indices of the runs that measured it."""
        return [i for i, t in enumerate(self.trials) if t]

    def means(self) -> list[float | None]:
        return [statistics.fmean(t) if t else None for t in self.trials]


@dataclass(frozen=True)
class Difference:
    """Two sides of a boundary compared: ratio of means (after/before) with its 95% interval and p."""

    ratio: float
    low: float | None
    high: float | None
    p: float | None
    replicates: str  # "runs" or "trials": what the test's samples were

    def significant(self, alpha: float = ALPHA) -> bool:
        return self.p is not None and self.p < alpha


@dataclass(frozen=True)
class Change:
    """A confirmed change of one point: from run `before` (the last of the old level) to `after` (the
    first of the new), both indices into the history's runs."""

    cores: int
    before: int
    after: int
    first: int  # the old level's first run and the new level's last, as the test compared them
    last: int
    difference: Difference
    p_adjusted: float


@dataclass
class Shift:
    """The changes of one series (test and variant) at one boundary, with what explains them."""

    key: SeriesKey
    before: int
    after: int
    changes: list[Change]  # the confirmed ones, by core count
    by_cores: dict[int, Difference]  # every core count of the series across the same runs
    scaling: tuple[float, float] | None  # per-core ratio, most cores to one, before and after
    environment: list[tuple[str, list[str]]]  # the facts that differ between `before` and `after`
    with_it: list[SeriesKey] = field(default_factory=list)  # other series that shifted at the same boundary

    @property
    def ratio(self) -> float:
        """The size of the shift: its change at the most cores."""
        return max(self.changes, key=lambda c: c.cores).difference.ratio

    def kind(self) -> Kind:
        counts = sorted(self.by_cores)
        if len(counts) < 2 or counts[0] != 1:
            return Kind.UNKNOWN
        one, most = self.by_cores[counts[0]], self.by_cores[counts[-1]]
        if one.significant() and most.significant():
            return Kind.EVERY_CORE
        if most.significant():
            return Kind.SCALABILITY
        return Kind.ONE_CORE


class Kind(Enum):
    """What a shift changed, read from one core and the most cores across the same runs."""

    EVERY_CORE = "every core"
    SCALABILITY = "scalability"
    ONE_CORE = "one core"
    UNKNOWN = "unknown"

    def explain(self) -> str:
        return {Kind.EVERY_CORE: "one core moved too: a cost every core pays",
                Kind.SCALABILITY: "one core did not move, the most cores did: the per-core ratio itself moved",
                Kind.ONE_CORE: "one core moved, the most cores did not",
                Kind.UNKNOWN: "no one-core point to tell a cost from a scalability change"}[self]


@dataclass
class History:
    machine: Machine
    order: Order
    runs: list[RunInfo]
    series: list[PointSeries]
    shifts: list[Shift]
    candidates: int  # the candidates tested, over which the correction was made
    other_machines: list[tuple[Machine, int]]  # the store's other machines and their runs
    left_out: list[str]  # runs not placed in this order, and why

    def begins_at_newest(self) -> list[Shift]:
        """The shifts whose first run of the new level is the newest run."""
        newest = len(self.runs) - 1
        return [s for s in self.shifts if s.after == newest]

    def worse_than(self, percent: float) -> list[Shift]:
        """Shifts the newest run begins that lowered throughput by more than `percent` at some core count."""
        return [s for s in self.begins_at_newest()
                if any(c.difference.ratio < 1 - percent / 100 for c in s.changes)]


# Ordering

_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(-rc(\d+))?(.*)")


def release_key(release: str) -> tuple:
    """Version order of kernel releases: 6.9 before 6.10, 6.10-rc7 before 6.10, Debian's 6.1.0-9 before
    6.1.0-13."""
    found = _RELEASE.match(release)
    if not found:
        return (math.inf, release)
    major, minor, patch, rc, rc_n, rest = found.groups()
    rest_numbers = tuple(int(n) for n in re.findall(r"\d+", rest))
    return (int(major), int(minor), int(patch or 0), 0 if rc else 1, int(rc_n or 0), rest_numbers, release)


def commit_positions(tree: Path, commits: Iterable[str]) -> dict[str, int]:
    """Each commit's place in the tree's history (topological, oldest first), by the name it was stored
    under; one that the tree does not know is left out."""
    resolved: dict[str, str] = {}
    for commit in set(commits):
        found = subprocess.run(["git", "-C", str(tree), "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}"],
                               capture_output=True, text=True)
        if found.returncode == 0:
            resolved[commit] = found.stdout.strip()
    if not resolved:
        return {}
    listed = subprocess.run(["git", "-C", str(tree), "rev-list", "--topo-order", "--reverse",
                             *sorted(set(resolved.values()))], capture_output=True, text=True)
    if listed.returncode:
        raise UserError(f"git rev-list in {tree}: {listed.stderr.strip()}")
    place = {sha: i for i, sha in enumerate(listed.stdout.split())}
    return {name: place[sha] for name, sha in resolved.items() if sha in place}


def order_runs(runs: list[RunInfo], order: Order, tree: Path | None) -> tuple[list[RunInfo], list[str]]:
    """The runs in the order asked for, and a line for each kind of run that order cannot place."""
    if order is Order.TIME:
        return sorted(runs, key=lambda r: (r.started_at, r.id)), []
    if order is Order.KERNEL:
        return sorted(runs, key=lambda r: (release_key(r.kernel), r.started_at, r.id)), []
    if tree is None:
        raise UserError("--order commit needs the kernel tree: --tree DIR")
    positions = commit_positions(tree, [r.commit for r in runs if r.commit])
    placed = [r for r in runs if r.commit in positions]
    left = []
    if without := sum(r.commit is None for r in runs):
        left.append(f"{without} run{'s' if without != 1 else ''} without a kernel commit")
    if unknown := sum(r.commit is not None and r.commit not in positions for r in runs):
        left.append(f"{unknown} run{'s' if unknown != 1 else ''} whose commit {tree} does not have")
    return sorted(placed, key=lambda r: (positions[r.commit], r.started_at, r.id)), left


# Finding changes


def noise(values: np.ndarray) -> float:
    """Run-to-run noise, relative, as a standard deviation of one value: from the successive differences
    (a step moves one of them, not the level's spread), the largest tenth of them left out so that the
    steps themselves do not count, the rest scaled back for what the trimming took. The median absolute
    deviation is as robust but wastes two thirds of the data: on 30 runs it read a third low often enough
    to make every unchanged series' tenth change somewhere."""
    if len(values) < 3:
        return NOISE_FLOOR
    diffs = np.sort(np.abs(np.diff(values)))
    keep = len(diffs) - max(1, len(diffs) // 10)
    trimmed = diffs[:keep]
    # E[d² | |d| below its q-quantile] for d ~ N(0, 2σ²): the trimmed mean square's share of the whole.
    q = keep / len(diffs)
    z = stats.norm.ppf(0.5 + q / 2)
    share = 1 - 2 * z * stats.norm.pdf(z) / q
    return max(math.sqrt(float(np.mean(trimmed**2)) / (2 * share)), NOISE_FLOOR)


class _MeanShift(ruptures.base.BaseCost):
    """ruptures' l2 cost (a segment's squared deviations from its mean) from running sums: O(1) a segment
    where CostL2 takes the segment's variance, which made PELT over 500 runs take minutes a series."""

    model = "mean shift"
    min_size = 2

    def fit(self, signal: np.ndarray) -> _MeanShift:
        values = np.asarray(signal, dtype=float).ravel()
        self.signal = values.reshape(-1, 1)  # ruptures reads the sample count from it
        self.sums = np.concatenate(([0.0], np.cumsum(values)))
        self.squares = np.concatenate(([0.0], np.cumsum(values**2)))
        return self

    def error(self, start: int, end: int) -> float:
        n = end - start
        total = self.sums[end] - self.sums[start]
        return float(self.squares[end] - self.squares[start] - total * total / n)

    def split_costs(self, lo: int, splits: np.ndarray, hi: int) -> np.ndarray:
        """The cost of [lo, b) and [b, hi) for each b in `splits`, at once."""
        def cost(a: np.ndarray | int, b: np.ndarray | int) -> np.ndarray:
            total = self.sums[b] - self.sums[a]
            return self.squares[b] - self.squares[a] - total * total / (np.asarray(b) - np.asarray(a))

        return cost(lo, splits) + cost(splits, hi)


# PELT looks at every JUMP-th run as a boundary, so that its work stays near SPLIT_POINTS² a series
# however long the history; each boundary it finds is then placed exactly among the runs around it.
SPLIT_POINTS = 50


def candidates(values: np.ndarray, sigma: float) -> list[int]:
    """Where PELT places a change in a series of run means scaled by their median, of noise σ (each index
    the first run of a new level)."""
    n = len(values)
    if n < FEWEST_RUNS:
        return []
    jump = max(1, math.ceil(n / SPLIT_POINTS))
    cost = _MeanShift()
    found = ruptures.Pelt(custom_cost=cost, min_size=2, jump=jump).fit(values).predict(
        pen=2 * sigma**2 * math.log(n))
    bounds = [0, *found]
    placed = []
    for i in range(1, len(bounds) - 1):
        lo, b, hi = bounds[i - 1], bounds[i], bounds[i + 1]
        splits = np.arange(max(lo + 2, b - jump + 1), min(hi - 2, b + jump - 1) + 1)
        placed.append(int(splits[np.argmin(cost.split_costs(lo, splits, hi))]) if len(splits) else b)
    # Two coarse boundaries either side of one step both settle on it.
    return sorted(set(placed))


def difference(series: PointSeries, before: list[int], after: list[int], spread_floor: float = 0.0
               ) -> Difference | None:
    """The runs `after` against the runs `before`; None where a side has too little to test.

    Where each side has RUNS_AS_REPLICATES runs, Welch's test between their run means (run-to-run noise is
    the noise that matters between runs). Where one side is shorter (the newest run alone), its mean
    against the longer side's with the longer side's run-to-run spread: the short side's own few trials
    say nothing of how runs vary, and three trials that happened to agree made 1% of unchanged series
    significant at 1e-4. That spread is at least `spread_floor`, the whole series' run-to-run noise: the
    longer side is a level PELT found, chosen for being even. Where both sides are short, Welch's test
    between their trials, as compare does."""
    if not before or not after:
        return None
    means_a = [statistics.fmean(series.trials[i]) for i in before]
    means_b = [statistics.fmean(series.trials[i]) for i in after]
    if len(before) >= RUNS_AS_REPLICATES and len(after) >= RUNS_AS_REPLICATES:
        ratio, low, high, p = welch(means_a, means_b)
        return Difference(ratio, low, high, p, "runs")
    if max(len(before), len(after)) >= RUNS_AS_REPLICATES:
        return _against_spread(means_a, means_b, spread_floor)
    ratio, low, high, p = welch([x for i in before for x in series.trials[i]],
                                [x for i in after for x in series.trials[i]])
    return Difference(ratio, low, high, p, "trials")


def cusum(values: np.ndarray, sigma: float) -> float:
    """The p-value of a change in mean anywhere in `values` (noise σ): the largest CUSUM deviation against
    the supremum of a Brownian bridge (Kolmogorov's distribution), which counts every split point that
    could have been chosen."""
    n = len(values)
    sums = np.cumsum(values - values.mean())
    return float(stats.kstwobign.sf(np.max(np.abs(sums)) / (sigma * math.sqrt(n))))


def _against_spread(before: list[float], after: list[float], floor: float) -> Difference:
    """The shorter side's mean against the longer side's, the variance of one run mean taken from the
    longer side alone (a t-test with its degrees of freedom)."""
    long_side = before if len(before) >= len(after) else after
    m, k = len(long_side), min(len(before), len(after))
    spread = max(statistics.stdev(long_side), floor)
    ma, mb = statistics.fmean(before), statistics.fmean(after)
    ratio = mb / ma
    se = spread * math.sqrt(1 / m + 1 / k)
    if se == 0:
        return Difference(ratio, ratio, ratio, 1.0 if ma == mb else 0.0, "runs against the longer side's spread")
    t = (mb - ma) / se
    p = float(2 * stats.t.sf(abs(t), m - 1))
    half = stats.t.ppf(1 - ALPHA / 2, m - 1) * se
    return Difference(ratio, (mb - half) / ma, (mb + half) / ma, p, "runs against the longer side's spread")


@dataclass(frozen=True)
class _Candidate:
    series: PointSeries
    before: list[int]  # the run indices of the old level
    after: list[int]
    difference: Difference
    positions: int  # the split points the boundary could have taken in its stretch
    searched: float  # the p of a change anywhere in the stretch searched (CUSUM); 0 where nothing was searched

    @property
    def p_selected(self) -> float:
        return min(1.0, max((self.difference.p or 1.0) * self.positions, self.searched))


def _candidates_of(series: PointSeries, newest: int) -> list[_Candidate]:
    measured = series.measured()
    means = np.asarray([statistics.fmean(series.trials[i]) for i in measured])
    level = float(np.median(means))
    scaled = means / level
    sigma = noise(scaled)
    bounds = candidates(scaled, sigma)
    edges = [0, *bounds, len(measured)]
    out = []
    for lo, b, hi in zip(edges, edges[1:], edges[2:], strict=False):
        d = difference(series, measured[lo:b], measured[b:hi], sigma * level)
        if d is not None and d.p is not None:
            out.append(_Candidate(series, measured[lo:b], measured[b:hi], d, max(1, len(measured) - 3),
                                  cusum(scaled[lo:hi], sigma)))
    # The newest run against the level before it, from the last boundary that leaves it two runs (a
    # boundary just before the newest run is the newest run pulling one towards itself): a change it
    # begins has one run so far.
    last_start = max((b for b in bounds if b <= len(measured) - 3), default=0)
    if len(measured) >= FEWEST_RUNS and measured[-1] == newest and len(measured) - 1 - last_start >= 2:
        d = difference(series, measured[last_start:-1], measured[-1:], sigma * level)
        if d is not None and d.p is not None:
            out.append(_Candidate(series, measured[last_start:-1], measured[-1:], d, 1, 0.0))
    return out


def _adjusted(p_values: list[float]) -> list[float]:
    """Holm's step-down adjustment: the chance of any false change among all candidates stays under
    ALPHA. Benjamini-Hochberg's false discovery rate let one real change carry false ones in with it
    (a +5% on an unchanged series beside a -20% planted one)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def find_shifts(runs: list[RunInfo], series: list[PointSeries]) -> tuple[list[Shift], int]:
    """The confirmed changes, as shifts, and how many candidates were tested."""
    newest = len(runs) - 1
    found = [c for s in series for c in _candidates_of(s, newest)]
    adjusted = _adjusted([c.p_selected for c in found])
    kept: dict[tuple[SeriesKey, int], list[Change]] = {}
    for cand, p_adj in zip(found, adjusted, strict=True):
        if p_adj >= ALPHA:
            continue
        change = Change(cand.series.cores, cand.before[-1], cand.after[0], cand.before[0], cand.after[-1],
                        cand.difference, p_adj)
        kept.setdefault((cand.series.key, change.after), []).append(change)
    by_key: dict[SeriesKey, list[PointSeries]] = {}
    for s in series:
        by_key.setdefault(s.key, []).append(s)
    shifts = []
    for (key, after), changes in kept.items():
        changes.sort(key=lambda c: c.cores)
        widest = max(changes, key=lambda c: c.last - c.first)
        span_before = range(widest.first, after)
        span_after = range(after, widest.last + 1)
        by_cores: dict[int, Difference] = {}
        for s in sorted(by_key[key], key=lambda s: s.cores):
            d = difference(s, [i for i in span_before if s.trials[i]], [i for i in span_after if s.trials[i]])
            if d is not None:
                by_cores[s.cores] = d
        before = max(c.before for c in changes)
        shifts.append(Shift(key, before, after, changes, by_cores, _scaling(by_key[key], span_before, span_after),
                            _environment(runs[before], runs[after])))
    for shift in shifts:
        shift.with_it = [other.key for other in shifts if other is not shift and other.after == shift.after]
    shifts.sort(key=lambda s: (s.after, s.key.name))
    return shifts, len(found)


def _scaling(series: list[PointSeries], before: range, after: range) -> tuple[float, float] | None:
    """Per-core throughput at the most cores over one core's, on each side (every run's trials pooled)."""
    by_cores = {s.cores: s for s in series}
    if 1 not in by_cores or len(by_cores) < 2:
        return None
    one, most = by_cores[1], by_cores[max(by_cores)]

    def ratio(span: range) -> float | None:
        a = [x for i in span for x in one.trials[i]]
        b = [x for i in span for x in most.trials[i]]
        return statistics.fmean(b) / statistics.fmean(a) if a and b else None

    before, after_ = ratio(before), ratio(after)
    return (before, after_) if before is not None and after_ is not None else None


def _environment(before: RunInfo, after: RunInfo) -> list[tuple[str, list[str]]]:
    envs = [{k: v for k, v in r.environment.items() if k not in TRANSIENT_FACTS} for r in (before, after)]
    return environment_differences(envs)


# From stored rows


def point_series(runs: list[RunInfo], rows: Iterable[tuple], selections: list[str]) -> list[PointSeries]:
    """(run_id, workload, test, variant, cores, per-core throughput, ok, interfered) rows as series, each
    run's trials those that count (cells.counts: ok, not interfered)."""
    index = {r.id: i for i, r in enumerate(runs)}
    trials: dict[tuple[SeriesKey, int], list[list[float]]] = {}
    for run_id, workload, test, variant, cores, per_core, ok, interfered in rows:
        i = index.get(run_id)
        if i is None or per_core is None or not counts(ok, interfered):
            continue
        if selections and not selected(workload, test, selections):
            continue
        key = (SeriesKey(workload, test, variant), cores)
        slots = trials.get(key)
        if slots is None:
            slots = trials[key] = [[] for _ in runs]
        slots[i].append(per_core)
    out = [PointSeries(key, cores, [tuple(t) for t in slots]) for (key, cores), slots in trials.items()]
    out.sort(key=lambda s: (s.key.workload, s.key.test, s.key.variant, s.cores))
    return out


def selected(workload: str, test: str, selections: list[str]) -> bool:
    """Whether a test is among `workload` or `workload/test` selections."""
    return any(sel == workload or sel == f"{workload}/{test}" for sel in selections)


def build(rows: list[dict[str, Any]], point_rows: Any, selections: list[str], host: str | None,
          order: Order, tree: Path | None) -> History:
    """The history of one machine from the store's runs (`rows`, as Store.list_runs gives them) and a
    callable giving their points' lean rows (Store.history_points)."""
    if not rows:
        raise UserError("the store has no runs: measure some with mosbench run")
    machines: dict[Machine, int] = {}
    for r in rows:
        m = machine_of(r["environment"] or {})
        machines[m] = machines.get(m, 0) + 1
    if host is None:
        machine = machine_of(max(rows, key=lambda r: (r["started_at"], r["id"]))["environment"] or {})
    else:
        named = [m for m in machines if m.hostname == host]
        if not named:
            known = ", ".join(sorted({m.hostname for m in machines}))
            raise UserError(f"no runs of host {host!r} in the store (it has: {known})")
        machine = max(named, key=lambda m: machines[m])
    mine = [RunInfo.of(r) for r in rows if machine_of(r["environment"] or {}) == machine]
    ordered, left_out = order_runs(mine, order, tree)
    if not ordered:
        raise UserError(f"none of {machine.describe()}'s runs can be placed in {order.value} order: "
                        + "; ".join(left_out))
    series = point_series(ordered, point_rows([r.id for r in ordered]), selections)
    if selections and not series:
        raise UserError(f"no stored points of {', '.join(selections)} on {machine.describe()}")
    shifts, tested = find_shifts(ordered, series)
    others = sorted(((m, n) for m, n in machines.items() if m != machine), key=lambda mn: -mn[1])
    return History(machine, order, ordered, series, shifts, tested, others, left_out)


@dataclass(frozen=True)
class BisectTarget:
    """What `mosbench bisect` is given for a change: its two sides' commits, the tests that moved, where."""

    good: str
    bad: str
    selections: tuple[str, ...]
    cores: str


def bisect_target(h: History) -> BisectTarget | None:
    """The newest change whose two sides both carry a kernel commit, with every series that moved at it."""
    for shift in reversed(h.shifts):
        before, after = h.runs[shift.before], h.runs[shift.after]
        if not (before.commit and after.commit) or before.commit == after.commit:
            continue
        at_boundary = [s for s in h.shifts if s.after == shift.after]
        tests = dict.fromkeys(test_name(s.key.workload, s.key.test) for s in at_boundary)
        cores = sorted({c for s in at_boundary for c, d in s.by_cores.items() if d.significant()}
                       | {c.cores for s in at_boundary for c in s.changes})
        return BisectTarget(before.commit, after.commit, tuple(tests), ",".join(map(str, cores)))
    return None


def of_run(rows: list[dict[str, Any]], point_rows: Any, run: dict[str, Any]) -> History | None:
    """The history a report of `run` shows: the tests it measured over its machine's runs up to it (so that
    a report of an older run reads the same whatever came after), in time order; None where none of its
    points was measured by FEWEST_RUNS runs (a guest's suite of one-off tests has no history)."""
    machine = machine_of(run["environment"] or {})
    mine = [r for r in rows if machine_of(r["environment"] or {}) == machine
            and (r["started_at"], r["id"]) <= (run["started_at"], run["id"])]
    if len(mine) < FEWEST_RUNS:
        return None
    tests = sorted({f"{w}/{t}" for _, w, t, _, _, per_core, ok, interfered in point_rows([run["id"]])
                    if per_core is not None and counts(ok, interfered)})
    if not tests:
        return None
    h = build(mine, point_rows, tests, machine.hostname, Order.TIME, None)
    return h if any(len(s.measured()) >= FEWEST_RUNS for s in h.series) else None
