"""What else ran on a point's CPUs during its window.

A point owns its CPUs only if nothing else used them. Over the window, the measured CPUs' busy time
(/proc/stat: user, nice, system, irq, softirq) is set against what is known to be the point's or done
on its behalf; what is left is another program's, and a share of it above the run's threshold marks
the point interfered. Each kind of time is told apart by where the kernel accounts it:

- the point's own: its groups' CPU time (the workload's cgroup, and the load generator's where it
  shares the measured CPUs): the cgroup's cpu.stat (v2) or cpuacct (v1);
- interrupts: /proc/stat's irq and softirq time on the measured CPUs, the kernel's work on the
  point's own packets and timers among it, which no group is charged with;
- kernel threads (kworkers serving its I/O, ksoftirqd, RCU's): every task with PF_KTHREAD whose last
  CPU was a measured one, by its own utime and stime in /proc/PID/stat;
- the harness: the mosbench process and its setup group (perf, when profiling), an upper bound of
  its share, since it may have run on other CPUs too.

Steal (a hypervisor running another guest on our CPUs) is interference too, reported apart.
In a guest whose balloon reports free memory to its host (free page reporting), the host takes back
what it is given, from 2 s after a program freed it and for as long as there is more, and that work
shows in the window as steal: on the 2-CPU VM, busy on both CPUs, each second that reported memory
stole about 0.45 s per GiB and the seconds between stole none (after a 4 GiB release); data
operations ran a third slower beside it (docs/FXMARK.md). Where the guest kernel counts what it has
reported, the window keeps the amount (`reported_mib`): steal that comes with it is the point's
neighbour's release (or its own), not another guest.
Tick-based /proc/stat and the cgroups' exact times differ by up to a tick per CPU, so a quiet point
reads a few tenths of a percent at most, never a negative figure.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosbench.machine.accounting import CpuTimes

PF_KTHREAD = 0x00200000
# Not in mainline: kernels built for some VMMs (Firecracker's) count what page reporting has handed back.
REPORTED_KIB = Path("/sys/module/page_reporting/parameters/reported_kib")
DEFAULT_THRESHOLD = 0.02  # the share of the point's CPU time others may take before it is marked


@dataclass(frozen=True)
class KernelThread:
    started: int  # ticks after boot: with the pid, one thread even after pid reuse
    seconds: float  # utime + stime
    last_cpu: int


KTHREADD_CHILDREN = Path("/proc/2/task/2/children")


def _candidate_pids() -> list[str]:
    """Kernel threads are kthreadd's children: where the kernel lists them, only those are read (a
    starved harness in an overcommitted guest must not spend its window's end reading every process)."""
    try:
        return ["2", *KTHREADD_CHILDREN.read_text().split()]
    except OSError:
        with os.scandir("/proc") as entries:
            return [e.name for e in entries if e.name.isdigit()]


# A scan slower than this (an overcommitted guest, where the harness gets a sliver of a vCPU) is given up
# where it is and not made again in this process: the window's ends must stay short (one whole scan of a
# 64-vCPU guest's kernel threads under load took a minute and a half). Kernel threads' time then counts
# as others'.
SLOW_SCAN_S = 0.05
_scans_too_slow = False


def kernel_threads() -> dict[int, KernelThread]:
    """Every kernel thread now, by pid; empty once a scan has been too slow."""
    global _scans_too_slow
    if _scans_too_slow:
        return {}
    began = time.monotonic()
    hz = os.sysconf("SC_CLK_TCK")
    found: dict[int, KernelThread] = {}
    for pid in _candidate_pids():
        if time.monotonic() - began > SLOW_SCAN_S:
            # Given up part-way (a partial scan would count the rest as born in the window).
            _scans_too_slow = True
            return {}
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                text = f.read()
        except OSError:
            continue  # it ended while we looked
        rest = text[text.rindex(b")") + 2:].split()
        # fields from the third on (state): flags is the 9th, utime 14th, stime 15th, starttime 22nd,
        # processor 39th (proc(5))
        if int(rest[6]) & PF_KTHREAD:
            found[int(pid)] = KernelThread(int(rest[19]), (int(rest[11]) + int(rest[12])) / hz, int(rest[36]))
    _scans_too_slow = time.monotonic() - began > SLOW_SCAN_S
    return found


def kernel_thread_seconds(before: dict[int, KernelThread], after: dict[int, KernelThread],
                          cpus: Iterable[int]) -> float:
    """CPU time of the kernel threads that last ran on the given CPUs; a thread born since, all of its.
    0 where either end was not scanned."""
    if not before or not after:
        return 0.0
    on = set(cpus)
    total = 0.0
    for pid, t in after.items():
        if t.last_cpu not in on:
            continue
        prev = before.get(pid)
        total += t.seconds - (prev.seconds if prev is not None and prev.started == t.started else 0.0)
    return total


def reported_kib() -> int | None:
    """The free memory this guest has reported to its host since boot, where its kernel counts it."""
    try:
        return int(REPORTED_KIB.read_text())
    except (OSError, ValueError):
        return None


def harness_seconds() -> float:
    """This process's CPU time, all its threads."""
    t = os.times()
    return t.user + t.system


@dataclass(frozen=True)
class Interference:
    """Seconds of the measured CPUs' time over one window, by whose they were."""

    other_s: float  # busy time charged to none of the point's groups, the kernel or the harness
    steal_s: float
    interrupts_s: float
    kernel_threads_s: float
    harness_s: float
    capacity_s: float  # the window × the measured CPUs
    reported_mib: float | None = None  # free memory the guest reported to its host in the window, if counted

    @property
    def share(self) -> float:
        """Others' time and steal as a share of the point's CPU time."""
        return (self.other_s + self.steal_s) / self.capacity_s if self.capacity_s > 0 else 0.0

    def as_metrics(self) -> dict[str, float]:
        out = {"other_s": round(self.other_s, 4), "steal_s": round(self.steal_s, 4),
               "interrupts_s": round(self.interrupts_s, 4), "kernel_threads_s": round(self.kernel_threads_s, 4),
               "harness_s": round(self.harness_s, 4), "capacity_s": round(self.capacity_s, 4),
               "share": round(self.share, 5)}
        if self.reported_mib is not None:
            out["reported_mib"] = round(self.reported_mib, 1)
        return out


def account(before: dict[int, CpuTimes], after: dict[int, CpuTimes], cpus: Iterable[int], window_s: float,
            ours_s: float, kernel_threads_s: float, harness_s: float,
            reported_mib: float | None = None) -> Interference:
    """The window's busy time on `cpus` less the point's own (`ours_s`: its groups' CPU time), the
    interrupts, the kernel threads and the harness; with what the guest reported to its host meanwhile."""
    cpus = [c for c in cpus if c in before and c in after]
    total = CpuTimes()
    for c in cpus:
        total = total + (after[c] - before[c])
    interrupts = total.irq + total.softirq
    busy = total.user + total.nice + total.system + interrupts
    other = busy - interrupts - ours_s - kernel_threads_s - harness_s
    return Interference(max(0.0, other), max(0.0, total.steal), interrupts, kernel_threads_s, harness_s,
                        window_s * len(cpus), reported_mib)


def describe(metrics: dict[str, Any]) -> str:
    """The figure a person reads: "5.3% of the point's CPU time (others 0.06 s, steal 1 s of 20 s)", and
    the memory the guest gave back to its host meanwhile where there was any."""
    share = metrics.get("share", 0.0)
    cap = metrics.get("capacity_s") or 0.0
    text = f"{share:.1%} of the point's CPU time"
    if cap:
        text += (f" (others {metrics.get('other_s', 0.0):.3g} s, steal {metrics.get('steal_s', 0.0):.3g} s"
                 f" of {cap:.3g} s)")
    if reported := metrics.get("reported_mib"):
        text += f"; {reported:.0f} MiB of free memory reported to the host"
    return text
