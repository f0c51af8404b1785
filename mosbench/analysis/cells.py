"""From stored points to the series the report draws: one line per workload/test/variant.

The paper reports the best of its trials; we keep that rule for the headline and also give the median
and the spread, so noise is visible rather than filtered away.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mosbench.analysis.precision import relative_half_width
from mosbench.errors import UserError
from mosbench.machine.accounting import per_unit_us, server_seconds, shares
from mosbench.workloads import registry
from mosbench.workloads.base import MetricColumn, MetricFigure, ModelSpec, PointNote, Workload, base_variant, test_name


@dataclass(frozen=True)
class SeriesKey:
    """One curve: a workload's test in one variant (its core counts are the curve's points; PointKey one)."""

    workload: str
    test: str
    variant: str

    @property
    def name(self) -> str:
        return f"{test_name(self.workload, self.test)} {self.variant}"

    def at(self, cores: int) -> PointKey:
        return PointKey(self.workload, self.test, self.variant, cores)


@dataclass(frozen=True)
class PointKey:
    """A point: what a run measures of a workload's test and variant at one core count. Its trials are a
    cell's; a comparison matches points and a decision judges one (a trial of one is run/plan's TrialKey)."""

    workload: str
    test: str
    variant: str  # the workload's name for it, without a compared run's label
    cores: int

    @classmethod
    def of(cls, row: dict[str, Any]) -> PointKey:
        """A stored point's."""
        return cls(row["workload"], row["test"], row["variant"], row["cores"])

    @property
    def name(self) -> str:
        return test_name(self.workload, self.test)

    def text(self) -> str:
        return f"{self.name} {self.variant} at {self.cores} {'core' if self.cores == 1 else 'cores'}"

    @property
    def series(self) -> SeriesKey:
        return SeriesKey(self.workload, self.test, self.variant)


@dataclass(frozen=True)
class Trial:
    """One ok trial of a point as the report reads it. CPU times are µs per unit of work; shares are of
    the measured CPUs' time (busy + idle + steal = 1)."""

    per_core: float  # work/s/core
    user_us_per_unit: float  # the point's own groups' (a server's own, without its client)
    system_us_per_unit: float
    idle_us_per_unit: float  # the measured CPUs' idle time (Figure 4's third line)
    client_user_us_per_unit: float | None  # the load generator's, per unit of the server's work
    client_system_us_per_unit: float | None
    # User time on the measured CPUs charged to none of the point's groups (another program's)
    outside_user_us_per_unit: float | None
    idle_share: float
    steal_share: float
    # The share of the measured CPUs' time that programs outside the point took in its window; None for
    # points stored before it was measured.
    interference_share: float | None
    interfered: bool  # the point was stored as interfered (interference_share over the run's limit)
    samples: list[dict[str, Any]]  # the per-second samples
    metrics: dict[str, Any]  # the workload's own


@dataclass
class Cell:
    """All trials of one (workload, test, variant, cores)."""

    cores: int
    trials: list[Trial] = field(default_factory=list)  # the ok ones, in trial order
    failed: list[str] = field(default_factory=list)  # each failed trial's reason
    cpus: str = ""
    loadgen: str | None = None
    loadgen_shared: bool | None = None

    @property
    def per_core(self) -> list[float]:
        """Every ok trial's work/s/core."""
        return [t.per_core for t in self.trials]

    def counted(self, include_interfered: bool = False) -> list[float]:
        """The per-core throughputs a mean, its interval or a test rests on: every ok trial's (the only ones a
        cell holds), an interfered one's only where asked: a trial that shared its CPUs with another program
        measured that program too."""
        return [t.per_core for t in self.trials if counts(True, t.interfered, include_interfered)]

    @property
    def half_width(self) -> float | None:
        """The 95% interval of the mean per-core throughput, ± this share of it (the trials that count)."""
        return relative_half_width(self.counted())

    @property
    def best_trial(self) -> Trial | None:
        """The trial whose throughput is reported: the highest per-core throughput (the paper's rule)."""
        return max(self.trials, key=lambda t: t.per_core) if self.trials else None

    @property
    def best(self) -> float | None:
        """The best trial's work/s/core."""
        return max(self.per_core) if self.trials else None

    @property
    def median(self) -> float | None:
        return statistics.median(self.per_core) if self.trials else None

    @property
    def best_metrics(self) -> dict[str, Any]:
        """The workload's own metrics of the best trial; empty where no trial was ok."""
        best = self.best_trial
        return best.metrics if best else {}


# Above this idle share, the fewest-cores point of a curve is not a baseline (Series.unsaturated_baseline).
BASELINE_IDLE_MAX = 0.10


@dataclass
class Series:
    workload: str
    test: str
    variant: str
    unit: str
    kind: str = "window"  # the workload's: "job" series are drawn per hour, their CPU time in seconds
    cells: dict[int, Cell] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return test_name(self.workload, self.test)

    @property
    def key(self) -> SeriesKey:
        """As labelled (a compared run's variant carries its label)."""
        return SeriesKey(self.workload, self.test, self.variant)

    def point(self, cores: int) -> PointKey:
        return PointKey(self.workload, self.test, base_variant(self.variant), cores)

    def ok_cells(self) -> list[Cell]:
        return [c for _, c in sorted(self.cells.items()) if c.best is not None]

    def unsaturated_baseline(self) -> float | None:
        """The idle share of the fewest-cores point (median over its ok trials) where it is above
        BASELINE_IDLE_MAX: a baseline that idles was not given enough work, and every per-core ratio
        against it measures the offered load, not the machine (Veal and Foong's point). None otherwise."""
        cells = self.ok_cells()
        if not cells:
            return None
        idle = statistics.median(t.idle_share for t in cells[0].trials)
        return idle if idle > BASELINE_IDLE_MAX else None

    def scalability(self) -> tuple[float, int] | None:
        """The scaling ratio of the best trials (Figure 3), and the most cores."""
        return scaling_ratio({c.cores: c.best for c in self.ok_cells()})


def per_core(throughput: float, cores: int) -> float:
    """Work per second per core: the paper's y axis, the one rule for every table, figure and history."""
    return throughput / cores


def scaling_ratio(per_core: Mapping[int, float | None]) -> tuple[float, int] | None:
    """The scaling ratio: a per-core figure (by core count) at the most cores over one core's, and the most
    cores; None without a one-core count and another, or without a value (or a zero) at one of the two."""
    if 1 not in per_core or len(per_core) < 2:
        return None
    most = max(per_core)
    one, top = per_core[1], per_core[most]
    return (top / one, most) if one and top is not None else None


@functools.cache
def workload_of(name: str) -> Workload | None:
    """The workload a stored series came from; None for one this mosbench no longer has."""
    try:
        return registry.get(name)
    except UserError:
        return None


def outside_user_seconds(p: dict[str, Any]) -> float | None:
    """User time on the measured CPUs that no group of the point was charged: another program's.
    User time only, since the kernel's interrupt work for a server is charged to no group either."""
    if p.get("cgroup_user_s") is None:
        return None
    ours = p["cgroup_user_s"] + ((p.get("loadgen_user_s") or 0.0) if p.get("loadgen_shared") else 0.0)
    return max(0.0, p["user_s"] - ours)


def _per_unit(seconds: float | None, work: float) -> float | None:
    return None if seconds is None else per_unit_us(seconds, work)


def build_series(points: list[dict[str, Any]], run_label: str | None = None) -> list[Series]:
    by_key: dict[tuple[str, str, str], Series] = {}
    for p in points:
        variant = f"{p['variant']} ({run_label})" if run_label else p["variant"]
        w = workload_of(p["workload"])
        s = by_key.setdefault((p["workload"], p["test"], variant),
                              Series(p["workload"], p["test"], variant, p.get("unit") or "op",
                                     w.kind if w else "window"))
        c = s.cells.setdefault(p["cores"], Cell(p["cores"]))
        c.cpus, c.loadgen, c.loadgen_shared = p["cpus"], p.get("loadgen_cpus"), p.get("loadgen_shared")
        if p["status"] != "ok":
            c.failed.append(p.get("reason") or "failed")
            continue
        work = p["work"]
        user, system = server_seconds(p)
        _, idle, steal = shares(p["user_s"], p["system_s"], p["idle_s"], p.get("steal_s") or 0.0)
        c.trials.append(Trial(
            per_core=per_core(p["throughput"], p["cores"]),
            user_us_per_unit=per_unit_us(user, work),
            system_us_per_unit=per_unit_us(system, work),
            idle_us_per_unit=per_unit_us(p["idle_s"], work),
            client_user_us_per_unit=_per_unit(p.get("loadgen_user_s"), work),
            client_system_us_per_unit=_per_unit(p.get("loadgen_system_s"), work),
            outside_user_us_per_unit=_per_unit(outside_user_seconds(p), work),
            idle_share=idle,
            steal_share=steal,
            interference_share=p.get("interference"),
            interfered=bool(p.get("interfered")),
            samples=p.get("samples") or [],
            metrics=p.get("metrics") or {},
        ))
    return list(by_key.values())


def counts(ok: bool, interfered: bool, include_interfered: bool = False) -> bool:
    """Whether a stored trial counts (Cell.counted's rule, for readers of bare rows: history)."""
    return ok and (include_interfered or not interfered)


def by_point(series: list[Series]) -> dict[PointKey, Cell]:
    """Every cell of these series under its point."""
    return {s.point(c.cores): c for s in series for c in s.cells.values()}


def counted_by_point(points: list[dict[str, Any]]) -> dict[PointKey, list[float]]:
    """Stored points' per-core throughputs that count (Cell.counted), by point in the order first measured;
    a point none of whose trials counts is left out."""
    cells = by_point(build_series(points))
    return {k: values for k in dict.fromkeys(map(PointKey.of, points)) if (values := cells[k].counted())}


def variant_rank(s: Series) -> int:
    """Where a series goes among its test's: the workload's own before/after order."""
    w = workload_of(s.workload)
    return w.variant_rank(base_variant(s.variant)) if w else 0


def _variant_order(s: Series) -> tuple[int, str]:
    return (variant_rank(s), s.variant)


def group_by_test(series: list[Series]) -> dict[str, list[Series]]:
    groups: dict[str, list[Series]] = {}
    for s in series:
        groups.setdefault(s.name, []).append(s)
    return {name: sorted(group, key=_variant_order) for name, group in groups.items()}


def rate_scale(s: Series) -> tuple[float, str]:
    """Per-second throughputs are drawn per hour for jobs, as the paper's Figures 10 and 11 are."""
    return (3600.0, "hour") if s.kind == "job" else (1.0, "sec")


def own_models(s: Series, params: dict[str, Any] | None = None) -> list[ModelSpec]:
    """The workload's own scaling models for a series' test (scale/lock: "lock"), with the run's parameters
    they need; analysis/models.py fits them."""
    w = workload_of(s.workload)
    return w.models_for(s.test, params or {}) if w else []


def figures_for(s: Series) -> tuple[MetricFigure, ...]:
    """The workload's own figures for a series' test."""
    w = workload_of(s.workload)
    return w.figures_for(s.test) if w else ()


def columns_for(s: Series) -> tuple[MetricColumn, ...]:
    """The workload's own table columns for a series' test."""
    w = workload_of(s.workload)
    return w.columns_for(s.test) if w else ()


def point_notes(s: Series, metrics: dict[str, Any]) -> list[PointNote]:
    """What the workload reads in one trial's metrics that a reader must see."""
    w = workload_of(s.workload)
    return w.point_notes(metrics) if w else []


def metrics_shown_apart(s: Series) -> tuple[str, ...]:
    """The workload's metrics that its notes or columns show, left out of the text of its metrics."""
    w = workload_of(s.workload)
    return w.metrics_shown_apart if w else ()
