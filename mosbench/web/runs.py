"""A run (its points, and today's HTML report of it) and two runs compared (compare's table, its "What
changed", and the report of both), saying plainly when the two come from different machines."""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass
from typing import Any

from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import BadRequest

from mosbench import units
from mosbench.analysis import history as hist
from mosbench.analysis import runs_compared
from mosbench.analysis.cells import build_series
from mosbench.analysis.compare import Change
from mosbench.report import whatchanged
from mosbench.web import records
from mosbench.web.lab import Lab
from mosbench.web.reports import Drawing, Drawn


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
    """A stored run named as `history` names it: its machine, kernel release and commit (a bisect step's too)."""
    run, machine = hist.RunInfo.of(r), hist.machine_of(r["environment"] or {})
    return RunSide(r["id"], r["label"], r["status"], machine.hostname if machine.hostname != "?" else
                   str(r["hostname"] or "?"), machine.topology, run.kernel, run.commit, r["started_at"],
                   records.when_text(r["started_at"]), r["finished_at"], r["command"])


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


def report(lab: Lab, run_ids: tuple[int, ...]) -> Drawn | Drawing:
    return lab.report(run_ids)


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
    """A significant change explained by its profiles, as `mosbench compare` prints it: its heading, the table
    of what grew and shrank (functions, locks, system calls), and what the named functions account for."""

    heading: str
    title: str  # its table's: the unit, which run is A and which B, the profiled trials
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    lines: tuple[str, ...]
    explanation: dict[str, Any]  # explain's JSON of it


@dataclass(frozen=True)
class Unexplained(records.Record):
    """The significant changes a side of which was not profiled, and the fewest commands that would profile
    them: compare's last lines."""

    line: str
    commands: tuple[str, ...]


@dataclass(frozen=True)
class CompareView(records.Record):
    a: RunSide  # the baseline
    b: RunSide
    same_machine: bool
    machines_note: str
    machines_class: str  # a warning where they differ
    differences: tuple[Difference, ...]
    changes: tuple[ChangeRow, ...]
    significant: int  # how many of them
    explained: tuple[WhyRow, ...]
    unexplained: Unexplained | None
    report: str


def compare_asked(args: MultiDict[str, str]) -> tuple[int, int]:
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


def _why(block: whatchanged.Block) -> WhyRow:
    return WhyRow(block.heading, block.table.title, tuple(c.title for c in block.table.columns),
                  tuple(tuple(r.cells) for r in block.table.rows), block.lines, block.found.found.as_json())


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
    why = runs_compared.explained(lab.db, runs, found)
    left = whatchanged.unexplained(why)
    return CompareView(a, b, same, machines_note(a, b), "" if same else "warn",
                       tuple(Difference(k, tuple(map(str, v))) for k, v in found.differences),
                       tuple(_row(c) for c in found.changes[0]), sum(bool(c.significant) for c in found.changes[0]),
                       tuple(_why(block) for block in whatchanged.blocks(why)),
                       Unexplained(left.line, left.commands) if left is not None else None,
                       f"/compare/report?a={a_id}&b={b_id}")
