"""Stored runs compared, as `compare` and `ab` read them: the comparison of their points (analysis/compare)
and, where a point changed, why (analysis/explain). The profiles, the largest part of a point, are read
only where something changed."""

from __future__ import annotations

from collections.abc import Sequence

from mosbench.analysis import compare as comparing
from mosbench.analysis import explain
from mosbench.analysis.cells import PointKey, Series, build_series
from mosbench.analysis.decide import Decision, State
from mosbench.store.db import Store


def comparison(db: Store, runs: list[dict], include_interfered: bool = False
               ) -> tuple[comparing.Comparison, list[list[Series]]]:
    """The runs compared with the first, and each run's series."""
    series = [build_series(db.points(r["id"], with_samples=False)) for r in runs]
    return comparing.compare_runs(runs, series, comparing.run_labels(runs), include_interfered), series


def explained(db: Store, runs: list[dict], found: comparing.Comparison,
              include_interfered: bool = False) -> list[explain.Explained]:
    """Each significant change explained by its two sides' profiles, or the command that would profile them."""
    if not any(c.significant for run in found.changes for c in run):
        return []
    return explain.comparison(found, runs, _profiled(db, runs), include_interfered)


def differing_explained(db: Store, runs: list[dict], found: comparing.Comparison,
                        decisions: Sequence[Decision]) -> list[explain.Explained]:
    """Where ab's A and B differ, why: each point's profiles on the two sides (every boot's trials
    replicates, with `--profile` among the run options), or the `mosbench ab … --profile` that would
    record them."""
    return _explained(db, runs, found, {d.point for d in decisions if d.state == State.DIFFER})


def undecided_explained(db: Store, runs: list[dict], found: comparing.Comparison,
                        decisions: Sequence[Decision]) -> list[explain.Explained]:
    """Where ab's boots ran out with a point undecided on throughput, what moved in its profiles anyway:
    throughput spreads from boot to boot (an emulated guest's by half), while CPU time per unit of work
    by function, tested trial against trial, can still tell a spin lock grown from nothing. Only points
    profiled on both sides."""
    undecided = _explained(db, runs, found, {d.point for d in decisions if d.state == State.UNSURE})
    return [x for x in undecided if isinstance(x.found, explain.Explanation)]


def _explained(db: Store, runs: list[dict], found: comparing.Comparison,
               points: set[PointKey]) -> list[explain.Explained]:
    if not points:
        return []
    rows = _profiled(db, runs)
    labels = (found.labels[0], found.labels[1])
    return [explain.Explained(c, explain.point(c.point, (runs[0], runs[1]), (rows[0], rows[1]), labels))
            for c in found.changes[0] if c.point in points]


def _profiled(db: Store, runs: list[dict]) -> list[list[dict]]:
    return [db.points(r["id"], with_profiles=True, with_samples=False) for r in runs]
