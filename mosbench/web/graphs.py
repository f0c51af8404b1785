"""The graphs: one series (machine, workload, test, variant, cores) over the runs of several machines at
once, in time, kernel-version or commit order, each trial a dot and each run's mean a line, the changes
history confirmed marked; and the paper's figure, per-core throughput against cores, for chosen runs.
The records carry every number the browser draws (static/lab.js draws them with plotly.js)."""

from __future__ import annotations

import datetime as dt
import json
import statistics
from dataclasses import dataclass

from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import BadRequest

from mosbench.analysis import history as hist
from mosbench.analysis.cells import SeriesKey, build_series, workload_of
from mosbench.web import records
from mosbench.web.lab import Lab, NotFound
from mosbench.web.runs import side
from mosbench.workloads.base import test_name

ORDERS = tuple(o.value for o in hist.Order)
NEWEST_RUNS_OFFERED = 5  # runs of each machine offered for the paper's figure


@dataclass(frozen=True)
class RunMark(records.Record):
    """One run's point of the series: where it goes, what hovering it names, its trials and their mean."""

    run_id: int
    x: str  # an ISO time, a kernel release or a commit: the order's axis
    kernel: str
    commit: str | None
    label: str | None
    started: dt.datetime
    trials: tuple[float, ...]  # per-core throughput of each trial that counts
    mean: float


@dataclass(frozen=True)
class ChangeMark(records.Record):
    """A change history confirmed in the series: at the first run of its new level."""

    run_id: int
    before_run: int
    x: str
    ratio: float
    text: str


@dataclass(frozen=True)
class MachineLine(records.Record):
    hostname: str
    topology: str
    runs: tuple[RunMark, ...]
    changes: tuple[ChangeMark, ...]
    left_out: str  # runs the order cannot place, said


@dataclass(frozen=True)
class SeriesChoice(records.Record):
    workload: str
    test: str
    variant: str
    cores: tuple[int, ...]
    machines: tuple[str, ...]
    name: str
    value: str  # what the page's series field sends


def _choice(key: SeriesKey, cores: set[int], machines: set[str]) -> SeriesChoice:
    return SeriesChoice(key.workload, key.test, key.variant, tuple(sorted(cores)), tuple(sorted(machines)),
                        f"{test_name(key.workload, key.test)} {key.variant}",
                        json.dumps([key.workload, key.test, key.variant]))


@dataclass(frozen=True)
class SeriesGraph(records.Record):
    workload: str
    test: str
    variant: str
    cores: int
    title: str
    y_title: str
    order: str
    x_title: str
    categories: tuple[str, ...]  # the kernel or commit axis in its order; empty for time
    machines: tuple[MachineLine, ...]
    chosen: tuple[str, ...]
    every_machine: tuple[str, ...]
    orders: tuple[str, ...]
    choices: tuple[SeriesChoice, ...]
    series: str  # the chosen one's value among the choices
    cores_offered: tuple[int, ...]

    # The form's choices, each with what is drawn now chosen.
    @property
    def series_options(self) -> tuple[records.Option, ...]:
        return tuple(records.Option(c.value, c.name, c.value == self.series) for c in self.choices)

    @property
    def cores_options(self) -> tuple[records.Option, ...]:
        return records.options(self.cores_offered, {self.cores})

    @property
    def order_options(self) -> tuple[records.Option, ...]:
        return records.options(self.orders, {self.order})

    @property
    def machine_options(self) -> tuple[records.Option, ...]:
        return records.options(self.every_machine, set(self.chosen))


@dataclass(frozen=True)
class Asked:
    machines: tuple[str, ...]
    workload: str | None
    test: str | None
    variant: str | None
    cores: int | None
    order: str


def asked(args: MultiDict[str, str]) -> Asked:
    """The query's choice of series, checked for shape."""
    order = args.get("order") or hist.Order.TIME.value
    if order not in ORDERS:
        raise BadRequest(f"no order {order!r}: one of {', '.join(ORDERS)}")
    cores = args.get("cores") or None
    if cores is not None:
        try:
            cores = int(cores)
        except ValueError:
            raise BadRequest(f"cores={cores!r} is not a number of cores") from None
    workload, test, variant = args.get("workload") or None, args.get("test") or None, args.get("variant") or None
    if args.get("series"):  # the page's one field for all three
        try:
            workload, test, variant = (str(x) for x in json.loads(args["series"]))
        except (ValueError, TypeError):
            raise BadRequest("series= names a series as the page sends it: [workload, test, variant]") from None
    return Asked(tuple(dict.fromkeys(m for m in args.getlist("machine") if m)), workload, test, variant, cores, order)


def _measured(h: hist.History) -> dict[SeriesKey, set[int]]:
    """A machine's series that some run measured, and at which core counts."""
    out: dict[SeriesKey, set[int]] = {}
    for s in h.series:
        if any(s.trials):
            out.setdefault(s.key, set()).add(s.cores)
    return out


def _choices(lab: Lab, histories: dict[str, hist.History]) -> tuple[SeriesChoice, ...]:
    found: dict[SeriesKey, tuple[set[int], set[str]]] = {}
    for host, h in histories.items():
        for key, measured in lab.kept("measured series", h, _measured).items():
            cores, hosts = found.setdefault(key, (set(), set()))
            cores |= measured
            hosts.add(host)
    return tuple(_choice(k, c, m) for k, (c, m) in
                 sorted(found.items(), key=lambda kv: (kv[0].workload, kv[0].test, kv[0].variant)))


def _unit(workload: str, test: str) -> str:
    found = workload_of(workload)
    return found.unit_for(test) if found is not None else "work"


def _ordered(runs: list[hist.RunInfo], order: hist.Order, positions: dict[str, int]) -> list[hist.RunInfo]:
    if order is hist.Order.TIME:
        return runs
    if order is hist.Order.KERNEL:
        return sorted(runs, key=lambda r: (hist.release_key(r.kernel), r.started_at, r.id))
    return sorted((r for r in runs if r.commit in positions), key=lambda r: (positions[r.commit], r.started_at, r.id))


def _x(r: hist.RunInfo, order: hist.Order) -> str:
    if order is hist.Order.TIME:
        return r.started_at.isoformat()
    return r.kernel if order is hist.Order.KERNEL else (r.commit or "")[:12]


def _line(h: hist.History, key: SeriesKey, cores: int, order: hist.Order, positions: dict[str, int]) -> MachineLine:
    series = next((s for s in h.series if s.key == key and s.cores == cores), None)
    by_run = {r.id: i for i, r in enumerate(h.runs)}  # History's runs are in time order
    runs = []
    placed = _ordered(h.runs, order, positions)
    for r in placed:
        trials = series.trials[by_run[r.id]] if series is not None else ()
        if trials:
            runs.append(RunMark(r.id, _x(r, order), r.kernel, r.commit, r.label, r.started_at, tuple(trials),
                                statistics.fmean(trials)))
    changes = []
    for shift in h.shifts:
        at = [c for c in shift.changes if c.cores == cores]
        if shift.key == key and at:
            after, before = h.runs[shift.after], h.runs[shift.before]
            if order is not hist.Order.COMMIT or after.commit in positions:
                ratio = at[0].difference.ratio
                changes.append(ChangeMark(after.id, before.id, _x(after, order), ratio,
                                          f"{records.change_text(ratio)} ({shift.kind().value}, {shift.shape.value}) "
                                          f"{before.name} → {after.name}"))
    return MachineLine(h.machine.hostname, h.machine.topology, tuple(runs), tuple(changes),
                       _left_out(h.runs, positions) if order is hist.Order.COMMIT else "")


def _left_out(runs: list[hist.RunInfo], positions: dict[str, int]) -> str:
    """The runs commit order cannot place, said as `history` says it."""
    said = []
    if without := sum(r.commit is None for r in runs):
        said.append(f"{without} run{'s' if without != 1 else ''} without a kernel commit")
    if unknown := sum(r.commit is not None and r.commit not in positions for r in runs):
        said.append(f"{unknown} run{'s' if unknown != 1 else ''} whose commit the tree does not have")
    return "; ".join(said)


def series_graph(lab: Lab, wanted: Asked) -> SeriesGraph:
    histories = lab.alerts.machine_histories()
    choices = _choices(lab, histories)
    if not choices:
        raise NotFound("the store holds no measured series yet")
    for m in wanted.machines:
        if m not in histories:
            raise NotFound(f"no machine {m!r} in the store")
    fits = [c for c in choices if (wanted.workload in (None, c.workload) and wanted.test in (None, c.test)
                                   and wanted.variant in (None, c.variant))]
    if wanted.machines:
        fits = [c for c in fits if set(wanted.machines) & set(c.machines)]
    if not fits:
        named = " ".join(x for x in (wanted.workload and test_name(wanted.workload, wanted.test or "*"),
                                     wanted.variant) if x) or "that series"
        raise NotFound(f"no machine in the store measured {named}"
                       + (f" (of {', '.join(wanted.machines)})" if wanted.machines else ""))
    choice = fits[0]
    cores = wanted.cores if wanted.cores is not None else max(choice.cores)
    if cores not in choice.cores:
        raise NotFound(f"{choice.name} was not measured at {cores} cores (it was at "
                       f"{', '.join(map(str, choice.cores))})")
    order = hist.Order(wanted.order)
    chosen = wanted.machines or choice.machines
    key = SeriesKey(choice.workload, choice.test, choice.variant)
    positions: dict[str, int] = {}
    if order is hist.Order.COMMIT:
        if lab.tree is None:
            raise BadRequest("commit order needs the kernel tree the runs' commits come from: "
                             "start the server with --tree DIR")
        positions = hist.commit_positions(lab.tree, [r.commit for m in chosen for r in histories[m].runs if r.commit])
    lines = tuple(_line(histories[m], key, cores, order, positions) for m in chosen)
    if order is hist.Order.KERNEL:
        categories = tuple(sorted({r.x for line in lines for r in line.runs}, key=hist.release_key))
    elif order is hist.Order.COMMIT:
        by_short = {c[:12]: p for c, p in positions.items()}
        categories = tuple(sorted({r.x for line in lines for r in line.runs}, key=lambda c: by_short.get(c, 0)))
    else:
        categories = ()
    unit = _unit(choice.workload, choice.test)
    return SeriesGraph(choice.workload, choice.test, choice.variant, cores,
                       f"{choice.name} at {cores} core{'s' if cores != 1 else ''}", f"{unit}/s per core", order.value,
                       {"time": "run started", "kernel": "kernel release", "commit": "kernel commit"}[order.value],
                       categories, lines, tuple(chosen), tuple(sorted(histories)), ORDERS, choices, choice.value,
                       choice.cores)


@dataclass(frozen=True)
class RunChoice(records.Record):
    run_id: int
    hostname: str
    label: str | None
    kernel: str
    started: str
    chosen: bool


@dataclass(frozen=True)
class CoresLine(records.Record):
    """One run's curve of one variant: per-core throughput at each core count (the paper's Figure 3 axes)."""

    run_id: int
    hostname: str
    name: str  # the legend's: machine, run, variant
    kernel: str
    commit: str | None
    label: str | None
    cores: tuple[int, ...]
    means: tuple[float, ...]
    trials: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class CoresGraph(records.Record):
    test: str  # workload/test
    title: str
    y_title: str
    tests: tuple[str, ...]  # every test the chosen runs measured
    runs: tuple[RunChoice, ...]  # the runs offered (each machine's newest) and those chosen
    lines: tuple[CoresLine, ...]

    @property
    def test_options(self) -> tuple[records.Option, ...]:
        return records.options(self.tests, {self.test})


def cores_asked(args: MultiDict[str, str]) -> tuple[tuple[int, ...], str | None]:
    ids = []
    for value in [*args.getlist("run"), *",".join(args.getlist("runs")).split(",")]:
        if value.strip():
            try:
                ids.append(int(value))
            except ValueError:
                raise BadRequest(f"run={value!r} is not a run id") from None
    return tuple(dict.fromkeys(ids)), args.get("test") or None


def cores_graph(lab: Lab, run_ids: tuple[int, ...], test: str | None) -> CoresGraph:
    histories = lab.alerts.machine_histories()
    offered = [r for h in histories.values() for r in h.runs[-NEWEST_RUNS_OFFERED:]]
    chosen = run_ids or tuple(h.runs[-1].id for _, h in sorted(histories.items()))
    stored = {i: side(lab.run(i)) for i in chosen}  # NotFound for a run the store lacks
    series = {i: build_series(lab.db.points(i, with_samples=False)) for i in chosen}
    tests = tuple(sorted({s.name for found in series.values() for s in found if s.ok_cells()}))
    if test is None and tests:
        test = tests[0]
    if test is not None and test not in tests:
        raise NotFound(f"none of runs {', '.join(f'#{i}' for i in chosen)} measured {test}")
    lines = []
    for i in chosen:
        r = stored[i]
        for s in series[i]:
            cells = s.ok_cells()
            if s.name != test or not cells:
                continue
            counted = [tuple(c.counted()) for c in cells]
            kept = [(c.cores, t) for c, t in zip(cells, counted, strict=True) if t]
            lines.append(CoresLine(i, r.hostname, f"{r.hostname} #{i} {s.variant}", r.kernel, r.commit, r.label,
                                   tuple(c for c, _ in kept), tuple(statistics.fmean(t) for _, t in kept),
                                   tuple(t for _, t in kept)))
    unit = _unit(*test.split("/", 1)) if test else "work"
    seen = {r.id for r in offered}
    runs = [RunChoice(r.id, host, r.label, r.kernel, records.when_text(r.started_at), r.id in chosen)
            for host, h in sorted(histories.items()) for r in reversed(h.runs[-NEWEST_RUNS_OFFERED:])]
    runs += [RunChoice(i, r.hostname, r.label, r.kernel, r.started_text, True)
             for i, r in stored.items() if i not in seen]
    return CoresGraph(test or "", f"{test or 'no test'}: per-core throughput against cores", f"{unit}/s per core",
                      tests, tuple(runs), tuple(lines))
