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

from mosbench import cpulist, workloads
from mosbench.errors import PointFailed
from mosbench.launch.processes import Launcher
from mosbench.machine import accounting, guardian, placement
from mosbench.machine.isolation import Group, Isolator
from mosbench.machine.journal import SCRATCH_PREFIX, Journal
from mosbench.machine.topology import Topology
from mosbench.run import profiler
from mosbench.run.plan import Plan, PointKey
from mosbench.run.window import JOB_LIMIT, Window, measure
from mosbench.store.db import Store, StoreError, now
from mosbench.units import latency, si
from mosbench.workloads.base import Instance, PointContext, RunContext, Workload, cache_root
from mosbench.workloads.server import limits

# Seconds a point may take beyond warm-up and window before its runner stops itself.
STOP_MARGIN = 120.0


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
        self.console = console or Console(stderr=True)
        self.cache = cache or cache_root()
        self.workloads: dict[str, Workload] = {w: workloads.get(w) for w, _ in plan.selections}

    def run(self, run_id: int, skip: set[tuple] | None = None) -> Outcome:
        todo = [k for k in self.plan.points()
                if (k.workload, k.test, k.variant, k.cores, k.trial) not in (skip or set())]
        stop = _StopSignals()
        journal = Journal()
        journal.set_run(self.store.url, run_id)
        guardian.start(journal.path)
        isolator: Isolator | None = None
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{run_id}-", dir=_scratch_parent()))
        journal.add_dir(scratch)
        launcher = Launcher(journal, scratch / "logs")
        measured = failed = 0
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
                for n, key in enumerate(todo, start=1):
                    stop.check()
                    progress.update(task, description=key.label())
                    values = self._measure(key, n, contexts[key.workload], isolator, launcher)
                    self.store.add_point(run_id, **values)
                    measured += 1
                    failed += values["status"] == "failed"
                    progress.console.print(_describe(key, values, self.workloads[key.workload]), soft_wrap=True,
                                           markup=False, highlight=False,
                                           style=None if values["status"] == "ok" else "red")
                    progress.advance(task)
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
            stop.restore()
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
                recorder = self._recorder(launcher, run_ctx.group, a.cpus, point_scratch, values,
                                          profiler.JOB_SECONDS if w.kind == "job" else self.plan.duration)
            values.update(measure(instance, w.kind, Window(self.plan.warmup, self.plan.duration, self.plan.interval),
                                  group, a.cpus, load_group, recorder))
            values["metrics"] = {**values.get("metrics", {}), **instance.stop()}
            if recorder is not None:
                self._profile(recorder, values)
                recorder = None
            _count_exactly(values, instance.window_work())
            verdict = limits.judge(values, len(a.loadgen_cpus)) if a.loadgen_cpus else None
            if verdict:
                values["metrics"].update(client_bound=verdict.client_bound, client_evidence=verdict.evidence)
            values["status"] = "ok"
        except PointFailed as e:
            values.update(status="failed", reason=str(e))
        except Exception as e:  # a workload bug must not lose the run: store it as this point's failure
            values.update(status="failed", reason=f"{type(e).__name__}: {e}")
        finally:
            if recorder is not None:
                recorder.abandon()
            if instance is not None:
                with contextlib.suppress(Exception):
                    instance.stop()
                values["logs"] = instance.logs()
            launcher.stop_all()
            for g in groups:
                isolator.release(g)
            shutil.rmtree(point_scratch, ignore_errors=True)
        return values


    @staticmethod
    def _recorder(launcher: Launcher, group: Group, cpus: tuple[int, ...], scratch: Path,
                  values: dict[str, Any], window_s: float) -> profiler.Recorder | None:
        """perf on the point's CPUs, or None with the reason in the point's metrics: a profile that
        cannot be taken never fails a measurement."""
        try:
            return profiler.Recorder(launcher, group, cpus, scratch, window_s)
        except OSError as e:
            values.setdefault("metrics", {})["profile"] = f"not recorded: {e}"
            return None

    @staticmethod
    def _profile(recorder: profiler.Recorder, values: dict[str, Any]) -> None:
        try:
            values["profile"] = recorder.finish(values["window_s"])
        except OSError as e:
            values["metrics"]["profile"] = f"not recorded: {e}"


def _count_exactly(values: dict[str, Any], exact: float | None) -> None:
    """The client's exact window count replaces the sampled one; the sampled one stays beside it."""
    if exact is None:
        return
    if exact <= 0:
        raise PointFailed("no work was done during the measurement window")
    values["metrics"]["sampled_work"] = values["work"]
    values["work"] = exact
    values["throughput"] = exact / values["window_s"]


def _describe(key: PointKey, v: dict[str, Any], w: Workload) -> str:
    """One line per point, plain text (it must not be read as markup nor wrap mid-line in a log)."""
    if v["status"] != "ok":
        return f"✗ {key.label()}: {v['reason']}"
    per_core = v["throughput"] / key.cores
    if w.kind == "job":
        speed = f"{v['window_s']:.3g} s per {v['unit']}"
        cpu = f"user {v['user_s'] / v['work']:.3g} s, sys {v['system_s'] / v['work']:.3g} s"
    else:
        speed = f"{si(v['throughput'])} {v['unit']}/s, {si(per_core)}/s/core"
        user, system = accounting.server_seconds(v)
        cpu = (f"user {accounting.per_unit_us(user, v['work']):.3g} µs, "
               f"sys {accounting.per_unit_us(system, v['work']):.3g} µs")
    _, idle, steal = accounting.shares(v["user_s"], v["system_s"], v["idle_s"], v["steal_s"])
    stolen = f", steal {steal:.0%}" if steal >= 0.005 else ""
    line = f"✓ {key.label()} cpus {v['cpus']}: {speed}, {cpu} per {v['unit']}, idle {idle:.0%}{stolen}"
    return line + _describe_client(v)


def _describe_client(v: dict[str, Any]) -> str:
    """The client's side of a server point: its CPU per unit, tail latency, losses, and whether it was the limit."""
    if v.get("loadgen_user_s") is None:
        return ""
    m = v.get("metrics") or {}
    client_us = accounting.per_unit_us(v["loadgen_user_s"] + v["loadgen_system_s"], v["work"])
    parts = [f"client {client_us:.3g} µs"]
    if "latency_p99_us" in m:
        parts.append(f"p99 {latency(m['latency_p99_us'])}")
    if m.get("client_lost") or m.get("client_errors"):
        parts.append(f"lost {m.get('client_lost', 0)}, errors {m.get('client_errors', 0)}")
    if m.get("client_bound"):
        parts.append(f"CLIENT-BOUND ({m['client_evidence']})")
    if m.get("deliveries_lag"):
        parts.append(f"DELIVERIES LAG (the queue grew by {m['queue_growth']} in the window)")
    return "; " + ", ".join(parts)
