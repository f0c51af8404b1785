"""System calls of a server's processes by kind, counted by the kernel's syscall tracepoints.

`perf stat` attached to the server's processes, started with its events disabled and enabled over
exactly the interval the workload chooses through perf's control FIFO (it acknowledges each switch),
so counts divided by that interval's work are system calls per unit of work. Each tracepoint hit
costs the calling process kernel time, so a workload counts outside its measured window. Where perf
or the tracepoints are missing (no linux-perf, no tracefs, too little privilege) the counts are
absent with the reason, never zero.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import subprocess
from pathlib import Path

from mosbench.launch.perfctl import PerfControl
from mosbench.launch.processes import Launcher
from mosbench.machine.isolation import Group

# The calls a database or server spends its kernel time in; "all" counts every call (raw_syscalls).
KINDS = ("lseek", "read", "pread64", "write", "pwrite64", "sendto", "recvfrom", "epoll_wait", "futex")
ALL = "all"


def event(kind: str) -> str:
    return "raw_syscalls:sys_enter" if kind == ALL else f"syscalls:sys_enter_{kind}"


@functools.cache
def unavailable() -> str | None:
    """Why system calls cannot be counted here, or None when they can."""
    if not shutil.which("perf"):
        return "perf is not installed (Debian: linux-perf)"
    probe = subprocess.run(["perf", "stat", "-x,", "-e", event("lseek"), "true"], capture_output=True, text=True,
                           timeout=30)
    said = probe.stderr.strip().splitlines()
    if probe.returncode != 0 or any("not supported" in line or "<not" in line for line in said):
        return f"perf cannot count syscall tracepoints: {said[-1] if said else f'status {probe.returncode}'}"
    return None


class SyscallCounter(PerfControl):
    """perf stat on pids, counting only between enable() and disable()."""

    def __init__(self, launcher: Launcher, group: Group, pids: list[int], workdir: Path, name: str = "perf-syscalls"):
        self.output = workdir / f"{name}.csv"
        events = ",".join(event(k) for k in (*KINDS, ALL))
        super().__init__(launcher, group, ["perf", "stat", "-x,", "-e", events, "-p", ",".join(map(str, pids)),
                                           "-o", str(self.output)], workdir, name)

    def finish(self) -> dict[str, int]:
        """Ends perf (SIGINT: it writes its counts) and returns them by kind; {} if it wrote none."""
        self.close()
        return parse(self.output.read_text() if self.output.exists() else "")


def parse(text: str) -> dict[str, int]:
    """perf stat -x, output: "count,unit,event,..." lines; a counter perf could not read is left out."""
    by_event = {event(k): k for k in (*KINDS, ALL)}
    counts: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or fields[2] not in by_event:
            continue
        with contextlib.suppress(ValueError):
            counts[by_event[fields[2]]] = int(fields[0])
    return counts
