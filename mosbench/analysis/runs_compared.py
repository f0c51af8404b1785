"""Stored runs compared, as `compare` and `ab` read them: the comparison of their points (analysis/compare)
and, where a point changed, why (analysis/explain). The profiles, the largest part of a point, are read
only where something changed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from mosbench.analysis import compare as comparing
from mosbench.analysis import explain
from mosbench.analysis.cells import Series, build_series
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


class AbExplained(NamedTuple):
    """ab's explanations: where A and B differ, why (or the command that would profile them); where the
    boots ran out with a point undecided on throughput, what moved in its profiles all the same."""

    differing: list[explain.Explained]
    undecided: list[explain.Explained]


def ab_explained(db: Store, runs: list[dict], found: comparing.Comparison,
                 decisions: Sequence[Decision]) -> AbExplained:
    """Each point's profiles on ab's two sides (every boot's trials replicates, with `--profile` among the
    run options), read once for both kinds. A differing point unprofiled gets the `mosbench ab … --profile`
    that would record it; an undecided one is told only where both sides were profiled: throughput spreads
    from boot to boot (an emulated guest's by half), while CPU time per unit of work by function, tested
    trial against trial, can still tell a spin lock grown from nothing."""
    differ = {d.point for d in decisions if d.state == State.DIFFER}
    unsure = {d.point for d in decisions if d.state == State.UNSURE}
    if not (points := differ | unsure):
        return AbExplained([], [])
    rows = _profiled(db, runs)
    labels = (found.labels[0], found.labels[1])
    explained = [explain.Explained(c, explain.point(c.point, (runs[0], runs[1]), (rows[0], rows[1]), labels))
                 for c in found.changes[0] if c.point in points]
    return AbExplained([x for x in explained if x.change.point in differ],
                       [x for x in explained if x.change.point in unsure and isinstance(x.found, explain.Explanation)])


def _profiled(db: Store, runs: list[dict]) -> list[list[dict]]:
    return [db.points(r["id"], with_profiles=True, with_samples=False) for r in runs]
