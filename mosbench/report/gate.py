"""The CI gates' verdict, one format for both: `compare --fail-on-regression` (each run against the
baseline) and `history --fail-on-change` (a change the newest run begins). A line a point past the gate,
with its ratio, 95% interval and p, then how many; or one line saying that none is."""

from __future__ import annotations

from dataclasses import dataclass

from mosbench.analysis.cells import PointKey
from mosbench.analysis.significance import Difference
from mosbench.report.rows import p_value


@dataclass(frozen=True)
class Gate:
    tag: str  # the word a CI log is searched for
    against: str  # what a ratio is of
    slower: str  # what a point past the gate is


REGRESSION = Gate("REGRESSION", "the baseline", "significantly slower than the baseline")
CHANGE = Gate("CHANGE", "the level before", "significantly slower from the newest run on")


@dataclass(frozen=True)
class Breach:
    """One point past a gate."""

    where: str  # the run: its label against the baseline, or the newest run
    point: PointKey
    difference: Difference
    p: float  # the p the gate read: compare's own, history's adjusted over all its candidates
    adjusted: bool = False


def regressions(regressed: list) -> list[Breach]:
    """compare.regressions' (label, Change) pairs."""
    return [Breach(label, c.point, c.difference, c.p) for label, c in regressed]


def changes(found, worse: list) -> list[Breach]:
    """history's shifts past the gate (History.worse_than), each at the core count it lowered most."""
    out = []
    for shift in worse:
        change = min(shift.changes, key=lambda c: c.difference.ratio)
        k = shift.key
        out.append(Breach(f"at the newest run {found.runs[-1].name}",
                          PointKey(k.workload, k.test, k.variant, change.cores), change.difference,
                          change.p_adjusted, adjusted=True))
    return out


def lines(gate: Gate, breaches: list[Breach], percent: float) -> list[str]:
    if not breaches:
        return [f"no point is {gate.slower} by more than {percent:g}%"]
    return [*(f"{gate.tag} {b.where}: {b.point.text()}: {b.difference.ratio:.3f}× {gate.against}"
              f"{_interval(b.difference)}, {'p adj.' if b.adjusted else 'p'} {p_value(b.p)}" for b in breaches),
            f"{len(breaches)} point{'s' if len(breaches) != 1 else ''} {gate.slower} by more than {percent:g}%"]


def _interval(d: Difference) -> str:
    return f" [{d.low:.3f}, {d.high:.3f}]" if d.low is not None and d.high is not None else ""
