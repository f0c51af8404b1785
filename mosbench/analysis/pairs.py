"""Two tools measured side by side in interleaved rounds: what one pair of them is, and how it is judged.

A pair is one test, mode and task count measured by both tools (mosbench-micro and will-it-scale,
run/willitscale.py), each round giving each tool a rate and its per-second counts. The pair's verdict:
"bimodal" where either tool's rounds settle into two separated rates (`bimodality`), else "within" where
the ratio's whole 95% bootstrap interval lies within ±5%, "apart" where it lies wholly outside ±5%,
"unclear" where it crosses a bound.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mosbench.analysis.significance import Difference
from mosbench.units import si

# Bimodality rule (see `bimodality`): the gap between the groups must be this share of the median...
GAP_OF_MEDIAN = 0.25
# ...and this many times the interquartile range inside either group.
GAP_OVER_SPREAD = 3.0
# The tools agree when their medians' ratio is within this of 1.
WITHIN = 0.05


@dataclass
class Round:
    """One tool's measurement in one round: the window's mean ops/s and its per-second counts."""

    rate: float
    samples: list[float] = field(default_factory=list)


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


def _iqr(values: Sequence[float]) -> float:
    q1, q3 = np.percentile(values, [25, 75])
    return float(q3 - q1)


def spread(values: Sequence[float]) -> float:
    """Interquartile range over median, in percent."""
    median = statistics.median(values)
    return 100 * _iqr(values) / median if median else 0.0


def ratio_interval(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """95% percentile-bootstrap interval of median(a)/median(b); the rounds of each tool resampled apart."""
    from scipy import stats  # a second of imports: only where a pair is judged

    res = stats.bootstrap((a, b), lambda x, y, axis: np.median(x, axis=axis) / np.median(y, axis=axis),
                          vectorized=True, method="percentile", n_resamples=4000, random_state=0)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


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


class Verdict(enum.Enum):
    """How a pair's two tools compare (the module's docstring gives the rule)."""

    WITHIN = "within"
    APART = "apart"
    UNCLEAR = "unclear"
    BIMODAL = "bimodal"


def verdict(ratio: float, low: float, high: float, bimodal: bool = False) -> Verdict:
    """BIMODAL when either tool is; else WITHIN where the ratio's whole interval lies within ±5% (the one
    rule for "the same", significance.Difference.same), APART where it lies wholly outside, UNCLEAR where
    it crosses a bound: a median that lands near 1 between wide rounds says neither."""
    if bimodal:
        return Verdict.BIMODAL
    if Difference(ratio, low, high, None).same(WITHIN):
        return Verdict.WITHIN
    if high < 1 - WITHIN or low > 1 + WITHIN:
        return Verdict.APART
    return Verdict.UNCLEAR


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
    verdict: Verdict
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

    def to_json(self) -> dict[str, Any]:
        """JSON-ready data: every round's rate and per-second counts, the findings, the verdict."""
        return {**dataclasses.asdict(self), "verdict": self.verdict.value}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Pair:
        return cls(**{**data, "verdict": Verdict(data["verdict"]), "ours_modes": Modes(**data["ours_modes"]),
                      "theirs_modes": Modes(**data["theirs_modes"])})


@dataclass
class FailedPair:
    """A pair that could not be measured: which, why, and the failing tool's last lines."""

    test: str
    mode: str
    tasks: int
    reason: str
    lines: list[str] = field(default_factory=list)


@dataclass
class Comparison(Sequence[Pair]):
    """What a side-by-side run measured: the pairs (the object is a sequence of them) and how the run went."""

    pairs: list[Pair]
    not_run: list[tuple[str, str, int]]  # (test, mode, tasks) not measured: left for the deadline or cut short
    steal_pct: float  # share of the machine's CPU time the host stole during the run
    seconds: float
    high_fds: list[int] = field(default_factory=list)  # descriptors >= 64 open in the measuring process
    interrupted: bool = False  # stopped by SIGINT (KeyboardInterrupt) rather than the deadline
    failed: list[FailedPair] = field(default_factory=list)  # a tool failed: neither in pairs nor in not_run

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i):  # type: ignore[override]  # int or slice, as a list's
        return self.pairs[i]

    def __iter__(self) -> Iterator[Pair]:
        return iter(self.pairs)


def tally(pairs: Sequence[Pair]) -> dict[Verdict, int]:
    """How many pairs got each verdict, every verdict listed."""
    return {v: sum(p.verdict is v for p in pairs) for v in Verdict}
