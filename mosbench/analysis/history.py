"""A machine's runs as one series per point, and the changes in that series: where, how large, of what kind.

A kernel developer runs the same suite on every release or every night and asks where a number changed
and why. Each (workload, test, variant, cores) becomes a series over the machine's runs, in time, kernel
version or commit order, and the search goes as Otava's does (Fleming et al., "Hunter", ICPE 2023): a
first pass finds candidate boundaries, then the weakest is merged away and its neighbours re-tested on
their longer sides, again, until every boundary left is confirmed.

1. Candidates: PELT on the runs' mean per-core throughputs, scaled by the series' median so that one
   penalty fits every test (a BIC, 2σ² ln n, with σ the series' run-to-run noise read from its successive
   differences, at least what its runs' trials imply, and weighed with its test's series'); the newest
   run is a candidate of its own (a change it begins has one run so far: the CI gate's case).
2. Merge: each boundary is tested between the two levels around it (Welch's test between their run means,
   each side's spread at least σ, since a side of one or two runs says nothing of how runs vary, and a
   wider one weighed with σ by their degrees of freedom), its p corrected for the split points it could
   have taken; the weakest goes while one fails, and a level of one run between two boundaries (an outlier,
   not a level) always loses its weaker boundary first.
3. Drifts: consecutive boundaries that move one way, or a series with none, are fitted as a ramp too (a
   level, a straight stretch, a level); where the ramp explains the runs better, by the same BIC, it
   replaces them as one drift with its total size.
4. Events: the boundaries of one test's series (its variants and core counts) that lie within
   CLUSTER_RUNS of each other are one change, moved to the run that best explains them all.
5. Every series' candidates are corrected together (Holm, family-wise at FAMILY_ALPHA): a suite of hundreds of
   series tests hundreds of candidates, and uncorrected 5% would find changes every night.

The changes of one test and variant at one boundary are one shift. Its kind comes from one core and the most
cores across the same runs (a cost every core pays, a scalability change, ...); it names the other tests
that shifted at the same run and the environment's differences across it (kernel, its options, THP,
mitigations, cgroups, microcode, the servers' packages).
"""

from __future__ import annotations

import functools
import math
import re
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mosbench import gitrepo
from mosbench.analysis import tails
from mosbench.analysis.cells import SeriesKey, counts, per_core, scaling_ratio
from mosbench.analysis.significance import CONFIDENCE, Difference, Replicates
from mosbench.analysis.tails import kolmogorov_tail, t_two_sided
from mosbench.errors import UserError
from mosbench.workloads.base import test_name

if TYPE_CHECKING:
    from mosbench.store.db import HistoryRow  # the store's own rows; importing it here would load SQLAlchemy

# One comparison's level (significance.ALPHA) is a core count's own test across a change, and the 95% intervals.
# The family's: the chance that a machine's history shows any false change. One false alarm in a hundred
# nights: at 0.05 two machine modes that happened to cluster made 3.5% of unchanged 60-series stores show
# one (benchmarks/history_vs_otava.py).
FAMILY_ALPHA = 0.01
# The least run-to-run noise assumed (relative): below it a perfectly steady series would call a 0.1%
# step a change.
NOISE_FLOOR = 0.005
# A series needs this many measured runs before changes are looked for in it.
FEWEST_RUNS = 4
# The fewest runs of a level between two changes: one run is an outlier, not a level (the newest run alone
# is the exception: a change it begins has one run so far).
MIN_SEGMENT = 2
# Boundaries of one test's series this many runs apart or closer are one change (a step shows at one run at
# some core counts and the next at others, as noise places it).
CLUSTER_RUNS = 2
# The fewest runs a drift's straight stretch spans; a shorter one is a step.
MIN_RAMP = 3
# A ramp's BIC penalty, in ln n (a boundary's is 2): a ramp has one parameter more than a step, and noise
# bends a step's sides into a ramp's often enough at 3 that a drift needs clearly more than a step gives.
RAMP_PENALTY = 5
# The fewest series whose noises moderate each other (_moderate): the spread of fewer says too little of
# whether their noises differ.
MODERATED_SERIES = 10
# The most that the prior weighs in a series' noise, in the series' own degrees of freedom. More finds no
# more steps in benchmarks/history_vs_otava.py and flattens a series noisier than the rest: with the store's
# median as every series' prior, one series of 60 with ±6% a night of its own showed a change in 7 of 100
# unchanged stores at 10, 2 at 1 (3 with each series' noise its own).
PRIOR_WEIGHT = 1
# The fewest series of a test whose median noise is its series' prior (fewer: the store's).
PRIOR_SIBLINGS = 4
# The F test's level at which a series is noisier than its prior and keeps its own noise.
NOISIER = 0.05
# Environment facts that differ between any two runs and explain nothing.
TRANSIENT_FACTS = ("harness_scheduling", "profiling", "merged_from", "ab", "bisect", "hostname")


# The t quantile is asked for with the same few degrees of freedom over and over: its Newton steps once each.
t_quantile = functools.lru_cache(maxsize=4096)(tails.t_quantile)


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
        bisected, guest = env.get("bisect"), env.get("virtual_machine")
        # --commit's, else a bisection step's, else the guest kernel's (vm or ab booting a tree, or an image
        # bisect kept: guest/kernels.py reads its commit)
        commit = (env.get("kernel_commit") or (bisected.get("commit") if isinstance(bisected, dict) else None)
                  or (guest.get("kernel_commit") if isinstance(guest, dict) else None))
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


class Shape(Enum):
    """How a level moved: at once between two runs, or evenly over a stretch of them."""

    STEP = "step"
    DRIFT = "drift"


@dataclass(frozen=True)
class Change:
    """A confirmed change of one point: from run `before` (the last of the old level) to `after` (the
    first of the new), both indices into the history's runs; a drift's are the ends of its stretch."""

    cores: int
    before: int
    after: int
    old_first: int  # the old level's first run and the new level's last, as the test compared them
    new_last: int
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
    shape: Shape = Shape.STEP

    @property
    def ratio(self) -> float:
        """The size of the shift: its change at the most cores."""
        return max(self.changes, key=lambda c: c.cores).difference.ratio

    def moved(self) -> dict[int, Difference]:
        """The core counts whose own test across the same runs says they moved (significant, unadjusted)."""
        return {c: d for c, d in sorted(self.by_cores.items()) if d.significant}

    def kind(self) -> Kind:
        cores = sorted(self.by_cores)
        if len(cores) < 2 or cores[0] != 1:
            return Kind.UNKNOWN
        moved = self.moved()
        if len({d.ratio > 1 for d in moved.values()}) > 1:
            return Kind.OPPOSITE
        one, most = cores[0] in moved, cores[-1] in moved
        if one and most:
            return Kind.EVERY_CORE
        if most:
            return Kind.SCALABILITY
        if one:
            return Kind.ONE_CORE
        return Kind.SOME_CORES


class Kind(Enum):
    """What a shift changed, read from every core count across the same runs."""

    EVERY_CORE = "every core"  # one core and the most cores moved, the same way
    SCALABILITY = "scalability"  # the most cores moved, one core did not
    ONE_CORE = "one core"  # one core moved, the most cores did not
    SOME_CORES = "some cores"  # neither one core nor the most cores moved; some counts between did
    OPPOSITE = "opposite ways"  # some core counts moved up and others down
    UNKNOWN = "unknown"  # no one-core point to tell a cost from a scalability change


@dataclass
class History:
    machine: Machine
    order: Order
    runs: list[RunInfo]
    series: list[PointSeries]
    shifts: list[Shift]
    hypotheses: int  # how many were tested, over which the correction was made
    other_machines: list[tuple[Machine, int]]  # the store's other machines and their runs
    left_out: list[str]  # runs not placed in this order, and why

    def begins_at_newest(self) -> list[Shift]:
        """The steps whose first run of the new level is the newest run (a drift begins nowhere)."""
        newest = len(self.runs) - 1
        return [s for s in self.shifts if s.after == newest and s.shape is Shape.STEP]

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
    resolved = {commit: sha for commit in set(commits) if (sha := gitrepo.commit_id(tree, commit))}
    if not resolved:
        return {}
    listed = gitrepo.git(tree, "rev-list", "--topo-order", "--reverse", *sorted(set(resolved.values())))
    place = {sha: i for i, sha in enumerate(listed.split())}
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
    normal = statistics.NormalDist()
    z = normal.inv_cdf(0.5 + q / 2)
    share = 1 - 2 * z * normal.pdf(z) / q
    return max(math.sqrt(float(np.mean(trimmed**2)) / (2 * share)), NOISE_FLOOR)


def within_runs(trials: list[tuple[float, ...]]) -> float:
    """The noise of a run's mean that its trials alone imply (absolute): their variance within runs, pooled,
    over the trials a run has (their harmonic mean). A run's mean varies at least that much from night to
    night, so it bounds the successive differences' estimate from below, which on 20 runs read 0.0066 in a
    series whose runs' own trials said 0.013 and made a change of a machine's two modes clustering."""
    squares, df, runs, inverse = 0.0, 0, 0, 0.0
    for t in trials:
        if len(t) >= 2:
            mean = statistics.fmean(t)
            squares += sum((x - mean) ** 2 for x in t)
            df += len(t) - 1
            runs += 1
            inverse += 1 / len(t)
    return math.sqrt(squares / df * inverse / runs) if df else 0.0


class _Sums:
    """Running sums of a series: any stretch's squared deviations from its own mean in O(1)."""

    def __init__(self, values: np.ndarray) -> None:
        self.sums = np.concatenate(([0.0], np.cumsum(values)))
        self.squares = np.concatenate(([0.0], np.cumsum(values**2)))

    def cost(self, start: Any, end: Any) -> Any:
        """The squared deviations of [start, end) from its mean (arrays of starts or ends at once)."""
        total = self.sums[end] - self.sums[start]
        return self.squares[end] - self.squares[start] - total * total / (np.asarray(end) - np.asarray(start))


def pelt(values: np.ndarray, penalty: float, jump: int = 1) -> list[int]:
    """The boundaries (each the first index of a new level; levels of MIN_SEGMENT values or more) that
    minimise the squared deviations from each level's mean plus `penalty` a boundary, among every `jump`-th
    index: Killick, Fearnhead and Eckley's pruned search. In plain floats: a series of tens of runs is
    faster so than through numpy's per-call cost, and one of hundreds is looked at every `jump`-th run."""
    n = len(values)
    sums, squares = [0.0], [0.0]
    for x in values.tolist():
        sums.append(sums[-1] + x)
        squares.append(squares[-1] + x * x)

    def cost(start: int, end: int) -> float:
        total = sums[end] - sums[start]
        return squares[end] - squares[start] - total * total / (end - start)

    best: dict[int, float] = {0: -penalty}
    last: dict[int, int] = {0: 0}
    alive = [0]
    for end in sorted(set(range(jump, n, jump)) | {n}):
        fits = [(best[s] + cost(s, end), s) for s in alive if end - s >= MIN_SEGMENT]
        if not fits:
            continue
        fit, start = min(fits)
        best[end], last[end] = fit + penalty, start
        # A start whose fit to here already costs more than the best with a boundary here never wins later.
        alive = [s for s in alive if end - s < MIN_SEGMENT] + [s for f, s in fits if f <= best[end]] + [end]
    if n not in best:
        return []
    bounds, end = [], n
    while (end := last[end]) > 0:
        bounds.append(end)
    return sorted(bounds)


# PELT looks at every JUMP-th run as a boundary, so that its work stays near SPLIT_POINTS² a series
# however long the history; each boundary it finds is then placed exactly among the runs around it.
SPLIT_POINTS = 50


def boundaries(values: np.ndarray, sigma: float) -> list[int]:
    """Where PELT places a change in a series of run means scaled by their median, of noise σ (each index
    the first run of a new level)."""
    n = len(values)
    if n < FEWEST_RUNS:
        return []
    jump = max(1, math.ceil(n / SPLIT_POINTS))
    found = pelt(values, 2 * sigma**2 * math.log(n), jump)
    if jump == 1:
        return found
    sums = _Sums(values)
    bounds = [0, *found, n]
    placed = []
    for i in range(1, len(bounds) - 1):
        lo, b, hi = bounds[i - 1], bounds[i], bounds[i + 1]
        splits = np.arange(max(lo + MIN_SEGMENT, b - jump + 1), min(hi - MIN_SEGMENT, b + jump - 1) + 1)
        if len(splits):
            b = int(splits[np.argmin(sums.cost(lo, splits) + sums.cost(splits, hi))])
        placed.append(b)
    # Two coarse boundaries either side of one step both settle on it.
    return sorted(set(placed))


def _difference(a: np.ndarray, b: np.ndarray, floor: float, floor_df: float) -> Difference:
    """mean(b) / mean(a) with its 95% interval and Welch's p between the two sides' run means, each side's
    variance at least floor² (the series' run-to-run noise, read from all its runs with floor_df degrees of
    freedom): a side of one run has only that, and two runs that happened to agree say nothing of how runs
    vary."""
    ma, mb = float(a.mean()), float(b.mean())
    parts = []
    for side in (a, b):
        own = float(side.var(ddof=1)) if len(side) >= 2 else 0.0
        variance, df = floor * floor, floor_df
        if own > floor * floor and floor > 0:
            # A side that spreads more than the series' noise says so, weighed against that noise as
            # Smyth's moderated variance weighs a gene's own against all genes': its 9 degrees of freedom
            # alone would set a t that needs 8.8 for the p a 60-series family asks (6.1 at 18, 4.5 at 200).
            # The same runs made the noise: no degrees of freedom are added.
            variance = (floor_df * floor * floor + (len(side) - 1) * own) / (floor_df + len(side) - 1)
        elif own > floor * floor:
            variance, df = own, len(side) - 1
        parts.append((variance / len(side), df))
    se2 = sum(v for v, _ in parts)
    if se2 == 0:
        return Difference(mb / ma, mb / ma, mb / ma, 1.0 if ma == mb else 0.0, Replicates.RUNS)
    df = se2 * se2 / sum(v * v / d for v, d in parts)
    se = math.sqrt(se2)
    half = t_quantile(CONFIDENCE, df) * se
    return Difference(mb / ma, (mb - half) / ma, (mb + half) / ma, t_two_sided((mb - ma) / se, df), Replicates.RUNS)


def cusum(values: np.ndarray, sigma: float) -> float:
    """The p-value of a change in mean anywhere in `values` (noise σ): the largest CUSUM deviation against
    the supremum of a Brownian bridge (Kolmogorov's distribution), which counts every split point that
    could have been chosen."""
    sums = np.cumsum(values - values.mean())
    return kolmogorov_tail(float(np.max(np.abs(sums))) / (sigma * math.sqrt(len(values))))


@dataclass(frozen=True)
class _Ramp:
    """A drift in a series' measured runs: level until `a`, a straight stretch to `b`, level from `b`."""

    lo: int  # the stretch fitted, [lo, hi)
    a: int
    b: int
    hi: int
    difference: Difference
    p_selected: float


class _Fit:
    """One series as the search sees it: its measured runs' means, scaled by their median, their noise σ, and
    the boundaries and drifts found in them (indices into the measured runs)."""

    def __init__(self, series: PointSeries, newest: int) -> None:
        self.series = series
        self.measured = series.measured()
        self.means = np.asarray([statistics.fmean(series.trials[i]) for i in self.measured])
        # statistics' median: numpy's imports numpy.ma on its first call, 30 ms of a short history's start.
        self.level = statistics.median(self.means.tolist()) if len(self.means) else 0.0
        usable = len(self.measured) >= FEWEST_RUNS and self.level > 0
        self.scaled = self.means / self.level if usable else self.means
        self.sigma = NOISE_FLOOR
        if usable:
            self.sigma = max(noise(self.scaled), within_runs([series.trials[i] for i in self.measured]) / self.level)
        self.df = max(1, len(self.measured) - 2)  # the noise's degrees of freedom
        self.sums = _Sums(self.scaled)
        self.newest = usable and self.measured[-1] == newest
        self.bounds: list[int] = []
        self.ramps: list[_Ramp] = []
        self.usable = usable

    def search(self) -> None:
        """The first pass (once the noise is settled): PELT's boundaries, and the newest run against the level
        before it, since a change it begins has one run so far."""
        self.bounds = boundaries(self.scaled, self.sigma)
        if self.newest and len(self.measured) - 1 not in self.bounds:
            self.bounds.append(len(self.measured) - 1)

    @property
    def n(self) -> int:
        return len(self.measured)

    def edges(self) -> list[int]:
        return [0, *self.bounds, self.n]

    def test(self, j: int) -> tuple[Difference, float]:
        """Boundary j between the levels either side of it: the difference and its p corrected for the
        choice of the boundary (the larger of Welch's p times the split points the series offered and the
        CUSUM p of a change anywhere in the two levels); the newest run alone was chosen for being newest."""
        edges = self.edges()
        lo, b, hi = edges[j], edges[j + 1], edges[j + 2]
        d = _difference(self.means[lo:b], self.means[b:hi], self.sigma * self.level, self.df)
        p = d.p if d.p is not None else 1.0
        if b == self.n - 1 and self.newest:
            return d, p
        return d, min(1.0, max(p * max(1, self.n - 3), cusum(self.scaled[lo:hi], self.sigma)))

    def merge(self, threshold: float) -> None:
        """Otava's merge: while a boundary fails `threshold`, the weakest goes and its neighbours are tested
        again on their longer sides; a level of one run between two boundaries loses the weaker first."""
        while self.bounds:
            edges = self.edges()
            ps = [self.test(j)[1] for j in range(len(self.bounds))]
            lonely = [j for j in range(1, len(self.bounds)) if edges[j + 1] - edges[j] < MIN_SEGMENT]
            if lonely:
                j = lonely[0]
                weakest = j - 1 if ps[j - 1] >= ps[j] else j
            else:
                weakest = int(np.argmax(ps))
                if ps[weakest] <= threshold:
                    return
            del self.bounds[weakest]

    def cost(self, lo: int, b: int, hi: int) -> float:
        """The squared deviations of [lo, hi) split at b, in units of the series' noise."""
        return float(self.sums.cost(lo, b) + self.sums.cost(b, hi)) / self.sigma**2

    def drifts(self, threshold: float) -> None:
        """Replace by a drift each run of boundaries that all move one way where a ramp explains their runs
        better (BIC: a boundary costs 2 ln n, a ramp 3 ln n); in a series without boundaries, a ramp over
        all its runs where they hold a change somewhere (CUSUM)."""
        log_n = math.log(self.n)
        if not self.bounds:
            if self.n >= FEWEST_RUNS + MIN_RAMP - 1 and cusum(self.scaled, self.sigma) < threshold:
                ramp = self._ramp(0, self.n)
                level = float(self.sums.cost(0, self.n)) / self.sigma**2
                if ramp is not None and ramp[0] + RAMP_PENALTY * log_n < level:
                    self.ramps.append(ramp[1])
            return
        ups = [self.test(j)[0].ratio > 1 for j in range(len(self.bounds))]
        j = 0
        while j < len(self.bounds):
            k = j
            while k + 1 < len(self.bounds) and ups[k + 1] == ups[j]:
                k += 1
            edges = self.edges()
            lo, hi = edges[j], edges[k + 2]
            steps = sum(float(self.sums.cost(a, b)) for a, b in zip(edges[j:k + 2], edges[j + 1:k + 3], strict=True))
            ramp = self._ramp(lo, hi)
            if ramp is not None and ramp[0] + RAMP_PENALTY * log_n < steps / self.sigma**2 + 2 * (k - j + 1) * log_n:
                self.ramps.append(ramp[1])
                del self.bounds[j:k + 1]
                del ups[j:k + 1]
            else:
                j = k + 1

    def _ramp(self, lo: int, hi: int, at: tuple[int, int] | None = None) -> tuple[float, _Ramp] | None:
        """The best ramp over [lo, hi) (its squared deviations in units of σ², and the ramp), its ends on a
        grid of at most about 40 places (or `at`, measured indices), with its difference (the far level over
        the near one), its p corrected for the ends it could have taken."""
        y = self.scaled[lo:hi]
        m = len(y)
        if m < MIN_RAMP + 1:
            return None
        grid = max(1, math.ceil(m / 40))
        places = sorted(set(range(0, m, grid)) | {m - 1})
        pairs = np.asarray([(a, b) for a in places for b in places if b - a >= MIN_RAMP])
        if not len(pairs):
            return None
        choices = len(pairs)
        if at is not None:
            pairs = np.asarray([(at[0] - lo, at[1] - lo)])
        a, b = pairs[:, :1], pairs[:, 1:]
        w = np.clip((np.arange(m)[None, :] - a) / (b - a), 0.0, 1.0)
        u = 1.0 - w
        suu, suw, sww = (u * u).sum(1), (u * w).sum(1), (w * w).sum(1)
        uy, wy = u @ y, w @ y
        det = suu * sww - suw * suw
        first = (sww * uy - suw * wy) / det
        last = (suu * wy - suw * uy) / det
        rss = float(y @ y) - (first * uy + last * wy)
        i = int(np.argmin(rss))
        spread2 = max(float(rss[i]) / max(1, m - 4), self.sigma**2)
        df = max(1, m - 4) if spread2 > self.sigma**2 else self.df
        se = math.sqrt(spread2 * (suu[i] + sww[i] + 2 * suw[i]) / det[i])
        half = t_quantile(CONFIDENCE, df) * se
        f, g = float(first[i]), float(last[i])
        d = Difference(g / f, (g - half) / f, (g + half) / f, t_two_sided((g - f) / se, df), Replicates.DRIFT)
        p = min(1.0, max((d.p if d.p is not None else 1.0) * choices, cusum(y, self.sigma)))
        return float(rss[i]) / self.sigma**2, _Ramp(lo, lo + int(pairs[i, 0]), lo + int(pairs[i, 1]), hi, d, p)

    def split_at(self, j: int, run: int) -> int | None:
        """Where boundary j would be at history run `run` (the first measured run at or after it), if that
        leaves its levels their runs (MIN_SEGMENT; one for the newest run alone)."""
        edges = self.edges()
        lo, hi = edges[j], edges[j + 2]
        b = next((i for i in range(lo, hi) if self.measured[i] >= run), hi)
        after_needs = 1 if hi == self.n and self.newest else MIN_SEGMENT
        return b if b - lo >= MIN_SEGMENT and hi - b >= after_needs else None


@dataclass(frozen=True)
class _Candidate:
    series: PointSeries
    before: list[int]  # the run indices of the old level
    after: list[int]
    difference: Difference
    p_selected: float
    shape: Shape
    start: int  # the last run at the old level and the first at the new (a drift's stretch between them)
    end: int


def _place_events(fits: list[_Fit]) -> None:
    """One change per event: the boundaries of one test's series (variants and core counts) within
    CLUSTER_RUNS runs of each other, never two of one series, are moved to the run where the sum of every
    one's squared deviations (in its own noise) is least, so each series is then sized at that run. Again
    until none moves: a cluster's window starts at its earliest boundary, so a boundary just past it makes a
    cluster of its own until the first has settled within its reach (one 5% step read as #10 and #11)."""
    for _ in range(5):
        if not _place_once(fits):
            return


def _place_once(fits: list[_Fit]) -> bool:
    """One pass of _place_events; whether a boundary moved."""
    moved = False
    by_test: dict[tuple[str, str], list[tuple[int, _Fit, int]]] = {}
    for fit in fits:
        for j, b in enumerate(fit.bounds):
            by_test.setdefault((fit.series.key.workload, fit.series.key.test), []).append((fit.measured[b], fit, j))
    for members in by_test.values():
        members.sort(key=lambda m: m[0])
        clusters: list[list[tuple[int, _Fit, int]]] = []
        for member in members:
            cluster = clusters[-1] if clusters else None
            if cluster and member[0] - cluster[0][0] <= CLUSTER_RUNS and all(m[1] is not member[1] for m in cluster):
                cluster.append(member)
            else:
                clusters.append([member])
        events: list[tuple[int, list[tuple[int, _Fit, int]]]] = []  # the clusters of two or more, at their run
        for cluster in clusters:
            runs = sorted({m[0] for m in cluster})
            if len(runs) < 2:
                if len(cluster) > 1:
                    events.append((runs[0], cluster))
                continue
            best, where, at = math.inf, None, runs[0]
            for run in range(runs[0], runs[-1] + 1):
                splits = [(fit, j, fit.split_at(j, run)) for _, fit, j in cluster]
                if any(b is None for _, _, b in splits):
                    continue
                edges = [fit.edges() for fit, _, _ in splits]
                total = sum(fit.cost(e[j], b, e[j + 2]) for (fit, j, b), e in zip(splits, edges, strict=True))
                if total < best:
                    best, where, at = total, splits, run
            for fit, j, b in where or []:
                moved |= fit.bounds[j] != b
                fit.bounds[j] = b
            events.append((at, cluster))
        for cluster in clusters:
            moved |= bool(events) and len(cluster) == 1 and _join(cluster[0][1], cluster[0][2], events)
    return moved


def _join(fit: _Fit, j: int, events: list[tuple[int, list[tuple[int, _Fit, int]]]]) -> bool:
    """A series' boundary alone at its run, where others of its test moved together at another run: noise
    placed it there when its split at their run costs at most a boundary's penalty (2 ln n, in its noise) more
    than its own, and it joins them (one 5% step at #10 read at #13 in one of ten series). The newest run's
    own candidate stays: it is the CI gate's question."""
    if fit.newest and fit.bounds[j] == fit.n - 1:
        return False
    run = fit.measured[fit.bounds[j]]
    for at, members in sorted(events, key=lambda e: abs(e[0] - run)):
        b = fit.split_at(j, at)
        if at == run or b is None or any(m[1] is fit for m in members):
            continue
        edges = fit.edges()
        if fit.cost(edges[j], b, edges[j + 2]) - fit.cost(edges[j], fit.bounds[j], edges[j + 2]) <= 2 * math.log(fit.n):
            fit.bounds[j] = b
            return True
        return False
    return False


def _settle_drifts(fits: list[_Fit]) -> None:
    """One shape per event in a test's series: where most of them step within another's drift, that drift
    goes back to a step at the run they share, as noise happened to bend it; where most drift, a series'
    steps inside their stretch become a drift too; and the drifts of one test share their ends (the
    medians), so that one drift is one change."""
    by_test: dict[tuple[str, str], list[_Fit]] = {}
    for fit in fits:
        by_test.setdefault((fit.series.key.workload, fit.series.key.test), []).append(fit)
    for siblings in by_test.values():
        for fit in siblings:
            for ramp in list(fit.ramps):
                a, b = fit.measured[ramp.a], fit.measured[ramp.b]
                steps = [other.measured[x] for other in siblings if other is not fit for x in other.bounds
                         if a < other.measured[x] <= b]
                drifts = sum(any(other.measured[r.a] < b and a < other.measured[r.b] for r in other.ramps)
                             for other in siblings if other is not fit)
                if len(steps) <= drifts:
                    continue
                run = statistics.median_low(steps)
                fit.ramps.remove(ramp)
                bounds = [x for x in fit.bounds if not ramp.lo < x < ramp.hi]
                b_new = next((i for i in range(ramp.lo, ramp.hi) if fit.measured[i] >= run), None)
                if b_new is not None and b_new - ramp.lo >= MIN_SEGMENT and ramp.hi - b_new >= 1:
                    bounds.append(b_new)
                fit.bounds = sorted(set(bounds))
        ramps = [(fit.measured[r.a], fit.measured[r.b]) for fit in siblings for r in fit.ramps]
        if not ramps:
            continue
        start = statistics.median_low(a for a, _ in ramps)
        end = statistics.median_high(b for _, b in ramps)
        for fit in siblings:
            inside = [j for j, x in enumerate(fit.bounds) if start < fit.measured[x] <= end]
            if inside and len(ramps) > len(siblings) // 2 and not fit.ramps:
                edges = fit.edges()
                lo, hi = edges[inside[0]], edges[inside[-1] + 2]
                del fit.bounds[inside[0]:inside[-1] + 1]
                fit.ramps.append(_Ramp(lo, lo, lo, hi, Difference(1.0, None, None, None, Replicates.DRIFT), 1.0))
            for i, r in enumerate(fit.ramps):
                a = next((x for x in range(r.lo, r.hi) if fit.measured[x] >= start), r.lo)
                b = next((x for x in range(r.lo, r.hi) if fit.measured[x] >= end), r.hi - 1)
                refit = fit._ramp(r.lo, r.hi, (a, b)) if b - a >= MIN_RAMP else None
                if refit is not None:
                    fit.ramps[i] = refit[1]


def _candidates_of(fit: _Fit) -> list[_Candidate]:
    out = []
    edges = fit.edges()
    m = fit.measured
    for j in range(len(fit.bounds)):
        d, p = fit.test(j)
        lo, b, hi = edges[j], edges[j + 1], edges[j + 2]
        out.append(_Candidate(fit.series, m[lo:b], m[b:hi], d, p, Shape.STEP, m[b - 1], m[b]))
    for r in fit.ramps:
        out.append(_Candidate(fit.series, m[r.lo:r.a + 1], m[r.b:r.hi], r.difference, r.p_selected, Shape.DRIFT,
                              m[r.a], m[r.b]))
    return out


def _moderate(fits: list[_Fit]) -> None:
    """Each series' noise weighed with its test's, as Smyth's empirical Bayes weighs a gene's variance with
    all genes' (limma): σ² read from 19 successive differences is uncertain by a third, and Student's t with
    18 degrees of freedom needs 6.1 for the p that a 60-series family asks where one with 200 needs 4.5. The
    prior, the median σ² of the series' test (of the store's where the test has few series), weighs d0
    degrees of freedom, from how far the store's ln σ² spread beyond what their own degrees of freedom
    explain (Var ln χ²_d = ψ′(d/2)): where noises truly differ they spread more, and each series keeps more
    of its own; d0 is at most PRIOR_WEIGHT times a series' own. A series whose own σ² is above the prior's
    beyond chance (F test, NOISIER) keeps its own, as limma's robust option does: one noisy series among
    quiet siblings is not their spread."""
    if len(fits) < MODERATED_SERIES:
        return
    own = statistics.median(f.df for f in fits)
    beyond = statistics.variance([2 * math.log(f.sigma) for f in fits]) - tails.trigamma(own / 2)
    prior_df = PRIOR_WEIGHT * own
    if beyond > 0:
        low, high = 1e-3, prior_df  # ψ′ falls: the d0 whose ψ′(d0/2) is the spread beyond, by bisection
        while high / low > 1.001:
            middle = math.sqrt(low * high)
            low, high = (middle, high) if tails.trigamma(middle / 2) > beyond else (low, middle)
        prior_df = low
    # A test's series (its variants and core counts: one code path, one unit) share their noise more than the
    # store's do: the prior is the median of its own where it has a few.
    by_test: dict[tuple[str, str], list[float]] = {}
    for f in fits:
        by_test.setdefault((f.series.key.workload, f.series.key.test), []).append(f.sigma**2)
    store = statistics.median(f.sigma**2 for f in fits)
    for f in fits:
        siblings = by_test[f.series.key.workload, f.series.key.test]
        prior = statistics.median(siblings) if len(siblings) >= PRIOR_SIBLINGS else store
        if tails.f_upper(f.sigma**2 / prior, f.df, prior_df) < NOISIER:
            continue
        f.sigma = math.sqrt((prior_df * prior + f.df * f.sigma**2) / (prior_df + f.df))
        f.df = f.df + prior_df


def _adjusted(p_values: list[float], tested: int) -> list[float]:
    """Holm's step-down adjustment over `tested` hypotheses, of which these are the ones with a p (the
    others were merged away or found nothing): the chance of any false change among all stays under
    FAMILY_ALPHA.
    Benjamini-Hochberg's false discovery rate let one real change carry false ones in with it (a +5% on an
    unchanged series beside a -20% planted one)."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (tested - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def find_shifts(runs: list[RunInfo], series: list[PointSeries]) -> tuple[list[Shift], int]:
    """The confirmed changes, as shifts, and how many hypotheses were tested."""
    newest = len(runs) - 1
    fits = [_Fit(s, newest) for s in series]
    usable = [f for f in fits if f.usable]
    _moderate(usable)
    for fit in usable:
        fit.search()
    # Merged down to the boundaries that would pass a Bonferroni correction over the series; Holm over all
    # that remain decides.
    threshold = FAMILY_ALPHA / max(1, len(usable))
    for fit in usable:
        fit.merge(threshold)
        fit.drifts(threshold)
    _place_events(usable)
    _settle_drifts(usable)
    found = [c for fit in usable for c in _candidates_of(fit)]
    tested = sum(max(1, len(fit.bounds) + len(fit.ramps)) for fit in usable)
    adjusted = _adjusted([c.p_selected for c in found], tested)
    kept: dict[tuple[SeriesKey, int, int, Shape], list[tuple[_Candidate, float]]] = {}
    for cand, p_adj in zip(found, adjusted, strict=True):
        if p_adj < FAMILY_ALPHA:
            kept.setdefault((cand.series.key, cand.start, cand.end, cand.shape), []).append((cand, p_adj))
    noise_of = {id(f.series): (f.sigma * f.level, f.df) for f in fits if f.usable}
    by_key: dict[SeriesKey, list[PointSeries]] = {}
    for s in series:
        by_key.setdefault(s.key, []).append(s)
    shifts = []
    for (key, start, end, shape), confirmed in kept.items():
        changes = sorted((Change(c.series.cores, start, end, c.before[0], c.after[-1], c.difference, p_adj)
                          for c, p_adj in confirmed), key=lambda c: c.cores)
        first, last = min(c.old_first for c in changes), max(c.new_last for c in changes)
        span_before, span_after = range(first, start + 1), range(end, last + 1)
        by_cores: dict[int, Difference] = {}
        for s in sorted(by_key[key], key=lambda s: s.cores):
            floor, floor_df = noise_of.get(id(s), (0.0, 1))
            if shape is Shape.DRIFT:
                d = _drift_at(s, first, start, end, last, floor, floor_df)
            else:
                d = difference(s, [i for i in span_before if s.trials[i]], [i for i in span_after if s.trials[i]],
                               floor, floor_df)
            if d is not None:
                by_cores[s.cores] = d
        shifts.append(Shift(key, start, end, changes, by_cores, _scaling(by_key[key], span_before, span_after),
                            _environment(runs[start], runs[end]), shape=shape))
    for shift in shifts:
        shift.with_it = [other.key for other in shifts if other is not shift and other.after == shift.after]
    shifts.sort(key=lambda s: (s.after, s.key.name))
    return shifts, tested


def difference(series: PointSeries, before: list[int], after: list[int], floor: float = 0.0, floor_df: float = 1
               ) -> Difference | None:
    """The runs `after` against the runs `before` (Welch's test between run means, each side's spread at
    least `floor`, the series' run-to-run noise); None where a side has no run."""
    if not before or not after:
        return None
    means = [np.asarray([statistics.fmean(series.trials[i]) for i in side]) for side in (before, after)]
    if floor == 0 and (len(before) < 2 or len(after) < 2):
        # No noise known and a side of one run: its trials are all there is to test.
        return _difference(np.asarray([x for i in before for x in series.trials[i]]),
                           np.asarray([x for i in after for x in series.trials[i]]), 0.0, 1)
    return _difference(means[0], means[1], floor, floor_df)


def _drift_at(series: PointSeries, first: int, start: int, end: int, last: int, floor: float, floor_df: float
              ) -> Difference | None:
    """A drift found in another series of the same test, sized in this one: its level over [first, start], a
    straight stretch to `end`, its level over [end, last], fitted by least squares."""
    xs = [i for i in range(first, last + 1) if series.trials[i]]
    if len(xs) < 4:
        return None
    y = np.asarray([statistics.fmean(series.trials[i]) for i in xs])
    w = np.clip((np.asarray(xs) - start) / (end - start), 0.0, 1.0)
    design = np.stack([1.0 - w, w], axis=1)
    (f, g), residual, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    if rank < 2 or f <= 0:
        return None
    rss = float(residual[0]) if len(residual) else 0.0
    spread2 = max(rss / max(1, len(xs) - 2), floor * floor)
    df = max(1, len(xs) - 2) if spread2 > floor * floor else floor_df
    inverse = np.linalg.inv(design.T @ design)
    se = math.sqrt(spread2 * float(inverse[0, 0] + inverse[1, 1] - 2 * inverse[0, 1]))
    if se == 0:
        return Difference(g / f, g / f, g / f, 1.0 if f == g else 0.0, Replicates.DRIFT)
    half = t_quantile(CONFIDENCE, df) * se
    return Difference(g / f, (g - half) / f, (g + half) / f, t_two_sided((g - f) / se, df), Replicates.DRIFT)


def _scaling(series: list[PointSeries], before: range, after: range) -> tuple[float, float] | None:
    """The scaling ratio on each side (every run's trials pooled)."""
    most = max(s.cores for s in series)
    ends = {s.cores: s for s in series if s.cores in (1, most)}

    def ratio(span: range) -> float | None:
        pooled = {cores: [x for i in span for x in s.trials[i]] for cores, s in ends.items()}
        found = scaling_ratio({cores: statistics.fmean(t) if t else None for cores, t in pooled.items()})
        return found[0] if found else None

    before, after_ = ratio(before), ratio(after)
    return (before, after_) if before is not None and after_ is not None else None


def _environment(before: RunInfo, after: RunInfo) -> list[tuple[str, list[str]]]:
    # compare imports scipy.stats (a second); only a history with a change needs it.
    from mosbench.analysis.compare import environment_differences

    envs = [{k: v for k, v in r.environment.items() if k not in TRANSIENT_FACTS} for r in (before, after)]
    return environment_differences(envs)


# From stored rows


def point_series(runs: list[RunInfo], rows: Iterable[HistoryRow], selections: list[str]) -> list[PointSeries]:
    """The store's rows as series of per-core throughput (cells.per_core), each run's trials those that count
    (cells.counts: ok, not interfered)."""
    index = {r.id: i for i, r in enumerate(runs)}
    # A store of 500 runs holds 100,000 rows: a test's selection is decided once, and a key made per series.
    chosen: dict[tuple[str, str], bool] = {}
    trials: dict[tuple[str, str, str, int], list[list[float]]] = {}
    for row in rows:
        i = index.get(row.run_id)
        if i is None or row.throughput is None or not counts(row.ok, row.interfered):
            continue
        workload, test, variant, cores = row.workload, row.test, row.variant, row.cores
        if selections:
            wanted = chosen.get((workload, test))
            if wanted is None:
                wanted = chosen[workload, test] = selected(workload, test, selections)
            if not wanted:
                continue
        slots = trials.get((workload, test, variant, cores))
        if slots is None:
            slots = trials[workload, test, variant, cores] = [[] for _ in runs]
        slots[i].append(per_core(row.throughput, cores))
    out = [PointSeries(SeriesKey(workload, test, variant), cores, [tuple(t) for t in slots])
           for (workload, test, variant, cores), slots in trials.items()]
    out.sort(key=lambda s: (s.key.workload, s.key.test, s.key.variant, s.cores))
    return out


def selected(workload: str, test: str, selections: list[str]) -> bool:
    """Whether a test is among `workload` or `workload/test` selections."""
    return any(sel == workload or sel == f"{workload}/{test}" for sel in selections)


def build(rows: list[dict[str, Any]], point_rows: Callable[[list[int]], Iterable[HistoryRow]], selections: list[str],
          host: str | None, order: Order, tree: Path | None) -> History:
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
        cores = sorted({c for s in at_boundary for c, d in s.by_cores.items() if d.significant}
                       | {c.cores for s in at_boundary for c in s.changes})
        return BisectTarget(before.commit, after.commit, tuple(tests), ",".join(map(str, cores)))
    return None


def of_run(rows: list[dict[str, Any]], point_rows: Callable[[list[int]], Iterable[HistoryRow]], run: dict[str, Any]
           ) -> History | None:
    """The history a report of `run` shows: the tests it measured over its machine's runs up to it (so that
    a report of an older run reads the same whatever came after), in time order; None where none of its
    points was measured by FEWEST_RUNS runs (a guest's suite of one-off tests has no history)."""
    machine = machine_of(run["environment"] or {})
    mine = [r for r in rows if machine_of(r["environment"] or {}) == machine
            and (r["started_at"], r["id"]) <= (run["started_at"], run["id"])]
    if len(mine) < FEWEST_RUNS:
        return None
    tests = sorted({f"{r.workload}/{r.test}" for r in point_rows([run["id"]])
                    if r.throughput is not None and counts(r.ok, r.interfered)})
    if not tests:
        return None
    h = build(mine, point_rows, tests, machine.hostname, Order.TIME, None)
    return h if any(len(s.measured()) >= FEWEST_RUNS for s in h.series) else None
