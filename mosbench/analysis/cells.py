"""From stored points to the series the report draws: one line per workload/test/variant.

The paper reports the best of its trials; we keep that rule for the headline and also give the median
and the spread, so noise is visible rather than filtered away.
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass, field
from typing import Any

from mosbench import workloads
from mosbench.errors import UserError
from mosbench.machine.accounting import per_unit_us, server_seconds, shares
from mosbench.workloads.base import Workload, base_variant


@dataclass
class Cell:
    """All trials of one (workload, test, variant, cores)."""

    cores: int
    per_core: list[float] = field(default_factory=list)  # work/s/core for each ok trial
    user_us: list[float] = field(default_factory=list)  # CPU µs per unit, each trial (the server's own)
    system_us: list[float] = field(default_factory=list)
    idle_us: list[float] = field(default_factory=list)  # the measured CPUs' idle time per unit (Figure 4's third line)
    client_user_us: list[float | None] = field(default_factory=list)  # the load generator's, per unit
    client_system_us: list[float | None] = field(default_factory=list)
    # user time on the measured CPUs charged to none of the point's groups (another program), per unit
    outside_user_us: list[float | None] = field(default_factory=list)
    idle: list[float] = field(default_factory=list)  # shares of the measured CPUs' time: busy + idle + steal = 1
    steal: list[float] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    samples: list[list[dict[str, Any]]] = field(default_factory=list)  # per ok trial, the per-second samples
    metrics: list[dict[str, Any]] = field(default_factory=list)  # per ok trial, the workload's own
    cpus: str = ""
    loadgen: str | None = None
    loadgen_shared: bool | None = None

    @property
    def best(self) -> float | None:
        return max(self.per_core) if self.per_core else None

    @property
    def median(self) -> float | None:
        return statistics.median(self.per_core) if self.per_core else None

    def _at_best(self, values: list[float]) -> float | None:
        """The CPU-time figure of the trial whose throughput is reported (the best one)."""
        if not self.per_core or not values:
            return None
        return values[self.per_core.index(max(self.per_core))]

    @property
    def user(self) -> float | None:
        return self._at_best(self.user_us)

    @property
    def system(self) -> float | None:
        return self._at_best(self.system_us)

    @property
    def idle_time(self) -> float | None:
        return self._at_best(self.idle_us)

    @property
    def client_user(self) -> float | None:
        return self._at_best(self.client_user_us)

    @property
    def client_system(self) -> float | None:
        return self._at_best(self.client_system_us)

    @property
    def outside_user(self) -> float | None:
        return self._at_best(self.outside_user_us)

    @property
    def idle_fraction(self) -> float | None:
        return self._at_best(self.idle)

    @property
    def steal_fraction(self) -> float | None:
        return self._at_best(self.steal)

    @property
    def best_metrics(self) -> dict[str, Any]:
        """The workload's own metrics of the trial whose throughput is reported."""
        return self._at_best(self.metrics) or {}


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
        return f"{self.workload}/{self.test}" if self.test else self.workload

    def ok_cells(self) -> list[Cell]:
        return [c for _, c in sorted(self.cells.items()) if c.best is not None]

    def scalability(self) -> tuple[float, int] | None:
        """Per-core throughput at the highest measured core count relative to one core (Figure 3)."""
        cells = self.ok_cells()
        if not cells or cells[0].cores != 1 or len(cells) < 2:
            return None
        return cells[-1].best / cells[0].best, cells[-1].cores


@functools.cache
def workload_of(name: str) -> Workload | None:
    """The workload a stored series came from; None for one this mosbench no longer has."""
    try:
        return workloads.get(name)
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
        c.per_core.append(p["throughput"] / p["cores"])
        user, system = server_seconds(p)
        c.user_us.append(per_unit_us(user, work))
        c.system_us.append(per_unit_us(system, work))
        c.idle_us.append(per_unit_us(p["idle_s"], work))
        c.client_user_us.append(_per_unit(p.get("loadgen_user_s"), work))
        c.client_system_us.append(_per_unit(p.get("loadgen_system_s"), work))
        c.outside_user_us.append(_per_unit(outside_user_seconds(p), work))
        _, idle, steal = shares(p["user_s"], p["system_s"], p["idle_s"], p.get("steal_s") or 0.0)
        c.idle.append(idle)
        c.steal.append(steal)
        c.samples.append(p.get("samples") or [])
        c.metrics.append(p.get("metrics") or {})
    return list(by_key.values())


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


def own_models(s: Series, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The workload's own scaling models for a series' test (scale/lock: "lock")."""
    w = workload_of(s.workload)
    return w.models_for(s.test, params or {}) if w else {}


def figures_for(s: Series) -> tuple[str, ...]:
    """The workload's own figures for a series' test."""
    w = workload_of(s.workload)
    return w.figures_for(s.test) if w else ()
