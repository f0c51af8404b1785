"""The sweep: each point of a plan measured in turn, committed to the store the moment it is done.

Stopping is always complete: whatever ends the run (the last point, an error, Ctrl-C, SIGTERM), the
finally blocks stop the point's processes, remove its cgroups, bring offlined CPUs back and mark the
run complete or incomplete. The journal covers the one case they cannot: the harness itself killed.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from mosbench import accounting, cpulist, placement, workloads
from mosbench.errors import PointFailed
from mosbench.isolation import Group, Isolator
from mosbench.journal import SCRATCH_PREFIX, Journal
from mosbench.plan import Plan, PointKey
from mosbench.processes import Launcher
from mosbench.report.table import si
from mosbench.store import Store, now
from mosbench.topology import Topology
from mosbench.workloads.base import Instance, PointContext, RunContext, Workload

# Seconds a point may take beyond warm-up and window before its runner stops itself.
STOP_MARGIN = 120.0
# How often a job workload is asked whether its job is done, and how long one job may take.
JOB_POLL = 0.01
JOB_LIMIT = 1800.0


@dataclass
class Outcome:
    status: str  # complete, incomplete
    measured: int
    failed: int


def _scratch_parent() -> str:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else tempfile.gettempdir()


class _Terminated(KeyboardInterrupt):
    """SIGTERM and SIGHUP end a run the way Ctrl-C does."""


def _raise_terminated(signum: int, _frame: Any) -> None:
    raise _Terminated(signal.Signals(signum).name)


class Runner:
    def __init__(self, store: Store, plan: Plan, topo: Topology, console: Console | None = None,
                 cache: Path | None = None):
        self.store = store
        self.plan = plan
        self.topo = topo
        self.console = console or Console(stderr=True)
        self.cache = cache or Path.home() / ".cache" / "mosbench"
        self.workloads: dict[str, Workload] = {w: workloads.get(w) for w, _ in plan.selections}

    def run(self, run_id: int, skip: set[tuple] | None = None) -> Outcome:
        todo = [k for k in self.plan.points()
                if (k.workload, k.test, k.variant, k.cores, k.trial) not in (skip or set())]
        old_handlers = {s: signal.signal(s, _raise_terminated) for s in (signal.SIGTERM, signal.SIGHUP)}
        journal = Journal()
        isolator: Isolator | None = None
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{run_id}-", dir=_scratch_parent()))
        journal.add_dir(scratch)
        launcher = Launcher(journal, scratch / "logs")
        measured = failed = 0
        status = "incomplete"
        set_up: list[tuple[Workload, RunContext]] = []
        try:
            isolator = Isolator(self.plan.isolation, journal)
            self.console.print(f"[dim]isolation: {isolator.description}; scratch: {scratch}[/dim]")
            for wname, w in self.workloads.items():
                ctx = RunContext(scratch / wname, self.cache / wname, self.plan.params.get(wname, {}))
                ctx.scratch.mkdir(parents=True, exist_ok=True)
                ctx.cache.mkdir(parents=True, exist_ok=True)
                set_up.append((w, ctx))
                w.setup(ctx)
            contexts = {w.name: ctx for w, ctx in set_up}
            with self._progress() as progress:
                task = progress.add_task("starting", total=len(todo))
                for n, key in enumerate(todo, start=1):
                    progress.update(task, description=key.label())
                    values = self._measure(key, n, contexts[key.workload], isolator, launcher)
                    self.store.add_point(run_id, **values)
                    measured += 1
                    failed += values["status"] == "failed"
                    progress.console.print(_describe(key, values))
                    progress.advance(task)
            status = "complete"
        finally:
            launcher.stop_all()
            for w, ctx in reversed(set_up):
                with contextlib.suppress(Exception):
                    w.teardown(ctx)
            if isolator is not None:
                isolator.close()
            shutil.rmtree(scratch, ignore_errors=True)
            journal.remove_dir(scratch)
            if not any(journal.data[k] for k in ("cgroups", "offlined", "procs", "dirs")):
                journal.close()
            self.store.finish_run(run_id, status)
            for s, h in old_handlers.items():
                signal.signal(s, h)
        return Outcome(status, measured, failed)

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=self.console,
        )

    def _measure(self, key: PointKey, serial: int, run_ctx: RunContext, isolator: Isolator,
                 launcher: Launcher) -> dict[str, Any]:
        w = self.workloads[key.workload]
        params = self.plan.params.get(key.workload, {})
        a = placement.assign(self.topo, self.plan.placement, key.cores, w.loadgen_cores(key.cores, params))
        if isolator.hotplug:
            isolator.hotplug.keep_only(set(a.cpus) | set(a.loadgen_cpus))
        values: dict[str, Any] = {
            "workload": key.workload, "test": key.test, "variant": key.variant, "cores": key.cores,
            "trial": key.trial, "started_at": now(), "cpus": cpulist.format(a.cpus),
            "loadgen_cpus": cpulist.format(a.loadgen_cpus) if a.loadgen_cpus else None,
            "loadgen_shared": a.loadgen_shared if a.loadgen_cpus else None, "unit": w.unit_for(key.test),
        }
        groups: list[Group] = []
        instance: Instance | None = None
        point_scratch = run_ctx.scratch / f"point-{serial}"
        point_scratch.mkdir(parents=True)
        try:
            group = isolator.group("work", a.cpus)
            groups.append(group)
            load_group = None
            if a.loadgen_cpus:
                load_group = group if a.loadgen_shared else isolator.group("load", a.loadgen_cpus)
                if load_group is not group:
                    groups.append(load_group)
            ctx = PointContext(run_ctx, key.test, key.variant, a.cpus, group, a.loadgen_cpus, load_group,
                               launcher, point_scratch,
                               JOB_LIMIT + STOP_MARGIN if w.kind == "job" else
                               self.plan.warmup + self.plan.duration + STOP_MARGIN)
            instance = w.start(ctx)
            values.update(self._window(w, instance, group, a.cpus))
            values["metrics"] = {**values.get("metrics", {}), **instance.stop()}
            values["status"] = "ok"
        except PointFailed as e:
            values.update(status="failed", reason=str(e))
        except Exception as e:  # a workload bug must not lose the run: store it as this point's failure
            values.update(status="failed", reason=f"{type(e).__name__}: {e}")
        finally:
            if instance is not None:
                with contextlib.suppress(Exception):
                    instance.stop()
                values["logs"] = instance.logs()
            launcher.stop_all()
            for g in groups:
                isolator.release(g)
            shutil.rmtree(point_scratch, ignore_errors=True)
        return values

    def _window(self, w: Workload, inst: Instance, group: Group, cpus: tuple[int, ...]) -> dict[str, Any]:
        plan = self.plan
        interval = plan.interval
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
                    # A job's end is looked for every 10 ms, so its time is not rounded up to a sample.
                    if done():
                        return
                    time.sleep(min(JOB_POLL, deadline - now_t))
                    if time.monotonic() >= next_tick:
                        tick(phase)
                        next_tick += step
                else:
                    time.sleep(min(step, deadline - now_t))
                    tick(phase)

        if w.kind == "window":
            run_until(time.monotonic() + plan.warmup, "warmup")
        stat0, cg0 = accounting.read_proc_stat(), group.cpu_seconds()
        s0, t0 = inst.sample(), time.monotonic()
        if w.kind == "job":
            inst.begin()
        for sample in samples:  # warm-up samples are kept at negative times: the window starts at 0
            sample["t"] = round(sample["t"] - (t0 - origin["t"]), 3)
        origin["t"] = t0
        if w.kind == "window":
            run_until(t0 + plan.duration, "window")
        else:
            run_until(t0 + JOB_LIMIT, "window", lambda: inst.finished)
            if not inst.finished:
                raise PointFailed(f"job did not finish within {JOB_LIMIT:.0f} s")
        s1, t1 = inst.sample(), time.monotonic()
        stat1, cg1 = accounting.read_proc_stat(), group.cpu_seconds()
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
        if s1.per_task and s0.per_task:
            per_task = [(a - b) / window for a, b in zip(s1.per_task, s0.per_task, strict=False)]
            values["metrics"] = {"per_task_min": min(per_task), "per_task_max": max(per_task)}
        return values


def _describe(key: PointKey, v: dict[str, Any]) -> str:
    if v["status"] != "ok":
        return f"[red]✗ {key.label()}: {v['reason']}[/red]"
    per_core = v["throughput"] / key.cores
    user = accounting.per_unit_us(v["user_s"], v["work"])
    system = accounting.per_unit_us(v["system_s"], v["work"])
    idle = v["idle_s"] / max(v["user_s"] + v["system_s"] + v["idle_s"], 1e-9)
    return (f"✓ {key.label()} [dim]cpus {v['cpus']}[/dim]: {si(v['throughput'])} {v['unit']}/s, "
            f"{si(per_core)}/s/core, user {user:.3g} µs, sys {system:.3g} µs per {v['unit']}, idle {idle:.0%}")
