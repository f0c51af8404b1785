"""Kernel A against kernel B on one machine: each booted in turn in the same guest (shape, memory,
vCPU placement), the same `mosbench run` inside each boot, rounds in the order A B B A A B B A …
so that a drift of the machine over the comparison falls on both sides alike.

After the first rounds every point is judged (analysis/decide): differ, same, or unsure. Unsure
points get two more rounds (A B, then B A, continuing the pattern) until all are decided or the round
budget ends; the outcome says which. Each side's rounds are then merged into one stored run, so
`mosbench compare`, `show` and `report` read an A/B comparison like any other pair of runs.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mosbench.analysis.cells import PointKey, counted_by_point
from mosbench.analysis.decide import Decision, State, decide_all
from mosbench.errors import UserError
from mosbench.guest.host import Guest, Shape, run_selection
from mosbench.guest.kernels import Kernel, config_differences
from mosbench.store.db import Store

PATTERN = (0, 1, 1, 0)  # A B B A: either side's mean round time is the same under a linear drift


def side_of(round_index: int) -> int:
    """0 for A, 1 for B; round_index counts from 0."""
    return PATTERN[round_index % len(PATTERN)]


class Booter:
    """One boot of a kernel per call, the same guest shape every time; each boot's run kept in the store."""

    def __init__(self, db: Store, shape: Shape, cgroup_version: int, run_args: list[str], timeout_s: float,
                 on_line: Callable[[str, float], None]):
        self.db = db
        self.shape = shape
        self.cgroup_version = cgroup_version
        self.run_args = run_args
        self.timeout_s = timeout_s
        self.on_line = on_line
        self.boots = 0
        self.boot_seconds: list[float] = []

    def measure(self, kernel: Kernel, label: str, **facts: Any) -> int:
        """The run this boot made, as this store's id; a guest that failed to measure is one UserError
        line (its run, if any, is kept)."""
        guest = Guest(self.shape, self.cgroup_version, kernel)
        run_args = self.run_args
        if not guest.kvm and not any(a.startswith("--max-interference") for a in run_args):
            # Under emulation the guest's tick-sampled CPU time and its cgroups' exact time part by up to
            # 15% (seen with a kernel that spins in udelay under a lock), which would mark every trial of
            # one side interfered and leave it out; what could interfere there is the host's load.
            run_args = [*run_args, "--max-interference", "100"]
        done = run_selection(self.db, guest, run_args, label, self.timeout_s, self.on_line, **facts)
        self.boots += 1
        self.boot_seconds.append(done.result.elapsed_s)
        if done.result.timed_out:
            raise UserError(f"the guest booting {kernel.describe()} did not finish within "
                            f"{self.timeout_s / 60:.0f} min and was stopped")
        if not done.imported:
            raise UserError(f"the guest booting {kernel.describe()} ended (exit {done.result.returncode}) without "
                            "a run: see its output above")
        return done.imported[-1]

    def samples(self, run_ids: list[int]) -> dict[PointKey, list[float]]:
        """The per-core throughputs that count of these boots' runs, by point."""
        out: dict[PointKey, list[float]] = {}
        for run_id in run_ids:
            for key, values in counted_by_point(self.db.points(run_id, with_samples=False)).items():
                out.setdefault(key, []).extend(values)
        return out


@dataclass
class Side:
    name: str  # A or B
    kernel: Kernel
    runs: list[int] = field(default_factory=list)


@dataclass
class Outcome:
    sides: list[Side]
    merged: list[int]  # one run per side, A's first
    decisions: list[Decision]
    rounds: int
    config_differences: list[tuple[str, str, str]]

    @property
    def decided(self) -> bool:
        return all(d.state != State.UNSURE for d in self.decisions)


def run(booter: Booter, a: Kernel, b: Kernel, first_rounds: int, max_rounds: int, precision: float,
        say: Callable[[str], None], merge: bool = True, names: tuple[str, str] = ("A", "B")) -> Outcome:
    sides = [Side(names[0], a), Side(names[1], b)]
    done = 0
    target = first_rounds
    decisions: list[Decision] = []
    while True:
        while done < target:
            side = sides[side_of(done)]
            say(f"round {done + 1} of {target} (at most {max_rounds}): {side.name}, {side.kernel.describe()}")
            side.runs.append(booter.measure(side.kernel, f"{side.name} {side.kernel.release} round {done + 1}",
                                            ab={"side": side.name, "round": done + 1}))
            done += 1
        decisions = decide_all(booter.samples(sides[0].runs), booter.samples(sides[1].runs), precision)
        unsure = [d for d in decisions if d.state == State.UNSURE]
        if not unsure or done >= max_rounds:
            break
        say(f"{len(unsure)} point(s) not yet decided (e.g. {unsure[0].name}: {unsure[0].text()}): two more rounds")
        target = min(done + 2, max_rounds)
    differences = config_differences(a, b)
    if not merge:
        return Outcome(sides, [], decisions, done, differences)
    # Every choice that shaped the runs, so the stored command runs this comparison again.
    command = shlex.join(["mosbench", "ab", "--kernel", a.spec, "--kernel", b.spec, "--shape", booter.shape.spec(),
                          "--rounds", str(first_rounds), "--max-rounds", str(max_rounds),
                          "--precision", f"{precision * 100:g}", "--boot-timeout", f"{booter.timeout_s / 60:g}",
                          *booter.run_args])
    merged = [booter.db.merge_runs(s.runs, f"{s.name}: {s.kernel.release}", command,
                                   ab={"side": s.name, "rounds": len(s.runs),
                                       "config_differences": [f"{k}: {x} → {y}" for k, x, y in differences]})
              for s in sides]
    return Outcome(sides, merged, decisions, done, differences)
