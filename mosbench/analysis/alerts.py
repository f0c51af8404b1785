"""The lab's alerts: every change `history` confirms on every machine of a store, grouped as Perfherder groups
its alerts into alert summaries, one per pair of sides.

An alert is one history Shift (one series, workload/test/variant, that moved on one machine between two of its
runs), with what `mosbench history --host H` says of it: its size, interval, adjusted p, kind and shape, and
its explanation from the profiles of the runs nearest each side (explain_history) or the exact command that
would profile them. Every machine's history is its default (all selections, time order), so the alerts are
exactly the changes `history --host H` reports, old ones included.

A summary holds every alert whose two sides have the same names: the kernel commits where both sides carry
one, else the kernel releases without their flavour (release_base), else (the same release on both sides: a
change that came with something other than the kernel) the two runs themselves. Beside its alerts, a summary
names the machines that ran both sides, measured one of its series on both and moved on none of them there
(`unmoved`): "it cost the 4-socket machine, not the 2-socket one" is a finding only with the second half.

`history` over 500 runs × 200 points takes over a second a machine, so AlertIndex keeps each machine's
history and alerts, keyed by its newest run (id and status) and its number of runs, and computes them again
only for a machine where that key moved.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import shlex
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import sqlalchemy as sa

from mosbench.analysis import explain, explain_history, history
from mosbench.analysis.explain import Explanation, Unprofiled
from mosbench.analysis.explain_history import HistoryExplained
from mosbench.analysis.history import History, RunInfo, Shift
from mosbench.analysis.significance import Difference
from mosbench.errors import UserError
from mosbench.store.db import Store, runs
from mosbench.units import plain
from mosbench.workloads.base import test_name

SIDE_BY_COMMIT, SIDE_BY_RELEASE = "commit", "release"
# Both sides ran the same release (and no two commits tell them apart): the change came with something else
# (a setting, firmware, the machine), and only the two runs name it.
SIDE_BY_RUN = "run"
COMMIT_DIGITS = 12  # a commit as git's abbreviations name it in a kernel tree
# Named functions an explanation's lines list (`history` prints five a table: whatchanged.TERMINAL_TOP).
TOP_FUNCTIONS = 5
# The tree `mosbench bisect` needs is the user's checkout: the store records its commits, not where it is.
TREE = "TREE"

# A trailing word of a release that is not its flavour: a release candidate, `git describe`'s commit.
_KEPT_WORD = re.compile(r"rc\d+|g[0-9a-f]{7,40}")
_FLAVOUR_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.]*")
# Fedora's and RHEL's flavour is the architecture after a dot: 6.11.4-301.fc41.x86_64.
_ARCH_SUFFIX = re.compile(r"\.(x86_64|aarch64|ppc64le|s390x|i686|armv7hl|riscv64)$")


def release_base(release: str) -> str:
    """A kernel release without its flavour, so that one release built for two architectures or
    configurations is one side: Debian's and Ubuntu's releases are VERSION-ABI-FLAVOUR, and the flavour is
    every trailing dash-separated word that begins with a letter (6.1.0-26-amd64 → 6.1.0-26, 6.1.0-26-rt-amd64
    and 6.1.0-26-cloud-arm64 → 6.1.0-26, 6.18.3-amd64 → 6.18.3, 6.8.0-45-generic → 6.8.0-45, 6.12.9+bpo-amd64
    → 6.12.9+bpo), a custom LOCALVERSION likewise; a release candidate (-rc7) and `git describe`'s commit
    (-00042-gdeadbeef1234) stay, being versions; Fedora's architecture after a dot goes (.x86_64)."""
    words = release.split("-")
    while len(words) > 1 and _FLAVOUR_WORD.fullmatch(words[-1]) and not _KEPT_WORD.fullmatch(words[-1]):
        words.pop()
    return _ARCH_SUFFIX.sub("", "-".join(words))


def side_name(run: RunInfo, by: str) -> str | None:
    """What names `run`'s side when sides are named `by`; None where the run carries no such name."""
    if by == SIDE_BY_COMMIT:
        return run.commit[:COMMIT_DIGITS] if run.commit else None
    if by == SIDE_BY_RELEASE:
        return release_base(run.kernel)
    return run.name


def sides(before: RunInfo, after: RunInfo) -> tuple[str, str, str]:
    """(before's name, after's name, what names them) for a change between two runs."""
    for by in (SIDE_BY_COMMIT, SIDE_BY_RELEASE, SIDE_BY_RUN):
        names = side_name(before, by), side_name(after, by)
        if names[0] is not None and names[1] is not None and names[0] != names[1]:
            return names[0], names[1], by
    return before.name, after.name, SIDE_BY_RUN  # one run on both sides: history never confirms that


@dataclass(frozen=True)
class Alert:
    """One series that moved on one machine: one history Shift, as `history --host H` reports it."""

    hostname: str
    workload: str
    test: str
    variant: str
    cores: int  # the most cores among the shift's confirmed changes (Shift.ratio's)
    ratio: float  # after / before, per-core throughput, at `cores`
    low: float  # its 95% interval
    high: float
    p_adjusted: float
    kind: str  # history's Kind value: "every core", "scalability", ...
    shape: str  # "step" | "drift"
    direction: str  # "regression" (ratio < 1) | "improvement"
    before_run: int  # store run ids: the last run of the old level, the first of the new (a drift's ends)
    after_run: int
    changes: tuple[tuple[int, float, float, float], ...]  # (cores, ratio, low, high) per confirmed core count
    # What `history` prints of it: each profiled change's explanation, then the exact commands (`mosbench ab`
    # where the sides ran two kernels) that would profile the rest.
    explanation: tuple[str, ...]
    profile_commands: tuple[str, ...] = ()  # those commands alone
    kernels: tuple[str, str] = ("?", "?")  # the two runs' kernel releases
    commits: tuple[str | None, str | None] = (None, None)  # and their kernel commits, where recorded
    after_started_at: dt.datetime | None = None  # when the first run of the new level started
    environment: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # the facts that differ between the two runs
    # The history objects themselves, for a page that shows them as `history` does (report/history.py's
    # shift_lines, report/whatchanged.py's blocks): the shift of the machine's History, its explanations.
    shift: Shift | None = field(default=None, compare=False, repr=False)
    explained: tuple[HistoryExplained, ...] = field(default=(), compare=False, repr=False)

    def key(self) -> tuple[str, str, str, str]:
        """The machine and series: what stays when new runs move the boundary."""
        return (self.hostname, self.workload, self.test, self.variant)

    @property
    def name(self) -> str:
        return test_name(self.workload, self.test)

    def as_json(self) -> dict[str, Any]:
        return {
            "hostname": self.hostname, "workload": self.workload, "test": self.test, "variant": self.variant,
            "cores": self.cores, "ratio": self.ratio, "low": self.low, "high": self.high,
            "p_adjusted": self.p_adjusted, "kind": self.kind, "shape": self.shape, "direction": self.direction,
            "before_run": self.before_run, "after_run": self.after_run,
            "changes": [{"cores": c, "ratio": r, "low": lo, "high": hi} for c, r, lo, hi in self.changes],
            "explanation": list(self.explanation), "profile_commands": list(self.profile_commands),
            "explanations": [x.as_json() for x in self.explained],  # as `history --json` gives them
            "kernels": list(self.kernels), "commits": list(self.commits),
            "after_started_at": self.after_started_at.isoformat() if self.after_started_at else None,
            "environment_differences": [{"key": k, "values": list(v)} for k, v in self.environment],
        }


def explanation_lines(found: Sequence[HistoryExplained]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A shift's explained changes in lines (each profiled core count: the two sides' runs, the measured CPU
    time per unit, the named functions and the share they account for), and the fewest commands that would
    profile the rest (explain.profile_commands: `history` prints the same)."""
    lines: list[str] = []
    for x in found:
        e = x.found
        if not isinstance(e, Explanation):
            continue
        a, b = e.labels
        lines.append(f"{e.point.text()}: profiles of {a} against {b} ({e.trials[0]} and {e.trials[1]} trials): "
                     f"CPU (user + system) {plain(e.cpu.a)} → {plain(e.cpu.b)} µs per {e.unit}")
        lines.extend(f"  {f.function} ({f.kind}) {f.own.change:+.3g} µs per {e.unit}, own time"
                     for f in e.own[:TOP_FUNCTIONS])
        if e.share is not None and e.replicated:
            lines.append(f"  the named functions account for {e.share:.0%} of the change in CPU time")
        lines.extend(f"  {why}" for why in e.absent)
    commands = tuple(explain.profile_commands(x.found for x in found if isinstance(x.found, Unprofiled)))
    return tuple(lines), commands


def _interval(d: Difference) -> tuple[float, float]:
    """A difference's 95% interval; its ratio at both ends where it has none (one trial a side)."""
    return (d.ratio if d.low is None else d.low, d.ratio if d.high is None else d.high)


def alert_of(h: History, shift: Shift, found: Sequence[HistoryExplained]) -> Alert:
    """A shift of machine `h`'s history, with the explanations of its changes."""
    most = max(shift.changes, key=lambda c: c.cores)
    d = most.difference
    before, after = h.runs[shift.before], h.runs[shift.after]
    lines, commands = explanation_lines(found)
    return Alert(
        hostname=h.machine.hostname, workload=shift.key.workload, test=shift.key.test, variant=shift.key.variant,
        cores=most.cores, ratio=d.ratio, low=_interval(d)[0], high=_interval(d)[1], p_adjusted=most.p_adjusted,
        kind=shift.kind().value, shape=shift.shape.value, direction="regression" if d.ratio < 1 else "improvement",
        before_run=before.id, after_run=after.id,
        changes=tuple((c.cores, c.difference.ratio, *_interval(c.difference)) for c in shift.changes),
        explanation=lines + commands, profile_commands=commands, kernels=(before.kernel, after.kernel),
        commits=(before.commit, after.commit), after_started_at=after.started_at,
        environment=tuple((k, tuple(v)) for k, v in shift.environment), shift=shift, explained=tuple(found))


@dataclass(frozen=True)
class Summary:
    """One pair of sides and every series that moved there, on every machine."""

    key: str  # f"{before}..{after}"
    before: str  # a commit (COMMIT_DIGITS hex) where both sides carry one, else the release without its flavour
    after: str
    by: str  # SIDE_BY_COMMIT | SIDE_BY_RELEASE | SIDE_BY_RUN
    alerts: tuple[Alert, ...]
    unmoved: tuple[str, ...]  # hostnames that ran both sides, measured one of these series, and moved on none
    bisect_command: str | None  # `mosbench bisect ...` where the sides are commits
    first_seen: dt.datetime  # the newest of the after-side runs' start
    bisect_host: str | None = None  # the machine whose alerts the bisect command is for

    def machines(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.hostname for a in self.alerts))

    def direction(self) -> str:
        found = {a.direction for a in self.alerts}
        return "mixed" if len(found) > 1 else found.pop()

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "before": self.before, "after": self.after, "by": self.by,
                "direction": self.direction(), "machines": list(self.machines()), "unmoved": list(self.unmoved),
                "alerts": [a.as_json() for a in self.alerts], "bisect_command": self.bisect_command,
                "bisect_host": self.bisect_host, "first_seen": self.first_seen.isoformat()}


class Freshness(NamedTuple):
    """What a machine's history is computed at: it is computed again when any of these moves (a new run, the
    newest run finished, a run deleted)."""

    newest_run: int
    status: str  # the newest run's
    runs: int


@dataclass(frozen=True)
class MachineAlerts:
    """One machine's history and its alerts, with each alert's sides: what AlertIndex keeps per machine."""

    fresh: Freshness  # what its history was computed at
    history: History
    alerts: tuple[tuple[Alert, str, str, str], ...]  # (alert, before's name, after's name, named by)

    @classmethod
    def of(cls, fresh: Freshness, h: History, found: Sequence[HistoryExplained]) -> MachineAlerts:
        out = []
        for shift in h.shifts:
            before, after, by = sides(h.runs[shift.before], h.runs[shift.after])
            out.append((alert_of(h, shift, [x for x in found if x.shift is shift]), before, after, by))
        return cls(fresh, h, tuple(out))

    def unmoved(self, by: str, before: str, after: str, series: set[tuple[str, str, str]]) -> bool:
        """Whether this machine ran both sides, measured one of `series` on both, and moved on none of them
        between its first run of either side and its last (a change whose sides it names otherwise is still
        a move)."""
        names = [side_name(r, by) for r in self.history.runs]
        on = {side: [i for i, n in enumerate(names) if n == side] for side in (before, after)}
        if not on[before] or not on[after]:
            return False
        mine = [s for s in self.history.series if (s.key.workload, s.key.test, s.key.variant) in series]
        if not any(any(s.trials[i] for i in on[before]) and any(s.trials[i] for i in on[after]) for s in mine):
            return False
        span = range(min(on[before] + on[after]), max(on[before] + on[after]) + 1)
        return not any((s.key.workload, s.key.test, s.key.variant) in series and s.after in span
                       for s in self.history.shifts)


def summaries_of(machines: dict[str, MachineAlerts]) -> list[Summary]:
    """Every machine's alerts grouped by their sides, newest first."""
    groups: dict[tuple[str, str, str], list[Alert]] = {}
    for m in machines.values():
        for alert, before, after, by in m.alerts:
            groups.setdefault((before, after, by), []).append(alert)
    out = []
    for (before, after, by), alerts in groups.items():
        alerts.sort(key=lambda a: (a.hostname, a.workload, a.test, a.variant, a.before_run))
        hosts = {a.hostname for a in alerts}
        series = {(a.workload, a.test, a.variant) for a in alerts}
        unmoved = tuple(sorted(host for host, m in machines.items()
                               if host not in hosts and m.unmoved(by, before, after, series)))
        command, host = bisect_command(machines, alerts) if by == SIDE_BY_COMMIT else (None, None)
        first_seen = max(a.after_started_at for a in alerts if a.after_started_at is not None)
        out.append(Summary(f"{before}..{after}", before, after, by, tuple(alerts), unmoved, command, first_seen,
                           host))
    out.sort(key=lambda s: (s.first_seen, s.key), reverse=True)
    return out


def bisect_command(machines: dict[str, MachineAlerts], alerts: Sequence[Alert]) -> tuple[str | None, str | None]:
    """`mosbench bisect` between the two commits for the machine with the most alerts here (its core counts:
    bisect runs in a guest of the machine it is started on), as `history --bisect` would start it there
    (history.bisect_target over these shifts), and that machine."""
    by_host: dict[str, list[Alert]] = {}
    for a in alerts:
        by_host.setdefault(a.hostname, []).append(a)
    host = min(by_host, key=lambda h: (-len(by_host[h]), min(a.ratio for a in by_host[h]), h))
    h = machines[host].history
    target = history.bisect_target(dataclasses.replace(h, shifts=[a.shift for a in by_host[host] if a.shift]))
    if target is None:
        return None, None
    return shlex.join(["mosbench", "bisect", "--tree", TREE, "--good", target.good, "--bad", target.bad,
                       *target.selections, "--cores", target.cores]), host


def freshness(db: Store) -> dict[str, Freshness]:
    """Each machine's newest run, its status and its number of runs: one light query, no JSON read."""
    with db.engine.connect() as conn:
        rows = conn.execute(sa.select(runs.c.id, runs.c.hostname, runs.c.status, runs.c.started_at)).all()
    newest: dict[str, tuple[Any, int, str]] = {}
    count: dict[str, int] = {}
    for run_id, host, status, started in rows:
        host = host or "?"  # history's name for a machine that recorded none
        count[host] = count.get(host, 0) + 1
        if host not in newest or (started, run_id) > newest[host][:2]:
            newest[host] = (started, run_id, status)
    return {host: Freshness(run_id, status, count[host]) for host, (_, run_id, status) in newest.items()}


class Kept(NamedTuple):
    """What AlertIndex holds at one moment: each machine's history and alerts, and the summaries made of
    them (a page that shows a summary with its histories takes both from here, not from two moments)."""

    machines: dict[str, MachineAlerts]
    summaries: list[Summary]  # newest first

    def histories(self) -> dict[str, History]:
        """hostname → its History."""
        return {host: m.history for host, m in sorted(self.machines.items())}


class AlertIndex:
    """Summaries over a store, computed per machine from `history` (its default: all selections, time order)
    and kept, keyed by that machine's newest run (id and status) and its number of runs: recomputed only for
    a machine where that moved. Thread-safe: one lock, held while a machine is computed, so that two requests
    after a new run compute it once."""

    def __init__(self, db: Store) -> None:
        self.db = db
        self._lock = threading.Lock()
        # Replaced, never changed in place: computed() hands it out without waiting for the lock.
        self._machines: dict[str, MachineAlerts] = {}
        self._summaries: list[Summary] = []
        self._summarised: dict[str, Freshness] | None = None  # the keys the summaries were made at

    def kept(self) -> Kept:
        """Every machine's alerts and the summaries, brought up to date with the store."""
        fresh = freshness(self.db)
        with self._lock:
            stale = [host for host, key in fresh.items()
                     if host not in self._machines or self._machines[host].fresh != key]
            rows = self.db.list_runs(with_counts=False) if stale else []  # history reads no counts
            for host in stale:
                computed = self._compute(host, fresh[host], rows)
                machines = dict(self._machines)
                if computed is None:
                    machines.pop(host, None)
                else:
                    machines[host] = computed
                self._machines = machines
            if set(self._machines) - set(fresh):
                self._machines = {h: m for h, m in self._machines.items() if h in fresh}
            if self._summarised != fresh:
                self._summaries = summaries_of(self._machines)
                self._summarised = fresh
            return Kept(dict(self._machines), list(self._summaries))

    def _compute(self, host: str, fresh: Freshness, rows: list[dict[str, Any]]) -> MachineAlerts | None:
        try:
            h = history.build(rows, self.db.history_points, [], host, history.Order.TIME, None)
        except UserError:
            return None  # its runs name another host in their environment than in the runs table
        return MachineAlerts.of(fresh, h, explain_history.explained(self.db, h) if h.shifts else [])

    def computed(self) -> dict[str, MachineAlerts]:
        """Each machine's alerts as far as they are computed now, without waiting for those being computed
        (nor bringing any up to date): what a page can show while the index is computed for the first time."""
        return dict(self._machines)

    def summaries(self) -> list[Summary]:
        """Every summary, newest first."""
        return self.kept().summaries

    def machine_histories(self) -> dict[str, History]:
        """hostname → its History (kept with its alerts)."""
        return self.kept().histories()
