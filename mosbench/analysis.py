"""From stored points to the series the report draws: one line per workload/test/variant.

The paper reports the best of its trials; we keep that rule for the headline and also give the median
and the spread, so noise is visible rather than filtered away.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Cell:
    """All trials of one (workload, test, variant, cores)."""

    cores: int
    per_core: list[float] = field(default_factory=list)  # work/s/core for each ok trial
    user_us: list[float] = field(default_factory=list)  # CPU µs per unit, each trial
    system_us: list[float] = field(default_factory=list)
    idle: list[float] = field(default_factory=list)
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
    def idle_fraction(self) -> float | None:
        return self._at_best(self.idle)

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


def build_series(points: list[dict[str, Any]], run_label: str | None = None) -> list[Series]:
    by_key: dict[tuple[str, str, str], Series] = {}
    for p in points:
        variant = f"{p['variant']} ({run_label})" if run_label else p["variant"]
        s = by_key.setdefault((p["workload"], p["test"], variant),
                              Series(p["workload"], p["test"], variant, p.get("unit") or "op"))
        c = s.cells.setdefault(p["cores"], Cell(p["cores"]))
        c.cpus, c.loadgen, c.loadgen_shared = p["cpus"], p.get("loadgen_cpus"), p.get("loadgen_shared")
        if p["status"] != "ok":
            c.failed.append(p.get("reason") or "failed")
            continue
        work = p["work"]
        c.per_core.append(p["throughput"] / p["cores"])
        c.user_us.append(p["user_s"] * 1e6 / work)
        c.system_us.append(p["system_s"] * 1e6 / work)
        total = p["user_s"] + p["system_s"] + p["idle_s"]
        c.idle.append(p["idle_s"] / total if total > 0 else 0.0)
        c.samples.append(p.get("samples") or [])
        c.metrics.append(p.get("metrics") or {})
    return list(by_key.values())


# Each workload's baseline first, then its fix: the paper's before and after, then the other forms.
# Threads (one shared address space) come before processes, as in the paper's pedsort figure.
BEFORE_AFTER = {"stock": 0, "4k": 0, "threads": 0, "scalable": 1, "2m": 1, "procs": 1}


def base_variant(variant: str) -> str:
    """The workload's variant name of a series: compared runs label theirs "stock (run)"."""
    return variant.split(" (")[0]


def variant_rank(variant: str) -> int:
    """Where a variant goes among its test's: baselines, then their fixes, then the other forms."""
    return BEFORE_AFTER.get(base_variant(variant), 2)


def _variant_order(s: Series) -> tuple[int, str]:
    return (variant_rank(s.variant), s.variant)


def group_by_test(series: list[Series]) -> dict[str, list[Series]]:
    groups: dict[str, list[Series]] = {}
    for s in series:
        groups.setdefault(s.name, []).append(s)
    return {name: sorted(group, key=_variant_order) for name, group in groups.items()}


def rate_scale(unit: str) -> tuple[float, str]:
    """Per-second throughputs are drawn per hour for jobs, as the paper's Figures 10 and 11 are."""
    return (3600.0, "hour") if unit == "job" else (1.0, "sec")
