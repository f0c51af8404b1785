"""CPU time over a measurement window: per-CPU /proc/stat deltas and the cgroup's own usage.

These are the paper's right-hand axes: CPU time per unit of work, split user and system, plus how
idle the measured CPUs were. /proc/stat counts in USER_HZ ticks; everything here is in seconds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The order of the fields on a /proc/stat cpuN line (guest time is already inside user and nice).
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


@dataclass(frozen=True)
class CpuTimes:
    user: float = 0.0
    nice: float = 0.0
    system: float = 0.0
    idle: float = 0.0
    iowait: float = 0.0
    irq: float = 0.0
    softirq: float = 0.0
    steal: float = 0.0

    def __sub__(self, other: CpuTimes) -> CpuTimes:
        return CpuTimes(*(getattr(self, f) - getattr(other, f) for f in FIELDS))

    def __add__(self, other: CpuTimes) -> CpuTimes:
        return CpuTimes(*(getattr(self, f) + getattr(other, f) for f in FIELDS))


def parse_proc_stat(text: str, hz: int | None = None) -> dict[int, CpuTimes]:
    """Per-CPU times in seconds from the text of /proc/stat (offline CPUs have no line)."""
    hz = hz or os.sysconf("SC_CLK_TCK")
    result: dict[int, CpuTimes] = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *values = line.split()
        ticks = [int(v) for v in values[: len(FIELDS)]]
        ticks += [0] * (len(FIELDS) - len(ticks))
        result[int(name[3:])] = CpuTimes(*(t / hz for t in ticks))
    return result


def read_proc_stat(path: Path = Path("/proc/stat")) -> dict[int, CpuTimes]:
    return parse_proc_stat(path.read_text())


def busy_by_cpu(before: dict[int, CpuTimes], after: dict[int, CpuTimes]) -> dict[str, float]:
    """Busy seconds (all but idle, iowait and steal) of each CPU online at both ends, keyed by its number
    as text (the form JSON keeps); CPUs that did nothing are left out."""
    busy: dict[str, float] = {}
    for cpu in sorted(before.keys() & after.keys()):
        d = after[cpu] - before[cpu]
        seconds = d.user + d.nice + d.system + d.irq + d.softirq
        if seconds > 0:
            busy[str(cpu)] = round(seconds, 3)
    return busy


def shares(user: float, system: float, idle: float, steal: float) -> tuple[float, float, float]:
    """(busy, idle, steal) as shares of all the measured CPUs' time; they add up to 1.

    Steal (a hypervisor running someone else on our CPU) is neither our work nor our idleness: on a
    VM a point can be 80% busy, 5% idle and 15% stolen.
    """
    total = user + system + idle + steal
    if total <= 0:
        return 0.0, 0.0, 0.0
    return (user + system) / total, idle / total, steal / total


@dataclass(frozen=True)
class Usage:
    """CPU time spent on the measured CPUs during a window."""

    user: float  # user + nice
    system: float  # system + irq + softirq
    idle: float  # idle + iowait
    steal: float
    cpus: int

    @property
    def total(self) -> float:
        return self.user + self.system + self.idle + self.steal

    @property
    def busy_fraction(self) -> float:
        return shares(self.user, self.system, self.idle, self.steal)[0]

    @property
    def idle_fraction(self) -> float:
        return shares(self.user, self.system, self.idle, self.steal)[1]


def usage(before: dict[int, CpuTimes], after: dict[int, CpuTimes], cpus: list[int] | tuple[int, ...]) -> Usage:
    total = CpuTimes()
    for cpu in cpus:
        if cpu in before and cpu in after:
            total = total + (after[cpu] - before[cpu])
    return Usage(
        user=total.user + total.nice,
        system=total.system + total.irq + total.softirq,
        idle=total.idle + total.iowait,
        steal=total.steal,
        cpus=len(cpus),
    )


def per_unit_us(seconds: float, work: float) -> float | None:
    """CPU µs per unit of work, or None when nothing was done."""
    return seconds * 1e6 / work if work > 0 else None


def server_seconds(point: dict) -> tuple[float, float]:
    """The server's (user, system) seconds of a point's window.

    Where the load generator shares the measured CPUs, /proc/stat holds both, so the server's own
    group says what was the server's. Where the client has CPUs of its own, /proc/stat of the
    measured CPUs is the fuller figure: it also holds the interrupt and softirq time the kernel spent
    there on the server's packets, which no group is charged with.
    """
    if point.get("loadgen_shared") and point.get("cgroup_user_s") is not None:
        return point["cgroup_user_s"], point["cgroup_system_s"]
    return point["user_s"], point["system_s"]
