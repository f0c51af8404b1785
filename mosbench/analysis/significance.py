"""A difference between two sides with its interval, and the two rules read from it.

Every comparison of two sets of measurements (compare's runs, ab's and bisect's kernels, history's levels)
ends in one `Difference`: the ratio of means (after over before) with its 95% interval and a p-value.
It is *significant* where p < ALPHA, and *the same* as closely as asked where the whole interval lies within
±precision of 1; a point ratio that happens to land near 1 says neither.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

ALPHA = 0.05  # one comparison's significance level
CONFIDENCE = 1 - ALPHA  # the intervals' confidence (95%)


class Replicates(StrEnum):
    """What a test's samples were: each side's trials, or the means of its runs (a level's or a drift's)."""

    TRIALS = "trials"
    RUNS = "runs"
    DRIFT = "runs (a drift)"


@dataclass(frozen=True)
class Difference:
    """mean(after) / mean(before), its 95% interval and the test's p; interval and p are None where a side
    had too few samples to test."""

    ratio: float
    low: float | None
    high: float | None
    p: float | None
    replicates: Replicates = Replicates.TRIALS

    @property
    def significant(self) -> bool:
        return self.p is not None and self.p < ALPHA

    def same(self, precision: float) -> bool:
        """The whole interval within ±precision (a share) of 1: no difference larger than was asked about."""
        return self.low is not None and self.high is not None and 1 - precision <= self.low \
            and self.high <= 1 + precision


class Compared:
    """A record holding a Difference where both sides were measured (None where not): its figures, None-safe."""

    difference: Difference | None

    @property
    def ratio(self) -> float | None:
        return None if self.difference is None else self.difference.ratio

    @property
    def low(self) -> float | None:
        return None if self.difference is None else self.difference.low

    @property
    def high(self) -> float | None:
        return None if self.difference is None else self.difference.high

    @property
    def p(self) -> float | None:
        return None if self.difference is None else self.difference.p

    @property
    def significant(self) -> bool:
        return self.difference is not None and self.difference.significant


def difference(base: list[float], other: list[float]) -> tuple[float, float | None, float | None, float | None]:
    """mean(other) - mean(base), Welch's 95% interval for it and Welch's p-value: the one test of two sets of
    trials (a throughput's, or a profile's function per unit of work: analysis/explain). With fewer than two
    values a side there is no variance to test against: interval and p are None."""
    import numpy as np  # here: the command line imports this module, and starts without numpy

    a, b = np.asarray(base, dtype=float), np.asarray(other, dtype=float)
    delta = float(b.mean() - a.mean())
    if len(a) < 2 or len(b) < 2:
        return delta, None, None, None
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:  # every value identical on both sides: any difference is certain, none is nothing
        return delta, delta, delta, 1.0 if delta == 0 else 0.0
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    from scipy import stats  # here: history imports this module, and scipy.stats takes a second to import

    half = float(stats.t.ppf(1 - ALPHA / 2, df)) * se
    p = float(2 * stats.t.sf(abs(delta) / se, df))  # scipy's ttest_ind, without its warning on near-equal data
    return delta, delta - half, delta + half, p


def welch(base: list[float], other: list[float]) -> Difference:
    """Ratio of means, its 95% interval and Welch's p-value.

    The interval is Welch's interval for the difference of means divided by the baseline's mean (the
    baseline's own uncertainty is in the difference's standard error). With fewer than two trials a
    side there is no variance to test against: interval and p are None.
    """
    import numpy as np

    ma = float(np.mean(base))
    delta, low, high, p = difference(base, other)
    ratio = (ma + delta) / ma
    if low is None or high is None:
        return Difference(ratio, None, None, None)
    return Difference(ratio, (ma + low) / ma, (ma + high) / ma, p)
