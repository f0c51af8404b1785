"""Whether two sides differ, for commands that can measure more until they know (ab, bisect).

A point is decided when Welch's test says the sides differ (p < 0.05), or when the 95% interval of
their ratio lies within ±precision of 1 (the same, as closely as was asked). Anything else is unsure:
the caller adds trials until it is decided or its budget ends, and says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mosbench.analysis.compare import ALPHA, welch

PointName = tuple[str, str, str, int]  # workload, test, variant, cores


@dataclass(frozen=True)
class Decision:
    point: PointName
    a: tuple[float, ...]  # per-core throughput of each usable trial
    b: tuple[float, ...]
    ratio: float | None  # mean(b) / mean(a)
    low: float | None
    high: float | None
    p: float | None
    state: str  # differ, same, unsure

    @property
    def name(self) -> str:
        w, t, v, n = self.point
        return f"{w}/{t} {v} at {n} cores" if t else f"{w} {v} at {n} cores"

    def text(self) -> str:
        if self.ratio is None:
            return "not measured on both sides"
        interval = f" [{self.low:.3f}, {self.high:.3f}]" if self.low is not None else ""
        p = f", p {self.p:.2g}" if self.p is not None else ""
        return f"{self.ratio:.3f}×{interval}{p} over {len(self.a)}+{len(self.b)} trials"


def samples(points: list[dict[str, Any]]) -> dict[PointName, list[float]]:
    """Per-core throughput of each ok trial not interfered with, by point."""
    out: dict[PointName, list[float]] = {}
    for p in points:
        if p["status"] == "ok" and not p.get("interfered"):
            out.setdefault((p["workload"], p["test"], p["variant"], p["cores"]), []).append(
                p["throughput"] / p["cores"])
    return out


def decide(point: PointName, a: list[float], b: list[float], precision: float) -> Decision:
    if not a or not b:
        return Decision(point, tuple(a), tuple(b), None, None, None, None, "unsure")
    ratio, low, high, p = welch(a, b)
    if p is not None and p < ALPHA:
        state = "differ"
    elif low is not None and high is not None and 1 - precision <= low and high <= 1 + precision:
        state = "same"
    else:
        state = "unsure"
    return Decision(point, tuple(a), tuple(b), ratio, low, high, p, state)


def decide_all(a: dict[PointName, list[float]], b: dict[PointName, list[float]],
               precision: float) -> list[Decision]:
    return [decide(k, a.get(k, []), b.get(k, []), precision) for k in dict.fromkeys([*a, *b])]
