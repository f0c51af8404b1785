"""The overview: every machine in the store against every workload it ran, each cell the newest per-core
ratio at the most cores to one core (the paper's Figure 3 measure), an arrow where the newest run began a
change there, and the machine's untriaged alerts counted.

While the server computes every machine's alerts for the first time (a lab's twenty machines: a quarter of a
minute), the overview does not wait for them: each machine is listed from its newest run, its cells drawn
once its history is computed, and the untriaged counts said to be computing until every summary is made."""

from __future__ import annotations

import datetime as dt
import math
import statistics
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import urlencode

from mosbench.analysis import alerts
from mosbench.analysis.cells import scaling_ratio
from mosbench.analysis.history import History, RunInfo, Shape, Shift, machine_of
from mosbench.store.triage import UNTRIAGED
from mosbench.web import records
from mosbench.web.lab import Lab
from mosbench.web.summaries import triaged

ARROWS = {"regression": "↓", "improvement": "↑", "mixed": "↕"}
COMPUTING = "computing"
# How often the overview reloads itself while the alerts are computed for the first time.
RELOAD_S = 10


@dataclass(frozen=True)
class WorkloadCell(records.Record):
    workload: str
    ratio: float | None  # the geometric mean over the workload's series of per-core (most cores / one core)
    ratio_text: str
    cores: int | None  # the most cores among them
    series: int  # how many series the mean is over
    run_id: int | None  # the newest run that measured the workload
    change: str | None  # "regression", "improvement", "mixed": the newest run began a change here
    arrow: str
    change_class: str
    title: str  # what the cell is over
    graph: str | None  # the workload's graph on this machine


@dataclass(frozen=True)
class MachineRow(records.Record):
    hostname: str
    topology: str
    kernel: str  # the newest run's
    runs: int
    last_run_id: int
    last_run_at: dt.datetime
    last_run_age: str
    # Alerts on this machine not yet triaged (their summary's state, or their own); None while the alerts
    # are computed for the first time.
    untriaged: int | None
    untriaged_text: str
    untriaged_class: str
    computing: bool  # its history is not computed yet: its cells are empty
    workloads: tuple[WorkloadCell, ...]  # in Overview.workloads' order; ratio None where it ran none
    graph: str  # the machine's series
    alerts: str  # its alert summaries


@dataclass(frozen=True)
class Overview(records.Record):
    machines: tuple[MachineRow, ...]
    workloads: tuple[str, ...]
    summaries: int | None  # None while the alerts are computed for the first time
    untriaged: int | None
    computing: bool  # the alerts are computed for the first time: the page reloads itself every reload_s
    computed: int  # machines whose history is computed
    reload_s: int


def _newest_changes(h: History) -> dict[str, tuple[str, list[str]]]:
    """Per workload, the direction of the changes the newest run began (steps: a drift begins nowhere), and
    each said: its series, size at the most cores and kind."""
    out: dict[str, list[Shift]] = {}
    newest = len(h.runs) - 1
    for shift in h.shifts:
        if shift.after == newest and shift.shape is Shape.STEP:
            out.setdefault(shift.key.workload, []).append(shift)
    found = {}
    for workload, shifts in out.items():
        down = {s.ratio < 1 for s in shifts}
        said = [f"{s.key.name} {records.change_text(s.ratio)} at {max(c.cores for c in s.changes)} cores "
                f"({s.kind().value})" for s in shifts]
        found[workload] = ("mixed" if len(down) > 1 else "regression" if True in down else "improvement", said)
    return found


class Scaling(NamedTuple):
    """A machine's workload as its overview cell says it."""

    ratio: float  # the geometric mean of its series' scaling ratios, each in the newest run that measured it
    cores: int  # the most cores among them
    series: int  # how many series
    run_id: int  # the newest of those runs


def _cells(h: History) -> dict[str, Scaling]:
    """Per workload, its scaling in the newest runs that measured each series' one core and most cores."""
    per_series: dict[tuple[str, str, str], dict[int, tuple[int, float]]] = {}
    for s in h.series:
        measured = s.measured()
        if measured:
            i = measured[-1]
            per_series.setdefault((s.key.workload, s.key.test, s.key.variant), {})[s.cores] = (
                i, statistics.fmean(s.trials[i]))
    found: dict[str, list[tuple[float, int, int]]] = {}
    for (workload, _, _), by_cores in per_series.items():
        newest = max(i for i, _ in by_cores.values())
        at_newest = {c: mean for c, (i, mean) in by_cores.items() if i == newest}
        ratio = scaling_ratio(at_newest)
        if ratio is not None and ratio[0] > 0:
            found.setdefault(workload, []).append((ratio[0], ratio[1], newest))
    return {w: Scaling(math.exp(statistics.fmean(math.log(r) for r, _, _ in got)), max(c for _, c, _ in got),
                       len(got), h.runs[max(i for _, _, i in got)].id)
            for w, got in found.items()}


def _row(host: str, h: History, cells: dict[str, Scaling], workloads: tuple[str, ...], untriaged: int | None,
         now: dt.datetime) -> MachineRow:
    """A machine whose history is computed."""
    newest = h.runs[-1]
    changed = _newest_changes(h)
    row = []
    for w in workloads:
        ratio, cores, n, run_id = cells.get(w) or (None, None, 0, None)
        change, began = changed.get(w, (None, []))
        said = (f"{n} series at up to {cores} cores, run #{run_id}" if ratio is not None
                else f"{host} has not measured {w}")
        if began:
            said += "; it began a change: " + "; ".join(began)
        row.append(WorkloadCell(w, ratio, records.ratio_text(ratio), cores, n, run_id, change,
                                ARROWS.get(change or "", ""), f"change-{change}" if change else "", said,
                                "/graphs?" + urlencode({"machine": host, "workload": w}) if ratio else None))
    return MachineRow(host, h.machine.topology, newest.kernel, len(h.runs), newest.id, newest.started_at,
                      records.age_text(newest.started_at, now), untriaged,
                      COMPUTING if untriaged is None else str(untriaged), "hot" if untriaged else "", False,
                      tuple(row), "/graphs?" + urlencode({"machine": host}), "/alerts?" + urlencode({"machine": host}))


def _computing_row(host: str, fresh: alerts.Freshness, newest_run: dict, workloads: tuple[str, ...],
                   now: dt.datetime) -> MachineRow:
    """A machine whose history is not computed yet, as its newest run names it (what history will name it
    by: its recorded hostname and topology, the kernel release)."""
    newest, machine = RunInfo.of(newest_run), machine_of(newest_run["environment"] or {})
    said = f"{host}'s history is being computed (the server has just started)"
    row = tuple(WorkloadCell(w, None, COMPUTING, None, 0, None, None, "", "", said, None) for w in workloads)
    return MachineRow(host, machine.topology, newest.kernel, fresh.runs, newest.id, newest.started_at,
                      records.age_text(newest.started_at, now), None, COMPUTING, "", True, row,
                      "/graphs?" + urlencode({"machine": host}), "/alerts?" + urlencode({"machine": host}))


def build(lab: Lab) -> Overview:
    if lab.warming:
        return _while_computing(lab)
    found = triaged(lab)
    histories, summaries = found.histories, found.summaries
    untriaged: dict[str, int] = {}
    for _, summary, triage in summaries:
        for alert in summary.alerts:
            if triage.alert_state(alert.key()) == UNTRIAGED:
                untriaged[alert.hostname] = untriaged.get(alert.hostname, 0) + 1
    cells, workloads = _cells_of(lab, histories)
    now = dt.datetime.now(dt.UTC)
    machines = tuple(_row(host, h, cells[host], workloads, untriaged.get(host, 0), now)
                     for host, h in sorted(histories.items()))
    return Overview(machines, workloads, len(summaries), sum(untriaged.values()), False, len(machines), RELOAD_S)


def _cells_of(lab: Lab, histories: dict[str, History]) -> tuple[dict[str, dict[str, Scaling]], tuple[str, ...]]:
    """Each machine's cells (kept per history), and every workload any of them ran, by name."""
    cells = {host: lab.kept("overview cells", h, _cells) for host, h in histories.items()}
    return cells, tuple(sorted({w for c in cells.values() for w in c}))


def _while_computing(lab: Lab) -> Overview:
    """The overview while every machine's alerts are computed for the first time: each machine from its
    newest run, the cells of those computed so far, no untriaged counts (a summary holds every machine's)."""
    histories = {host: m.history for host, m in lab.alerts.computed().items()}
    fresh = alerts.freshness(lab.db)
    cells, workloads = _cells_of(lab, histories)
    now = dt.datetime.now(dt.UTC)
    machines = tuple(_row(host, histories[host], cells[host], workloads, None, now) if host in histories else
                     _computing_row(host, fresh[host], lab.run(fresh[host].newest_run), workloads, now)
                     for host in sorted(set(fresh) | set(histories)))
    return Overview(machines, workloads, None, None, True, len(histories), RELOAD_S)
