"""Why a point changed between two runs: its profiles on the two sides set against each other.

Kleen and Chen's chain of profiles (Exim spending 52.8% in a spin lock taken from dput and dget, then
after a fix 29.5%) is how a kernel developer believes a number: what grew and what shrank, per caller.
For one point (workload, test, variant, cores) measured in two runs A and B, every trial's profile is a
replicate, so each quantity per unit of work has a mean a side and Welch's 95% interval for its change
(significance.difference, the comparison's own test):

- CPU µs per unit by function, kernel and user frames, own time and inclusive, A → B; for each named
  function the nearest callers outside any lock (003's "spin lock from dput, dget");
- perf lock's wait per unit by site, perf c2c's HITMs per unit (in all and by the code that touched
  the lines), system calls per unit where the workload counts them (PostgreSQL), and the trials' user,
  system and idle µs per unit.

A function is named only where its change's interval excludes zero and the change is at least
FLOOR of the CPU time per unit (a frame that moved less than its trials' spread says nothing). The
named functions' own-time changes add up (own times partition the busy samples), and their sum over the
measured change in CPU µs per unit (user + system, from /proc/stat) is the share they account for; the
rest is "not attributed", never spread over the named ones. Profiles and their per-unit normalisation
are the sweep's (profiles.Profile, profiles.sides).
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mosbench.analysis.cells import PointKey, Series, build_series, counts, figures_for, workload_of
from mosbench.analysis.compare import Change, Comparison
from mosbench.analysis.profiles import IDLE_COMMS, KERNEL, Profile, sides
from mosbench.analysis.significance import difference
from mosbench.analysis.verdict import kind_of
from mosbench.workloads.base import base_variant, test_name

FLOOR = 0.005  # of the larger side's CPU µs per unit: a smaller change is not named, however certain
REPLICATES = 3  # trials a side the printed commands ask for: each profiled trial is a replicate
# A frame perf could resolve to neither a symbol nor a binary: an address read off a stack that a
# frame-pointer walk misread, not a function. Never named, never a caller; its own time is not attributed.
UNRESOLVED = "[unknown]"
NO_CALLER = "[caller not recorded]"  # a stack with no frame outward of the function: perf cut its chain
OTHER_STACKS = "[other stacks]"  # the recording's fold of its least sampled stacks (profiler.trim): no chain
# The share of a side's user samples whose call chain perf cut short above which the explanation says so.
CUT_SHORT = 0.2


@dataclass(frozen=True)
class Delta:
    """One quantity per unit of work on both sides: each side's mean over its trials and the change's
    95% interval (Welch's; None with one trial a side); named where the interval excludes zero and
    the change is not below the floor it was judged against."""

    name: str
    a: float
    b: float
    low: float | None
    high: float | None
    named: bool

    @property
    def change(self) -> float:
        return self.b - self.a

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "a": self.a, "b": self.b, "change": self.change, "low": self.low,
                "high": self.high, "named": self.named}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def delta(name: str, a: Sequence[float], b: Sequence[float], floor: float = 0.0) -> Delta:
    """The change of a quantity from side A's trials to side B's."""
    change, low, high, _ = difference(list(a), list(b))
    outside = low is not None and high is not None and (low > 0 or high < 0)
    return Delta(name, _mean(a), _mean(b), low, high, outside and abs(change) >= floor)


@dataclass(frozen=True)
class FunctionDelta:
    """A function's CPU µs per unit, own and inclusive, and its callers' shares of its own time."""

    function: str
    kind: str  # verdict.kind_of: kernel, kernel lock, user, user lock
    own: Delta
    inclusive: Delta
    callers: tuple[Delta, ...]  # by the nearest frame outward that is not a lock, largest change first

    def as_json(self) -> dict[str, Any]:
        return {"function": self.function, "kind": self.kind, "own": self.own.as_json(),
                "inclusive": self.inclusive.as_json(), "callers": [c.as_json() for c in self.callers]}


@dataclass(frozen=True)
class Explanation:
    point: PointKey
    unit: str
    labels: tuple[str, str]  # A's and B's
    trials: tuple[int, int]  # profiled trials a side: the replicates
    cpu: Delta  # user + system µs per unit: the measured change the functions are set against
    times: tuple[Delta, ...]  # user, system and idle µs per unit
    profiled: Delta  # the profiles' busy µs per unit (every frame but the idle task's)
    functions: tuple[FunctionDelta, ...]  # named by own or inclusive time, largest own change first
    locks: tuple[Delta, ...]  # perf lock's wait µs per unit by site, on both sides traced
    hitm: tuple[Delta, ...]  # perf c2c's HITMs per unit: in all first, then by the code that touched the lines
    syscalls: tuple[Delta, ...]  # system calls per unit by kind, where the workload counts them
    absent: tuple[str, ...]  # what was not recorded on a side, and why
    a_profile: Profile = field(repr=False, compare=False)  # each side's trials added up: the flame graph's
    b_profile: Profile = field(repr=False, compare=False)

    @property
    def own(self) -> list[FunctionDelta]:
        """The functions whose own time moved beyond their trials' spread, largest change first."""
        return [f for f in self.functions if f.own.named]

    @property
    def inclusive(self) -> list[FunctionDelta]:
        """The functions whose inclusive time moved beyond their trials' spread, largest change first."""
        return sorted((f for f in self.functions if f.inclusive.named),
                      key=lambda f: (-abs(f.inclusive.change), f.function))

    @property
    def attributed(self) -> float:
        """The named functions' own-time changes added up (µs per unit)."""
        return sum(f.own.change for f in self.own)

    @property
    def share(self) -> float | None:
        """The share of the measured change in CPU µs per unit the named functions account for; None where
        the measured change is nothing."""
        return self.attributed / self.cpu.change if self.cpu.change else None

    @property
    def replicated(self) -> bool:
        return min(self.trials) >= 2

    def as_json(self) -> dict[str, Any]:
        k = self.point
        return {"workload": k.workload, "test": k.test, "variant": k.variant, "cores": k.cores, "unit": self.unit,
                "a": self.labels[0], "b": self.labels[1], "trials": list(self.trials), "floor_share": FLOOR,
                "cpu": self.cpu.as_json(), "times": [t.as_json() for t in self.times],
                "profiled": self.profiled.as_json(), "attributed": self.attributed, "share": self.share,
                "not_attributed": self.cpu.change - self.attributed,
                "functions": [f.as_json() for f in self.functions], "locks": [x.as_json() for x in self.locks],
                "hitm": [x.as_json() for x in self.hitm], "syscalls": [x.as_json() for x in self.syscalls],
                "absent": list(self.absent)}


@dataclass(frozen=True)
class Unprofiled:
    """A point one side (or both) of which holds no profile: the commands that would record one."""

    point: PointKey
    labels: tuple[str, str]
    missing: tuple[str, ...]  # the labels of the sides without a profile
    commands: tuple[str, ...]
    runs: tuple[dict[str, Any], ...] = field(default=(), repr=False, compare=False)  # the sides' without one
    kernels: tuple[str, str] | None = None  # where the sides ran different kernels: `ab` measures both

    def as_json(self) -> dict[str, Any]:
        k = self.point
        return {"workload": k.workload, "test": k.test, "variant": k.variant, "cores": k.cores,
                "a": self.labels[0], "b": self.labels[1], "unprofiled": list(self.missing),
                "commands": list(self.commands)}


@dataclass(frozen=True)
class Explained:
    """A significant change of a comparison, with why (or the command that would say why)."""

    change: Change
    found: Explanation | Unprofiled


def _lock(frame: str) -> bool:
    return kind_of(frame).endswith("lock")


def callers(prof: Profile, function: str) -> dict[str, float]:
    """µs per unit of `function`'s own time by its nearest frame outward that is not a lock function (a
    spin lock's from dput, from dget); NO_CALLER where nothing is (every thread starts in some frame)."""
    out: Counter[str] = Counter()
    for stack, n in prof.stacks.items():
        frames = stack.split(";")
        if frames[-1] != function:
            continue
        outward = [f for f in reversed(frames[1:-1]) if f not in (function, UNRESOLVED) and not _lock(f)]
        out[outward[0] if outward else NO_CALLER] += n
    return {k: prof.us_per_unit(n) for k, n in out.items()}


def _functions(a: list[Profile], b: list[Profile], floor: float) -> tuple[FunctionDelta, ...]:
    own, incl = sides(a, b), sides(a, b, Profile.inclusive_time)
    zeros = ([0.0] * len(a), [0.0] * len(b))
    found = []
    for f, (ia, ib) in incl.items():
        if f == UNRESOLVED:
            continue
        oa, ob = own.get(f, zeros)
        if max(abs(_mean(ob) - _mean(oa)), abs(_mean(ib) - _mean(ia))) < floor:
            continue  # cannot be named: spare the test (a profile holds thousands of functions)
        o, i = delta(f, oa, ob, floor), delta(f, ia, ib, floor)
        if not (o.named or i.named):
            continue
        by_caller = sides(a, b, lambda p, f=f: callers(p, f)) if o.named else {}
        calls = sorted((delta(c, *v, floor) for c, v in by_caller.items()), key=_largest_first)
        found.append(FunctionDelta(f, kind_of(f), o, i, tuple(calls)))
    return tuple(sorted(found, key=lambda f: (-abs(f.own.change) if f.own.named else 0, -abs(f.inclusive.change),
                                              f.function)))


def _largest_first(d: Delta) -> tuple[float, str]:
    """Largest change first; equal changes (a caller and its only callee) by name, so a report reads the
    same twice."""
    return -abs(d.change), d.name


def _locks(a: list[Profile], b: list[Profile], floor: float) -> tuple[Delta, ...]:
    def waits(p: Profile) -> dict[str, float]:
        return {f"{record['type']} in {caller}": wait for caller, record, wait, _ in p.lock_waits()}

    found = [delta(site, *v, floor) for site, v in sides(a, b, waits).items()]
    return tuple(sorted(found, key=_largest_first))


def _hitm(a: list[Profile], b: list[Profile]) -> tuple[Delta, ...]:
    def by_symbol(p: Profile) -> dict[str, float]:
        out: Counter[str] = Counter()
        for line in p.c2c_lines:
            for code in line["code"]:
                out[str(code["symbol"])] += code["hitm"] / p.c2c_work
        return dict(out)

    total = delta("[every line]", [p.hitm_per_unit() or 0.0 for p in a], [p.hitm_per_unit() or 0.0 for p in b])
    floor = FLOOR * max(total.a, total.b)
    symbols = sorted((delta(s, *v, floor) for s, v in sides(a, b, by_symbol).items()), key=_largest_first)
    return (total, *symbols)


def cut_short(profiles: Sequence[Profile]) -> float | None:
    """The share of the profiles' samples in user code whose call chain perf cut short: the innermost
    frame alone, or a frame it could not resolve (perf -g walks frame pointers, and code built without
    them breaks the walk); None where no sample was in user code."""
    user = cut = 0
    for stack, n in (item for p in profiles for item in p.stacks.items()):
        frames = stack.split(";")
        if frames[0] in IDLE_COMMS or frames[-1].endswith(KERNEL) or frames[-1] == OTHER_STACKS:
            continue
        user += n
        if len(frames) == 2 or UNRESOLVED in frames:
            cut += n
    return cut / user if user else None


def _absent(a: list[Profile], b: list[Profile], labels: tuple[str, str]) -> tuple[str, ...]:
    """What a side's profiles did not record (perf lock's waits, perf c2c's lines, user call chains), with
    perf's reason."""
    said = []
    cut = {label: share for label, side in zip(labels, (a, b), strict=True)
           if (share := cut_short(side)) is not None and share > CUT_SHORT}
    if cut:
        said.append("user call chains cut short in " + " and ".join(f"{share:.0%} of {label}'s" for label, share
                                                                    in cut.items())
                    + " user samples (perf -g walks frame pointers, which code built without them breaks): user "
                      "functions' own times stand, their callers and inclusive times are undercounted")
    for what, traced, why in (("kernel locks (perf lock)", lambda p: p.locks_work > 0, lambda p: p.locks_absent),
                              ("shared cache lines (perf c2c)", lambda p: p.c2c_work > 0, lambda p: p.c2c_absent)):
        untraced = [(label, side) for label, side in zip(labels, (a, b), strict=True)
                    if not all(traced(p) for p in side)]
        if untraced:
            reasons = dict.fromkeys(r for _, side in untraced for p in side if (r := why(p)))
            said.append(f"{what} not traced in {' and '.join(label for label, _ in untraced)}: "
                        + ("; ".join(reasons) or "not recorded"))
    return tuple(said)


def _syscall_metrics(s: Series) -> str | None:
    """The suffix of the workload's system-call metrics (its figure named syscalls), or None."""
    return next((f.suffix for f in figures_for(s) if f.name == "syscalls"), None)


def explain(key: PointKey, a_rows: Sequence[dict[str, Any]], b_rows: Sequence[dict[str, Any]],
            labels: tuple[str, str] = ("A", "B"), include_interfered: bool = False) -> Explanation | None:
    """Side A's stored trials of one point against side B's (rows as the store gives them, with their
    profiles); None where a side has no profiled trial that counts."""
    rows = [[r for r in side if counts(r["status"] == "ok", bool(r.get("interfered")), include_interfered)
             and PointKey.of(r) == key and r.get("profile") and r.get("work")] for side in (a_rows, b_rows)]
    pairs = [[(r, p) for r in side if (p := Profile.of_points([r])) is not None] for side in rows]
    if not pairs[0] or not pairs[1]:
        return None
    kept, profs = [[r for r, _ in side] for side in pairs], [[p for _, p in side] for side in pairs]
    series = [build_series(side)[0] for side in kept]
    trials = [s.cells[key.cores].trials for s in series]
    a, b = profs
    busy = delta("[profile, every frame]", [p.busy_time() for p in a], [p.busy_time() for p in b])
    floor = FLOOR * max(busy.a, busy.b)

    def of_trials(name: str, value) -> Delta:
        return delta(name, [value(t) for t in trials[0]], [value(t) for t in trials[1]], floor)

    cpu = of_trials("CPU (user + system)", lambda t: t.user_us_per_unit + t.system_us_per_unit)
    times = (of_trials("user", lambda t: t.user_us_per_unit), of_trials("system", lambda t: t.system_us_per_unit),
             of_trials("idle", lambda t: t.idle_us_per_unit))
    suffix = _syscall_metrics(series[0])
    syscalls: tuple[Delta, ...] = ()
    if suffix:
        names = sorted({m for side in trials for t in side for m, v in t.metrics.items()
                        if m.endswith(suffix) and isinstance(v, int | float)})
        syscalls = tuple(sorted((delta(m.removesuffix(suffix), [t.metrics.get(m, 0.0) for t in trials[0]],
                                       [t.metrics.get(m, 0.0) for t in trials[1]]) for m in names),
                                key=lambda d: -abs(d.change)))
    both_c2c = all(p.c2c_work > 0 for p in (*a, *b))
    return Explanation(key, series[0].unit, labels, (len(a), len(b)), cpu, times, busy, _functions(a, b, floor),
                       _locks(a, b, floor) if all(p.locks_work > 0 for p in (*a, *b)) else (),
                       _hitm(a, b) if both_c2c else (), syscalls, _absent(a, b, labels),
                       Profile.of_points(kept[0]) or a[0], Profile.of_points(kept[1]) or b[0])


def profile_command(run: dict[str, Any], keys: Sequence[PointKey], kernels: tuple[str, str] | None = None) -> str:
    """The command that measures these points of one run's workload again with a profile of every trial:
    where the two sides ran different kernels, `mosbench ab` between them (`kernels`: A's and B's, as
    `ab --kernel` takes them) with the run's settings; the stored `mosbench ab … --profile` for a side an
    A/B comparison made (its guests' runs are profiled boot by boot); else `mosbench run` with the run's
    own settings for these points."""
    sels = list(dict.fromkeys(test_name(k.workload, k.test) for k in keys))
    if kernels is None and run["environment"].get("ab"):
        args = shlex.split(run["command"])
        return shlex.join([*args, "--profile", ",".join(sels)]) if "--profile" not in args else run["command"]
    plan = run["plan"]  # the stored plan's settings, read as any version wrote them
    args = [*sels, "--profile", ",".join(sels),
            "--cores", ",".join(str(n) for n in sorted({k.cores for k in keys})),
            "--variant", ",".join(dict.fromkeys(base_variant(k.variant) for k in keys)),
            "--trials", str(max(plan.get("trials", 1), REPLICATES)), *setting_options(plan)]
    for workload in dict.fromkeys(k.workload for k in keys):
        args += param_options(workload, (plan.get("params") or {}).get(workload, {}))
    head = ["mosbench", "run"] if kernels is None else ["mosbench", "ab", "--kernel", kernels[0], "--kernel",
                                                         kernels[1]]
    return shlex.join([*head, *args])


def profile_commands(found: Iterable[Unprofiled]) -> list[str]:
    """The fewest commands that profile every unprofiled side of these points: one per run and workload
    (and pair of kernels)."""
    grouped: dict[tuple[int, str, tuple[str, str] | None], tuple[dict[str, Any], list[PointKey]]] = {}
    for u in found:
        for run in u.runs:
            grouped.setdefault((run["id"], u.point.workload, u.kernels), (run, []))[1].append(u.point)
    return list(dict.fromkeys(profile_command(run, keys, kernels)
                              for (_, _, kernels), (run, keys) in grouped.items()))


def setting_options(plan: dict[str, Any]) -> list[str]:
    """`mosbench run`'s options for the sweep settings a stored plan (as any version wrote it) holds, each
    given whatever its value: a command measures as that run did, whatever the defaults have become."""
    args = []
    for option in ("duration", "warmup", "interval", "placement", "isolation"):
        if (value := plan.get(option)) is not None:
            args += [f"--{option}", f"{value:g}" if isinstance(value, float) else str(value)]
    return args


def param_options(workload: str, values: dict[str, Any]) -> list[str]:
    """-p options for the parameters this run set away from the workload's defaults (those the workload
    chooses a run by run are left to it)."""
    w = workload_of(workload)
    defaults = {p.name: p.default for p in w.params} if w else {}
    out = []
    for name, value in sorted(values.items()):
        if name in defaults and defaults[name] is not None and value != defaults[name]:
            text = str(value).lower() if isinstance(value, bool) else str(value)
            out += ["-p", f"{workload}.{name}={text}"]
    return out


def point(key: PointKey, runs: tuple[dict[str, Any], dict[str, Any]],
          rows: tuple[Sequence[dict[str, Any]], Sequence[dict[str, Any]]], labels: tuple[str, str],
          include_interfered: bool = False, kernels: tuple[str, str] | None = None) -> Explanation | Unprofiled:
    """One point of two stored runs (or two sides of runs pooled: rows from several runs each), explained,
    or the command that would profile the side that is not (`mosbench ab` between `kernels` where the
    sides ran two: one command measures both)."""
    found = explain(key, rows[0], rows[1], labels, include_interfered)
    if found is not None:
        return found
    missing = [i for i, side in enumerate(rows) if not any(PointKey.of(r) == key and r.get("profile") for r in side)]
    missing = missing or [0, 1]  # profiled, but none of the profiled trials counts
    commanded = [1] if kernels else missing  # B's settings: the newer measurement's
    commands = tuple(dict.fromkeys(profile_command(runs[i], [key], kernels) for i in commanded))
    return Unprofiled(key, labels, tuple(labels[i] for i in missing), commands, tuple(runs[i] for i in commanded),
                      kernels)


def comparison(found: Comparison, runs: Sequence[dict[str, Any]], rows: Sequence[Sequence[dict[str, Any]]],
               include_interfered: bool = False) -> list[Explained]:
    """Each significant change of a comparison (every run against the first) explained; rows are each run's
    stored points with their profiles."""
    by_point: list[dict[PointKey, list[dict[str, Any]]]] = []
    for run_rows in rows:
        grouped: dict[PointKey, list[dict[str, Any]]] = {}
        for r in run_rows:
            grouped.setdefault(PointKey.of(r), []).append(r)
        by_point.append(grouped)
    out = []
    for i, run_changes in enumerate(found.changes, start=1):
        labels = (found.labels[0], found.labels[i])
        for c in run_changes:
            if c.significant:
                sides_rows = (by_point[0].get(c.point, []), by_point[i].get(c.point, []))
                out.append(Explained(c, point(c.point, (runs[0], runs[i]), sides_rows, labels, include_interfered)))
    return out

