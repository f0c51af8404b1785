"""Two or more runs side by side: what changed in the environment, then what changed in the numbers.

Every run is compared with the first (the baseline). The environment comes first, so a user sees that
the kernel, the CPU or a setting differs before reading any number. Points are matched by workload,
test, variant and core count; a change is the ratio of the mean per-core throughputs over the ok
trials, with a 95% interval and Welch's t-test (unequal variances), which needs two trials a side.
A change is flagged only where the test says it is significant: on machines that vary ±10% between
runs, a single difference of means says nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mosbench.analysis.cells import Cell, PointKey, Series, by_point

ALPHA = 0.05
# What a reader must see first when two runs differ, in this order; everything else after, sorted.
FIRST_KEYS = ("kernel", "kernel_version", "kernel_commit", "kernel_cmdline", "kernel_config", "cpu_model",
              "microcode", "topology_summary", "memory_bytes", "virtualization", "governor", "thp", "thp_defrag",
              "smt_control", "mitigations", "cgroups")
# Differ between any two runs and say nothing about the result.
IGNORED_KEYS = ("topology", "uid", "harness_scheduling")


def flatten(env: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested facts as dotted keys (sysctls.vm.swappiness, a workload's settings.<variant>.fsync)."""
    out: dict[str, str] = {}
    for key, value in env.items():
        name = f"{prefix}{key}"
        if not prefix and key in IGNORED_KEYS:
            continue
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value if isinstance(value, str) else json.dumps(value)
    return out


def environment_differences(environments: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """(key, each run's value) for every fact that is not the same in all runs; absent reads "–"."""
    flat = [flatten(e) for e in environments]
    keys = set().union(*flat)
    differing = [k for k in keys if len({f.get(k, "–") for f in flat}) > 1]

    def order(key: str) -> tuple[int, str]:
        top = key.split(".")[0]
        return (FIRST_KEYS.index(top) if top in FIRST_KEYS else len(FIRST_KEYS), key)

    return [(k, [f.get(k, "–") for f in flat]) for k in sorted(differing, key=order)]


@dataclass(frozen=True)
class Change:
    """One matched point: the baseline's and the other run's per-core throughputs, and the verdict."""

    point: PointKey
    base: tuple[float, ...]  # per-core throughput of each trial that counts (Cell.counted)
    other: tuple[float, ...]
    ratio: float | None  # mean(other) / mean(base)
    low: float | None  # its 95% interval
    high: float | None
    p: float | None  # Welch's t-test; None where a side has fewer than two trials
    note: str = ""

    @property
    def matched(self) -> bool:
        """Measured on both sides (ok, failed or interfered), so the row says something of both."""
        return not self.note.startswith("not measured in the ")

    @property
    def significant(self) -> bool:
        return self.p is not None and self.p < ALPHA

    @property
    def verdict(self) -> str:
        if self.ratio is None:
            return self.note
        if self.p is None:
            return "untested: " + self.note
        if not self.significant:
            return "no significant change"
        return "faster" if self.ratio > 1 else "slower"

    def regressed(self, percent: float) -> bool:
        """Significantly slower than the baseline by more than `percent` (the mean's ratio, not its interval)."""
        return self.significant and self.ratio is not None and self.ratio < 1 - percent / 100

    def as_json(self) -> dict[str, Any]:
        k = self.point
        return {"workload": k.workload, "test": k.test, "variant": k.variant, "cores": k.cores,
                "base": list(self.base), "other": list(self.other), "ratio": self.ratio, "low": self.low,
                "high": self.high, "p": self.p, "significant": self.significant, "verdict": self.verdict,
                "note": self.note}


def difference(base: list[float], other: list[float]) -> tuple[float, float | None, float | None, float | None]:
    """mean(other) - mean(base), Welch's 95% interval for it and Welch's p-value: the one test of two sets of
    trials (a throughput's, or a profile's function per unit of work: analysis/explain). With fewer than two
    values a side there is no variance to test against: interval and p are None."""
    a, b = np.asarray(base, dtype=float), np.asarray(other, dtype=float)
    delta = float(b.mean() - a.mean())
    if len(a) < 2 or len(b) < 2:
        return delta, None, None, None
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:  # every value identical on both sides: any difference is certain, none is nothing
        return delta, delta, delta, 1.0 if delta == 0 else 0.0
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    from scipy import stats  # here: history imports this module, and scipy.stats takes a second to import

    half = float(stats.t.ppf(1 - ALPHA / 2, df)) * se
    p = float(2 * stats.t.sf(abs(delta) / se, df))  # scipy's ttest_ind, without its warning on near-equal data
    return delta, delta - half, delta + half, p


def welch(base: list[float], other: list[float]) -> tuple[float, float | None, float | None, float | None]:
    """Ratio of means, its 95% interval and Welch's p-value.

    The interval is Welch's interval for the difference of means divided by the baseline's mean (the
    baseline's own uncertainty is in the difference's standard error). With fewer than two trials a
    side there is no variance to test against: interval and p are None.
    """
    ma = float(np.mean(base))
    delta, low, high, p = difference(base, other)
    ratio = (ma + delta) / ma
    if low is None or high is None:
        return ratio, None, None, None
    return ratio, (ma + low) / ma, (ma + high) / ma, p


def _usable(cell: Cell | None, include_interfered: bool) -> tuple[tuple[float, ...], int]:
    """A cell's per-core throughputs that may be compared, and how many interfered trials were left out."""
    if cell is None:
        return (), 0
    kept = tuple(cell.counted(include_interfered))
    return kept, len(cell.trials) - len(kept)


def changes(base: list[Series], other: list[Series], include_interfered: bool = False) -> list[Change]:
    """Every point of either run, the baseline's order first; interfered trials are left out unless asked
    for."""
    a, b = by_point(base), by_point(other)
    out = []
    for key in [*a, *(k for k in b if k not in a)]:
        ca, cb = a.get(key), b.get(key)
        (pa, left_a), (pb, left_b) = _usable(ca, include_interfered), _usable(cb, include_interfered)
        if not pa or not pb:
            missing = "baseline" if not pa else "other run"
            cell, left = (ca, left_a) if not pa else (cb, left_b)
            why = ("not measured" if cell is None else
                   "interfered (--include-interfered compares it)" if left else "failed")
            out.append(Change(key, pa, pb, None, None, None, None, f"{why} in the {missing}"))
            continue
        ratio, low, high, p = welch(list(pa), list(pb))
        notes = [] if p is not None else [f"{min(len(pa), len(pb))} trial: give --trials 2 or more"]
        if left_a or left_b:
            notes.append(f"{left_a + left_b} interfered trial{'s' if left_a + left_b > 1 else ''} left out")
        out.append(Change(key, pa, pb, ratio, low, high, p, "; ".join(notes)))
    return out


@dataclass(frozen=True)
class Comparison:
    labels: list[str]  # the baseline's first
    differences: list[tuple[str, list[str]]]
    changes: list[list[Change]]  # per run after the baseline, against it

    def shares_any(self) -> bool:
        """Whether any run after the baseline measured a point the baseline did too."""
        return any(c.matched for run in self.changes for c in run)


@dataclass(frozen=True)
class Unmatched:
    """What one side of a comparison measured that the other did not: points and their tests."""

    points: int
    tests: tuple[str, ...]

    def text(self) -> str:
        shown = ", ".join(self.tests[:6]) + (f" and {len(self.tests) - 6} more" if len(self.tests) > 6 else "")
        return f"{self.points} point{'s' if self.points != 1 else ''} ({shown})"


def unmatched(found: list[Change], side: str) -> Unmatched:
    """The points of `side` ("baseline" or "other run") that the other side never measured."""
    missing = [c for c in found if c.note == f"not measured in the {'other run' if side == 'baseline' else 'baseline'}"]
    tests = dict.fromkeys(c.point.name for c in missing)
    return Unmatched(len(missing), tuple(tests))


def regressions(found: Comparison, percent: float) -> list[tuple[str, Change]]:
    """Every matched point of every run significantly slower than the baseline by more than `percent`,
    with the run's label."""
    return [(label, c) for label, run in zip(found.labels[1:], found.changes, strict=True) for c in run
            if c.regressed(percent)]


def as_json(found: Comparison, fail_on: float | None,
            explanations: Mapping[tuple[str, PointKey], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The comparison for a CI system: the environment's differences, every matched point per run (a
    significant change with its explanation, by run label and point, where given), and, with a threshold,
    the regressions past it."""
    said = explanations or {}
    out: dict[str, Any] = {
        "baseline": found.labels[0], "alpha": ALPHA,
        "environment_differences": [{"key": k, "values": v} for k, v in found.differences],
        "runs": [{"label": label, "changes": [{**c.as_json(), **({"explanation": said[label, c.point]}
                                                                 if (label, c.point) in said else {})}
                                              for c in run]}
                 for label, run in zip(found.labels[1:], found.changes, strict=True)],
    }
    if fail_on is not None:
        out["fail_on_regression_percent"] = fail_on
        out["regressions"] = [{"run": label, **c.as_json()} for label, c in regressions(found, fail_on)]
    return out


def compare_runs(runs: list[dict[str, Any]], series: list[list[Series]], labels: list[str],
                 include_interfered: bool = False) -> Comparison:
    """Stored runs (with each run's series) compared with the first."""
    return Comparison(labels, environment_differences([r["environment"] for r in runs]),
                      [changes(series[0], s, include_interfered) for s in series[1:]])


def run_labels(runs: list[dict[str, Any]]) -> list[str]:
    """Each run's label, or #id; runs that share a label (two "quick" runs) get their ids beside it."""
    names = [r["label"] or f"#{r['id']}" for r in runs]
    return [f"{n} #{r['id']}" if names.count(n) > 1 and r["label"] else n for n, r in zip(names, runs, strict=True)]
