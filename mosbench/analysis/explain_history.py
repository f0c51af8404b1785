"""Why each change a history found happened: the profiled runs nearest each side of it set against each
other as `compare` sets two runs (analysis/explain), or the command that would profile them.

A change is a boundary between two levels of one point (history.Change: the old level's runs first …
before, the new one's after … last). A side's profiles are those of the runs nearest the boundary, within
its level, that hold profiled trials of the point, taken outward until REPLICATES trials (each profiled
trial is a replicate): every run of a level measured it at that level, and the nearest are the most alike
in everything else. Where a side holds none, the command that would profile it: `mosbench ab --kernel A
--kernel B` where the two sides ran different kernels (one command measures both; a kernel as `ab` takes
it, kernel_spec), else `mosbench run --profile` with the nearest run's settings. Two kernels that read
alike (a tree rebuilt at another commit under the same release) cannot be named apart, and get the
latter: it profiles the point on whatever kernel runs then.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from mosbench.analysis import explain
from mosbench.analysis.cells import PointKey
from mosbench.analysis.explain import REPLICATES, Explanation, Unprofiled
from mosbench.analysis.history import Change, History, RunInfo, Shift
from mosbench.store.db import Store, points


@dataclass(frozen=True)
class HistoryExplained:
    """One confirmed change of a history (a point at one core count) with why, or the command that would
    say why."""

    shift: Shift
    change: Change
    before: RunInfo  # the last run of the old level and the first of the new
    after: RunInfo
    sides: tuple[tuple[int, ...], tuple[int, ...]]  # the profiled runs pooled a side, oldest first
    found: Explanation | Unprofiled

    @property
    def point(self) -> PointKey:
        k = self.shift.key
        return PointKey(k.workload, k.test, k.variant, self.change.cores)

    def as_json(self) -> dict[str, Any]:
        return {"cores": self.change.cores, "a_runs": list(self.sides[0]), "b_runs": list(self.sides[1]),
                **self.found.as_json()}


def profiled_trials(db: Store, run_ids: Sequence[int], key: PointKey) -> dict[int, int]:
    """The trials of `key` that count and hold a profile, by run, without reading a profile: history's
    store may hold hundreds of profiled runs."""
    if not run_ids:
        return {}
    profile = sa.cast(points.c.profile, sa.Text)  # a profile stored as None reads 'null', not NULL
    query = (sa.select(points.c.run_id, sa.func.count())
             .where(points.c.run_id.in_(list(run_ids)), points.c.workload == key.workload,
                    points.c.test == key.test, points.c.variant == key.variant, points.c.cores == key.cores,
                    points.c.status == "ok", points.c.interfered.isnot(True), points.c.work.isnot(None),
                    profile.isnot(None), profile != "null")
             .group_by(points.c.run_id))
    with db.engine.connect() as conn:
        return {int(run_id): int(n) for run_id, n in conn.execute(query)}


def kernel_spec(run: RunInfo) -> str:
    """The kernel a run ran, as `mosbench ab --kernel` takes it: the image a guest booted, else the release
    (an installed kernel's name in /boot)."""
    vm = run.environment.get("virtual_machine")
    return str(vm.get("kernel_image") or run.kernel) if isinstance(vm, dict) else run.kernel


def nearest(outward: Sequence[int], trials: dict[int, int], want: int = REPLICATES) -> list[int]:
    """The runs (ids, nearest the boundary first) whose profiled trials add up to `want`, or all there are."""
    picked, n = [], 0
    for run_id in outward:
        if trials.get(run_id):
            picked.append(run_id)
            n += trials[run_id]
            if n >= want:
                break
    return picked


def explained(db: Store, h: History) -> list[HistoryExplained]:
    """Every confirmed change of the history, by shift and core count, explained by the profiled runs
    nearest each side; each run's profiles read once, and only where a change uses them."""
    rows: dict[int, dict[PointKey, list[dict[str, Any]]]] = {}
    stored: dict[int, dict[str, Any]] = {}

    def rows_of(run_id: int, key: PointKey) -> list[dict[str, Any]]:
        if run_id not in rows:
            by_key: dict[PointKey, list[dict[str, Any]]] = {}
            for r in db.points(run_id, with_profiles=True, with_samples=False):
                by_key.setdefault(PointKey.of(r), []).append(r)
            rows[run_id] = by_key
        return rows[run_id].get(key, [])

    def run_of(run_id: int) -> dict[str, Any]:
        if run_id not in stored:
            stored[run_id] = db.run(run_id)
        return stored[run_id]

    out = []
    for shift in h.shifts:
        for change in shift.changes:
            key = PointKey(shift.key.workload, shift.key.test, shift.key.variant, change.cores)
            before, after = h.runs[change.before], h.runs[change.after]
            old = [r.id for r in reversed(h.runs[change.old_first:change.before + 1])]
            new = [r.id for r in h.runs[change.after:change.new_last + 1]]
            trials = profiled_trials(db, old + new, key)
            a, b = nearest(old, trials)[::-1], nearest(new, trials)
            labels = ("+".join(f"#{i}" for i in a) or before.name, "+".join(f"#{i}" for i in b) or after.name)
            side_rows = ([r for i in a for r in rows_of(i, key)], [r for i in b for r in rows_of(i, key)])
            specs = (kernel_spec(before), kernel_spec(after))
            kernels = specs if specs[0] != specs[1] else None
            found = explain.point(key, (run_of(before.id), run_of(after.id)), side_rows, labels, kernels=kernels)
            out.append(HistoryExplained(shift, change, before, after, (tuple(a), tuple(b)), found))
    return out


def add_to_json(data: dict[str, Any], h: History, found: list[HistoryExplained]) -> dict[str, Any]:
    """history --json (report.history.as_json: a change per shift, in order) with each change's
    explanations in it, one per core count it was confirmed at."""
    for c, shift in zip(data["changes"], h.shifts, strict=True):
        c["explanations"] = [x.as_json() for x in found if x.shift is shift]
    return data
