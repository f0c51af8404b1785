"""The commutativity matrix of a run: which pairs of calls keep their alone rates side by side.

A situation's pair point at n cores runs A on half the cores and B on the other half; each side's rate
per core is set against that call's rate alone on one core in the same state (the `a` and `b` points). A
pair scales when both sides keep at least SCALES_AT of it. Reads only stored points, so a run is judged
again anywhere; the calls of a situation come from its name (`open-unlink/diffname-samedir`) and whether
they commute from the points' metrics.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass

from mosbench.analysis.cells import Series, SeriesKey, Trial
from mosbench.analysis.profiles import BySeries, Growth, Profile, growth

WORKLOAD = "commute"
SCALES_AT = 0.9  # the and COMMUTER's spirit: each side keeps 90% of its alone rate
# COMMUTER's published result for Linux 3.8 (Clements et al., SOSP 2013, section 6): conflict-free memory
# accesses, counted per generated test case. Ours is throughput per situation: the two answer the same
# question by different means, so they are set side by side, never subtracted.
PUBLISHED = (("Linux 3.8 (COMMUTER)", 9389, 13664), ("sv6 (COMMUTER)", 13528, 13664))


def calls_of(test: str) -> tuple[str, str]:
    first, _, second = test.split("/", 1)[0].partition("-")
    return first, second


def _usable(trials: list[Trial]) -> list[Trial]:
    """Trials nothing else interfered with; all of them where every one was interfered with."""
    quiet = [t for t in trials if not t.interfered]
    return quiet or trials


@dataclass(frozen=True)
class PairResult:
    test: str  # the situation
    call_a: str
    call_b: str
    commutes: bool | None  # None: stored without it
    cores: int  # the pair point's
    alone_a: float | None  # ops/s on one core, the median of its trials
    alone_b: float | None
    pair_a: float | None  # ops/s per core of side A beside B, the median of the trials
    pair_b: float | None
    trials: int  # the pair's trials used
    interfered: bool  # every trial of the pair point was interfered with

    @property
    def ratio_a(self) -> float | None:
        return self.pair_a / self.alone_a if self.pair_a is not None and self.alone_a else None

    @property
    def ratio_b(self) -> float | None:
        return self.pair_b / self.alone_b if self.pair_b is not None and self.alone_b else None

    @property
    def worst(self) -> float | None:
        """The side that lost most: its rate beside the other over its rate alone."""
        ratios = [r for r in (self.ratio_a, self.ratio_b) if r is not None]
        return min(ratios) if len(ratios) == 2 else None

    @property
    def scales(self) -> bool | None:
        return None if self.worst is None else self.worst >= SCALES_AT

    @property
    def loss(self) -> float:
        """The worst side's share of its alone rate lost (0 where it kept it)."""
        return max(0.0, 1.0 - self.worst) if self.worst is not None else 0.0


def _median_alone(s: Series | None) -> float | None:
    cell = s.cells.get(1) if s else None
    trials = _usable(cell.trials) if cell else []
    return statistics.median(t.per_core for t in trials) if trials else None


def _median_side(trials: list[Trial], side: str) -> float | None:
    values = [t.metrics[f"side_{side}_per_core"] for t in trials if f"side_{side}_per_core" in t.metrics]
    return statistics.median(values) if values else None


def results(series: list[Series]) -> list[PairResult]:
    """Every measured situation's pair point (one result per core count of two or more), by name."""
    by_test: dict[str, dict[str, Series]] = {}
    for s in series:
        if s.workload == WORKLOAD:
            by_test.setdefault(s.test, {})[s.variant] = s
    out = []
    for test, variants in sorted(by_test.items()):
        pair = variants.get("pair")
        if pair is None:
            continue
        alone_a, alone_b = _median_alone(variants.get("a")), _median_alone(variants.get("b"))
        call_a, call_b = calls_of(test)
        for cores, cell in sorted(pair.cells.items()):
            trials = _usable(cell.trials)
            if not trials:
                continue
            commutes = trials[0].metrics.get("commutes")
            out.append(PairResult(test, call_a, call_b, commutes, cores, alone_a, alone_b,
                                  _median_side(trials, "a"), _median_side(trials, "b"), len(trials),
                                  all(t.interfered for t in trials)))
    return out


def at_most_cores(found: list[PairResult]) -> list[PairResult]:
    """Each situation's result at the most cores it was measured at: the matrix's cells."""
    best: dict[str, PairResult] = {}
    for r in found:
        if r.test not in best or r.cores > best[r.test].cores:
            best[r.test] = r
    return list(best.values())


@dataclass(frozen=True)
class MatrixCell:
    scaling: int  # commutative situations of this pair of calls that scale
    total: int  # commutative situations of this pair with a verdict

    @property
    def share(self) -> float:
        return self.scaling / self.total if self.total else 0.0


def matrix(found: list[PairResult]) -> dict[tuple[str, str], MatrixCell]:
    """(call, call) → the share of its commutative situations that scale; unordered pairs, each once."""
    scaling: Counter[tuple[str, str]] = Counter()
    total: Counter[tuple[str, str]] = Counter()
    for r in at_most_cores(found):
        if r.commutes and r.scales is not None:
            key = (r.call_a, r.call_b)
            total[key] += 1
            scaling[key] += bool(r.scales)
    return {k: MatrixCell(scaling[k], n) for k, n in total.items()}


def not_scaling(found: list[PairResult]) -> list[PairResult]:
    """Commutative situations that do not scale, the worst loss first: this kernel's to fix."""
    return sorted((r for r in at_most_cores(found) if r.commutes and r.scales is False),
                  key=lambda r: r.loss, reverse=True)


def expected_profile(alone_a: Profile, alone_b: Profile, work_a: float, work_b: float) -> Profile:
    """What the pair's profile would be if each side cost what it costs alone: each alone profile scaled to
    the work that side did in the pair. Growth against it names what running side by side added."""
    out = Profile(period_ns=alone_a.period_ns or alone_b.period_ns, work=work_a + work_b)
    for prof, work in ((alone_a, work_a), (alone_b, work_b)):
        for stack, n in prof.stacks.items():
            out.stacks[stack] += n * work / prof.work
    return out


def pair_growth(r: PairResult, profiles: BySeries, pair_work: tuple[float, float] | None, top: int = 3) -> list[Growth]:
    """The kernel functions whose time per operation grew most from alone to side by side; empty where
    the situation was not profiled at one core (both sides) and at the pair's cores."""
    a = profiles.get(SeriesKey(WORKLOAD, r.test, "a"), {}).get(1)
    b = profiles.get(SeriesKey(WORKLOAD, r.test, "b"), {}).get(1)
    pair = profiles.get(SeriesKey(WORKLOAD, r.test, "pair"), {}).get(r.cores)
    if not (a and b and pair and pair_work and sum(pair_work) > 0):
        return []
    # The split of the pair's work between its sides, applied to the work its profile was taken over.
    share_a = pair_work[0] / sum(pair_work)
    rows = growth(expected_profile(a, b, share_a * pair.work, (1 - share_a) * pair.work), pair, top=top * 4)
    return [g for g in rows if g.change_us > 0][:top]


def pair_work(series: list[Series], r: PairResult) -> tuple[float, float] | None:
    """Each side's work in the pair point's profiled trials (the split the profile's samples were spent on)."""
    for s in series:
        if s.workload == WORKLOAD and s.test == r.test and s.variant == "pair" and r.cores in s.cells:
            trials = [t for t in s.cells[r.cores].trials if "side_a_work" in t.metrics]
            if trials:
                return (sum(t.metrics["side_a_work"] for t in trials), sum(t.metrics["side_b_work"] for t in trials))
    return None


@dataclass(frozen=True)
class Change:
    test: str
    cores: int
    before: PairResult
    after: PairResult


def changed(base: list[PairResult], other: list[PairResult]) -> list[Change]:
    """Situations whose verdict differs between two runs (scaled in one, not in the other)."""
    theirs = {(r.test, r.cores): r for r in other}
    return [Change(r.test, r.cores, r, theirs[(r.test, r.cores)]) for r in base
            if (r.test, r.cores) in theirs and r.scales is not None and theirs[(r.test, r.cores)].scales is not None
            and r.scales != theirs[(r.test, r.cores)].scales]
