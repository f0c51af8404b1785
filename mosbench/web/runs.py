"""A run (its points, and today's HTML report of it) and two runs compared (compare's table, its "What
changed", and the report of both), saying plainly when the two come from different machines."""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass
from typing import Any

from werkzeug.exceptions import BadRequest

from mosbench import units
from mosbench.analysis import explain, runs_compared
from mosbench.analysis.cells import build_series
from mosbench.analysis.compare import Change
from mosbench.report import whatchanged
from mosbench.web import records
from mosbench.web.lab import Lab


@dataclass(frozen=True)
class PointRow(records.Record):
    workload: str
    test: str
    variant: str
    cores: int
    unit: str
    trials: int  # that count (ok, not interfered)
    failed: int
    mean: float | None  # per-core throughput
    mean_text: str


@dataclass(frozen=True)
class RunSide(records.Record):
    """A run as a page names it."""

    id: int
    label: str | None
    status: str
    hostname: str
    topology: str
    kernel: str
    commit: str | None
    started: dt.datetime
    started_text: str
    finished: dt.datetime | None
    command: str | None


@dataclass(frozen=True)
class RunView(records.Record):
    run: RunSide
    points: tuple[PointRow, ...]
    previous: int | None  # the machine's run before it, in time
    compare_previous: str | None
    report: str  # today's HTML report of it


def side(r: dict[str, Any]) -> RunSide:
    env = r["environment"] or {}
    return RunSide(r["id"], r["label"], r["status"], str(env.get("hostname") or r["hostname"] or "?"),
                   str(env.get("topology_summary") or "?"), str(env.get("kernel_release") or env.get("kernel") or "?"),
                   env.get("kernel_commit"), r["started_at"], records.when_text(r["started_at"]), r["finished_at"],
                   r["command"])


def _previous(lab: Lab, run: RunSide) -> int | None:
    h = lab.alerts.machine_histories().get(run.hostname)
    ids = [r.id for r in h.runs] if h is not None else []
    at = ids.index(run.id) if run.id in ids else 0
    return ids[at - 1] if at > 0 else None


def run_view(lab: Lab, run_id: int) -> RunView:
    r = side(lab.run(run_id))
    rows = []
    for s in build_series(lab.db.points(run_id, with_samples=False)):
        for cores, cell in sorted(s.cells.items()):
            counted = cell.counted()
            mean = statistics.fmean(counted) if counted else None
            rows.append(PointRow(s.workload, s.test, s.variant, cores, s.unit, len(counted), len(cell.failed), mean,
                                 units.si(mean) if mean is not None else "–"))
    previous = _previous(lab, r)
    return RunView(r, tuple(rows), previous, f"/compare?a={previous}&b={run_id}" if previous else None,
                   f"/runs/{run_id}/report")


def report(lab: Lab, run_ids: tuple[int, ...]) -> str:
    return lab.reports.html(lab.db, [lab.run(i) for i in run_ids])


@dataclass(frozen=True)
class ChangeRow(records.Record):
    workload: str
    test: str
    variant: str
    cores: int
    base_mean: float | None
    other_mean: float | None
    ratio: float | None
    change_text: str
    low: float | None
    high: float | None
    interval_text: str
    p: float | None
    p_text: str
    significant: bool
    verdict: str
    note: str
    change_class: str  # a significant change's direction


@dataclass(frozen=True)
class Difference(records.Record):
    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class WhyRow(records.Record):
    """A significant change's explanation from its profiles, or the commands that would profile it."""

    heading: str
    lines: tuple[str, ...]
    commands: tuple[str, ...]
    explanation: dict[str, Any]  # explain's JSON of it


@dataclass(frozen=True)
class CompareView(records.Record):
    a: RunSide  # the baseline
    b: RunSide
    same_machine: bool
    machines_note: str
    machines_class: str  # a warning where they differ
    differences: tuple[Difference, ...]
    changes: tuple[ChangeRow, ...]
    explained: tuple[WhyRow, ...]
    report: str


def compare_asked(args) -> tuple[int, int]:
    try:
        a, b = int(args.get("a", "")), int(args.get("b", ""))
    except ValueError:
        raise BadRequest("compare two runs by id: ?a=BASELINE&b=OTHER") from None
    if a == b:
        raise BadRequest(f"a run compared with itself (a={a}, b={b}) says nothing: give two runs")
    return a, b


def _row(c: Change) -> ChangeRow:
    d = c.difference
    return ChangeRow(c.point.workload, c.point.test, c.point.variant, c.point.cores,
                     statistics.fmean(c.base) if c.base else None, statistics.fmean(c.other) if c.other else None,
                     c.ratio, records.change_text(c.ratio), c.low, c.high, records.interval_text(c.low, c.high),
                     c.p, units.plain(c.p) if c.p is not None else "", bool(c.significant), c.verdict,
                     c.note if d is not None else "",
                     ("change-improvement" if (c.ratio or 0) > 1 else "change-regression") if c.significant else "")


def _why(x: explain.Explained) -> WhyRow:
    found = x.found
    if isinstance(found, explain.Explanation):
        return WhyRow(whatchanged.heading(x), tuple(whatchanged.lines(found)), (), found.as_json())
    return WhyRow(whatchanged.heading(x), (f"not profiled in {', '.join(found.missing)}",), tuple(found.commands),
                  found.as_json())


def machines_note(a: RunSide, b: RunSide) -> str:
    if a.hostname == b.hostname and a.topology == b.topology:
        return f"Both runs come from {a.hostname} ({a.topology})."
    return (f"These runs come from different machines: #{a.id} from {a.hostname} ({a.topology}), #{b.id} from "
            f"{b.hostname} ({b.topology}). Every difference below is the machines' as much as the kernels': "
            "compare two runs of one machine to see what a kernel changed.")


def compare_view(lab: Lab, a_id: int, b_id: int) -> CompareView:
    runs = [lab.run(a_id), lab.run(b_id)]
    found, _ = runs_compared.comparison(lab.db, runs)
    a, b = side(runs[0]), side(runs[1])
    same = a.hostname == b.hostname and a.topology == b.topology
    return CompareView(a, b, same, machines_note(a, b), "" if same else "warn",
                       tuple(Difference(k, tuple(map(str, v))) for k, v in found.differences),
                       tuple(_row(c) for c in found.changes[0]),
                       tuple(_why(x) for x in runs_compared.explained(lab.db, runs, found)),
                       f"/compare/report?a={a_id}&b={b_id}")
