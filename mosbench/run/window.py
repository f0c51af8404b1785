"""One point's measurement: a warm-up, then a window (or a job) with the work counter, /proc/stat and
every group's CPU time read at both ends, and per-second samples in between."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from mosbench.errors import PointFailed
from mosbench.machine import accounting
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


def measure(inst: Instance, kind: str, win: Window, group: Group, cpus: tuple[int, ...],
            load_group: Group | None = None, recorder: profiler.Recorder | None = None) -> dict[str, Any]:
    """Warms up, measures one window (or one job) and returns the point's values.

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
    stat0, cg0 = accounting.read_proc_stat(), group.cpu_seconds()
    lg0 = load_group.cpu_seconds() if load_group else None
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
    stat1, cg1 = accounting.read_proc_stat(), group.cpu_seconds()
    lg1 = load_group.cpu_seconds() if load_group else None
    inst.check()
    work = s1.work - s0.work
    if work <= 0:
        raise PointFailed("no work was done during the measurement window")
    u = accounting.usage(stat0, stat1, cpus)
    window = t1 - t0
    values: dict[str, Any] = {
        "window_s": window, "work": work, "throughput": work / window,
        "user_s": u.user, "system_s": u.system, "idle_s": u.idle, "steal_s": u.steal, "samples": samples,
    }
    if cg0 and cg1:
        values["cgroup_user_s"] = cg1[0] - cg0[0]
        values["cgroup_system_s"] = cg1[1] - cg0[1]
    if lg0 and lg1:
        values["loadgen_user_s"] = lg1[0] - lg0[0]
        values["loadgen_system_s"] = lg1[1] - lg0[1]
    # Where the window's CPU time went, every CPU (not only the point's): shows a point ran where it should.
    metrics: dict[str, Any] = {"cpu_busy_s": accounting.busy_by_cpu(stat0, stat1)}
    if s1.per_task and s0.per_task:
        per_task = [(a - b) / window for a, b in zip(s1.per_task, s0.per_task, strict=False)]
        metrics.update(per_task_min=min(per_task), per_task_max=max(per_task))
    values["metrics"] = metrics
    return values
