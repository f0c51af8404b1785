"""Whether two sides differ, for commands that can measure more until they know (ab, bisect).

A point is decided when Welch's test says the sides differ (p < 0.05), or when the 95% interval of
their ratio lies within ±precision of 1 (the same, as closely as was asked). Anything else is unsure:
the caller adds trials until it is decided or its budget ends, and says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from mosbench.analysis.cells import PointKey
from mosbench.analysis.compare import ALPHA, welch


class State(StrEnum):
    DIFFER = "differ"
    SAME = "same"
    UNSURE = "unsure"


@dataclass(frozen=True)
class Decision:
    point: PointKey
    a: tuple[float, ...]  # per-core throughput of each trial that counts (Cell.counted)
    b: tuple[float, ...]
    ratio: float | None  # mean(b) / mean(a)
    low: float | None
    high: float | None
    p: float | None
    state: State

    @property
    def name(self) -> str:
        return self.point.text()

    def text(self) -> str:
        if self.ratio is None:
            return "not measured on both sides"
        interval = f" [{self.low:.3f}, {self.high:.3f}]" if self.low is not None else ""
        p = f", p {self.p:.2g}" if self.p is not None else ""
        return f"{self.ratio:.3f}×{interval}{p} over {len(self.a)}+{len(self.b)} trials"


def decide(point: PointKey, a: list[float], b: list[float], precision: float) -> Decision:
    if not a or not b:
        return Decision(point, tuple(a), tuple(b), None, None, None, None, State.UNSURE)
    ratio, low, high, p = welch(a, b)
    if p is not None and p < ALPHA:
        state = State.DIFFER
    elif low is not None and high is not None and 1 - precision <= low and high <= 1 + precision:
        state = State.SAME
    else:
        state = State.UNSURE
    return Decision(point, tuple(a), tuple(b), ratio, low, high, p, state)


def decide_all(a: dict[PointKey, list[float]], b: dict[PointKey, list[float]],
               precision: float) -> list[Decision]:
    return [decide(k, a.get(k, []), b.get(k, []), precision) for k in dict.fromkeys([*a, *b])]
