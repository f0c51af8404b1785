"""What a run measures: workload/test selections × variants × core counts × trials, and how."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from mosbench.analysis import precision
from mosbench.analysis.cells import PointKey, counted_by_point
from mosbench.analysis.precision import DEFAULT_PRECISION
from mosbench.errors import UserError
from mosbench.machine import interference
from mosbench.printable import one_line, quoted
from mosbench.workloads import registry
from mosbench.workloads.base import test_name


@dataclass(frozen=True)
class TrialKey(PointKey):
    """One trial of a point: what the sweep measures and the store keeps as a row."""

    trial: int

    @property
    def point(self) -> PointKey:
        return PointKey(self.workload, self.test, self.variant, self.cores)

    def label(self) -> str:
        return f"{self.name} {self.variant} {self.cores} cores trial {self.trial}"


@dataclass
class Plan:
    """A run's plan; its defaults are `mosbench run`'s (the command's options read them here)."""

    selections: list[tuple[str, str]]  # (workload, test); test "" for a workload without tests
    variants: dict[str, list[str]]  # per workload
    cores: list[int]
    trials: int = 3
    warmup: float = 2.0
    duration: float = 5.0
    interval: float = 1.0  # sampling period; 0 samples only the window's ends
    placement: str = "pack"
    isolation: str = "cgroup"
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    # --profile: the selections whose points are profiled (run/profiler.py); ["all"] for every point
    profile: list[str] = field(default_factory=list)
    # A point whose CPUs other programs used for more than this share of its CPU time is interfered
    # (machine/interference.py), and measured again up to retry_interfered times.
    max_interference: float = interference.DEFAULT_THRESHOLD
    retry_interfered: int = 0
    # --trials auto[:MAX]: `trials` first, then more, a round at a time, for every point whose 95%
    # interval is wider than ±precision of its mean, up to trials_max. 0: exactly `trials`.
    trials_max: int = 0
    precision: float = DEFAULT_PRECISION

    @property
    def auto(self) -> bool:
        return self.trials_max > 0

    def points(self) -> list[TrialKey]:
        """Variants innermost, so a stock/scalable pair is measured side by side in time. With --trials
        auto, trials outermost: every point's first trial, then every point's second, …, so drift over
        the run spreads across a point's trials instead of looking like precision."""
        keys = []
        for w, t in self.selections:
            wl = registry.get(w)
            has = set(wl.variants_for(t))
            keys.extend(TrialKey(w, t, v, n, trial) for n in self.cores for trial in range(1, self.trials + 1)
                        for v in self.variants[w] if v in has and wl.measures(t, v, n))
        if self.auto:
            keys.sort(key=lambda k: k.trial)  # stable: within a round, the order above
        return keys

    def next_round(self, stored: list[dict[str, Any]]) -> list[TrialKey]:
        """--trials auto: one more trial of each point that is not yet sure enough (analysis/precision),
        judged on the run's stored points."""
        if not self.auto:
            return []
        counted = counted_by_point(stored)
        taken: dict[PointKey, int] = {}
        for p in stored:
            key = PointKey.of(p)
            taken[key] = max(taken.get(key, 0), p["trial"])
        wanted = []
        for k in self.points():
            if k.trial != 1:
                continue
            cell = precision.Cell(taken.get(k.point, 0), counted.get(k.point, []))
            if cell.taken >= self.trials and cell.wants_more(self.precision, self.trials_max):
                wanted.append(replace(k, trial=cell.taken + 1))
        return wanted

    def trials_text(self) -> str:
        if not self.auto:
            return f"{self.trials} trials"
        return f"{self.trials} to {self.trials_max} trials until ±{self.precision:.1%}"

    def seconds(self, keys: list[TrialKey]) -> float:
        """About how long these points take: each one's warm-up, window and setup."""
        return sum(self.warmup + self.duration + 0.5 + registry.get(k.workload).setup_seconds(
            k.test, self.params.get(k.workload, {})) for k in keys)

    def profiled(self, key: TrialKey) -> bool:
        return any(s in ("all", key.workload, key.name) for s in self.profile)

    def to_json(self) -> dict[str, Any]:
        return {"version": PLAN_VERSION, **asdict(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        """A stored plan, brought up to this mosbench's version (a plan without one is version 1)."""
        data = dict(data)
        version = data.pop("version", 1)
        if version > PLAN_VERSION:
            raise UserError(f"the run's plan is version {version}, newer than this mosbench's ({PLAN_VERSION})")
        for v in range(version, PLAN_VERSION):
            data = PLAN_MIGRATIONS[v - 1](data)
        data["selections"] = [tuple(s) for s in data["selections"]]
        return cls(**data)


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """micro's tests took will-it-scale's names, and some old names now mean other tests (open1 and open2
    swapped): points measured under the old names cannot be finished under the new."""
    if any(w == "micro" for w, _ in data["selections"]):
        raise UserError("this run's micro tests were planned under mosbench's old test names (before they took "
                        "will-it-scale's); its micro points cannot be resumed: start a new run")
    return data


# PLAN_MIGRATIONS[i] takes a stored plan from version i+1 to i+2, like the store's schema migrations.
PLAN_MIGRATIONS: list[Callable[[dict[str, Any]], dict[str, Any]]] = [_v1_to_v2]
PLAN_VERSION = len(PLAN_MIGRATIONS) + 1


AUTO_MAX_TRIALS = 10
AUTO_MIN_TRIALS = 3  # the fewest whose interval says anything: with two, t is 12.7


def parse_trials(spec: str) -> tuple[int, int]:
    """--trials: "N" is exactly N; "auto" or "auto:MAX" is (AUTO_MIN_TRIALS, MAX), never fewer than
    the minimum's."""
    text = spec.strip().lower()
    if text.isdigit():
        n = int(text)
        if not 1 <= n <= 100:
            raise UserError(f"--trials {one_line(spec, 100)}: give 1 to 100 trials, or auto[:MAX]")
        return n, 0
    name, _, most = text.partition(":")
    if name != "auto" or (most and not most.isdigit()):
        raise UserError(f"--trials {one_line(spec, 100)}: expected a number of trials or auto[:MAX] (e.g. auto:20)")
    top = int(most) if most else AUTO_MAX_TRIALS
    if not AUTO_MIN_TRIALS <= top <= 100:
        raise UserError(f"--trials {one_line(spec, 100)}: MAX must be {AUTO_MIN_TRIALS} to 100")
    return AUTO_MIN_TRIALS, top


def _tests_named(name: str, known: list[str]) -> list[str]:
    """The tests among `known` (its workload's) that a selection `name` (workload or workload/test) names;
    an unknown test is a UserError."""
    wname, _, test = name.partition("/")
    if not test:
        return known
    # A test's name may have parts (commute/open-open/diffname-samedir): a leading part selects them all.
    chosen = [test] if test in known else [t for t in known if t.startswith(test + "/")]
    if not chosen:
        raise UserError(f"unknown test {quoted(name)} (see `mosbench list {one_line(wname, 100)}`)")
    return chosen


def resolve_selections(names: list[str]) -> list[tuple[str, str]]:
    """"micro" → every micro test; "micro/open1" → that one; an unknown name is a UserError."""
    selections: list[tuple[str, str]] = []
    for name in names:
        wname = name.partition("/")[0]
        w = registry.get(wname)
        w.check_available()
        for t in _tests_named(name, [t.name for t in w.tests()]):
            if (wname, t) not in selections:
                selections.append((wname, t))
    if not selections:
        raise UserError("nothing to run: name a workload, e.g. `mosbench run micro`")
    return selections


def stored_selections(names: list[str]) -> list[str]:
    """Selections of stored points (history's), named as `run` names them: an unknown workload or test is
    a UserError, and a leading part of a test's name is every test it leads (commute/open-open: each
    open-open situation), written out whole. Nothing need be built: where a workload cannot list its tests
    here (its native program missing), a test is taken as named."""
    chosen: list[str] = []
    for name in names:
        wname, _, test = name.partition("/")
        known = [t.name for t in registry.get(wname).tests()]
        chosen += [test_name(wname, t) for t in _tests_named(name, known)] if test and known else [name]
    return list(dict.fromkeys(chosen))


def resolve_variants(selections: list[tuple[str, str]], wanted: list[str] | None) -> dict[str, list[str]]:
    """--variant's names per selected workload: a plain name applies to every workload (each must have
    it); WORKLOAD.NAME to that workload alone, the others keeping all of theirs (`make bench`'s
    `--variant fxmark.tmpfs,fxmark.ext4` beside micro and scale)."""
    selected = list(dict.fromkeys(w for w, _ in selections))
    plain = [v for v in wanted or [] if "." not in v]
    qualified: dict[str, list[str]] = {}
    for v in wanted or []:
        if "." in v:
            wname, name = v.split(".", 1)
            if wname not in selected:
                raise UserError(f"--variant {one_line(v, 100)}: workload {one_line(wname, 100)} is not among this "
                                "run's selections")
            qualified.setdefault(wname, []).append(name)
    result: dict[str, list[str]] = {}
    for wname in selected:
        w = registry.get(wname)
        known = [v.name for v in w.variants]
        mine = qualified.get(wname) or plain
        if not mine:
            result[wname] = known
            continue
        unknown = [v for v in mine if v not in known]
        if unknown:
            raise UserError(f"workload {wname} has no variant {quoted(unknown[0])} (it has {', '.join(known)})")
        result[wname] = list(mine)
        for w_name, test in selections:
            if w_name == wname and not set(mine) & set(w.variants_for(test)):
                raise UserError(f"{test_name(wname, test)} has none of the variants {', '.join(mine)} "
                                f"(it has {', '.join(w.variants_for(test))})")
    return result


def resolve_profile(selections: list[tuple[str, str]], spec: str | None) -> list[str]:
    """--profile's value: "all", or workloads and workload/tests among those the run selects."""
    if spec is None:
        return []
    if spec == "all":
        return ["all"]
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    chosen = {w for w, _ in selections} | {test_name(w, t) for w, t in selections}
    for s in wanted:
        if s not in chosen:
            raise UserError(f"--profile {one_line(s, 100)}: not among this run's selections "
                            f"({', '.join(sorted(chosen))})")
    return wanted


def resolve_params(selections: list[tuple[str, str]], settings: list[str]) -> dict[str, dict[str, Any]]:
    """-p name=value (applies to every selected workload that has it) or -p workload.name=value."""
    result: dict[str, dict[str, Any]] = {}
    wnames = list(dict.fromkeys(w for w, _ in selections))
    for wname in wnames:
        result[wname] = {p.name: p.default for p in registry.get(wname).params}
    for s in settings:
        key, eq, value = s.partition("=")
        if not eq:
            raise UserError(f"bad parameter {quoted(s)}: expected name=value")
        scope, _, pname = key.rpartition(".")
        targets = [scope] if scope else wnames
        matched = False
        for wname in targets:
            if wname not in result:
                raise UserError(f"parameter {quoted(s)} names workload {quoted(wname)}, which is not in this run")
            for p in registry.get(wname).params:
                if p.name == pname:
                    try:
                        result[wname][pname] = p.parse(value)
                    except ValueError:
                        raise UserError(f"bad value for {one_line(key, 100)}: {quoted(value)}") from None
                    matched = True
        if not matched:
            raise UserError(f"no selected workload has a parameter {quoted(pname)} (see `mosbench list`)")
    return result
