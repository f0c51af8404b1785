"""The sweep: each point of a plan measured in turn, committed to the store the moment it is done.

Stopping is always complete: whatever ends the run (the last point, an error, Ctrl-C, SIGTERM), the
finally blocks stop the point's processes, remove its cgroups, bring offlined CPUs back and mark the
run complete or incomplete. The journal and its guardian cover the one case they cannot: the harness
itself killed.

A point's workload runs in one group; its load generator, when it has one, always in a group of its
own, also when it must share the measured CPUs, so the server's CPU time and the client's are
accounted apart.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from mosbench import cpulist
from mosbench.errors import PointFailed
from mosbench.launch.processes import Launcher
from mosbench.machine import accounting, guardian, interference, placement
from mosbench.machine.isolation import Group, Isolator
from mosbench.machine.journal import SCRATCH_PREFIX, Journal
from mosbench.machine.topology import Topology
from mosbench.run import profiler
from mosbench.run.plan import Plan, TrialKey
from mosbench.run.point import Point
from mosbench.run.window import JOB_LIMIT, Window, WindowGroups, measure
from mosbench.store.db import Store, StoreError, now
from mosbench.units import cpu_time, latency, si
from mosbench.workloads import registry
from mosbench.workloads.base import Instance, PointContext, RunContext, Workload, cache_root
from mosbench.workloads.server import limits

# Seconds a point may take beyond warm-up and window before its runner stops itself: its start (up to
# 300 s for every task's readiness in an overcommitted guest) counts against it too.
STOP_MARGIN = 600.0


@dataclass
class Outcome:
    status: str  # complete, incomplete
    measured: int
    failed: int
    interfered: int = 0


def _scratch_parent() -> str:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else tempfile.gettempdir()


class _Terminated(KeyboardInterrupt):
    """SIGTERM and SIGHUP end a run the way Ctrl-C does."""


class _StopSignals:
    """SIGTERM, SIGHUP and Ctrl-C raise at once, and are remembered: a signal that lands while Python
    runs a finaliser (a __del__, a weakref callback of the store's connection pool) has its exception
    printed and dropped, and the run would go on to its last point. The sweep asks again between points."""

    def __init__(self) -> None:
        self.received: str | None = None
        ours = [signal.SIGTERM, signal.SIGHUP]
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where a shell ignores it
            ours.append(signal.SIGINT)
        self._old = {s: signal.signal(s, self._handle) for s in ours}

    def _handle(self, signum: int, _frame: Any) -> None:
        self.received = signal.Signals(signum).name
        raise _Terminated(self.received)

    def check(self) -> None:
        if self.received:
            raise _Terminated(self.received)

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


class Sweep:
    def __init__(self, store: Store, plan: Plan, topo: Topology, console: Console | None = None,
                 cache: Path | None = None):
        self.store = store
        self.plan = plan
        self.topo = topo
        self.console = console or Console(stderr=True, emoji=False, markup=False)
        self.cache = cache or cache_root()
        self.workloads: dict[str, Workload] = {w: registry.get(w) for w, _ in plan.selections}

    def run(self, run_id: int, skip: set[TrialKey] | None = None) -> Outcome:
        todo = [k for k in self.plan.points() if k not in (skip or set())]
        stop = _StopSignals()
        journal = Journal()
        journal.set_run(self.store.url, run_id)
        watcher = guardian.start(journal.path)
        isolator: Isolator | None = None
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{run_id}-", dir=_scratch_parent()))
        journal.add_dir(scratch)
        launcher = Launcher(journal, scratch / "logs")
        measured = failed = interfered = 0
        status = "incomplete"
        set_up: list[tuple[Workload, RunContext]] = []
        try:
            isolator = Isolator(self.plan.isolation, journal)
            self.console.print(f"isolation: {isolator.description}; scratch: {scratch}", style="dim",
                               markup=False, soft_wrap=True)
            setup_group = isolator.group("setup", tuple(c.id for c in self.topo.cpus))
            for wname, w in self.workloads.items():
                ctx = RunContext(scratch / wname, self.cache / wname, self.plan.params.get(wname, {}),
                                 launcher, setup_group)
                ctx.scratch.mkdir(parents=True, exist_ok=True)
                ctx.cache.mkdir(parents=True, exist_ok=True)
                set_up.append((w, ctx))
                w.setup(ctx)
            contexts = {w.name: ctx for w, ctx in set_up}
            with self._progress() as progress:
                task = progress.add_task("starting", total=len(todo))
                n = 0
                while todo:
                    for key in todo:
                        stop.check()
                        n += 1
                        progress.update(task, description=key.label())
                        point = self._measure_owned(key, n, contexts[key.workload], isolator, launcher,
                                                    progress.console)
                        self.store.add_point(run_id, **point.row())
                        measured += 1
                        failed += point.status == "failed"
                        interfered += point.interfered
                        progress.console.print(describe(point, self.workloads[key.workload]), soft_wrap=True,
                                               markup=False, highlight=False,
                                               style=None if point.status == "ok" and not point.interfered
                                               else "red")
                        progress.advance(task)
                    # Only --trials auto reads the run back: a fixed run's last round is its last.
                    todo = self.plan.next_round(self.store.points(run_id, with_samples=False)) if self.plan.auto else []
                    if todo:
                        progress.console.print(
                            f"↻ --trials auto: {len(todo)} point(s) wider than ±{self.plan.precision:.1%} "
                            f"get trial {min(k.trial for k in todo)}", style="dim", markup=False, highlight=False)
                        progress.update(task, total=(progress.tasks[0].total or 0) + len(todo))
            stop.check()
            status = "complete"
        finally:
            launcher.stop_all()
            for w, ctx in reversed(set_up):
                with contextlib.suppress(Exception):
                    w.teardown(ctx)
                if ctx.facts:
                    with contextlib.suppress(StoreError):
                        self.store.note_environment(run_id, **{w.name: ctx.facts})
            if isolator is not None:
                isolator.close()  # every group it made, the setup group too
            shutil.rmtree(scratch, ignore_errors=True)
            journal.remove_dir(scratch)
            try:
                self.store.finish_run(run_id, status)
                journal.set_run(None, None)
            except StoreError:
                # The store is gone: the journal keeps the run, so the next command marks it killed
                # (resumable) once the store answers again. The error that stopped the run goes on up.
                pass
            if journal.is_clean() and journal.data.get("run") is None:
                journal.close()
                guardian.stop(watcher)
            stop.restore()
        return Outcome(status, measured, failed, interfered)

    def _progress(self) -> Progress:
        return Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=self.console,
        )

    def _measure_owned(self, key: TrialKey, serial: int, run_ctx: RunContext, isolator: Isolator,
                       launcher: Launcher, console: Console) -> Point:
        """The point, measured again while others took more of its CPUs than the plan allows (up to
        --retry-interfered times); the last attempt is stored, the earlier ones' shares with it."""
        earlier: list[float] = []
        while True:
            point = self._measure(key, serial, run_ctx, isolator, launcher)
            share = point.interference
            point.interfered = point.status == "ok" and share is not None and share > self.plan.max_interference
            point.earlier_interference = earlier
            if not point.interfered or len(earlier) >= self.plan.retry_interfered:
                return point
            earlier.append(share or 0.0)
            console.print(f"↻ {key.label()}: interfered ({_interference_text(point)}); measuring it again "
                          f"({len(earlier)} of {self.plan.retry_interfered})", soft_wrap=True, markup=False,
                          highlight=False, style="yellow")

    def _measure(self, key: TrialKey, serial: int, run_ctx: RunContext, isolator: Isolator,
                 launcher: Launcher) -> Point:
        w = self.workloads[key.workload]
        params = self.plan.params.get(key.workload, {})
        a = placement.assign(self.topo, self.plan.placement, key.cores, w.loadgen_cores(key.cores, params))
        if isolator.hotplug:
            isolator.hotplug.keep_only(set(a.cpus) | set(a.loadgen_cpus))
        point = Point(key, now(), cpulist.format(a.cpus), w.unit_for(key.test),
                      loadgen_cpus=cpulist.format(a.loadgen_cpus) if a.loadgen_cpus else None,
                      loadgen_shared=a.loadgen_shared if a.loadgen_cpus else None)
        groups: list[Group] = []
        instance: Instance | None = None
        recorder: profiler.Recorder | None = None
        point_scratch = run_ctx.scratch / f"point-{serial}"
        point_scratch.mkdir(parents=True)
        try:
            group = isolator.group("work", a.cpus)
            groups.append(group)
            load_group = None
            if a.loadgen_cpus:
                # Its own group even on the measured CPUs: the client's CPU time is never the server's.
                load_group = isolator.group("load", a.loadgen_cpus)
                groups.append(load_group)
            window_end = 0.0 if w.kind == "job" else self.plan.warmup + self.plan.duration
            ctx = PointContext(run_ctx, key.test, key.variant, a.cpus, group, a.loadgen_cpus, load_group,
                               launcher, point_scratch,
                               JOB_LIMIT + STOP_MARGIN if w.kind == "job" else window_end + STOP_MARGIN,
                               window_end)
            instance = w.start(ctx)
            if self.plan.profiled(key):
                recorder = self._recorder(launcher, run_ctx.group, a.cpus, point_scratch, point,
                                          profiler.JOB_SECONDS if w.kind == "job" else self.plan.duration)
            measured = measure(instance, w.kind, Window(self.plan.warmup, self.plan.duration, self.plan.interval),
                               WindowGroups(group, load_group, bool(a.loadgen_cpus and a.loadgen_shared),
                                            run_ctx.group), a.cpus, recorder)
            point.workload_metrics = instance.stop()
            if recorder is not None:
                try:
                    point.profile = recorder.finish(measured.window_s)
                except OSError as e:
                    point.profile_note = f"not recorded: {e}"
                recorder = None
            point.measured = measured.counted_exactly(instance.window_work())
            if a.loadgen_cpus:
                point.client = limits.judge(point.row() | point.measured.columns(), len(a.loadgen_cpus))
            elif point.workload_metrics.get("client_hosts"):
                point.client = limits.judge_hosts(point.row() | point.measured.columns(),
                                                  point.workload_metrics["client_hosts"])
            point.status = "ok"
        except PointFailed as e:
            point.fail(str(e))
        except Exception as e:  # a workload bug must not lose the run: store it as this point's failure
            point.fail(f"{type(e).__name__}: {e}")
        finally:
            if recorder is not None:
                recorder.abandon()
            if instance is not None:
                with contextlib.suppress(Exception):
                    instance.stop()
                point.logs = instance.logs()
            launcher.stop_all()
            for g in groups:
                isolator.release(g)
            shutil.rmtree(point_scratch, ignore_errors=True)
        return point

    @staticmethod
    def _recorder(launcher: Launcher, group: Group, cpus: tuple[int, ...], scratch: Path,
                  point: Point, window_s: float) -> profiler.Recorder | None:
        """perf on the point's CPUs, or None with the reason kept with the point: a profile that
        cannot be taken never fails a measurement."""
        try:
            return profiler.Recorder(launcher, group, cpus, scratch, window_s)
        except OSError as e:
            point.profile_note = f"not recorded: {e}"
            return None


def _interference_text(point: Point) -> str:
    m = point.measured
    return interference.describe(m.interference.as_metrics()) if m is not None and m.interference else "?"


def describe(point: Point, w: Workload) -> str:
    """One line per point, plain text (it must not be read as markup nor wrap mid-line in a log)."""
    key = point.key
    if point.status != "ok" or point.measured is None:
        return f"✗ {key.label()}: {point.reason}"
    v = point.measured
    per_core = v.throughput / key.cores
    columns = point.row()
    if w.kind == "job":
        speed = f"{v.window_s:.3g} s per {point.unit}"
        cpu = f"user {v.user_s / v.work:.3g} s, sys {v.system_s / v.work:.3g} s"
    else:
        speed = f"{si(v.throughput)} {point.unit}/s, {si(per_core)}/s/core"
        user, system = accounting.server_seconds(columns)
        cpu = (f"user {cpu_time(accounting.per_unit_us(user, v.work))}, "
               f"sys {cpu_time(accounting.per_unit_us(system, v.work))}")
    _, idle, steal = accounting.shares(v.user_s, v.system_s, v.idle_s, v.steal_s)
    stolen = f", steal {steal:.0%}" if steal >= 0.005 else ""
    mark = "⚠" if point.interfered else "✓"
    line = f"{mark} {key.label()} cpus {point.cpus}: {speed}, {cpu} per {point.unit}, idle {idle:.0%}{stolen}"
    line += _describe_client(columns, point.metrics())
    notes = w.point_notes(point.metrics())
    if notes:
        line += "; " + ", ".join(n.text for n in notes)
    if point.interfered:
        line += f"; INTERFERED: other programs took {_interference_text(point)}"
    return line


def _describe_client(v: dict[str, Any], m: dict[str, Any]) -> str:
    """The client's side of a server point: its CPU per unit, tail latency, losses, and whether it was the limit."""
    if v.get("loadgen_user_s") is not None:
        client_us = accounting.per_unit_us(v["loadgen_user_s"] + v["loadgen_system_s"], v["work"])
        parts = [f"client {cpu_time(client_us)}"]
    elif m.get("client_cpu_us_per_request") is not None:
        parts = [f"{len(m['client_hosts'])} client hosts {cpu_time(m['client_cpu_us_per_request'])}"]
    else:
        return ""
    if "latency_p99_us" in m:
        parts.append(f"p99 {latency(m['latency_p99_us'])}")
    if m.get("client_lost") or m.get("client_errors"):
        parts.append(f"lost {m.get('client_lost', 0)}, errors {m.get('client_errors', 0)}")
    if m.get("client_bound"):
        parts.append(f"CLIENT-BOUND ({m['client_evidence']})")
    return "; " + ", ".join(parts)
