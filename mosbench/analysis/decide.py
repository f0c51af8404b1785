"""Whether two sides differ, for commands that can measure more until they know (ab, bisect).

A point is decided when its Difference is significant (they differ) or the same within ±precision (its
whole interval, significance.Difference.same). Anything else is unsure: the caller adds trials until it is
decided or its budget ends, and says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from mosbench.analysis.cells import PointKey
from mosbench.analysis.significance import Compared, Difference, welch


class State(StrEnum):
    DIFFER = "differ"
    SAME = "same"
    UNSURE = "unsure"


@dataclass(frozen=True)
class Decision(Compared):
    point: PointKey
    a: tuple[float, ...]  # per-core throughput of each trial that counts (Cell.counted)
    b: tuple[float, ...]
    difference: Difference | None  # b against a; None where a side has no trial
    state: State

    @property
    def name(self) -> str:
        return self.point.text()

    def text(self) -> str:
        d = self.difference
        if d is None:
            return "not measured on both sides"
        interval = f" [{d.low:.3f}, {d.high:.3f}]" if d.low is not None else ""
        p = f", p {d.p:.2g}" if d.p is not None else ""
        return f"{d.ratio:.3f}×{interval}{p} over {len(self.a)}+{len(self.b)} trials"


def decide(point: PointKey, a: list[float], b: list[float], precision: float) -> Decision:
    if not a or not b:
        return Decision(point, tuple(a), tuple(b), None, State.UNSURE)
    d = welch(a, b)
    state = State.DIFFER if d.significant else State.SAME if d.same(precision) else State.UNSURE
    return Decision(point, tuple(a), tuple(b), d, state)


def decide_all(a: dict[PointKey, list[float]], b: dict[PointKey, list[float]],
               precision: float) -> list[Decision]:
    return [decide(k, a.get(k, []), b.get(k, []), precision) for k in dict.fromkeys([*a, *b])]
