"""The file systems' section (fxmark's series): FxMark's figures in mosbench's form.

(a) Per operation and sharing level, the curves of one figure: one line per file system (each fxmark test's
    variants), per-core throughput against cores, as every mosbench figure draws it (a flat line scales);
    `grid_figure` draws all of a run's operations as small multiples, a colour per file system throughout.
(b) FxMark's Figure 2: file systems × operations, each cell the per-core throughput at the most cores
    relative to one core (Series.scalability), graded as the summary's are; as a table (`ratio_table`,
    both outputs) and a heat map (`heat_map`, the HTML report).

The verdict of each curve and, with --profile, what grew are the report's per-test sections, as for every
workload.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, MaxNLocator

from mosbench.analysis.cells import Series, group_by_test, rate_scale
from mosbench.report.plots import COLORS
from mosbench.report.rows import GRADES, Column, TableModel, grade
from mosbench.workloads.fxmark import BY_NAME, OPERATIONS, Fxmark, Operation

WORKLOAD = Fxmark.name


@dataclass(frozen=True)
class OperationCurves:
    """One operation at one sharing level: a line per file system (per run, where runs are compared)."""

    operation: Operation
    series: list[Series]  # in the workload's file-system order

    @property
    def title(self) -> str:
        op = self.operation
        return f"{op.name}: {op.does} ({op.sharing} sharing)"

    @property
    def file_systems(self) -> list[str]:
        return [s.variant for s in self.series]


def operation_curves(series: list[Series]) -> list[OperationCurves]:
    """(a): fxmark's series by operation, in FxMark's order (data reads and writes, then metadata), the file
    systems of each in the workload's order; empty where the runs measured no file system."""
    groups = group_by_test([s for s in series if s.workload == WORKLOAD and s.test in BY_NAME])
    return [OperationCurves(op, group) for op in OPERATIONS if (group := groups.get(f"{WORKLOAD}/{op.name}"))]


def _file_systems(curves: list[OperationCurves]) -> list[str]:
    """Every file system (labelled by run where runs are compared), in first-seen order."""
    return list(dict.fromkeys(fs for c in curves for fs in c.file_systems))


def grid_figure(curves: list[OperationCurves]) -> Figure | None:
    """Every operation's figure as a small panel (FxMark's Figure 3 layout), per-core throughput of the
    best trial against cores, one colour per file system in every panel."""
    if not curves:
        return None
    systems = _file_systems(curves)
    color = {fs: COLORS[i % len(COLORS)] for i, fs in enumerate(systems)}
    columns = min(5, len(curves))
    rows = math.ceil(len(curves) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(2.6 * columns, 2.1 * rows + 0.6), layout="constrained",
                             squeeze=False)
    for ax, c in zip(axes.flat, curves, strict=False):
        for s in c.series:
            cells = s.ok_cells()
            if cells:
                factor, _ = rate_scale(s)
                ax.plot([x.cores for x in cells], [x.best * factor for x in cells], color=color[s.variant],
                        marker="o", markersize=3, linewidth=1.4, label=s.variant)
        ax.set_title(f"{c.operation.name} ({c.operation.unit})", fontsize=9)
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
        ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(curves):]:
        ax.set_visible(False)
    fig.supxlabel("cores", fontsize=9)
    fig.supylabel("per-core throughput (/s/core)", fontsize=9)
    handles = [plt.Line2D([], [], color=color[fs], marker="o", markersize=3, label=fs) for fs in systems]
    fig.legend(handles=handles, loc="outside upper center", ncols=min(6, len(systems)), fontsize=8, frameon=False)
    return fig


@dataclass(frozen=True)
class Ratio:
    value: float | None  # per-core throughput at the most cores over one core's; None: none to give
    cores: int | None  # the most cores
    why: str = ""  # where there is no value: why


def ratio_of(s: Series) -> Ratio:
    found = s.scalability()
    if found is None:
        return Ratio(None, None, "needs 1 core and another count")
    value, at = found
    if (idle := s.unsaturated_baseline()) is not None:
        return Ratio(None, at, f"one core idled {idle:.0%}")
    return Ratio(value, at)


def ratios(curves: list[OperationCurves]) -> dict[tuple[str, str], Ratio]:
    """(b) as data: by (operation, file system)."""
    return {(c.operation.name, s.variant): ratio_of(s) for c in curves for s in c.series}


def ratio_table(curves: list[OperationCurves]) -> TableModel | None:
    """(b): an operation a row (its sharing level beside it), a file system a column, each cell the per-core
    ratio at the most cores, graded; "–" where the operation was not measured on that file system."""
    if not curves:
        return None
    systems = _file_systems(curves)
    found = ratios(curves)
    counts = sorted({r.cores for r in found.values() if r.cores})
    at = "the most cores" if not counts else f"{counts[0]} cores" if len(counts) == 1 else \
        f"the most cores ({', '.join(map(str, counts))})"
    title = f"File systems × operations: per-core throughput at {at} relative to one core (FxMark's Figure 2)"
    t = TableModel(title, [Column("operation", left=True), Column("sharing", left=True),
                           *(Column(fs, wraps=True) for fs in systems)],
                   note=f"1.00 scales perfectly; {GRADES}. A blank cell (–) was not measured; "
                        "a word says why a measured one has no ratio.")
    kinds = [c.operation.name[0] for c in curves]
    t.breaks = {i for i in range(len(curves) - 1) if kinds[i] != kinds[i + 1]}  # data apart from metadata
    for c in curves:
        cells, styles = [c.operation.name, c.operation.sharing], {}
        for j, fs in enumerate(systems, start=2):
            r = found.get((c.operation.name, fs))
            if r is None:
                cells.append("–")
            elif r.value is None:
                cells.append(r.why)
                styles[j] = "poor" if r.cores else "failed"
            else:
                cells.append(f"{r.value:.2f}")
                styles[j] = grade(r.value)
        t.add(cells, cell_styles=styles)
    return t


def heat_map(curves: list[OperationCurves]) -> Figure | None:
    """(b) drawn as FxMark's Figure 2: a file system a row, an operation a column, each cell coloured by its
    ratio (red 0 to green 1) and labelled; grey where there is none."""
    found = ratios(curves)
    if not any(r.value is not None for r in found.values()):
        return None
    systems = _file_systems(curves)
    ops = [c.operation.name for c in curves]
    grid = np.full((len(systems), len(ops)), np.nan)
    for (op, fs), r in found.items():
        if r.value is not None:
            grid[systems.index(fs), ops.index(op)] = min(r.value, 1.0)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.55 * len(ops) + 2.2), 0.5 * len(systems) + 1.6), layout="constrained")
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#e8e8e8")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for (op, fs), r in found.items():
        if r.value is not None:
            ax.text(ops.index(op), systems.index(fs), f"{r.value:.2f}", ha="center", va="center", fontsize=6.5)
    ax.set_xticks(range(len(ops)), ops, rotation=90, fontsize=7)
    ax.set_yticks(range(len(systems)), systems, fontsize=8)
    counts = sorted({r.cores for r in found.values() if r.cores})
    ax.set_title(f"per-core throughput at {'/'.join(map(str, counts))} cores relative to one core", fontsize=9)
    fig.colorbar(image, ax=ax, shrink=0.8)
    return fig
