"""One point's measurement: a warm-up, then a window (or a job) with the work counter, /proc/stat and
every group's CPU time read at both ends, and per-second samples in between."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

from mosbench.errors import PointFailed
from mosbench.machine import accounting, interference, schedstat
from mosbench.machine.interference import Interference
from mosbench.machine.isolation import Group
from mosbench.run import profiler
from mosbench.workloads.base import Instance

# How often a job workload is asked whether its job is done, and how long one job may take.
JOB_POLL = 0.01
JOB_LIMIT = 1800.0


@dataclass(frozen=True)
class Window:
    warmup: float  # seconds before the window (window workloads only: a job starts with its window)
    duration: float  # the window (window workloads); a job's window is the job
    interval: float  # sampling period; 0 reads only the window's ends
    job_limit: float = JOB_LIMIT


@dataclass(frozen=True)
class WindowGroups:
    """The groups whose CPU time a window reads: the point's, its load generator's, and the harness's
    own setup group (perf, when profiling), which is not interference."""

    work: Group
    load: Group | None = None
    load_shares_cpus: bool = False
    harness: Group | None = None


@dataclass(frozen=True)
class Measured:
    """One window's (or one job's) figures, as the point's columns name them."""

    window_s: float
    work: float
    throughput: float  # units of work per second, all cores
    user_s: float  # /proc/stat of the measured CPUs: user + nice
    system_s: float  # system + irq + softirq
    idle_s: float
    steal_s: float
    samples: list[dict[str, Any]]
    cpu_busy_s: dict[str, float]  # every CPU's busy seconds (JSON keys), not only the point's
    cgroup_user_s: float | None = None
    cgroup_system_s: float | None = None
    loadgen_user_s: float | None = None
    loadgen_system_s: float | None = None
    per_task_min: float | None = None
    per_task_max: float | None = None
    interference: Interference | None = None
    sampled_work: float | None = None  # where a client's exact count replaced the sampled one
    # The point's own threads (its work group): context switches and CPU migrations in the window.
    sched: schedstat.ThreadCounts | None = None
    # Load imbalance (Veal & Foong's Table 4): the busiest measured CPU's utilization less the idlest's.
    busy_spread: float | None = None

    def counted_exactly(self, exact: float | None) -> Measured:
        """The client's exact window count in place of the sampled one, which stays beside it."""
        if exact is None:
            return self
        if exact <= 0:
            raise PointFailed("no work was done during the measurement window")
        return replace(self, work=exact, throughput=exact / self.window_s, sampled_work=self.work)

    def columns(self) -> dict[str, Any]:
        return {"window_s": self.window_s, "work": self.work, "throughput": self.throughput,
                "user_s": self.user_s, "system_s": self.system_s, "idle_s": self.idle_s,
                "steal_s": self.steal_s, "samples": self.samples,
                "cgroup_user_s": self.cgroup_user_s, "cgroup_system_s": self.cgroup_system_s,
                "loadgen_user_s": self.loadgen_user_s, "loadgen_system_s": self.loadgen_system_s,
                "interference": None if self.interference is None else self.interference.share}

    def metrics(self) -> dict[str, Any]:
        """The harness's own metrics of the window (the workload adds its own beside them)."""
        out: dict[str, Any] = {"cpu_busy_s": self.cpu_busy_s}
        if self.per_task_min is not None:
            out.update(per_task_min=self.per_task_min, per_task_max=self.per_task_max)
        if self.interference is not None:
            out["interference"] = self.interference.as_metrics()
        if self.sampled_work is not None:
            out["sampled_work"] = self.sampled_work
        if self.sched is not None:
            out.update(context_switches=self.sched.switches, migrations=self.sched.migrations,
                       context_switches_per_unit=round(self.sched.switches / self.work, 6),
                       migrations_per_unit=round(self.sched.migrations / self.work, 6))
        if self.busy_spread is not None:
            out["busy_spread"] = round(self.busy_spread, 4)
        return out


def _delta(a: tuple[float, float] | None, b: tuple[float, float] | None) -> tuple[float, float] | tuple[None, None]:
    return (b[0] - a[0], b[1] - a[1]) if a and b else (None, None)


def measure(inst: Instance, kind: str, win: Window, groups: WindowGroups, cpus: tuple[int, ...],
            recorder: profiler.Recorder | None = None) -> Measured:
    """Warms up, measures one window (or one job) and returns its figures.

    Samples are kept with their times relative to the window's start, warm-up ones negative. A job is
    asked every 10 ms whether it is done, so its time is not rounded up to a sample.
    """
    interval = win.interval
    samples: list[dict[str, Any]] = []
    prev = {"t": time.monotonic(), "s": inst.sample(), "stat": accounting.read_proc_stat() if interval else None}
    origin = {"t": prev["t"]}

    def tick(phase: str) -> None:
        inst.check()
        if not interval:
            return
        s, t, stat = inst.sample(), time.monotonic(), accounting.read_proc_stat()
        dt = t - prev["t"]
        if dt > 0:
            per_task = None
            if s.per_task and prev["s"].per_task:
                per_task = [round((a - b) / dt, 1) for a, b in zip(s.per_task, prev["s"].per_task, strict=False)]
            samples.append({
                "t": round(t - origin["t"], 3), "phase": phase, "rate": (s.work - prev["s"].work) / dt,
                "busy": round(accounting.usage(prev["stat"], stat, cpus).busy_fraction, 4),
                "per_task": per_task,
            })
        prev.update(t=t, s=s, stat=stat)

    def run_until(deadline: float, phase: str, done=None) -> None:
        step = interval or 1.0
        next_tick = time.monotonic() + step
        while (now_t := time.monotonic()) < deadline:
            if done is not None:
                if done():
                    return
                time.sleep(min(JOB_POLL, deadline - now_t))
                if time.monotonic() >= next_tick:
                    tick(phase)
                    next_tick += step
            else:
                time.sleep(min(step, deadline - now_t))
                tick(phase)

    if kind == "window":
        if recorder is not None:
            recorder.warmup_begins(prev["s"].work)
        run_until(time.monotonic() + win.warmup, "warmup")
    ends = _Ends.read(groups)
    if recorder is not None:  # samples over the window alone, never the warm-up
        recorder.window_begins(inst.sample().work)
    s0, t0 = inst.sample(), time.monotonic()
    inst.window_opened()
    if kind == "job":
        inst.begin()
    for sample in samples:  # warm-up samples are kept at negative times: the window starts at 0
        sample["t"] = round(sample["t"] - (t0 - origin["t"]), 3)
    origin["t"] = t0
    if kind == "window":
        run_until(t0 + win.duration, "window")
    else:
        run_until(t0 + win.job_limit, "window", lambda: inst.finished)
        if not inst.finished:
            raise PointFailed(f"job did not finish within {win.job_limit:.0f} s")
    s1, t1 = inst.sample(), time.monotonic()
    if recorder is not None:
        recorder.window_ends()
    inst.window_closed()
    end = _Ends.read(groups)
    inst.check()
    work = s1.work - s0.work
    if work <= 0:
        raise PointFailed("no work was done during the measurement window")
    u = accounting.usage(ends.stat, end.stat, cpus)
    window = t1 - t0
    busy = accounting.busy_by_cpu(ends.stat, end.stat)
    measured_busy = [busy.get(str(c), 0.0) / window for c in cpus]  # a CPU left out did nothing
    cg_user, cg_system = _delta(ends.work, end.work)
    lg_user, lg_system = _delta(ends.load, end.load)
    per_task = ([(a - b) / window for a, b in zip(s1.per_task, s0.per_task, strict=False)]
                if s1.per_task and s0.per_task else None)
    return Measured(
        window_s=window, work=work, throughput=work / window, user_s=u.user, system_s=u.system, idle_s=u.idle,
        steal_s=u.steal, samples=samples, cpu_busy_s=busy,
        cgroup_user_s=cg_user, cgroup_system_s=cg_system, loadgen_user_s=lg_user, loadgen_system_s=lg_system,
        per_task_min=min(per_task) if per_task else None, per_task_max=max(per_task) if per_task else None,
        interference=_interference(ends, end, groups, cpus, window),
        sched=schedstat.window(ends.sched, end.sched) if ends.sched is not None and end.sched is not None else None,
        busy_spread=max(measured_busy) - min(measured_busy) if len(measured_busy) > 1 else None,
    )


@dataclass(frozen=True)
class _Ends:
    """What is read at each end of the window besides the work: /proc/stat and every CPU time that is
    the point's, the kernel's or the harness's."""

    stat: dict[int, accounting.CpuTimes]
    work: tuple[float, float] | None
    load: tuple[float, float] | None
    harness: float
    kernel_threads: dict[int, interference.KernelThread]
    sched: dict[int, schedstat.ThreadCounts] | None
    reported_kib: int | None

    @classmethod
    def read(cls, groups: WindowGroups) -> _Ends:
        harness_group = groups.harness.cpu_seconds() if groups.harness else None
        return cls(accounting.read_proc_stat(), groups.work.cpu_seconds(),
                   groups.load.cpu_seconds() if groups.load else None,
                   interference.harness_seconds() + (sum(harness_group) if harness_group else 0.0),
                   interference.kernel_threads(), schedstat.read(tids) if (tids := groups.work.threads()) else None,
                   interference.reported_kib())


def _interference(a: _Ends, b: _Ends, groups: WindowGroups, cpus: tuple[int, ...],
                  window: float) -> interference.Interference | None:
    """None where the point's own CPU time is not known (affinity isolation keeps no group)."""
    if not (a.work and b.work):
        return None
    ours = sum(b.work) - sum(a.work)
    if groups.load_shares_cpus:
        if not (a.load and b.load):
            return None
        ours += sum(b.load) - sum(a.load)
    return interference.account(a.stat, b.stat, cpus, window, ours,
                                interference.kernel_thread_seconds(a.kernel_threads, b.kernel_threads, cpus),
                                b.harness - a.harness,
                                None if a.reported_kib is None or b.reported_kib is None
                                else (b.reported_kib - a.reported_kib) / 1024)
