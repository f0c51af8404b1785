"""Processes as /proc shows them, read only: a process's stat fields, its CPU time, its children and every
process below it. A process that ends while it is read is not there."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name, which may hold spaces and parentheses: [0] the state,
    [1] the parent, [11] and [12] utime and stime in ticks, [19] the start time; None where it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def state(pid: int) -> str | None:
    """Its state letter (R, S, D, T, Z, ...); None where it is gone."""
    fields = stat_fields(pid)
    return fields[0] if fields else None


def cpu_seconds(pid: int) -> float:
    """User and system time of every thread of the process so far; ProcessLookupError where it is gone."""
    fields = stat_fields(pid)
    if fields is None:
        raise ProcessLookupError(f"no process {pid}")
    return (int(fields[11]) + int(fields[12])) / TICKS


def parents() -> dict[int, int]:
    """Every process's parent."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(IndexError, ValueError):
                if (fields := stat_fields(int(entry.name))) is not None:
                    found[int(entry.name)] = int(fields[1])
    return found


def children_of(pid: int) -> list[int]:
    """The processes whose parent is pid."""
    return sorted(p for p, parent in parents().items() if parent == pid)


def descendants(pid: int) -> dict[int, int]:
    """Every process below pid (its children, theirs, ...), each with its parent."""
    parent_of = parents()
    below: dict[int, int] = {}
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in parent_of.items() if parent in frontier}
        below.update((p, parent_of[p]) for p in frontier)
    return below
