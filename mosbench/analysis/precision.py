"""How sure a point's mean is: the half-width of its 95% confidence interval, relative to the mean.

Student's t, since a point has a handful of trials: with 3 trials the interval is 2.48 standard errors
each side, with 10 it is 1.38. `--trials auto` repeats a point until this is within `--precision`.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from mosbench.analysis.significance import CONFIDENCE

# --trials auto's target when --precision is not given: ±2% of the mean.
DEFAULT_PRECISION = 0.02


def relative_half_width(values: list[float]) -> float | None:
    """t(0.975, n-1) × s/√n ÷ mean; None with fewer than two values or a mean of zero."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    if mean == 0:
        return None
    from scipy import stats  # here: the CLI imports this module, and scipy.stats takes a second to import

    t = float(stats.t.ppf(0.5 + CONFIDENCE / 2, len(values) - 1))
    return t * statistics.stdev(values) / math.sqrt(len(values)) / abs(mean)


@dataclass(frozen=True)
class Cell:
    """One point's trials as --trials auto judges them."""

    taken: int  # trials stored, failed ones too
    values: list[float]  # the ok, uninterfered trials' per-core throughput

    @property
    def half_width(self) -> float | None:
        return relative_half_width(self.values)

    def wants_more(self, precision: float, most: int) -> bool:
        """Another trial, unless the interval is narrow enough, the budget is spent, or most trials
        failed (a point that fails is not made surer by failing again)."""
        if self.taken >= most or len(self.values) * 2 < self.taken:
            return False
        width = self.half_width
        return width is None or width > precision
