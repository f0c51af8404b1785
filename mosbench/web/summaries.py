"""Alert summaries as the pages show them: the list (filtered by machine, workload, state and direction),
one summary with its triage, and a triage asked for (PATCH's body or the form) checked before it is kept."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import BadRequest

from mosbench.analysis.alerts import Alert, Summary
from mosbench.analysis.history import History
from mosbench.report import history as history_report
from mosbench.store.triage import STATES, AlertKey, Triage, check_link, check_note, check_state
from mosbench.web import records
from mosbench.web.lab import Lab, NotFound
from mosbench.workloads.base import test_name

DIRECTIONS = ("regression", "improvement", "mixed")


@dataclass(frozen=True)
class Triaged:
    """Every summary, newest first, with its id and its triage, and the machines' histories it was made from
    (taken at one moment: a summary's runs are those of these histories)."""

    summaries: list[tuple[int, Summary, Triage]]
    histories: dict[str, History]  # hostname -> its History
    told: dict[int, tuple[str, ...]]  # id() of each of their shifts -> history's telling of it (shift_lines)


def _told(h: History) -> dict[int, tuple[str, ...]]:
    return {id(shift): tuple(history_report.shift_lines(h, shift)) for shift in h.shifts}


def triaged(lab: Lab) -> Triaged:
    kept = lab.alerts.kept()
    ids = lab.triage.ids(kept.summaries)
    book = lab.triage.all()  # read after ids(), which stores every id it gives
    histories = kept.histories()
    told = {k: lines for h in histories.values() for k, lines in lab.kept("told", h, _told).items()}
    return Triaged([(ids[s.key], s, book[ids[s.key]]) for s in kept.summaries], histories, told)


def graph_url(workload: str, test: str, variant: str, cores: int, machines: tuple[str, ...]) -> str:
    return "/graphs?" + urlencode([("workload", workload), ("test", test), ("variant", variant),
                                   ("cores", cores), *(("machine", m) for m in machines)])


@dataclass(frozen=True)
class CoreChange(records.Record):
    cores: int
    ratio: float
    low: float
    high: float
    text: str  # the core count, the change and its interval, as percentages


@dataclass(frozen=True)
class AlertRow(records.Record):
    hostname: str
    workload: str
    test: str
    name: str  # workload/test
    variant: str
    cores: int
    ratio: float
    change_text: str
    low: float
    high: float
    interval_text: str
    p_adjusted: float
    kind: str
    shape: str
    direction: str
    before_run: int
    after_run: int
    kernels: tuple[str, ...]  # the two runs'
    commits: tuple[str | None, ...]
    changes: tuple[CoreChange, ...]
    differed: tuple[str, ...]  # the facts of the machine that differ between the two runs, as history lists them
    # `mosbench history --host H`'s telling of the change: its size and adjusted p, what its kind means, each
    # core count's own test, the per-core ratio at the most cores to one core, what moved with it, what differed.
    told: tuple[str, ...]
    explanation: tuple[str, ...]  # history's lines of it: the profiles' explanation, or the `mosbench ab` command
    state: str  # its own where set, else its summary's
    note: str  # its own
    set_by: str | None  # who set its own state, and when (None where it has none: its summary's holds)
    set_at: dt.datetime | None
    set_text: str  # both, as the page says them
    key: str  # what the form sends to triage this alert alone
    graph: str  # its series on every machine that ran both sides
    compare: str  # its two sides compared


@dataclass(frozen=True)
class SummaryView(records.Record):
    id: int
    url: str
    key: str
    before: str
    after: str
    by: str  # "commit" or "release"
    direction: str
    state: str
    note: str
    link: str
    link_href: str | None  # the link where it is one a page may follow
    set_by: str | None
    set_at: dt.datetime | None
    set_at_text: str
    first_seen: dt.datetime
    age: str
    machines: tuple[str, ...]
    unmoved: tuple[str, ...]  # ran both sides and moved on none of these series
    bisect_command: str | None
    bisect_host: str | None  # the machine the bisect command measures on
    alerts: tuple[AlertRow, ...]
    states: tuple[str, ...]  # what triage may set

    @property
    def state_options(self) -> tuple[records.Option, ...]:
        """The triage form's states, its own chosen."""
        return records.options(self.states, {self.state})


def _alert(alert: Alert, triage: Triage, machines: tuple[str, ...], told: tuple[str, ...]) -> AlertRow:
    own = triage.alert_details.get(alert.key())
    return AlertRow(
        alert.hostname, alert.workload, alert.test, test_name(alert.workload, alert.test), alert.variant,
        alert.cores, alert.ratio, records.change_text(alert.ratio), alert.low, alert.high,
        records.interval_text(alert.low, alert.high), alert.p_adjusted, alert.kind, alert.shape, alert.direction,
        alert.before_run, alert.after_run, tuple(alert.kernels), tuple(alert.commits),
        tuple(CoreChange(c, r, lo, hi, f"{c} core{'s' if c != 1 else ''} {records.change_text(r)} "
                                       f"{records.interval_text(lo, hi)}")
              for c, r, lo, hi in alert.changes),
        tuple(f"{fact}: {' → '.join(map(str, values))}" for fact, values in alert.environment), told,
        tuple(alert.explanation), triage.alert_state(alert.key()), own.note if own else "",
        own.set_by if own else None, own.set_at if own else None,
        f"by {own.set_by}, {records.when_text(own.set_at)}" if own else "",
        json.dumps(list(alert.key())),
        graph_url(alert.workload, alert.test, alert.variant, alert.cores, machines),
        f"/compare?a={alert.before_run}&b={alert.after_run}")


def view(summary_id: int, summary: Summary, triage: Triage, told: dict[int, tuple[str, ...]],
         now: dt.datetime) -> SummaryView:
    """A summary as its page shows it; told: Triaged.told."""
    machines = tuple(dict.fromkeys((*summary.machines(), *summary.unmoved)))
    return SummaryView(
        summary_id, f"/alerts/{summary_id}", summary.key, summary.before, summary.after, summary.by,
        summary.direction(), triage.state,
        triage.note, triage.link, triage.link or None, triage.set_by,
        triage.set_at, records.when_text(triage.set_at), summary.first_seen,
        records.age_text(summary.first_seen, now), tuple(summary.machines()), tuple(summary.unmoved),
        summary.bisect_command, summary.bisect_host,
        tuple(_alert(a, triage, machines, told.get(id(a.shift), ())) for a in summary.alerts),
        STATES)


@dataclass(frozen=True)
class Filters(records.Record):
    machine: str | None
    workload: str | None
    state: str | None
    direction: str | None

    def keeps(self, v: SummaryView) -> bool:
        return ((self.machine is None or self.machine in v.machines)
                and (self.workload is None or any(a.workload == self.workload for a in v.alerts))
                and (self.state is None or v.state == self.state or any(a.state == self.state for a in v.alerts))
                and (self.direction is None or v.direction == self.direction))


@dataclass(frozen=True)
class AlertsView(records.Record):
    filters: Filters
    machines: tuple[str, ...]  # what the filters may name
    workloads: tuple[str, ...]
    states: tuple[str, ...]
    directions: tuple[str, ...]
    summaries: tuple[SummaryView, ...]

    @property
    def filtered(self) -> bool:
        return any(getattr(self.filters, f.name) is not None for f in dataclasses.fields(self.filters))

    # The filters' choices, each with the one asked for chosen ("any" is the empty value).
    @property
    def machine_options(self) -> tuple[records.Option, ...]:
        return records.options(self.machines, {self.filters.machine})

    @property
    def workload_options(self) -> tuple[records.Option, ...]:
        return records.options(self.workloads, {self.filters.workload})

    @property
    def state_options(self) -> tuple[records.Option, ...]:
        return records.options(self.states, {self.filters.state})

    @property
    def direction_options(self) -> tuple[records.Option, ...]:
        return records.options(self.directions, {self.filters.direction})

    def as_json(self) -> Any:
        """The list of summaries: /api/alerts is a JSON list (every summary, whatever its state or age, unless
        filtered)."""
        return [s.as_json() for s in self.summaries]


def filters(args: MultiDict[str, str]) -> Filters:
    """The query's filters, their shape checked (what they name is checked against the store in `alerts`)."""
    state, direction = args.get("state") or None, args.get("direction") or None
    if state is not None and state not in STATES:
        raise BadRequest(f"no triage state {state!r}: one of {', '.join(STATES)}")
    if direction is not None and direction not in DIRECTIONS:
        raise BadRequest(f"no direction {direction!r}: one of {', '.join(DIRECTIONS)}")
    return Filters(args.get("machine") or None, args.get("workload") or None, state, direction)


def alerts(lab: Lab, chosen: Filters) -> AlertsView:
    histories = lab.alerts.machine_histories()
    machines = tuple(sorted(histories))
    workloads = tuple(sorted({s.key.workload for h in histories.values() for s in h.series}))
    if chosen.machine is not None and chosen.machine not in machines:
        raise NotFound(f"no machine {chosen.machine!r} in the store")
    if chosen.workload is not None and chosen.workload not in workloads:
        raise NotFound(f"no workload {chosen.workload!r} in the store")
    now = dt.datetime.now(dt.UTC)
    found = triaged(lab)
    shown = [view(i, s, t, found.told, now) for i, s, t in found.summaries]
    return AlertsView(chosen, machines, workloads, STATES, DIRECTIONS, tuple(v for v in shown if chosen.keeps(v)))


def one(lab: Lab, summary_id: int) -> SummaryView:
    found = triaged(lab)
    for i, s, t in found.summaries:
        if i == summary_id:
            return view(i, s, t, found.told, dt.datetime.now(dt.UTC))
    raise NotFound(f"no alert summary {summary_id}")


@dataclass(frozen=True)
class TriageAsked(records.Record):
    """A triage as PATCH's body or the form gives it, checked: a known state, a note and a link of sane size,
    the link one a page may follow, the alert (where one alone is triaged) named in full."""

    state: str
    note: str | None
    link: str | None
    alert: AlertKey | None


def _text(body: dict[str, Any], name: str) -> str | None:
    value = body.get(name)
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"{name!r} must be a string")
    return value


def asked(body: Any) -> TriageAsked:
    """The triage a body asks for, its shape checked here and its values by the store's own rules (a state
    of STATES, a note and link of sane size, the link http(s)), so that a bad one is refused before anything
    is read."""
    if not isinstance(body, dict):
        raise BadRequest('the body must be a JSON object: {"state": …, "note": …, "link": …}')
    if unknown := sorted(set(body) - {"state", "note", "link", "alert"}):
        raise BadRequest(f"unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}: "
                         "give state, note, link and (to triage one alert) alert")
    state = body.get("state")
    if not isinstance(state, str):
        raise BadRequest(f"give a \"state\": one of {', '.join(STATES)}")
    check_state(state)
    note, link = _text(body, "note"), _text(body, "link")
    if note is not None:
        check_note(note)
    if link is not None:
        check_link(link)
    alert = body.get("alert")
    if alert is not None:
        fields = ("hostname", "workload", "test", "variant")
        if isinstance(alert, list) and len(alert) == 4:
            alert = dict(zip(fields, alert, strict=True))
        if not (isinstance(alert, dict) and set(alert) == set(fields)
                and all(isinstance(v, str) for v in alert.values())):
            raise BadRequest("'alert' names one alert: {\"hostname\", \"workload\", \"test\", \"variant\"}")
        alert = tuple(alert[f] for f in fields)
    return TriageAsked(state, note, link, alert)


def form_body(form: dict[str, str]) -> dict[str, Any]:
    """The triage form's fields as PATCH's body: the alert field holds an alert's key, or nothing for the
    whole summary."""
    body: dict[str, Any] = {k: form[k] for k in ("state", "note", "link") if k in form}
    if form.get("alert"):
        try:
            body["alert"] = json.loads(form["alert"])
        except ValueError:
            raise BadRequest("the form's alert field is not one this page sent") from None
    return body


def triage(lab: Lab, summary_id: int, wanted: TriageAsked, by: str) -> SummaryView:
    """Keeps a triage of a summary (or of one alert in it), and the summary as it now is."""
    current = one(lab, summary_id)
    if wanted.alert is not None and json.dumps(list(wanted.alert)) not in {a.key for a in current.alerts}:
        raise NotFound(f"alert summary {summary_id} has no alert of {'/'.join(wanted.alert)}")
    lab.triage.set(summary_id, wanted.state, wanted.note, wanted.link, by, alert=wanted.alert)
    return one(lab, summary_id)
