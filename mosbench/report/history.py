"""A machine's history as tables (terminal and HTML), figures and JSON (analysis/history.py finds it).

The terminal shows each series at one core and at the most cores as a line of blocks over the runs,
newest last, a bar where a change begins, with its first and newest level, and under it each change that
series took, a line each; then every change: between which runs, its size with interval and p, of what
kind, what moved with it and what differed.
"""

from __future__ import annotations

import itertools
import statistics
from typing import TYPE_CHECKING, Any

import numpy as np

from mosbench.analysis import history
from mosbench.analysis.cells import SeriesKey, scaling_ratio
from mosbench.analysis.history import FAMILY_ALPHA, History, Kind, PointSeries, Shape, Shift
from mosbench.analysis.significance import Difference
from mosbench.printable import printable
from mosbench.report.rows import Column, TableModel, p_value
from mosbench.store.db import Store
from mosbench.units import plain, si

if TYPE_CHECKING:
    from matplotlib.figure import Figure  # imported where drawn: matplotlib takes half a second

    from mosbench.analysis.explain_history import HistoryExplained

BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 24  # characters of a series' line: 80 columns hold it beside a name and two levels
MARK = "│"


def _buckets(n: int, width: int) -> list[range]:
    """The runs each character stands for: one each where they fit, else even shares."""
    if n <= width:
        return [range(i, i + 1) for i in range(n)]
    edges = np.linspace(0, n, width + 1).round().astype(int)
    return [range(a, b) for a, b in itertools.pairwise(edges) if b > a]


def sparkline(means: list[float | None], marks: set[int], width: int = SPARK_WIDTH) -> str:
    """Blocks from the series' lowest level to its highest (each character the median of its runs; a
    space where none measured), MARK before the character holding a change's first run."""
    known = [m for m in means if m is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    out = []
    for bucket in _buckets(len(means), width):
        if any(i in marks for i in bucket):
            out.append(MARK)
        values = [means[i] for i in bucket if means[i] is not None]
        if not values:
            out.append(" ")
            continue
        level = statistics.median(values)
        step = 0 if high == low else round((level - low) / (high - low) * (len(BLOCKS) - 1))
        out.append(BLOCKS[step])
    return "".join(out)


def _levels(s: PointSeries) -> tuple[float | None, float | None]:
    means = [m for m in s.means() if m is not None]
    return (means[0], means[-1]) if means else (None, None)


def _shown_series(h: History) -> list[tuple[SeriesKey, list[PointSeries]]]:
    """Each test and variant with its series at one core (or its fewest) and at its most cores."""
    by_key: dict[SeriesKey, list[PointSeries]] = {}
    for s in h.series:
        by_key.setdefault(s.key, []).append(s)
    out = []
    for key, group in by_key.items():
        group.sort(key=lambda s: s.cores)
        out.append((key, [group[0]] if len(group) == 1 else [group[0], group[-1]]))
    return out


def series_table(h: History) -> TableModel:
    """A row per series (one core, the most cores), each change it took a row of its own under it."""
    t = TableModel(
        f"{_machine_title(h)}\n{len(h.runs)} runs in {h.order.value} order, per-core throughput",
        [Column("test", left=True), Column("cores"), Column("runs, newest last", left=True), Column("first"),
         Column("newest")],
        note=f"{MARK} marks where a change begins, the line under the series what it was at those cores; each "
             "block is the median of its runs, lowest to highest.")
    shifts: dict[SeriesKey, list[Shift]] = {}
    for shift in h.shifts:
        shifts.setdefault(shift.key, []).append(shift)
    for key, shown in _shown_series(h):
        marks = {shift.after if shift.shape is Shape.STEP else shift.before + 1 for shift in shifts.get(key, [])}
        for i, s in enumerate(shown):
            lo, hi = _levels(s)
            moved = [(shift, d) for shift in shifts.get(key, [])
                     if (d := shift.by_cores.get(s.cores)) is not None and d.significant]
            t.add([key.name if i == 0 else "", str(s.cores), sparkline(s.means(), marks), si(lo), si(hi)])
            # A change a row, under the blocks it marks: a column of changes beside them took 80 columns' last
            # few and folded each change over five lines, the test's name over two.
            for shift, d in moved:
                t.add(["", "", f"{_percent(d.ratio)} {_runs(h, shift)}", "", ""],
                      cell_styles={2: "poor" if d.ratio < 1 else "good"})
        t.breaks.add(len(t.rows) - 1)
    return t


def _machine_title(h: History, width: int = 78) -> str:
    """The machine's name and topology, on two lines where one cannot hold them (never broken inside)."""
    said = printable(h.machine.describe())  # a stored hostname's line break too: the title has its own
    return said if len(said) <= width else f"{printable(h.machine.hostname)}\n({printable(h.machine.topology)})"


def _percent(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f}%"


def _interval(ratio: float, low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return f"{plain(ratio)}×"
    return f"{plain(ratio)}× [{plain(low)}, {plain(high)}]"


def _runs(h: History, shift: Shift) -> str:
    """A step's two runs ("#10 → #11"), a drift's stretch ("#3 … #17")."""
    mark = "→" if shift.shape is Shape.STEP else "…"
    return f"{h.runs[shift.before].name} {mark} {h.runs[shift.after].name}"


def shifts_table(h: History, anchors: dict[int, str] | None = None) -> TableModel:
    """Every change, a row each; `anchors` (the report's ids of their explanations, by the change's index
    in h.shifts) link a row's size to why it happened."""
    anchors = anchors or {}
    t = TableModel(
        f"Changes: {len(h.shifts)} among {h.hypotheses} hypotheses (Holm-adjusted at {FAMILY_ALPHA:g})",
        [Column("test", left=True), Column("runs", left=True), Column("cores"), Column("after/before"),
         Column("p adj."), Column("kind", left=True), Column("kernels", left=True, essential=False)],
        note="runs: a step between two runs (→) or a drift over the runs between (…); after/before: the new "
             "level's mean per-core throughput over the old one's, 95% interval, at the most cores where the "
             "change was confirmed; p adj.: Holm-adjusted for every candidate of every series; kind: "
             "from each core count's own test. Each change is told in full after the table.")
    for i, shift in enumerate(h.shifts):
        change = max(shift.changes, key=lambda c: c.cores)
        d = change.difference
        before, after = h.runs[shift.before], h.runs[shift.after]
        t.add([shift.key.name, _runs(h, shift), str(change.cores), _interval(d.ratio, d.low, d.high),
               p_value(change.p_adjusted), shift.kind().value, f"{before.kernel} → {after.kernel}"],
              cell_styles={3: "poor" if d.ratio < 1 else "good"}, links={3: anchors[i]} if i in anchors else None)
    return t


def environment_text(shift: Shift, most: int = 4) -> str:
    parts = [f"{key}: {values[0]} → {values[1]}" for key, values in shift.environment[:most]]
    if len(shift.environment) > most:
        parts.append(f"and {len(shift.environment) - most} more")
    return "; ".join(parts)


def scaling_text(shift: Shift) -> str:
    if shift.scaling is None:
        return ""
    before, after = shift.scaling
    return f"per-core ratio at the most cores to one core {plain(before)} → {plain(after)}"


def _cores(n: int) -> str:
    return f"{n} core{'s' if n != 1 else ''}"


def cores_text(chosen: list[int], every: list[int]) -> str:
    """Core counts as a reader says them: neighbours in the series' sweep as a range ("2-4 cores"), the
    rest listed ("1, 8 and 16 cores")."""
    groups: list[list[int]] = []
    for c in chosen:
        if groups and every.index(c) == every.index(groups[-1][-1]) + 1:
            groups[-1].append(c)
        else:
            groups.append([c])
    parts = [f"{g[0]}-{g[-1]}" if len(g) > 1 else str(g[0]) for g in groups]
    said = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"{said} core{'s' if chosen != [1] else ''}"


def kind_text(shift: Shift) -> str:
    """What the shift's kind means, with the core counts that say so."""
    every = sorted(shift.by_cores)
    moved = shift.moved()
    kind = shift.kind()
    if kind is Kind.EVERY_CORE:
        return "one core moved too, the same way: a cost every core pays"
    if kind is Kind.SCALABILITY:
        return "one core did not move, the most cores did: the per-core ratio itself moved"
    if kind is Kind.ONE_CORE:
        return "one core moved, the most cores did not"
    if kind is Kind.OPPOSITE:
        up = [c for c, d in moved.items() if d.ratio > 1]
        down = [c for c, d in moved.items() if d.ratio < 1]
        return f"the directions disagree: up at {cores_text(up, every)}, down at {cores_text(down, every)}"
    if kind is Kind.SOME_CORES:
        if not moved:
            return "no core count moved on its own test across these runs"
        return f"seen only at {cores_text(list(moved), every)}: neither one core nor the most cores moved"
    return "no one-core point to tell a cost from a scalability change"


def wrap_items(items: list[str], width: int = 78, indent: str = "  ") -> list[str]:
    """Items joined by "; " into lines of at most `width`, an item never broken across two ("p <0.0001"
    stays whole); an item longer than a line has one to itself."""
    lines: list[str] = []
    line = ""
    for item in items:
        if line and len(line) + 2 + len(item) > width - 1:  # a line that goes on ends with ";"
            lines.append(line + ";")
            line = indent + item
        else:
            line = f"{line}; {item}" if line else indent + item
    if line:
        lines.append(line)
    return lines


def _told(d: Difference) -> str:
    return f"{_interval(d.ratio, d.low, d.high)} p {p_value(d.p)}" if d.p is not None else _interval(
        d.ratio, d.low, d.high)


def shift_lines(h: History, shift: Shift) -> list[str]:
    """A change told in full: its size and adjusted p, its kind, every core count across the same runs
    (each with its own, unadjusted p), the scaling ratio, what moved with it and what differed."""
    change = max(shift.changes, key=lambda c: c.cores)
    what = "a drift" if shift.shape is Shape.DRIFT else "a step"
    d = change.difference
    head = (f"{shift.key.name}, {_runs(h, shift)}: {what} of {_interval(d.ratio, d.low, d.high)} at "
            f"{_cores(change.cores)}, p adj. {p_value(change.p_adjusted)}; {kind_text(shift)}")
    lines = wrap_words(head)
    if shift.by_cores:
        lines.append("  each core count's own test across the same runs, p unadjusted:")
        lines.extend(wrap_items([f"{_cores(cores)} {_told(d)}" for cores, d in sorted(shift.by_cores.items())],
                                indent="    "))
    if scaling := scaling_text(shift):
        lines.append(f"  {scaling}")
    if shift.with_it:
        lines.extend(wrap_words("moved with it: " + ", ".join(k.name for k in shift.with_it), indent="  ",
                                then="    "))
    lines.extend(wrap_words("what differs: " + (environment_text(shift, most=8) or "nothing recorded"), indent="  ",
                            then="    "))
    return lines


def wrap_words(text: str, width: int = 78, indent: str = "", then: str = "  ") -> list[str]:
    """Text in lines of at most `width` (the first starting with `indent`, the rest with `then`), broken at
    spaces but never inside "p <0.0001" or "p adj. 0.01"."""
    words = text.replace("p <", "p\0<").replace("p adj. ", "p\0adj.\0").split()
    lines: list[str] = []
    line = indent
    for word in words:
        if line.strip() and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = then + word
        else:
            line = f"{line} {word}" if line.strip() else line + word
    if line.strip():
        lines.append(line)
    return [x.replace("\0", " ") for x in lines]


def summary_lines(h: History) -> list[str]:
    lines = []
    if h.other_machines:
        others = ", ".join(f"{m.describe()} ({n} runs)" for m, n in h.other_machines)
        lines.extend(wrap_words(f"this store also holds runs of {others}: --host chooses"))
    lines.extend(f"left out: {why}" for why in h.left_out)
    for shift in h.shifts:
        lines.extend(shift_lines(h, shift))
    if not h.shifts:
        lines.append(f"no significant change in {len(h.series)} series over {len(h.runs)} runs")
    return lines


# JSON


def _run_json(r) -> dict[str, Any]:
    return {"id": r.id, "label": r.label, "started_at": r.started_at.isoformat(), "kernel": r.kernel,
            "commit": r.commit}


def _difference_json(d) -> dict[str, Any]:
    return {"ratio": d.ratio, "low": d.low, "high": d.high, "p": d.p, "replicates": d.replicates}


def as_json(h: History, fail_on: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "machine": {"hostname": h.machine.hostname, "topology": h.machine.topology},
        "order": h.order.value, "alpha": FAMILY_ALPHA, "candidates": h.hypotheses,
        "p_values": "p_adjusted: Holm over every candidate of every series; by_cores: each count's own, unadjusted",
        "runs": [_run_json(r) for r in h.runs],
        "series": [{"workload": s.key.workload, "test": s.key.test, "variant": s.key.variant, "cores": s.cores,
                    "trials": [list(t) for t in s.trials]} for s in h.series],
        "changes": [{
            "workload": sh.key.workload, "test": sh.key.test, "variant": sh.key.variant,
            "before_run": h.runs[sh.before].id, "after_run": h.runs[sh.after].id, "shape": sh.shape.value,
            "kind": sh.kind().value,
            "by_cores": {str(c): _difference_json(d) for c, d in sorted(sh.by_cores.items())},
            "found_at_cores": [{"cores": c.cores, "p_adjusted": c.p_adjusted, **_difference_json(c.difference)}
                               for c in sh.changes],
            "scaling_before_after": list(sh.scaling) if sh.scaling else None,
            "moved_with_it": [k.name for k in sh.with_it],
            "environment_differences": [{"key": k, "values": v} for k, v in sh.environment],
        } for sh in h.shifts],
    }
    if fail_on is not None:
        out["fail_on_change_percent"] = fail_on
        out["worse_at_newest"] = [f"{s.key.name}" for s in h.worse_than(fail_on)]
    return out


# Figures


def _run_ticks(ax, h: History) -> None:
    n = len(h.runs)
    step = max(1, n // 12)
    ticks = list(range(0, n, step))
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{h.runs[i].name}\n{h.runs[i].kernel}" for i in ticks], fontsize=7, rotation=30,
                       ha="right")


def series_figure(h: History, key: SeriesKey, shown: list[PointSeries]) -> Figure:
    from matplotlib.figure import Figure
    from matplotlib.ticker import EngFormatter

    fig = Figure(figsize=(7.2, 3.4), layout="constrained")
    ax = fig.subplots()
    for s in shown:
        xs = [i for i, t in enumerate(s.trials) if t]
        ax.plot(xs, [statistics.fmean(s.trials[i]) for i in xs], marker="o", markersize=3,
                label=f"{s.cores} core{'s' if s.cores != 1 else ''}")
        # Every trial as one artist: one a run made 1,000 of them in a 500-run figure, most of its time.
        ax.plot([i for i in xs for _ in s.trials[i]], [x for i in xs for x in s.trials[i]], ".", color="grey",
                markersize=2, alpha=0.5)
    for shift in h.shifts:
        if shift.key == key and shift.shape is Shape.DRIFT:
            ax.axvspan(shift.before, shift.after, color="red", alpha=0.1)
            ax.annotate(_percent(shift.ratio), (shift.before, ax.get_ylim()[1]), fontsize=8, color="red",
                        ha="left", va="top")
        elif shift.key == key:
            ax.axvline(shift.after - 0.5, color="red", linestyle="--", linewidth=1)
            ax.annotate(_percent(shift.ratio), (shift.after - 0.5, ax.get_ylim()[1]), fontsize=8, color="red",
                        ha="left", va="top")
    ax.set_title(key.name, fontsize=10)
    ax.set_ylabel("per core per second")
    ax.yaxis.set_major_formatter(EngFormatter())
    ax.set_ylim(bottom=0)
    _run_ticks(ax, h)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def heatmap_figure(h: History) -> Figure | None:
    """Tests × runs: each run's per-core throughput at a series' most cores over its one core's (the
    scaling ratio), so a reader sees at a glance which run broke which test's scaling."""
    rows, labels = [], []
    for key, shown in _shown_series(h):
        if len(shown) < 2 or shown[0].cores != 1:
            continue
        one, most = shown[0].means(), shown[1].means()
        rows.append([r[0] if (r := scaling_ratio({1: o, shown[1].cores: m})) else np.nan
                     for o, m in zip(one, most, strict=True)])
        labels.append(f"{key.name} ({shown[1].cores}/1)")
    if not rows:
        return None
    from matplotlib.figure import Figure

    data = np.asarray(rows, dtype=float)
    fig = Figure(figsize=(7.2, 1.2 + 0.28 * len(rows)), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(data, aspect="auto", cmap="RdYlGn", vmin=0, vmax=max(1.0, float(np.nanmax(data))),
                      interpolation="nearest")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=7)
    _run_ticks(ax, h)
    fig.colorbar(image, ax=ax, label="scaling ratio")
    ax.set_title("Scaling over the runs", fontsize=10)
    return fig


# Tests drawn in the report's History section: every changed one first, then the rest up to this many.
MOST_FIGURES = 40


def figures(h: History) -> list[tuple[str, Figure]]:
    """(file stem, figure): the heat map first, then each changed series, then the rest."""
    out: list[tuple[str, Figure]] = []
    heat = heatmap_figure(h)
    if heat is not None:
        out.append(("history_heatmap", heat))
    changed = {s.key for s in h.shifts}
    shown = sorted(_shown_series(h), key=lambda ks: (ks[0] not in changed, ks[0].name))
    for key, series in shown[:MOST_FIGURES]:
        stem = "history_" + "".join(ch if ch.isalnum() else "_" for ch in key.name)
        out.append((stem, series_figure(h, key, series)))
    return out


def undrawn(h: History) -> int:
    """The tests the History section leaves without a figure (MOST_FIGURES drawn)."""
    return max(0, len(_shown_series(h)) - MOST_FIGURES)


def of_run(db: Store, run: dict[str, Any]) -> History | None:
    """The history a report of `run` shows (analysis/history.of_run)."""
    return history.of_run(db.list_runs(), db.history_points, run)


def of_run_explained(db: Store, run: dict[str, Any]) -> tuple[History | None, tuple[HistoryExplained, ...]]:
    """The history a report or `show` of `run` shows, and each of its changes explained (explain_history)."""
    from mosbench.analysis import explain_history

    found = of_run(db, run)
    return found, tuple(explain_history.explained(db, found)) if found else ()
