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
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mosbench.analysis.cells import Cell, PointKey, Series, by_point
from mosbench.analysis.significance import ALPHA, Compared, Difference, welch
from mosbench.machine.journal import GUEST_SHARE_PREFIX
from mosbench.printable import printable

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


# A mosbench guest's command line names what changes with every boot: the host folder it mounts
# (mosbench-runvm-<random>) and virtme-ng's command for the guest (virtme.exec=, base64 of a command naming
# that folder and the round's label). Two boots of one kernel differ there and nowhere that matters.
_PER_BOOT = re.compile(f"(?<=\\b{re.escape(GUEST_SHARE_PREFIX)})\\w+|(?<=\\bvirtme\\.exec=)\\S+")


def _comparable(flat: dict[str, str]) -> dict[str, str]:
    if "kernel_cmdline" in flat:
        flat["kernel_cmdline"] = _PER_BOOT.sub("…", flat["kernel_cmdline"])
    return flat


def environment_differences(environments: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """(key, each run's value) for every fact that is not the same in all runs; absent reads "–"."""
    flat = [_comparable(flatten(e)) for e in environments]
    keys = set().union(*flat)
    differing = [k for k in keys if len({f.get(k, "–") for f in flat}) > 1]

    def order(key: str) -> tuple[int, str]:
        top = key.split(".")[0]
        return (FIRST_KEYS.index(top) if top in FIRST_KEYS else len(FIRST_KEYS), key)

    return [(k, [f.get(k, "–") for f in flat]) for k in sorted(differing, key=order)]


class Absence(StrEnum):
    """Why a point has no trials to compare on one side."""

    NOT_MEASURED = "not measured"
    FAILED = "failed"
    INTERFERED = "interfered (--include-interfered compares it)"


class Side(StrEnum):
    BASELINE = "baseline"
    OTHER = "other run"


@dataclass(frozen=True)
class Missing:
    """A side with nothing to compare, and why."""

    side: Side
    why: Absence

    def text(self) -> str:
        return f"{self.why} in the {self.side}"


@dataclass(frozen=True)
class Change(Compared):
    """One point of two runs: the baseline's and the other run's per-core throughputs, and the verdict."""

    point: PointKey
    base: tuple[float, ...]  # per-core throughput of each trial that counts (Cell.counted)
    other: tuple[float, ...]
    difference: Difference | None  # other against base; None where a side has nothing to compare
    missing: Missing | None = None  # the side that has nothing, where one has
    notes: tuple[str, ...] = ()  # what a reader should know of a compared point (one trial, interfered ones)

    @property
    def note(self) -> str:
        return self.missing.text() if self.missing is not None else "; ".join(self.notes)

    @property
    def matched(self) -> bool:
        """Measured on both sides (ok, failed or interfered), so the row says something of both."""
        return self.missing is None or self.missing.why is not Absence.NOT_MEASURED

    @property
    def verdict(self) -> str:
        if self.difference is None:
            return self.note
        if self.difference.p is None:
            return "untested: " + self.note
        if not self.difference.significant:
            return "no significant change"
        return "faster" if self.difference.ratio > 1 else "slower"

    def regressed(self, percent: float) -> bool:
        """Significantly slower than the baseline by more than `percent` (the mean's ratio, not its interval)."""
        return self.significant and self.difference is not None and self.difference.ratio < 1 - percent / 100

    def as_json(self) -> dict[str, Any]:
        k = self.point
        return {"workload": k.workload, "test": k.test, "variant": k.variant, "cores": k.cores,
                "base": list(self.base), "other": list(self.other), "ratio": self.ratio, "low": self.low,
                "high": self.high, "p": self.p, "significant": self.significant, "verdict": self.verdict,
                "note": self.note}


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
            side = Side.BASELINE if not pa else Side.OTHER
            cell, left = (ca, left_a) if not pa else (cb, left_b)
            why = Absence.NOT_MEASURED if cell is None else Absence.INTERFERED if left else Absence.FAILED
            out.append(Change(key, pa, pb, None, Missing(side, why)))
            continue
        d = welch(list(pa), list(pb))
        notes = [] if d.p is not None else [f"{min(len(pa), len(pb))} trial: give --trials 2 or more"]
        if left_a or left_b:
            notes.append(f"{left_a + left_b} interfered trial{'s' if left_a + left_b > 1 else ''} left out")
        out.append(Change(key, pa, pb, d, notes=tuple(notes)))
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


def unmatched(found: list[Change], side: Side) -> Unmatched:
    """The points of `side` that the other side never measured."""
    other = Side.OTHER if side is Side.BASELINE else Side.BASELINE
    missing = [c for c in found if c.missing == Missing(other, Absence.NOT_MEASURED)]
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
    """Each run's label, or #id; runs that share a label (two "quick" runs) get their ids beside it. A label
    is a name to show: its control characters and line breaks escaped (printable), as stored text is."""
    names = [printable(r["label"]) if r["label"] else f"#{r['id']}" for r in runs]
    return [f"{n} #{r['id']}" if names.count(n) > 1 and r["label"] else n for n, r in zip(names, runs, strict=True)]
