"""Terminal tables of a run: every point with its spread, and the paper's Figure 3 ratios."""

from __future__ import annotations

from rich import box
from rich.table import Table

from mosbench.analysis import Series, group_by_test, rate_scale


def si(x: float | None, digits: int = 3) -> str:
    """1234567 → 1.23M: throughputs span nine orders of magnitude across workloads."""
    if x is None:
        return "–"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.{digits}g}{unit}"
    return f"{x:.{digits}g}"


def rate(per_s: float, unit: str) -> str:
    """A per-second throughput in the unit's own time base: "9.76M/s", or "1.18k/h" for jobs."""
    factor, per = rate_scale(unit)
    return si(per_s * factor) + ("/h" if per == "hour" else "/s")


def grade(ratio: float) -> str:
    """A scalability ratio in words: good from 0.9 (near perfect), poor below 0.5 (half lost)."""
    return "good" if ratio >= 0.9 else "fair" if ratio >= 0.5 else "poor"


GRADE_STYLE = {"good": "green", "fair": "yellow", "poor": "red"}


def _us(x: float | None) -> str:
    return "–" if x is None else f"{x:.3g}"


def series_tables(series: list[Series]) -> list[Table]:
    """One table per test, variants stacked: narrow enough for an 80-column terminal."""
    tables = []
    for name, group in group_by_test(series).items():
        any_failed = any(c.failed for s in group for c in s.cells.values())
        factor, per = rate_scale(group[0].unit)
        t = Table(title=f"{name}: {group[0].unit}/{per}/core, CPU µs per {group[0].unit}", title_justify="left",
                  box=box.SIMPLE_HEAD, padding=(0, 1))
        cols = ["variant", "cores", "cpus", "best", "median", "min–max", "n", "user", "sys", "idle"]
        for col in cols + (["failed"] if any_failed else []):
            wraps = col in ("cpus", "failed")  # long CPU lists fold; the numbers must never be cut
            t.add_column(col, justify="left" if col in ("variant", "cpus", "failed") else "right",
                         no_wrap=not wraps, overflow="fold" if wraps else "ellipsis",
                         min_width=4 if wraps else len(col))
        for s in group:
            for cores, c in sorted(s.cells.items()):
                spread = f"{si(min(c.per_core) * factor)}–{si(max(c.per_core) * factor)}" if c.per_core else "–"
                idle = "–" if c.idle_fraction is None else f"{c.idle_fraction:.0%}"
                row = [s.variant, str(cores), c.cpus, si(c.best and c.best * factor),
                       si(c.median and c.median * factor), spread, str(len(c.per_core)),
                       _us(c.user), _us(c.system), idle]
                if any_failed:
                    row.append(f"{len(c.failed)}: {c.failed[-1][:40]}" if c.failed else "")
                t.add_row(*row, style="red" if c.failed and not c.per_core else None)
            t.add_section()
        tables.append(t)
    return tables


def summary_table(series: list[Series]) -> Table:
    """Figure 3 in numbers: per-core throughput at the most cores relative to one core."""
    t = Table(title="Per-core throughput at the most cores relative to one core (1.0 = perfect scaling)",
              title_justify="left")
    for col in ("test", "variant", "unit", "1 core", "at cores", "per core", "ratio"):
        t.add_column(col, justify="left" if col in ("test", "variant", "unit") else "right")
    for s in series:
        ratio = s.scalability()
        cells = s.ok_cells()
        if ratio is None:
            t.add_row(s.name, s.variant, s.unit, rate(cells[0].best, s.unit) if cells else "–", "–", "–",
                      "needs 1 core and another count")
            continue
        value, at = ratio
        style = GRADE_STYLE[grade(value)]
        t.add_row(s.name, s.variant, s.unit, rate(cells[0].best, s.unit), str(at), rate(cells[-1].best, s.unit),
                  f"[{style}]{value:.2f}[/{style}]")
    return t


def lock_model_table(fits: dict, up_to: int) -> Table:
    """Each lock's fitted model: its parameters, fit error, and predicted per-core throughput."""
    measured = max((max(f.cores) for f in fits.values() if f.cores), default=1)
    counts = sorted({1, measured, 48, up_to} - ({48} if up_to < 48 else set()))
    t = Table(title="Lock model: acquisitions/s/core at each core count", title_justify="left",
              box=box.SIMPLE_HEAD)
    for col in ("lock", "model", "s ns", "c ns", "fit err", *(f"{n}" for n in counts), "collapse"):
        t.add_column(col, justify="left" if col in ("lock", "model") else "right", no_wrap=True)
    for name, f in fits.items():
        p = f.params
        knee = p.collapse(up_to)
        t.add_row(name, p.kind, f"{p.s:.0f}", f"{p.c:.1f}", f"{f.rms_log_error:.1%}" if f.cores else "–",
                  *(si(p.per_core(n)) for n in counts), f"at {knee}" if knee else "none")
    return t
