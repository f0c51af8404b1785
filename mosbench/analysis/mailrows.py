"""What `mosbench mail` says, as data; report/mail.py lays it out as the kernel test robot's mail
(docs/MAIL.md has the form).

Two sides: two stored runs, or the two levels of a history around a confirmed change (each level's runs
pooled, as `ab` pools its boots' trials). Every point both sides measured gives one row per metric
(`MEASURES`): each side's mean over the trials that count (cells.Cell.counted's rule: ok and not
interfered), each side's relative standard deviation, and the change, a percentage of the base or, for a
metric that is itself a share, the difference (the robot's rule). A row is significant where Welch's test on
those trials says so (significance.difference, p < ALPHA): the one test compare, ab and bisect apply. The
significant rows come first, the per-core throughput that moved most at their head. Each point whose
per-core throughput changed significantly is explained by its profiles (analysis/explain): every function
the explanation names gives rows of its own and inclusive time, as a share of the samples and as CPU µs per
unit of work; a point a side of which holds no profile gets the command that would record one.
"""

from __future__ import annotations

import math
import re
import shlex
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosbench import gitrepo
from mosbench.analysis import explain
from mosbench.analysis.cells import PointKey, Trial, build_series, by_point, counts
from mosbench.analysis.compare import environment_differences
from mosbench.analysis.explain_history import kernel_spec
from mosbench.analysis.history import TRANSIENT_FACTS, History, Machine, RunInfo, Shift, machine_of, selected
from mosbench.analysis.profiles import Profile
from mosbench.analysis.significance import ALPHA, difference
from mosbench.errors import UserError
from mosbench.machine.interference import DEFAULT_THRESHOLD
from mosbench.printable import one_line, printable
from mosbench.workloads.base import base_variant, test_name

if TYPE_CHECKING:
    from mosbench.store.db import Store  # importing it here would load SQLAlchemy with this module

TOP_FUNCTIONS = 12  # functions a point's profile rows name (the explanation orders them, largest move first)


@dataclass(frozen=True)
class Measure:
    """A metric of a point, read from one trial that counts and the point's cores."""

    suffix: str  # the last part of the row's dotted name
    of: Callable[[Trial, int], float | None]
    absolute: bool = False  # a share in percent: its change is the difference in points, as the robot's
    better: int = 0  # 1: more is better (throughput), -1: less is (CPU per unit of work), 0: neither


PER_CORE = Measure("per_core_ops", lambda t, _: t.per_core, better=1)
MEASURES = (
    PER_CORE,
    Measure("throughput", lambda t, cores: t.per_core * cores, better=1),
    Measure("user_us_per_op", lambda t, _: t.user_us_per_unit, better=-1),
    Measure("system_us_per_op", lambda t, _: t.system_us_per_unit, better=-1),
    Measure("idle_us_per_op", lambda t, _: t.idle_us_per_unit),
    Measure("interference%", lambda t, _: None if t.interference_share is None else 100 * t.interference_share,
            absolute=True),
)


@dataclass(frozen=True)
class Row:
    """One row of the table: a metric's mean on each side, each side's spread, Welch's p between them."""

    metric: str  # one dotted token, the point's cores inside it
    base: float
    new: float
    base_spread: float | None  # relative standard deviation, percent; None with one value
    new_spread: float | None
    absolute: bool
    p: float | None  # None with fewer than two values a side: untested
    better: int = 0
    point: PointKey | None = None
    measure: str = ""  # the Measure's suffix, or the profile family's

    @property
    def change(self) -> float:
        """The difference (a share's, in points), or a percentage of the base (±inf from a zero base)."""
        if self.absolute:
            return self.new - self.base
        if self.base == 0:
            return 0.0 if self.new == 0 else math.copysign(math.inf, self.new)
        return 100 * (self.new - self.base) / abs(self.base)

    @property
    def significant(self) -> bool:
        return self.p is not None and self.p < ALPHA

    @property
    def regression(self) -> bool:
        """Worse in the new side, as far as the metric says which way is worse."""
        return self.better * self.change < 0


def spread(values: Sequence[float]) -> float | None:
    """The values' sample standard deviation as a percentage of their mean; None for one value or a zero mean."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return 100 * statistics.stdev(values) / abs(mean) if mean else None


def row(metric: str, a: Sequence[float], b: Sequence[float], absolute: bool = False, better: int = 0,
        point: PointKey | None = None, measure: str = "") -> Row:
    _, _, _, p = difference(list(a), list(b))
    return Row(metric, statistics.fmean(a), statistics.fmean(b), spread(a), spread(b), absolute, p, better, point,
               measure)


_SPACE = re.compile(r"\s+")


def token(text: str) -> str:
    """Stored text as part of a dotted name: printable, its spaces made `_` (a C++ symbol's)."""
    return _SPACE.sub("_", printable(text))


def metric_name(key: PointKey, *rest: str) -> str:
    """workload.test.variant.cores.metric: one dotted token (a workload without tests has no test part)."""
    return ".".join(token(part) for part in (key.workload, key.test, key.variant, str(key.cores), *rest) if part)


@dataclass(frozen=True)
class Table:
    significant: tuple[Row, ...]  # per-core throughput, throughput in all, then the rest; each by its move
    rest: tuple[Row, ...]  # in the points' order, metrics in MEASURES' order
    unmatched: tuple[str, ...]  # the points one side has nothing to compare of, and why
    points: int  # compared

    @property
    def head(self) -> Row | None:
        """What the subject names: the significant per-core throughput that moved most, else the significant
        row that moved most of a metric with a better way; None where nothing changed."""
        return next((r for r in self.significant if r.better), None)


# The benchmark's own figures lead the significant rows: per-core throughput, then throughput in all.
_OWN = (PER_CORE.suffix, "throughput")


def _moved(r: Row) -> tuple[int, bool, float, str]:
    """The significant rows' order: the benchmark's own figures, then the metrics with a better way before
    those without (idle time, interference), so that the row the subject names (Table.head) is the first
    whatever moved; each group by how far it moved."""
    return _OWN.index(r.measure) if r.measure in _OWN else len(_OWN), not r.better, -abs(r.change), r.metric


def table(a_rows: Sequence[dict[str, Any]], b_rows: Sequence[dict[str, Any]]) -> Table:
    """Every point either side measured, a row per metric where both have trials that count."""
    cells = [by_point(build_series(list(side))) for side in (a_rows, b_rows)]
    rows: list[Row] = []
    unmatched = []
    compared = 0
    for key in [*cells[0], *(k for k in cells[1] if k not in cells[0])]:
        trials = [[t for t in c[key].trials if counts(True, t.interfered)] if key in c else None for c in cells]
        missing = next((i for i, side in enumerate(trials) if not side), None)
        if missing is not None:
            why = "not measured" if trials[missing] is None else "no trial that counts: failed or interfered"
            unmatched.append(f"{metric_name(key)} ({why} in the {('base', 'new')[missing]} side)")
            continue
        compared += 1
        for m in MEASURES:
            a, b = ([m.of(t, key.cores) for t in side] for side in trials)
            if any(v is None for v in (*a, *b)) or not any((*a, *b)):
                continue  # a trial stored before the metric was measured; nothing on either side (idle)
            rows.append(row(metric_name(key, m.suffix), a, b, m.absolute, m.better, key, m.suffix))
    return Table(tuple(sorted((r for r in rows if r.significant), key=_moved)),
                 tuple(r for r in rows if not r.significant), tuple(unmatched), compared)


# The profiles' rows


@dataclass(frozen=True)
class ProfileRows:
    """A point's profiles set against each other (explain.Explanation) as rows: for each function named by
    its inclusive time, that (children), for each named by its own time, that (self); each as a share of
    every sample (idle included, as perf's own percentages are) and in CPU µs per unit of work."""

    point: PointKey
    unit: str
    trials: tuple[int, int]  # profiled trials a side: the replicates
    named: int  # functions the comparison named
    shown: int  # the first TOP_FUNCTIONS of them, which the rows are of
    rows: tuple[Row, ...]


def trial_profiles(rows: Sequence[dict[str, Any]], key: PointKey) -> list[Profile]:
    """One profile per trial of the point that counts, as explain.explain takes them."""
    kept = [r for r in rows if PointKey.of(r) == key and counts(r["status"] == "ok", bool(r.get("interfered")))
            and r.get("profile") and r.get("work")]
    return [p for r in kept if (p := Profile.of_points([r])) is not None]


@dataclass(frozen=True)
class Family:
    """A kind of profile row: perf-profile.<name>.<event or unit>.<function>."""

    name: str  # children (inclusive time) or self (own time), as perf report names them
    kind: str  # cpu-clock (a share of its samples, in percent) or us_per_op (CPU µs per unit of work)
    value: Callable[[float, float, float], float]  # of a function's own, inclusive and every sample's time
    named: Callable[[explain.FunctionDelta], bool]  # whose rows it has: the functions named by this time


def _by_own(f: explain.FunctionDelta) -> bool:
    return f.own.named


def _by_inclusive(f: explain.FunctionDelta) -> bool:
    return f.inclusive.named


FAMILIES = (
    Family("children", "cpu-clock", lambda own, inclusive, total: 100 * inclusive / total, _by_inclusive),
    Family("self", "cpu-clock", lambda own, inclusive, total: 100 * own / total, _by_own),
    Family("children", "us_per_op", lambda own, inclusive, total: inclusive, _by_inclusive),
    Family("self", "us_per_op", lambda own, inclusive, total: own, _by_own),
)


def profile_rows(found: explain.Explanation, a_rows: Sequence[dict[str, Any]],
                 b_rows: Sequence[dict[str, Any]]) -> ProfileRows:
    functions = found.functions[:TOP_FUNCTIONS]
    per_trial = []
    for side in (a_rows, b_rows):
        measured = []
        for p in trial_profiles(side, found.point):
            own, inclusive = p.self_time(), p.inclusive_time()
            total = p.us_per_unit(sum(p.stacks.values()))
            measured.append((own, inclusive, total))
        per_trial.append(measured)
    out = []
    for family in FAMILIES:
        rows = [row(metric_name(found.point, "perf-profile", family.name, family.kind, f.function),
                    *([family.value(own.get(f.function, 0.0), inclusive.get(f.function, 0.0), total)
                       for own, inclusive, total in side] for side in per_trial),
                    absolute=True, point=found.point, measure=f"{family.name}.{family.kind}")
                for f in functions if family.named(f)]
        out += sorted(rows, key=lambda r: (-abs(r.change), r.metric))
    return ProfileRows(found.point, found.unit, found.trials, len(found.functions), len(functions), tuple(out))


# The two sides


@dataclass(frozen=True)
class Side:
    """One side of a mail: the stored runs whose trials it pools and their points (with profiles); `run` names
    it (its kernel, commit, environment, plan and command): the run itself, or a level's run next to the
    change."""

    run: dict[str, Any]
    runs: tuple[dict[str, Any], ...]
    rows: tuple[dict[str, Any], ...]

    @property
    def info(self) -> RunInfo:
        return RunInfo.of(self.run)

    @property
    def ids(self) -> str:
        ids = [r["id"] for r in self.runs]
        return f"#{ids[0]}" if len(ids) == 1 else f"#{min(ids)}..#{max(ids)}"


def load_side(db: Store, runs: Sequence[dict[str, Any]], naming: dict[str, Any],
              selections: Sequence[str] = ()) -> Side:
    """The side made of these runs (their points with profiles, of the selections where given)."""
    rows = [r for run in runs for r in db.points(run["id"], with_profiles=True, with_samples=False)
            if not selections or selected(r["workload"], r["test"], list(selections))]
    return Side(naming, tuple(runs), tuple(rows))


def check_pair(a: dict[str, Any], b: dict[str, Any]) -> None:
    """Two runs a mail can set against each other: two, of one machine."""
    if a["id"] == b["id"]:
        raise UserError(f"mail was given run #{a['id']} twice: it compares two runs")
    ma, mb = (machine_of(r["environment"] or {}) for r in (a, b))
    if ma != mb:
        raise UserError(f"runs #{a['id']} and #{b['id']} ran on different machines ({_machine(ma)} and "
                        f"{_machine(mb)}): a mail reports what changed on one machine (`mosbench compare` sets "
                        "any runs side by side)")


def _machine(m: Machine) -> str:
    return one_line(m.describe(), 120)


class Naming(StrEnum):
    """What tells the two sides apart in the subject, the commit block and the table's columns."""

    COMMIT = "commit"  # both carry a kernel commit, and they differ
    KERNEL = "kernel"  # the kernel releases differ
    RUN = "run"  # the same kernel: the runs themselves


def naming(a: RunInfo, b: RunInfo) -> Naming:
    if a.commit and b.commit and a.commit != b.commit:
        return Naming.COMMIT
    return Naming.KERNEL if a.kernel != b.kernel else Naming.RUN


@dataclass(frozen=True)
class Commit:
    """A side's kernel commit, its subject where known, and the tree that does not hold it."""

    id: str
    subject: str | None
    missing_from: Path | None = None  # --tree, where it does not hold the commit: the subject is left out


# A commit as `mosbench run --commit` and bisect store it: its id's hex digits, whole or abbreviated.
_COMMIT_ID = re.compile(r"[0-9a-fA-F]{7,40}")


def commit_of(info: RunInfo, tree: Path | None) -> Commit | None:
    """The commit a side ran, its subject read from `tree` (only read), else the one a bisection stored with
    its step; None where the side carries no commit. Its id as stored, printable: only an id is looked up in
    the tree (a stored "HEAD" or "-x" is never given to git)."""
    if not info.commit:
        return None
    shown = one_line(info.commit, 60)
    if tree is not None:
        full = gitrepo.commit_id(tree, info.commit) if _COMMIT_ID.fullmatch(info.commit) else None
        if full is None:
            return Commit(shown, None, tree)
        return Commit(full, gitrepo.git(tree, "log", "-1", "--format=%s", full))
    stored = info.environment.get("bisect")
    subject = stored.get("subject") if isinstance(stored, dict) and stored.get("commit") == info.commit else None
    return Commit(shown, subject if isinstance(subject, str) else None)


def environment(a: Side, b: Side) -> list[tuple[str, str, str]]:
    """The environment's differences between the sides' naming runs, as compare orders them (kernel first),
    without the facts that differ between any two runs (history's TRANSIENT_FACTS)."""
    envs = [{k: v for k, v in (s.run["environment"] or {}).items() if k not in TRANSIENT_FACTS} for s in (a, b)]
    return [(key, va, vb) for key, (va, vb) in environment_differences(envs)]


# Explanations


@dataclass(frozen=True)
class Findings:
    table: Table
    profiles: tuple[ProfileRows, ...]  # the significant per-core changes whose sides were both profiled
    unprofiled: tuple[explain.Unprofiled, ...]  # and those a side of which was not

    @property
    def profile_commands(self) -> list[str]:
        return explain.profile_commands(self.unprofiled)


def findings(a: Side, b: Side, labels: tuple[str, str]) -> Findings:
    """The table, and every significant per-core change explained by the two sides' profiles."""
    found = table(a.rows, b.rows)
    grouped: list[dict[PointKey, list[dict[str, Any]]]] = [{}, {}]
    for side, rows in zip(grouped, (a.rows, b.rows), strict=True):
        for r in rows:
            side.setdefault(PointKey.of(r), []).append(r)
    specs = (kernel_spec(a.info), kernel_spec(b.info))
    kernels = specs if specs[0] != specs[1] else None
    profiles, unprofiled = [], []
    for r in found.significant:
        if r.measure != PER_CORE.suffix or r.point is None:
            continue
        sides = (grouped[0].get(r.point, []), grouped[1].get(r.point, []))
        said = explain.point(r.point, (a.run, b.run), sides, labels, kernels=kernels)
        if isinstance(said, explain.Explanation):
            profiles.append(profile_rows(said, *sides))
        else:
            unprofiled.append(said)
    return Findings(found, tuple(profiles), tuple(unprofiled))


# A history's changes


# The runs of each level nearest a history's change that a mail pools: each is a night of its own, and pooling
# a long level's trials as replicates would call every night-to-night drift between the levels significant.
LEVEL_RUNS = 3


@dataclass(frozen=True)
class Boundary:
    """A confirmed change of a history as a mail reports it: every shift at one boundary between runs, with
    the LEVEL_RUNS runs of the level before it nearest the change (oldest first: the last is next to it) and
    of the level after."""

    shifts: tuple[Shift, ...]
    before: tuple[RunInfo, ...]
    after: tuple[RunInfo, ...]


def boundaries(h: History) -> list[Boundary]:
    """Every boundary a confirmed change lies at, oldest first (the robot's one mail per commit: the shifts of
    every test at one boundary are one mail, whose table holds every point anyway)."""
    grouped: dict[tuple[int, int], list[Shift]] = {}
    for s in h.shifts:
        grouped.setdefault((s.before, s.after), []).append(s)
    out = []
    for (before, after), shifts in sorted(grouped.items(), key=lambda item: (item[0][1], item[0][0])):
        first = min(c.old_first for s in shifts for c in s.changes)
        last = max(c.new_last for s in shifts for c in s.changes)
        out.append(Boundary(tuple(shifts), tuple(h.runs[max(first, before + 1 - LEVEL_RUNS):before + 1]),
                            tuple(h.runs[after:min(last + 1, after + LEVEL_RUNS)])))
    return out


# To reproduce


@dataclass(frozen=True)
class Reproduction:
    how: str  # what the commands do, in a sentence
    commands: tuple[tuple[str, ...], ...]  # each an argv, as a shell would be given it


def _stored_command(run: dict[str, Any]) -> list[str] | None:
    try:
        return shlex.split(run.get("command") or "")
    except ValueError:  # unbalanced quotes: a command stored by hand
        return None


def _keys(rows: Sequence[dict[str, Any]]) -> list[PointKey]:
    return list(dict.fromkeys(PointKey.of(r) for r in rows))


# `mosbench run`'s options that `mosbench ab` has too: after the selections ab still takes them as its own
# (its --precision decides the A/B, the run's is --trials auto's), so where a run's are given they follow `--`.
AB_SHARED_OPTIONS = ("--precision",)


def ab_command(kernels: tuple[str, str], run_args: Sequence[str]) -> tuple[str, ...]:
    """`mosbench ab` between two kernels measuring with these `mosbench run` arguments, as ab parses them."""
    shared = any(arg.split("=")[0] in AB_SHARED_OPTIONS for arg in run_args)
    return ("mosbench", "ab", "--kernel", kernels[0], "--kernel", kernels[1], *(("--",) if shared else ()),
            *run_args)


def _stored_ab(argv: list[str] | None) -> tuple[str, ...] | None:
    """An A/B comparison's stored command (guest/ab.py writes `mosbench ab --kernel A --kernel B` and the run's
    arguments) rebuilt to parse as it measured: the run's --precision after `--`. None for any other command."""
    if not argv or argv[:3] != ["mosbench", "ab", "--kernel"] or len(argv) < 6 or argv[4] != "--kernel":
        return None
    return ab_command((argv[3], argv[5]), [arg for arg in argv[6:] if arg != "--"])


def reproduction(a: Side, b: Side, head: PointKey | None) -> Reproduction:
    """The mosbench commands that measure both sides again: the `mosbench ab` that did (both sides one A/B
    comparison's), `ab` between the two kernels at the head's point with B's settings, or, the kernel the same,
    `mosbench run` with each side's settings, one command per distinct side."""
    stored = [_stored_command(s.run) for s in (a, b)]
    if all((s.run["environment"] or {}).get("ab") for s in (a, b)) and stored[0] and stored[0] == stored[1]:
        return Reproduction("The `mosbench ab` that measured both sides, its kernels and run options as it "
                            "stored them:", (_stored_ab(stored[0]) or tuple(stored[0]),))
    specs = (kernel_spec(a.info), kernel_spec(b.info))
    if specs[0] != specs[1]:
        keys = [head] if head else _keys(b.rows)
        argv = ab_command(specs, run_arguments(b.run.get("plan") or {}, keys))
        where = "the point that moved most" if head else "the new side's points"
        return Reproduction(f"Kernel A against kernel B, booted in turn in one guest until decided, at {where} "
                            "with the new side's settings:", (argv,))
    commands = []
    for s in (a, b):
        argv = ["mosbench", "run", *run_arguments(s.run.get("plan") or {}, _keys(s.rows))]
        if s.info.commit:
            argv += ["--commit", s.info.commit]
        commands.append(tuple(argv))
    distinct = tuple(dict.fromkeys(commands))
    # Where the environments differ, that difference is what the sides measured: the reader sets it up again.
    set_up = " set up as that side was (the environment's differences below)" if environment(a, b) else ""
    if a.info.commit and b.info.commit and a.info.commit != b.info.commit:
        how = (f"The sides' kernels share a release ({specs[1]}) and differ by commit: each side's `mosbench run` "
               "on this machine booted into that side's kernel (--commit records which):")
    elif len(distinct) > 1:
        how = f"Both sides ran one kernel: each side's `mosbench run`, with its settings, on this machine{set_up}:"
    else:
        how = ("Both sides ran one kernel with the same settings: this `mosbench run` once for each side on this "
               f"machine{set_up}:")
    return Reproduction(how, distinct)


def run_arguments(plan: dict[str, Any], keys: Sequence[PointKey]) -> list[str]:
    """`mosbench run`'s selections and options that measure these points as the stored plan (read as any
    version wrote it) did: each setting it stored given, whatever its value."""
    selections = list(dict.fromkeys(test_name(k.workload, k.test) for k in keys))
    args = [*selections, "--cores", ",".join(str(n) for n in sorted({k.cores for k in keys})),
            "--variant", ",".join(dict.fromkeys(base_variant(k.variant) for k in keys))]
    if plan.get("trials_max"):
        args += ["--trials", f"auto:{plan['trials_max']}"]
        if plan.get("precision") is not None:
            args += ["--precision", f"{plan['precision'] * 100:g}"]
    elif plan.get("trials"):
        args += ["--trials", str(plan["trials"])]
    args += explain.setting_options(plan)
    if plan.get("max_interference") is not None and plan["max_interference"] != DEFAULT_THRESHOLD:
        args += ["--max-interference", f"{plan['max_interference'] * 100:g}"]
    if plan.get("retry_interfered"):
        args += ["--retry-interfered", str(plan["retry_interfered"])]
    for workload in dict.fromkeys(k.workload for k in keys):
        args += explain.param_options(workload, (plan.get("params") or {}).get(workload, {}))
    if profiled := plan.get("profile"):
        chosen = [s for s in selections if "all" in profiled or s in profiled or s.split("/")[0] in profiled]
        if chosen:
            args += ["--profile", ",".join(chosen)]
    return args
