"""The report's tables as data: built once here, rendered to the terminal (table.py) and to HTML.

A table is columns and rows of text with a style per row or cell ("failed", or a scalability grade);
each renderer maps a style to its own colour. The HTML report shows every column. The terminal (table.py)
shows the essential ones in 80 columns and the rest only with --wide: columns marked `essential=False`
(a point's CPUs, the median and spread, steal, the client's columns, a parameter's interval) and those
marked `wide`, long text (the workload's own metrics) the report sets small.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from mosbench.analysis.cells import (
    PointKey,
    Series,
    Trial,
    columns_for,
    group_by_test,
    metrics_shown_apart,
    point_notes,
    rate_scale,
)
from mosbench.units import latency, plain, si
from mosbench.workloads.base import PointNote


def rate(per_s: float, s: Series) -> str:
    """A per-second throughput in the series' own time base: "9.76M/s", or "1.18k/h" for jobs."""
    factor, per = rate_scale(s)
    return si(per_s * factor) + ("/h" if per == "hour" else "/s")


GOOD = 0.9  # a scaling ratio from which it is good: near perfect
POOR = 0.5  # and below which poor: half of one core's throughput per core lost
GRADES = f"good from {GOOD:.2f}, poor below {POOR:.2f}"  # for a table's note


def grade(ratio: float) -> str:
    """A scaling ratio in words: good, fair or poor."""
    return "good" if ratio >= GOOD else "fair" if ratio >= POOR else "poor"


def cpu_unit(s: Series) -> tuple[float, str]:
    """CPU time per unit of work is µs for operations; a job's reads in seconds."""
    return (1e-6, "s") if s.kind == "job" else (1.0, "µs")


def _num(x: float | None, scale: float = 1.0) -> str:
    """A number in a column that names its unit: 3 significant figures, no exponent ("2,360", "0.0157")."""
    return "–" if x is None else plain(x * scale)


def _share(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def _signed(x: float) -> str:
    """A change with its sign: "+2,360", "-0.5"."""
    return ("+" if x >= 0 else "") + plain(x)


def p_value(p: float) -> str:
    """A test's p to two figures, without an exponent: "0.012", "<0.0001"."""
    return "<0.0001" if p < 1e-4 else plain(p, 2)


@dataclass(frozen=True)
class Column:
    title: str
    left: bool = False  # text columns; numbers are right-aligned
    wraps: bool = False  # long text folds (CPU lists, reasons); numbers are never cut
    wide: bool = False  # long text: the HTML report's (small), the terminal's only with --wide
    essential: bool = True  # False: the terminal shows it only with --wide (the HTML report always)


@dataclass
class Row:
    cells: list[str]
    style: str | None = None  # for the whole row: "failed"
    cell_styles: dict[int, str] = field(default_factory=dict)  # per cell: "good", "fair", "poor", "failed"
    links: dict[int, str] = field(default_factory=dict)  # per cell: the report's id it links to (HTML only)


@dataclass
class TableModel:
    title: str
    columns: list[Column]
    rows: list[Row] = field(default_factory=list)
    breaks: set[int] = field(default_factory=set)  # a divider after these row indexes
    note: str | None = None  # how to read it, under the table: what a short column title cannot say

    def add(self, cells: list[str], style: str | None = None, cell_styles: dict[int, str] | None = None,
            links: dict[int, str] | None = None) -> None:
        self.rows.append(Row(cells, style, cell_styles or {}, links or {}))

    def column(self, title: str) -> list[str]:
        i = [c.title for c in self.columns].index(title)
        return [r.cells[i] for r in self.rows]

    def part(self, title: str, titles: list[str], note: str | None = None) -> TableModel:
        """Some of the columns (by title, in that order; those absent left out), as a table of their own:
        where one table of every column cannot fit a terminal, its parts can."""
        index = {c.title: i for i, c in enumerate(self.columns)}
        picked = [index[t] for t in titles if t in index]
        t = TableModel(title, [self.columns[i] for i in picked], breaks=set(self.breaks), note=note)
        for r in self.rows:
            t.add([r.cells[i] for i in picked], r.style,
                  {new: r.cell_styles[old] for new, old in enumerate(picked) if old in r.cell_styles},
                  {new: r.links[old] for new, old in enumerate(picked) if old in r.links})
        return t


def cell_tables(series: list[Series]) -> list[TableModel]:
    """Per test, every (variant, cores): best/median/spread per core, CPU time per unit, idle and steal,
    the best trial's.

    Where a load generator ran, the server's CPU time is its own group's and the client's is shown
    beside it: each per unit of the server's work. The workload's own columns follow (columns_for), and
    where a client ran or the workload noted something of a trial, which side limited the point.
    """
    tables = []
    for name, group in group_by_test(series).items():
        first = group[0]
        factor, per = rate_scale(first)
        cpu_scale, cpu_name = cpu_unit(first)
        own_columns = columns_for(first)
        shown_apart = HIDDEN_METRICS | set(metrics_shown_apart(first))
        notes = {(s.variant, c.cores): [point_notes(s, t.metrics) for t in c.trials]
                 for s in group for c in s.cells.values()}
        any_failed = any(c.failed for s in group for c in s.cells.values())
        any_client = any(c.loadgen for s in group for c in s.cells.values())
        any_interfered = any(t.interfered for s in group for c in s.cells.values() for t in c.trials)
        any_limit = any_client or any_interfered or any(n for by_trial in notes.values() for n in by_trial)
        # In 80 columns: variant, cores, best, n, ±95%, user, sys, idle, limit and failed where any; the
        # rest with --wide and in the report.
        cols = [Column("variant", left=True), Column("cores"),
                Column("cpus", left=True, wraps=True, essential=False)]
        if any_client:
            cols.append(Column("client cpus", left=True, wraps=True, essential=False))
        cols += [Column(f"best /{per}/core"), Column("median", essential=False),
                 Column("min–max", essential=False), Column("n"), Column("±95%"),
                 Column(f"user {cpu_name}"), Column(f"sys {cpu_name}")]
        if any_client:
            cols.append(Column(f"client {cpu_name} u+s", essential=False))
        cols += [Column("idle"), Column("steal", essential=False),
                 *(Column(own.title, essential=False) for own in own_columns)]
        if any_client:
            cols.append(Column("client p99", essential=False))
        if any_limit:
            cols.append(Column("limit", left=True, wraps=True))
        if any_failed:
            cols.append(Column("failed", left=True, wraps=True))
        cols.append(Column("workload's own (best trial)", left=True, wraps=True, wide=True))
        t = TableModel(f"{name}: {first.unit}/{per}/core, CPU {cpu_name} per {first.unit}", cols)
        for s in group:
            for cores, c in sorted(s.cells.items()):
                spread = f"{si(min(c.per_core) * factor)}–{si(max(c.per_core) * factor)}" if c.trials else "–"
                best = c.best_trial
                row = [s.variant, str(cores), c.cpus]
                if any_client:
                    row.append((c.loadgen or "") + (" (shared)" if c.loadgen and c.loadgen_shared else ""))
                row += [si(c.best and c.best * factor), si(c.median and c.median * factor), spread,
                        str(len(c.trials)), _plus_minus(c.half_width), _num(best and best.user_us_per_unit, cpu_scale),
                        _num(best and best.system_us_per_unit, cpu_scale)]
                if any_client:
                    row.append(f"{_num(best.client_user_us_per_unit, cpu_scale)}+"
                               f"{_num(best.client_system_us_per_unit, cpu_scale)}"
                               if best and best.client_user_us_per_unit is not None else "–")
                row += [_share(best and best.idle_share), _share(best and best.steal_share),
                        *(own.text(c.best_metrics) for own in own_columns)]
                styles = {}
                if any_client:
                    row.append(latency(c.best_metrics.get("latency_p99_us")))
                if any_limit:
                    limit, poor = limit_text(c.trials, notes[(s.variant, cores)])
                    row.append(limit)
                    if poor:
                        styles[len(row) - 1] = "poor"
                if any_failed:
                    row.append(f"{len(c.failed)}: {c.failed[-1]}" if c.failed else "")
                row.append(metrics_text(c.best_metrics, shown_apart))
                t.add(row, style="failed" if c.failed and not c.trials else None, cell_styles=styles)
            t.breaks.add(len(t.rows) - 1)
        tables.append(t)
    return tables


HIDDEN_METRICS = {"driver_pid", "client_bound", "latency_p99_us",  # shown in columns of their own
                  "interference", "interfered_attempts"}  # in the limit column


def _plus_minus(share: float | None) -> str:
    """The 95% interval's half-width as a share of the mean; "–" with fewer than two trials."""
    return "–" if share is None else f"±{share:.1%}" if share < 0.1 else f"±{share:.0%}"


def limit_text(trials: list[Trial], notes: list[list[PointNote]]) -> tuple[str, bool]:
    """Which side limited a server point's trials, "client n/m" (the evidence is in the metrics) or
    "server", how many trials each of the workload's notes was made of ("queue grew n/m"), and how
    many other programs interfered with ("interfered n/m, up to 12%", and the most memory a guest gave back
    to its host in one of those windows); whether that is a limit other
    than the server's own."""
    said = []
    judged = [t.metrics for t in trials if "client_bound" in t.metrics]
    bound = [m for m in judged if m["client_bound"]]
    if judged:
        said.append(f"client {len(bound)}/{len(judged)}" if bound else "server")
    tags = Counter(tag for by_trial in notes for tag in dict.fromkeys(n.tag for n in by_trial))
    said += [f"{tag} {count}/{len(trials)}" for tag, count in tags.items()]
    interfered = [t for t in trials if t.interfered]
    if interfered:
        worst = max(t.interference_share or 0.0 for t in interfered)
        said.append(f"interfered {len(interfered)}/{len(trials)}, up to {worst:.0%}")
        # The host taking back memory the guest freed shows as steal: say so where it happened.
        reported = max((t.metrics.get("interference") or {}).get("reported_mib") or 0.0 for t in interfered)
        if reported >= 1:
            said.append(f"{reported:.0f} MiB reported to the host")
    return ", ".join(said), bool(bound or tags or interfered)


def interference_banner(series: list[Series]) -> str | None:
    """The count a reader must see before any number: trials other programs took CPU time from."""
    trials = [t for s in series for c in s.cells.values() for t in c.trials]
    interfered = [t for t in trials if t.interfered]
    if not interfered:
        return None
    return (f"{len(interfered)} of {len(trials)} measured trials were interfered with: other programs (or a "
            f"hypervisor) took more than the run's --max-interference of their CPUs' time, so they measured "
            f"those programs too. They are marked in the limit column; compare leaves them out.")


def metrics_text(m: dict, hidden: set[str]) -> str:
    """The workload's own measurements, compact: page faults, phase times, bytes per second; those
    shown elsewhere (hidden) left out."""
    parts = []
    for k, v in m.items():
        if k in hidden:
            continue
        text = si(v) if isinstance(v, int | float) and not isinstance(v, bool) else str(v)
        parts.append(f"{k}={text}")
    return ", ".join(parts)


def summary_table(series: list[Series]) -> TableModel:
    """Figure 3 in numbers: per-core throughput at the most cores relative to one core."""
    t = TableModel("Per-core throughput at the most cores relative to one core (1.0 = perfect scaling)",
                   [Column("test", left=True), Column("variant", left=True),
                    Column("unit", left=True, essential=False),  # each test's table above names it
                    Column("1 core"), Column("at cores"), Column("per core"),
                    Column("ratio", wraps=True)])  # or why there is none: words that fold
    for s in series:
        ratio = s.scalability()
        cells = s.ok_cells()
        if ratio is None:
            one = rate(cells[0].best, s) if cells and cells[0].cores == 1 else "–"
            t.add([s.name, s.variant, s.unit, one, "–", "–", "needs 1 core and another count"])
            continue
        value, at = ratio
        if (idle := s.unsaturated_baseline()) is not None:
            t.add([s.name, s.variant, s.unit, rate(cells[0].best, s), str(at), rate(cells[-1].best, s),
                   f"baseline not saturated (idles {idle:.0%})"], cell_styles={6: "poor"})
            continue
        t.add([s.name, s.variant, s.unit, rate(cells[0].best, s), str(at), rate(cells[-1].best, s), f"{value:.2f}"],
              cell_styles={6: grade(value)})
    return t


def extrapolation_counts(measured_max: int, up_to: int) -> list[int]:
    """Where a model is read past the machine: 48, 96 and up_to (256 or the machine), beyond what was measured."""
    return [n for n in sorted({48, 96, up_to}) if measured_max < n <= up_to]


def _total_at(f, n: int) -> float:
    """A fitted model's total throughput at n cores."""
    import numpy as np  # here: the command line imports this module, and starts without numpy

    return float(np.atleast_1d(f.throughput(n))[0])


def _param(value: float, interval: tuple[float, float] | None, fmt: str) -> str:
    """A parameter with its interval, "0.00049 [0–0.0012]": the solver's zeros (1e-29) written as 0."""
    return _param_value(value, fmt) + (f" {_param_interval(interval, fmt)}" if interval else "")


def _param_interval(interval: tuple[float, float] | None, fmt: str) -> str:
    """A parameter's interval alone, "[0–0.0012]"; "–" without one."""
    if not interval:
        return "–"
    return f"[{_param_value(interval[0], fmt)}–{_param_value(interval[1], fmt)}]"


def _param_value(x: float, fmt: str) -> str:
    """A parameter: the solver's zeros (1e-29) written as 0; two figures without an exponent ("0.00049",
    "1.2"), but a coherency of a few millionths keeps its "3.4e-06" (never an "e+")."""
    if abs(x) < 1e-12:
        return "0"
    return plain(x, 2) if abs(x) >= 1e-4 else f"{x:{fmt}}"


def count_interval(value: float, interval: tuple[float, float] | None, measured_max: int) -> str:
    """A core count (a peak, a collapse) with its interval: "36 [26–48]". An end past UNBOUNDED times
    the most cores measured (or none at all) bounds nothing: "36 [26 or more]", "over 1600"; an
    interval of the one value is the value."""
    from mosbench.analysis.scaling import UNBOUNDED, bounded

    limit = UNBOUNDED * measured_max
    if value > limit:
        return f"over {limit}"
    if not interval:
        return f"{value:.0f}"
    low, high = interval
    if bounded(high, measured_max) is None:
        return f"{value:.0f} [{low:.0f} or more]"
    if round(low) == round(high) == round(value):
        return f"{value:.0f}"
    return f"{value:.0f} [{low:.0f}–{high:.0f}]"


def _end(x: float) -> str:
    """An interval's end, to two figures: "31k", "440k", "2.1M"."""
    return si(x, 2)


def predicted(f, n: int, factor: float = 1.0) -> str:
    """A model's per-core throughput at n with its 95% prediction interval: "49.6k [31k–98k]"."""
    value = si(_total_at(f, n) / n * factor)
    band = f.band([n])
    if band is None:
        return value
    return f"{value} [{_end(float(band[0][0]) / n * factor)}–{_end(float(band[1][0]) / n * factor)}]"


def peak_cell(f, up_to: int, measured_max: int) -> str:
    """Where a model's total throughput peaks (a lock collapses): "cannot tell" where its points
    cannot tell a fall, "none" where it only levels off."""
    if f.undetermined:
        return "cannot tell"
    peak = f.peak(up_to)
    return "none" if not peak else count_interval(peak, f.peak_interval(up_to), measured_max)


def holdout_cell(f) -> tuple[str, str | None]:
    """The hold-out's error at the largest count ("+0.5%"), styled poor where its prediction interval
    missed the measured value; "–" with too few counts to hold one out."""
    h = f.holdout
    if h is None:
        return "–", None
    return h.text(), "poor" if h.missed else None if h.error is None else "good"


HOLDOUT_NOTE = ("[ ]: 95% intervals; past the measured cores, of a new measurement. held out: the model fitted "
                "without the largest core count, its error there ((predicted − measured) / measured), \"missed\" "
                "where the measured mean lies outside its interval. cannot tell: per-core throughput does not fall "
                "beyond the points' spread, so no peak or collapse is named.")


def scaling_table(group: list[Series], fits: dict, up_to: int) -> TableModel:
    """Each curve's fitted models (Amdahl, the USL, the workload's own): parameters with their 95%
    bootstrap intervals where the model has them, the predicted peak, per-core throughput carried past
    the measured cores with its prediction interval, the hold-out's error, or why a model was refused.

    Every column for the report; the terminal shows it in two parts (scaling_tables)."""
    from mosbench.analysis.scaling import ModelFit, Refusal

    first = group[0]
    factor, per = rate_scale(first)
    measured_max = max((c.cores for s in group for c in s.ok_cells()), default=1)
    counts = extrapolation_counts(measured_max, up_to)
    t = TableModel(f"{first.name}: scaling models ({first.unit}/{per}/core; [95% bootstrap interval])",
                   [Column("variant", left=True), Column("model", left=True), Column(f"λ /{per}"),
                    Column("σ contention"), Column("σ interval", essential=False),
                    Column("κ coherency"), Column("κ interval", essential=False), Column("peak at"),
                    # The first and last count past the measured cores in 80 columns, any between with --wide.
                    *(Column(f"{n} cores", essential=n in (counts[0], counts[-1])) for n in counts),
                    Column("fit err"), Column("held out"),
                    Column("note", left=True, wraps=True, wide=True)], note=HOLDOUT_NOTE)
    for s in group:
        for model, f in fits[s.variant].items():
            if isinstance(f, Refusal):
                t.add([s.variant, f.label, *("–" for _ in range(8 + len(counts))), f"refused: {f.reason}"])
                continue
            fitted = isinstance(f, ModelFit)
            usl = fitted and model == "usl"
            held, style = holdout_cell(f)
            row = [s.variant, f.label, si(_total_at(f, 1) * factor),
                   _param_value(f.sigma, ".2g") if fitted else "–",
                   _param_interval(f.ci.get("sigma"), ".2g") if fitted else "–",
                   _param_value(f.kappa, ".2g") if usl else "–",
                   _param_interval(f.ci.get("kappa"), ".2g") if usl else "–",
                   peak_cell(f, up_to, measured_max), *(predicted(f, n, factor) for n in counts),
                   f"{f.rms_log_error:.1%}", held, f.describe()]
            t.add(row, cell_styles={len(row) - 2: style} if style else {})
        t.breaks.add(len(t.rows) - 1)
    return t


def scaling_tables(group: list[Series], fits: dict, up_to: int) -> list[TableModel]:
    """The terminal's scaling table, in two parts that each fit 80 columns: the fits (parameters, error,
    hold-out) and what they predict (the peak, per-core throughput past the measured cores)."""
    full = scaling_table(group, fits, up_to)
    first = group[0]
    _, per = rate_scale(first)
    titles = [c.title for c in full.columns]
    fitted = full.part(f"{first.name}: scaling models fitted ({first.unit}/{per}/core)",
                       [t for t in titles if t not in ("peak at",) and not t.endswith(" cores")])
    predicted_ = full.part(f"{first.name}: what they predict ({first.unit}/{per}/core; [95% prediction "
                           "interval])", ["variant", "model", "peak at", *(t for t in titles if t.endswith(" cores"))],
                           note=HOLDOUT_NOTE)
    return [fitted, predicted_]


def lock_model_counts(fits: dict, up_to: int) -> list[int]:
    """The lock table's core counts: one core, the most measured, 48 and up_to."""
    measured = max((max(f.cores) for f in fits.values() if f.cores), default=1)
    return sorted({1, measured, 48, up_to} - ({48} if up_to < 48 else set()))


def lock_model_table(fits: dict, up_to: int) -> TableModel:
    """Each lock's fitted model: its parameters, fit error, predicted per-core throughput (with its
    prediction interval past the measured cores), the collapse and the hold-out's error."""
    measured = max((max(f.cores) for f in fits.values() if f.cores), default=1)
    counts = lock_model_counts(fits, up_to)
    t = TableModel("Lock model: acquisitions/s/core at each core count [95% prediction interval]",
                   [Column("lock", left=True), Column("model", left=True), Column("a ns"), Column("s ns"),
                    Column("c ns"), Column("fit err"), *(Column(f"{n} cores") for n in counts), Column("collapse"),
                    Column("held out"), Column("note", left=True, wraps=True, wide=True)],
                   note=HOLDOUT_NOTE if any(f.cores for f in fits.values()) else None)  # not for given s and c
    for name, f in fits.items():
        p = f.params
        at = [predicted(f, n) if n > measured else si(p.per_core(n)) for n in counts]
        collapse = peak_cell(f, up_to, measured)
        held, style = holdout_cell(f)
        row = [name, p.kind, f"{p.a:.0f}", f"{p.s:.0f}", f"{p.c:.1f}", f"{f.rms_log_error:.1%}" if f.cores else "–",
               *at, collapse if collapse in ("none", "cannot tell") else f"at {collapse}", held,
               "; ".join(filter(None, [f.remark(), f.undetermined]))]
        t.add(row, cell_styles={len(row) - 2: style} if style else {})
    return t


def lock_model_tables(fits: dict, up_to: int) -> list[TableModel]:
    """The terminal's lock model table in two parts that each fit 80 columns: each lock's parameters, fit
    error, collapse and hold-out; then its predicted per-core throughput at each core count."""
    full = lock_model_table(fits, up_to)
    counts = [c.title for c in full.columns if c.title.endswith(" cores")]
    return [full.part("Lock model: a, s and c in ns, the fit's error, the collapse and the hold-out",
                      [c.title for c in full.columns if c.title not in counts]),
            full.part(full.title, ["lock", *counts], note=full.note)]


def environment_table(labels: list[str], differences: list[tuple[str, list[str]]]) -> TableModel:
    """The facts that differ between runs (kernel, CPU, settings), each run's value in its column."""
    t = TableModel("What differs between the runs' environments" if differences else
                   "The runs' environments are the same (kernel, CPU, topology, settings, versions)",
                   [Column("fact", left=True), *(Column(label, left=True, wraps=True) for label in labels)])
    for key, values in differences:
        t.add([key, *(v if len(v) <= 120 else v[:117] + "…" for v in values)])
    return t


def change_table(base: str, other: str, found: list, anchors: dict[PointKey, str] | None = None) -> TableModel:
    """Each matched point: both runs' mean per-core throughput ± its spread over n trials, the ratio
    with its 95% interval and Welch's p; styled only where the change is significant, its verdict linked
    to its explanation where `anchors` (the report's ids by point) holds one."""
    from mosbench.analysis.cells import workload_of
    from mosbench.analysis.significance import ALPHA

    t = TableModel(f"{other} against {base}: mean per-core throughput, ratio {other}/{base} "
                   f"[95% interval], flagged where Welch's t-test gives p < {ALPHA}",
                   # In 80 columns the ratio with its interval and the verdict (Welch's p < ALPHA or not) say
                   # the change; each run's mean ± sd ×n and p itself with --wide.
                   [Column("test", left=True), Column("variant", left=True), Column("cores"),
                    Column(base, essential=False), Column(other, essential=False), Column("ratio"),
                    Column("p", essential=False), Column("verdict", left=True)])

    def mean_sd(values: tuple[float, ...], factor: float, per: str) -> str:
        if not values:
            return "–"
        m = sum(values) / len(values)
        sd = (sum((v - m) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else None
        return f"{si(m * factor)}{'' if sd is None else ' ± ' + si(sd * factor, 2)}/{per} ×{len(values)}"

    last = None
    for c in found:
        k = c.point
        w = workload_of(k.workload)
        factor, per = (3600.0, "h") if w is not None and w.kind == "job" else (1.0, "s")
        name = k.name
        if last is not None and name != last:
            t.breaks.add(len(t.rows) - 1)
        last = name
        ratio = "–" if c.ratio is None else f"{c.ratio:.3f}" + (
            f" [{c.low:.3f}–{c.high:.3f}]" if c.low is not None else "")
        p = "–" if c.p is None else p_value(c.p)
        style = {} if not c.significant else {5: "good" if c.ratio > 1 else "poor",
                                              7: "good" if c.ratio > 1 else "poor"}
        t.add([name, k.variant, str(k.cores), mean_sd(c.base, factor, per), mean_sd(c.other, factor, per), ratio, p,
               c.verdict], cell_styles=style, links={7: anchors[k]} if anchors and k in anchors else None)
    return t


def comparison_tables(found, anchors: dict[str, dict[PointKey, str]] | None = None) -> list[TableModel]:
    """A compare.Comparison as tables: the environment's differences first, then each run's changes on the
    points it shares with the baseline, with one line for what either side holds alone. Runs that share no
    point with it are not compared (a table of "not measured" rows says nothing): one table says what each
    run holds, and the report shows them side by side in their own sections. `anchors`: the report's ids
    of the changes' explanations, by run label and point."""
    from mosbench.analysis.compare import Side, unmatched

    base = found.labels[0]
    if not found.shares_any():
        t = TableModel(f"The runs share no point (test, variant and cores) with {base}: each is reported in its "
                       "own sections, not compared", [Column("run", left=True), Column("holds", left=True)])
        for i, label in enumerate(found.labels):
            side = unmatched(found.changes[0], Side.BASELINE if i == 0 else Side.OTHER) if found.changes else None
            held = side if i == 0 or i == 1 else unmatched(found.changes[i - 1], Side.OTHER)
            t.add([label, held.text() if held else "–"])
        return [t]
    tables = [environment_table(found.labels, found.differences)]
    for other, changes in zip(found.labels[1:], found.changes, strict=True):
        if not any(c.matched for c in changes):
            t = TableModel(f"{other} shares no point with {base}: not compared", [Column("holds", left=True)])
            t.add([unmatched(changes, Side.OTHER).text()])
            tables.append(t)
            continue
        t = change_table(base, other, [c for c in changes if c.matched], (anchors or {}).get(other))
        alone = [f"{label}: {u.text()}" for label, u in ((base, unmatched(changes, Side.BASELINE)),
                                                           (other, unmatched(changes, Side.OTHER))) if u.points]
        if alone:
            t.note = "Measured in one run only, not compared: " + "; ".join(alone)
        tables.append(t)
    return tables


def bisect_table(steps: list) -> TableModel:
    """`mosbench bisect`'s steps (guest/bisect.Step): each candidate's verdict, its boots, and its first
    point against both ends."""
    t = TableModel("bisection: each step against both ends",
                   [Column("commit", left=True), Column("subject", left=True, wraps=True),
                    Column("verdict", left=True), Column("boots"), Column("candidate/good"), Column("p vs good"),
                    Column("p vs bad")])
    for s in steps:
        g = s.against_good[0] if s.against_good else None
        b = s.against_bad[0] if s.against_bad else None
        t.add([s.commit[:12], s.subject, str(s.verdict), str(len(s.runs)),
               f"{g.ratio:.3f}" if g and g.ratio else "–", f"{g.p:.2g}" if g and g.p is not None else "–",
               f"{b.p:.2g}" if b and b.p is not None else "–"])
    return t


def profile_table(name: str, variant: str, unit: str, low_cores: int, high_cores: int, low, high) -> TableModel:
    """The functions whose own CPU time per unit of work grew most from the fewest cores to the most
    (profiles.growth), with the command that spent it; hardware counters per unit where measured."""
    from mosbench.analysis.profiles import growth

    t = TableModel(f"{name} {variant}: where the time per {unit} grew from {low_cores} to {high_cores} cores "
                   f"(own CPU µs per {unit}, perf samples)",
                   [Column("function", left=True, wraps=True), Column("mostly in", left=True),
                    Column(f"{low_cores} cores"), Column(f"{high_cores} cores"), Column("change")])
    comms = high.leaf_comms()
    for g in growth(low, high):
        t.add([g.function, comms.get(g.function, ""), plain(g.low_us), plain(g.high_us),
               _signed(g.change_us)], cell_styles={4: "poor"} if g.change_us > 0 else {})
    hw_low, hw_high = low.hardware_per_unit(), high.hardware_per_unit()
    for k in sorted(set(hw_low) | set(hw_high)):
        a, b = hw_low.get(k), hw_high.get(k)
        t.add([f"[{k}]", "PMU", si(a), si(b), "–" if a is None or b is None else _signed(b - a)])
    if not hw_high and high.pmu_absent:
        t.add(["[hardware counters]", "", "absent", "absent", high.pmu_absent])
    t.add(["[perf itself]", "perf", f"{low.perf_share():.1%}", f"{high.perf_share():.1%}", "of the busy samples"])
    return t


def verdict_table(verdicts: list) -> TableModel:
    """The paper's Figure 12 for these runs: each curve's bottleneck class, its cause and how sure."""
    t = TableModel("Where each curve's per-core throughput went (the paper's Figure 12)",
                   [Column("test", left=True), Column("variant", left=True), Column("cores"), Column("kept"),
                    Column("class", left=True), Column("cause", left=True, wraps=True), Column("sure", left=True),
                    Column("evidence", left=True, wraps=True, wide=True)])
    for v in verdicts:
        kept = "–" if v.loss is None else f"{1 - v.loss:.2f}"
        style = {} if v.category in ("scales", "unknown") else {4: "poor" if v.confidence == "high" else "fair"}
        t.add([v.name, v.variant, f"{v.low_cores}→{v.high_cores}", kept, v.category, v.cause, v.confidence,
               "; ".join(v.evidence)], cell_styles=style)
    return t


def lock_table(name: str, variant: str, unit: str, low_cores: int, high_cores: int, low, high) -> TableModel:
    """The most waited-on kernel locks at the most cores (perf lock: lock:contention_* tracepoints),
    each per unit of work at both core counts, with the call path that took it."""
    t = TableModel(f"{name} {variant}: contended kernel locks, wait per {unit} ({low_cores} → {high_cores} cores)",
                   [Column("taken in", left=True), Column("type", left=True),
                    Column(f"wait µs {low_cores}"), Column(f"wait µs {high_cores}"),
                    Column(f"per 1k {unit}s {high_cores}"), Column("call path", left=True, wraps=True, wide=True)])
    before = {caller: wait for caller, _, wait, _ in low.lock_waits()}
    for caller, record, wait, count in high.lock_waits()[:8]:
        t.add([caller, record["type"], plain(before.get(caller, 0.0)), plain(wait), plain(count * 1e3),
               " ← ".join(record["stack"][:8])])
    if not high.locks and high.locks_absent:
        t.add(["(not traced)", "", "–", "–", "–", high.locks_absent])
    return t


def c2c_table(name: str, variant: str, unit: str, cores: int, prof) -> TableModel:
    """The cache lines most often found modified in another core's cache (perf c2c's HITM samples) at
    `cores`: each line's share of the HITMs and HITMs per 1k units of work, then the code that touched
    it (offset in the line, symbol, source:line)."""
    t = TableModel(f"{name} {variant}: shared cache lines at {cores} cores (perf c2c samples; HITM: a load "
                   f"that found the line modified in another core's cache)",
                   [Column("cache line", left=True), Column("offset", left=True), Column("HITM share"),
                    Column(f"HITM per 1k {unit}s"), Column("stores"), Column("touched by", left=True, wraps=True),
                    Column("source:line", left=True, wraps=True, wide=True)])
    per_unit = prof.hitm_per_unit()
    if per_unit is None:
        t.add(["(not measured)", "", "–", "–", "–", prof.c2c_absent or "not recorded", ""])
        return t
    loads = f"{prof.c2c_hitm / prof.c2c_loads:.1%} of the sampled loads" if prof.c2c_loads else "no sampled loads"
    t.add(["[every line]", "", "100%" if prof.c2c_hitm else "–", plain(per_unit * 1e3), "",
           f"{prof.c2c_hitm:.0f} HITM samples: {loads}", ""])
    t.breaks.add(0)
    for line in prof.c2c_lines:
        share = line["hitm"] / prof.c2c_hitm if prof.c2c_hitm else None
        t.add([line["address"], "", _share(share), plain(line['hitm'] / prof.c2c_work * 1e3), str(line["stores"]),
               "", ""], cell_styles={2: "poor"} if share is not None and share >= 0.25 else {})
        for code in line["code"]:
            touched = f"{code['symbol']} ({code['dso']})" if code.get("dso") else str(code["symbol"])
            t.add(["", code["offset"] or "", _share(code["hitm"] / prof.c2c_hitm if prof.c2c_hitm else None),
                   plain(code['hitm'] / prof.c2c_work * 1e3), str(code["stores"]), touched, code["source"] or "–"])
        t.breaks.add(len(t.rows) - 1)
    return t
