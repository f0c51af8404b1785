"""The scheduler's own counts for a group's threads: context switches and CPU migrations.

Veal & Foong (paper 002, section 5.2) ruled out migrations and load imbalance as causes before looking
further; a point needs the same figures. /proc/<tid>/sched (CONFIG_SCHED_DEBUG, as Debian builds)
keeps both per thread, for any thread, without perf or a PMU: `nr_switches` (voluntary and not) and
`se.nr_migrations`. A window's counts are differences per thread present at both ends; a thread born
inside the window counts from its birth, one that ended inside it is lost (its counts with it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class ThreadCounts:
    switches: int
    migrations: int


def parse(text: str) -> ThreadCounts | None:
    """The counts of one /proc/<tid>/sched; None when either line is missing."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("nr_switches", "se.nr_migrations"):
            try:
                found[key] = int(float(value.strip()))
            except ValueError:
                return None
    if len(found) < 2:
        return None
    return ThreadCounts(found["nr_switches"], found["se.nr_migrations"])


# Reading every thread's counts at a window's end must stay short. On a real machine of 256 CPUs a
# server per core is a few thousand threads, read in well under this; in an overcommitted guest, where
# the harness gets a sliver of a vCPU while the load runs, one read of 450 threads took minutes (and the
# client's own time limit ended the point). Past it the counts are given up for the point: None.
READ_BUDGET_S = 0.5


def read(tids: list[int], proc: Path = PROC, budget_s: float = READ_BUDGET_S) -> dict[int, ThreadCounts] | None:
    """Each listed thread's counts now (threads that ended meanwhile are left out); None where the kernel
    keeps no /proc/<tid>/sched, or where reading them all took longer than budget_s."""
    out: dict[int, ThreadCounts] = {}
    kept = False
    give_up = time.monotonic() + budget_s
    root = str(proc)
    for tid in tids:
        if time.monotonic() > give_up:
            return None
        try:
            with open(f"{root}/{tid}/sched") as f:
                counts = parse(f.read())
        except OSError:
            continue
        kept = True
        if counts is not None:
            out[tid] = counts
    if tids and not kept:
        return None
    return out


def window(before: dict[int, ThreadCounts], after: dict[int, ThreadCounts]) -> ThreadCounts:
    """Switches and migrations between two reads: per thread, from the first read or its birth."""
    switches = migrations = 0
    for tid, b in after.items():
        a = before.get(tid, ThreadCounts(0, 0))
        switches += max(0, b.switches - a.switches)
        migrations += max(0, b.migrations - a.migrations)
    return ThreadCounts(switches, migrations)
