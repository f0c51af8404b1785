"""A stored profile read back: the trials' folded stacks added up, CPU µs per unit of work by function,
and what grew from the fewest cores to the most. Reads only what the store holds, so a run is
analysed again on a machine without perf (the recording is `mosbench.run.profiler`).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mosbench.analysis.cells import SeriesKey

KERNEL = "_[k]"  # the suffix of a kernel frame in a folded stack
IDLE_COMMS = ("swapper",)
C2C_LINES = 10  # shared cache lines kept when trials are added up
C2C_CODE = 8  # code rows kept per line


@dataclass
class Profile:
    """A point's (or several trials') samples per stack, and the work they were spent on."""

    stacks: Counter[str] = field(default_factory=Counter)
    period_ns: float = 0.0
    work: float = 0.0  # units of work done while the samples were taken
    pmu: dict[str, float] = field(default_factory=dict)
    pmu_absent: str | None = None
    locks: dict[str, dict[str, Any]] = field(default_factory=dict)  # by caller: type, contended, wait, stack
    locks_work: float = 0.0  # the warm-ups' work, over which the locks were traced
    locks_absent: str | None = None
    c2c_hitm: float = 0.0  # perf c2c's sampled HITM loads (local and remote), over the trials that had c2c
    c2c_loads: float = 0.0  # its sampled loads, which the HITMs are a share of
    c2c_work: float = 0.0  # the work of the trials that had c2c, which the HITMs are counted against
    c2c_lines: list[dict[str, Any]] = field(default_factory=list)  # most HITMs first: address, counts, code
    c2c_absent: str | None = None

    @classmethod
    def of_points(cls, points: list[dict[str, Any]]) -> Profile | None:
        """The trials' profiles added up (their stacks and their work), or None where none has one."""
        out = cls()
        for p in points:
            prof = p.get("profile")
            if not prof or not p.get("work"):
                continue
            out.stacks.update(prof["stacks"])
            out.period_ns = prof["period_ns"] or out.period_ns
            out.work += p["work"]
            for k, v in prof.get("pmu", {}).items():
                out.pmu[k] = out.pmu.get(k, 0.0) + v
            out.pmu_absent = prof.get("pmu_absent", out.pmu_absent)
            out.locks_absent = prof.get("locks_absent", out.locks_absent)
            out.locks_work += prof.get("locks_work", 0.0) if prof.get("locks") is not None else 0.0
            for lock in prof.get("locks", []):
                mine = out.locks.setdefault(lock["caller"], {"type": lock["type"], "contended": 0,
                                                             "wait_total_us": 0.0, "stack": lock["stack"]})
                mine["contended"] += lock["contended"]
                mine["wait_total_us"] += lock["wait_total_us"]
            out._add_c2c(prof, p["work"])
        out.c2c_lines = merge_lines(out.c2c_lines)  # cut once all trials are in, not trial by trial
        return out if out.work > 0 and out.stacks else None

    def _add_c2c(self, prof: dict[str, Any], work: float) -> None:
        """A trial's c2c added to the others': totals, and its lines merged by address with theirs."""
        self.c2c_absent = prof.get("c2c_absent", self.c2c_absent)
        report = prof.get("c2c")
        if report is None:
            return
        self.c2c_hitm += report.get("totals", {}).get("hitm", 0)
        self.c2c_loads += report.get("totals", {}).get("loads", 0)
        self.c2c_work += work
        self.c2c_lines = merge_lines([*self.c2c_lines, *report.get("lines", [])], keep=None)

    def hitm_per_unit(self) -> float | None:
        """perf c2c's sampled HITM loads per unit of work, or None where c2c was not recorded."""
        return self.c2c_hitm / self.c2c_work if self.c2c_work > 0 else None

    def us_per_unit(self, samples: float) -> float:
        return samples * self.period_ns / 1e3 / self.work

    def self_time(self, skip_idle: bool = True) -> dict[str, float]:
        """CPU µs per unit of work by function, counting only the innermost frame (its own time)."""
        out: Counter[str] = Counter()
        for stack, n in self.stacks.items():
            frames = stack.split(";")
            if skip_idle and frames[0] in IDLE_COMMS:
                continue
            out[frames[-1]] += n
        return {k: self.us_per_unit(n) for k, n in out.items()}

    def inclusive_time(self) -> dict[str, float]:
        """CPU µs per unit of work by function, counting every stack it is on (itself and what it called),
        once per stack however often it recurs; the command (a stack's first frame) is not a function."""
        out: dict[str, int] = {}
        get = out.get
        for stack, n in self.stacks.items():
            for f in _functions_on(stack):
                out[f] = get(f, 0) + n
        return {k: self.us_per_unit(n) for k, n in out.items()}

    def busy_time(self) -> float:
        """CPU µs per unit of work of every busy sample: what self_time adds up to."""
        return self.us_per_unit(sum(n for k, n in self.stacks.items() if k.split(";", 1)[0] not in IDLE_COMMS))

    def lock_waits(self) -> list[tuple[str, dict[str, Any], float, float]]:
        """Contended kernel locks by caller, most waited on first: (caller, record, wait µs per unit of
        work, contentions per unit)."""
        if self.locks_work <= 0:
            return []
        rows = [(c, r, r["wait_total_us"] / self.locks_work, r["contended"] / self.locks_work)
                for c, r in self.locks.items()]
        return sorted(rows, key=lambda row: row[2], reverse=True)

    def perf_share(self) -> float:
        """perf's own share of the busy samples on the measured CPUs: what profiling took from them
        that the samples can see (the sampling interrupt itself they cannot: `make bench-profile`)."""
        busy = {k: n for k, n in self.stacks.items() if k.split(";", 1)[0] not in IDLE_COMMS}
        ours = sum(n for k, n in busy.items() if k.split(";", 1)[0].startswith("perf"))
        return ours / max(sum(busy.values()), 1)

    def leaf_comms(self) -> dict[str, str]:
        """For each function, the command whose samples it had most of its own time in."""
        by: dict[str, Counter[str]] = {}
        for stack, n in self.stacks.items():
            frames = stack.split(";")
            by.setdefault(frames[-1], Counter())[frames[0]] += n
        return {f: c.most_common(1)[0][0] for f, c in by.items()}

    def hardware_per_unit(self) -> dict[str, float]:
        """Cycles, instructions and cache misses per unit of work, and instructions per cycle."""
        out = {f"{k}_per_unit": v / self.work for k, v in self.pmu.items()}
        if self.pmu.get("cycles") and "instructions" in self.pmu:
            out["ipc"] = self.pmu["instructions"] / self.pmu["cycles"]
        return out


@functools.lru_cache(maxsize=1 << 16)
def _functions_on(stack: str) -> frozenset[str]:
    """The functions a folded stack passes through, once each; none for the idle task's. Cached: every
    trial of a point, and both sides of a comparison, sample the same stacks."""
    frames = stack.split(";")
    return frozenset() if frames[0] in IDLE_COMMS else frozenset(frames[1:])


def merge_lines(lines: list[dict[str, Any]], keep: int | None = C2C_LINES) -> list[dict[str, Any]]:
    """Cache lines of several reports added up by address (their counts, and their code rows by offset,
    symbol and source), most HITMs first; with keep, the first keep lines and C2C_CODE rows of each."""
    merged: dict[str, dict[str, Any]] = {}
    for line in lines:
        mine = merged.setdefault(line["address"], {"address": line["address"], "hitm": 0, "hitm_local": 0,
                                                   "hitm_remote": 0, "stores": 0, "code": []})
        for k in ("hitm", "hitm_local", "hitm_remote", "stores"):
            mine[k] += line.get(k) or 0
        mine["code"] = _merge_code([*mine["code"], *line.get("code", [])], None if keep is None else C2C_CODE)
    return sorted(merged.values(), key=lambda line: line["hitm"], reverse=True)[:keep]


def _merge_code(rows: list[dict[str, Any]], keep: int | None) -> list[dict[str, Any]]:
    merged: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        key = (row.get("offset"), row.get("symbol"), row.get("source"))
        mine = merged.setdefault(key, {"offset": row.get("offset"), "symbol": row.get("symbol"),
                                       "dso": row.get("dso"), "source": row.get("source"), "hitm": 0,
                                       "stores": 0, "records": 0})
        for k in ("hitm", "stores", "records"):
            mine[k] += row.get(k) or 0
    return sorted(merged.values(), key=lambda r: (r["hitm"], r["records"]), reverse=True)[:keep]


@dataclass(frozen=True)
class Growth:
    function: str
    low_us: float  # CPU µs per unit of work at the fewest cores
    high_us: float  # at the most

    @property
    def change_us(self) -> float:
        return self.high_us - self.low_us


Measure = Callable[[Profile], dict[str, float]]


def sides(a: Sequence[Profile], b: Sequence[Profile],
          measure: Measure = Profile.self_time) -> dict[str, tuple[list[float], list[float]]]:
    """Each function's CPU µs per unit of work (`measure`: own time, or inclusive) in every profile of
    either side, 0 where a profile has none of it: the one way profiles are set against each other, by
    the sweep (growth: a profile a side, the fewest cores and the most) and between runs
    (analysis/explain: a profile a trial, each a replicate)."""
    ma, mb = [measure(p) for p in a], [measure(p) for p in b]
    names = set().union(*ma, *mb)
    return {f: ([m.get(f, 0.0) for m in ma], [m.get(f, 0.0) for m in mb]) for f in names}


def growth(low: Profile, high: Profile, top: int = 12) -> list[Growth]:
    """The functions whose own CPU time per unit of work grew most from the fewest cores to the most."""
    rows = [Growth(f, a[0], b[0]) for f, (a, b) in sides([low], [high]).items()]
    return sorted(rows, key=lambda g: g.change_us, reverse=True)[:top]


# A run's profiles: by series, then by core count.
BySeries = dict[SeriesKey, dict[int, Profile]]


def by_series(points: list[dict[str, Any]]) -> BySeries:
    """Each series' profiles by core count, the ok trials' added up."""
    grouped: dict[SeriesKey, dict[int, list[dict[str, Any]]]] = {}
    for p in points:
        if p["status"] == "ok" and p.get("profile"):
            key = SeriesKey(p["workload"], p["test"], p["variant"])
            grouped.setdefault(key, {}).setdefault(p["cores"], []).append(p)
    out: BySeries = {}
    for key, by_cores in grouped.items():
        found = {n: prof for n, pts in by_cores.items() if (prof := Profile.of_points(pts)) is not None}
        if found:
            out[key] = found
    return out
