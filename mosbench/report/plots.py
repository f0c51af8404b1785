"""The paper's figure formats, drawn with matplotlib.

Per test (the paper's Figures 4–11): per-core throughput against cores on the left axis (solid, the
best trial with a bar from the worst to the best), CPU µs per unit of work on the right axis (user
dashed, system dotted, and idle dash-dotted where the CPUs idled: the paper's runtime breakdown),
one colour per variant. The summary (Figure 3): per-core throughput at the
most cores relative to one core, as bars, variants side by side. Per-second samples at the highest
core count show warm-up, drift and throttling (for a job, how busy its CPUs were).
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on benchmark machines; must precede pyplot

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, MaxNLocator

from mosbench.analysis.cells import Series, rate_scale, variant_rank
from mosbench.printable import printable
from mosbench.report.rows import cpu_unit
from mosbench.workloads.base import MetricFigure

COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def _plural(unit: str) -> str:
    if unit.endswith("s") or "/" in unit:
        return unit
    if unit.endswith("y") and unit[-2:-1] not in ("a", "e", "o", "u"):
        return unit[:-1] + "ies"  # query -> queries (but day -> days)
    return unit + "s"


def _core_ticks(ax, counts: list[int]) -> None:
    if 1 < len(counts) <= 12:
        ax.set_xticks(counts)
    else:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


IDLE_SHOWN = 0.01  # a variant's idle line is drawn once some point of it was this idle


def test_figure(series: list[Series], title: str) -> Figure:
    fig, left = plt.subplots(figsize=(7.2, 4.2), layout="constrained")
    right = left.twinx()
    unit = series[0].unit
    factor, per = rate_scale(series[0])
    cpu, cpu_name = cpu_unit(series[0])
    counts: set[int] = set()
    for i, s in enumerate(series):
        color = COLORS[i % len(COLORS)]
        cells = s.ok_cells()
        if not cells:
            continue
        xs = [c.cores for c in cells]
        counts.update(xs)
        best = [c.best * factor for c in cells]
        low = [b - min(c.per_core) * factor for b, c in zip(best, cells, strict=True)]
        left.errorbar(xs, best, yerr=[low, [0.0] * len(best)], color=color, marker="o", markersize=4,
                      linewidth=1.8, capsize=2, label=f"{s.variant}: {_plural(unit)}/{per}/core")
        bests = [c.best_trial for c in cells]
        right.plot(xs, [t.user_us_per_unit * cpu for t in bests], color=color, linestyle="--", linewidth=1.2,
                   label=f"{s.variant}: user")
        right.plot(xs, [t.system_us_per_unit * cpu for t in bests], color=color, linestyle=":", linewidth=1.5,
                   label=f"{s.variant}: system")
        if any(t.idle_share >= IDLE_SHOWN for t in bests):  # the paper's runtime breakdown
            right.plot(xs, [t.idle_us_per_unit * cpu for t in bests], color=color, linestyle="-.", linewidth=1.0,
                       label=f"{s.variant}: idle")
        failed = [c.cores for c in s.cells.values() if c.failed and not c.trials]
        if failed:
            left.plot(failed, [0] * len(failed), "x", color=color, markersize=8, label=f"{s.variant}: failed")
    left.set_xlabel("cores")
    left.set_ylabel(f"throughput ({_plural(unit)}/{per}/core)")
    right.set_ylabel(f"CPU time ({cpu_name}/{unit})")
    left.yaxis.set_major_formatter(EngFormatter(sep=""))
    left.set_ylim(bottom=0)
    right.set_ylim(bottom=0)
    left.set_xlim(left=0)
    _core_ticks(left, sorted(counts))
    left.grid(True, alpha=0.3)
    handles = left.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    # Under the axes, never over a curve: the lowest core counts' points sit where "lower left" would put it.
    fig.legend(handles[0] + more[0], handles[1] + more[1], fontsize=7, loc="outside lower center",
               ncols=min(3, len(handles[0]) + len(more[0])), frameon=False)
    left.set_title(title, fontsize=10)
    return fig


def summary_figure(series: list[Series]) -> Figure | None:
    """Figure 3: one group of bars per test, one bar per variant it has; stock before scalable."""
    tests: dict[str, dict[str, tuple[float, int]]] = {}
    rank: dict[str, int] = {}
    unsaturated: list[str] = []
    for s in series:
        ratio = s.scalability()
        if ratio is None:
            continue
        if s.unsaturated_baseline() is not None:
            unsaturated.append(f"{s.name} {s.variant}")
            continue
        tests.setdefault(s.name, {})[s.variant] = ratio
        rank[s.variant] = min(rank.get(s.variant, 99), variant_rank(s))
    if not tests:
        return None
    seen = list(dict.fromkeys(v for per in tests.values() for v in per))
    variants = sorted(seen, key=lambda v: (rank[v], seen.index(v)))
    color = {v: COLORS[i % len(COLORS)] for i, v in enumerate(variants)}
    nbars = sum(len(per) for per in tests.values())
    fig, ax = plt.subplots(figsize=(min(16.0, max(6.0, 0.32 * nbars + 0.35 * len(tests) + 1.5)), 4.2),
                           layout="constrained")
    width = 0.8 / max(len(per) for per in tests.values())
    labelled: set[str] = set()
    for i, per in enumerate(tests.values()):
        present = [v for v in variants if v in per]
        for j, v in enumerate(present):
            x = i + (j - (len(present) - 1) / 2) * width
            ax.bar(x, per[v][0], width=width * 0.92, color=color[v], label=None if v in labelled else v)
            labelled.add(v)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(tests)), list(tests), rotation=30, ha="right", fontsize=8)
    at = sorted({r[1] for per in tests.values() for r in per.values()})
    where = f"{at[0]} cores" if len(at) == 1 else f"{at[0]}–{at[-1]} cores"
    ax.set_ylabel(f"per-core throughput at {where}\nrelative to one core")
    ax.set_ylim(bottom=0, top=max(1.2, max(r[0] for per in tests.values() for r in per.values()) * 1.1))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, ncols=min(len(variants), 6), loc="upper center", bbox_to_anchor=(0.5, -0.25))
    # A ratio against a baseline that idled is not a result: named, not drawn.
    ax.set_title("Scalability at the most cores measured (1.0 = perfect)"
                 + ("\nnot drawn, baseline not saturated: " + ", ".join(unsaturated) if unsaturated else ""),
                 fontsize=10)
    return fig


def samples_figure(series: list[Series]) -> Figure | None:
    """Per-second samples of every trial at each series' highest core count, warm-up drawn faint.

    For rates, the per-core rate. A job finishes its one unit of work at the end, so its per-second
    rate says nothing: for jobs the figure shows how busy the point's CPUs were instead, where a
    straggler or a serial phase shows as a drop.
    """
    job = series[0].kind == "job"
    fig, ax = plt.subplots(figsize=(7.2, 2.8), layout="constrained")
    drawn = False
    for i, s in enumerate(series):
        cells = s.ok_cells()
        if not cells:
            continue
        top = cells[-1]
        for n, samples in enumerate(t.samples for t in top.trials):
            for phase, alpha in (("warmup", 0.35), ("window", 1.0)):
                if job:
                    pts = [(p["t"], p["busy"] * 100) for p in samples if p.get("phase") == phase and "busy" in p]
                else:
                    pts = [(p["t"], p["rate"] / top.cores) for p in samples if p.get("phase") == phase]
                if not pts:
                    continue
                ax.plot([t for t, _ in pts], [y for _, y in pts], color=COLORS[i % len(COLORS)],
                        alpha=alpha, marker=".", linewidth=1,
                        label=f"{s.variant}, {top.cores} cores" if n == 0 and phase == "window" else None)
                drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.axvline(0, color="gray", linewidth=0.8)
    if job:
        ax.set_xlabel("seconds from the start of the job")
        ax.set_ylabel("CPUs busy (%)")
        ax.set_ylim(0, 105)
    else:
        ax.set_xlabel("seconds from the start of the window (warm-up faint, before 0)")
        ax.set_ylabel(f"{_plural(series[0].unit)}/sec/core")
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    _legend_below(fig, ax)
    return fig


def _legend_below(fig: Figure, ax, columns: int = 3) -> None:
    """The legend under the axes, outside them: a legend inside must never cover a curve or a band."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, fontsize=7, loc="outside lower center", ncols=min(columns, len(handles)),
                   frameon=False)


def _legend_height(entries: int, columns: int = 3) -> float:
    """Inches the figure grows by to hold a legend of this many entries in these columns."""
    return 0.17 * math.ceil(entries / columns)


def lock_model_figure(fits: dict, up_to: int) -> Figure:
    """Measured scale/lock points with the fitted model of each lock, carried out to up_to cores, its
    95% prediction band shaded; a dotted line where a ticket lock collapses (none where the points
    cannot tell)."""
    from mosbench.analysis.lockmodel import core_axis

    fig, ax = plt.subplots(figsize=(7.2, 4.2 + _legend_height(len(fits), 2)), layout="constrained")
    xs = np.array(core_axis(up_to))
    band_at = np.unique(np.geomspace(1, up_to, 48).round().astype(int))
    knees: set[int] = set()
    for i, (variant, f) in enumerate(fits.items()):
        color = COLORS[i % len(COLORS)]
        p = f.params
        ax.plot(xs, f.throughput(xs) / xs, color=color, linewidth=1.4, linestyle="-" if p.kind == "ticket" else "--",
                label=f"{variant}: {p.kind}, a {p.a:.0f}, s {p.s:.0f}, c {p.c:.1f} ns"
                      + (" (cannot tell)" if f.undetermined else ""))
        if (band := f.band(band_at)) is not None:
            ax.fill_between(band_at, band[0] / band_at, band[1] / band_at, color=color, alpha=0.12, linewidth=0)
        ax.plot(f.cores, f.measured, "o", color=color, markersize=5)
        knee = f.peak(up_to)
        if knee and knee not in knees:
            knees.add(knee)
            ax.axvline(knee, color=color, linewidth=0.8, linestyle=":")
            ax.annotate(f"collapse at {knee}", (knee, p.per_core(knee)), textcoords="offset points",
                        xytext=(4, 6), fontsize=7, color=color)
    ax.set_xlabel("cores (dots: measured; lines: model; shaded: 95% prediction band)")
    ax.set_ylabel("acquisitions/sec/core")
    ax.yaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0, right=up_to)
    ax.grid(True, alpha=0.3)
    _legend_below(fig, ax, 2)
    ax.set_title("Lock-collapse model (a outside the lock, s inside it, c a handoff)", fontsize=10)
    return fig


LINESTYLES = ("-", "--", ":", "-.")
# Each model's line over the measured cores and past them.
MODEL_STYLES = {"usl": ("-", "--"), "amdahl": ((0, (1, 1)), (0, (1, 3))), "lock": ("-.", (0, (5, 2, 1, 2)))}


def scaling_figure(group: list[Series], fits: dict, up_to: int) -> Figure | None:
    """Measured per-core throughput with each fitted model, solid over the measured cores and dashed
    past them to up_to, every model's 95% prediction band shaded; None where every model was refused."""
    from mosbench.analysis.scaling import Refusal

    if all(isinstance(f, Refusal) for by_model in fits.values() for f in by_model.values()):
        return None
    factor, per = rate_scale(group[0])
    entries = sum(1 + sum(not isinstance(f, Refusal) for f in fits[s.variant].values()) for s in group)
    fig, ax = plt.subplots(figsize=(7.2, 4.2 + _legend_height(entries)), layout="constrained")
    xs = np.unique(np.geomspace(1, up_to, 200).round().astype(int))
    # The workload's own models are chains to solve per core count: drawn at fewer points.
    coarse = np.unique(np.geomspace(1, up_to, 48).round().astype(int))
    heights = [0.0]  # of the points and the models' curves: a loose fit's band must not flatten the data
    for i, s in enumerate(group):
        color = COLORS[i % len(COLORS)]
        cells = s.ok_cells()
        if not cells:
            continue
        ax.plot([c.cores for c in cells], [c.best * factor for c in cells], "o", color=color, markersize=5,
                label=f"{s.variant}: measured (best)")
        heights += [c.best * factor for c in cells]
        top = max(c.cores for c in cells)
        for model, f in fits[s.variant].items():
            if isinstance(f, Refusal):
                continue
            inside_style, past_style = MODEL_STYLES.get(model, MODEL_STYLES["usl"])
            at = xs if model in ("usl", "amdahl") else coarse
            inside, past = at[at <= top], at[at >= top]
            ax.plot(inside, f.throughput(inside) / inside * factor, color=color, linestyle=inside_style,
                    linewidth=1.3, label=f"{s.variant}: {f.label}" + (" (cannot tell)" if f.undetermined else ""))
            ax.plot(past, f.throughput(past) / past * factor, color=color, linewidth=1.3, linestyle=past_style)
            heights.append(float(np.max(f.throughput(at) / at)) * factor)
            if (band := f.band(at)) is not None:
                ax.fill_between(at, band[0] / at * factor, band[1] / at * factor, color=color, alpha=0.08,
                                linewidth=0)
            peak = f.peak(up_to)
            if peak and peak <= up_to:
                ax.axvline(peak, color=color, linewidth=0.8, linestyle=":")
    ax.set_xscale("log", base=2)
    ax.set_xlim(1, up_to)
    ax.set_xlabel("cores (log scale; dashed past the measured cores)")
    ax.set_ylabel(f"{_plural(group[0].unit)}/{per}/core")
    ax.yaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_ylim(0, max(heights) * 1.25 or None)
    ax.grid(True, alpha=0.3)
    _legend_below(fig, ax)
    ax.set_title(f"{group[0].name}: scaling models, 95% prediction bands shaded", fontsize=10)
    return fig


def metric_figure(series: list[Series], figure: MetricFigure) -> Figure | None:
    """A workload's own figure (MetricFigure): its metrics of each point's best trial against cores
    (colour: metric; line: variant); None where no point has any of them."""
    kinds: list[str] = []
    for s in series:
        for c in s.ok_cells():
            kinds += [k for k in c.best_metrics if k.endswith(figure.suffix) and k not in kinds]
    if not kinds:
        return None
    kinds.sort(key=lambda k: (k == figure.total, k))  # the total last, in black
    fig, ax = plt.subplots(figsize=(7.2, 4.2), layout="constrained")
    counts: set[int] = set()
    for v, s in enumerate(series):
        cells = [c for c in s.ok_cells() if any(k in c.best_metrics for k in kinds)]
        for i, kind in enumerate(kinds):
            xs = [c.cores for c in cells if kind in c.best_metrics]
            if not xs:
                continue
            counts.update(xs)
            total = kind == figure.total
            ax.plot(xs, [c.best_metrics[kind] for c in cells if kind in c.best_metrics],
                    color="black" if total else COLORS[i % len(COLORS)], linestyle=LINESTYLES[v % len(LINESTYLES)],
                    marker="o", markersize=3, linewidth=1.8 if total else 1.2,
                    label=f"{s.variant}: {'all' if total else kind.removesuffix(figure.suffix)}")
    ax.set_xlabel("cores")
    ax.set_ylabel(figure.y_label.format(unit=series[0].unit))
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    _core_ticks(ax, sorted(counts))
    ax.grid(True, alpha=0.3)
    _legend_below(fig, ax)
    ax.set_title(figure.title, fontsize=10)
    return fig


def save(fig: Figure, directory: Path, stem: str, png: bool = True) -> str:
    """Writes stem.png (where png: a page served embeds the SVG alone) and stem.svg; returns the SVG text for
    embedding in the HTML report."""
    # Labels come from the store (a run's label, a test's name): a control character in one is drawn as its
    # escape (\x1b), never carried raw into the SVG, which XML forbids, and which a terminal showing it obeys.
    for text in fig.findobj(matplotlib.text.Text):
        if (safe := printable(label := text.get_text(), keep="\n")) != label:
            text.set_text(safe)
    directory.mkdir(parents=True, exist_ok=True)
    if png:
        fig.savefig(directory / f"{stem}.png", dpi=130)
        fig.set_layout_engine("none")  # laid out once for the PNG; the SVG keeps that layout (16% of a figure's time)
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    (directory / f"{stem}.svg").write_text(svg)
    plt.close(fig)
    return svg[svg.index("<svg"):]  # drop the XML prolog and doctype: the HTML embeds the element itself
