"""gmake: the paper's section 5.6, GNU make building the Linux kernel's object files with -j twice the cores.

The tree is Debian's linux-source-6.1, unpacked once into the tmpfs cache psearchy indexes (one copy
for both, so its inputs are always in memory). It is configured once per run (`defconfig`, then
`prepare`: generated headers and host tools) into an output tree of the run's, and each point copies
that configured tree into its own tmpfs (`O=`) and builds the same targets from it: every job does
the same work from the same clean start. A job that builds a different number of objects from the
run's first fails its point.

While make runs, the instance samples the point's CPUs every 100 ms: the serial start (configuration
checks, one make walking the tree), the parallel middle and the stragglers at the end. The CPU time
spent while fewer than 1.5 CPUs were busy, over all of the job's CPU time, estimates Amdahl's serial
fraction from one point (the paper: 35x at 48 cores).
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from mosbench.errors import PointFailed, UserError
from mosbench.machine import accounting
from mosbench.workloads import linuxsrc
from mosbench.workloads.base import (
    Instance,
    Param,
    PointContext,
    RunContext,
    Sample,
    Variant,
    Workload,
    mem_available_mb,
)

MAKE = Path("/usr/bin/make")
TIMELINE_S = 0.1
SERIAL_BELOW = 1.5  # CPUs busy: under this, one thing at a time is running
# What one make job and its compiler take, for the check before a run (cc1 on a kernel file: 100-250 MB).
MB_PER_JOB = 250
TREE_MB = 1500
TARGET = re.compile(r"[A-Za-z0-9_./+-]+")  # a path in the tree, no character make would read as its syntax


def targets_of(spec: str) -> list[str]:
    """The goals given, comma- or blank-separated: each one word of make's command line, as a shell splits them."""
    return [t for t in re.split(r"[,\s]+", spec) if t]


def count_objects(root: Path) -> int:
    return sum(1 for _, _, files in os.walk(root) for f in files if f.endswith(".o"))


def serial_profile(timeline: list[tuple[float, float]], cpus: int) -> dict[str, float]:
    """From (seconds since the start, CPUs busy over the step ending then): Amdahl's serial fraction
    (CPU time while fewer than SERIAL_BELOW CPUs were busy, over all), the serial start and the tail."""
    if cpus < 2 or len(timeline) < 2:
        return {}
    total = serial = 0.0
    prev_t = 0.0
    first_parallel = last_parallel = None  # start of the first parallel step, end of the last
    for t, busy in timeline:
        cpu_s = busy * (t - prev_t)
        total += cpu_s
        if busy < SERIAL_BELOW:
            serial += cpu_s
        else:
            first_parallel = prev_t if first_parallel is None else first_parallel
            last_parallel = t
        prev_t = t
    if not total:
        return {}
    end = timeline[-1][0]
    out = {"serial_fraction": round(serial / total, 4),
           "serial_start_s": round(end if first_parallel is None else first_parallel, 2),
           "tail_s": round(0.0 if last_parallel is None else end - last_parallel, 2)}
    if serial:
        out["amdahl_limit"] = round(total / serial, 1)  # 1 / serial fraction: the speedup no core count passes
    return out


def same_work(run_extra: dict[str, Any], built: int) -> None:
    """Every job of a run builds as many objects as its first did, or its point fails."""
    first = run_extra.setdefault("objects", built)
    if built != first:
        raise PointFailed(f"make built {built} objects, the run's first job {first}: not the same work")


def make_env(scratch: Path) -> dict[str, str]:
    """make's environment with the compilers' temporary files (gcc's .s between cc1 and as) in the scratch:
    the build's own tmpfs, like its tree, and gone with it when a killed build cannot remove them."""
    tmp = scratch / "tmp"
    tmp.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(tmp)}


class GmakeInstance(Instance):
    def __init__(self, ctx: PointContext, tree: Path, configured: Path, targets: list[str]):
        self.ctx = ctx
        self.tree = tree
        self.targets = targets
        self.jobs = 2 * len(ctx.cpus)
        self.obj = ctx.scratch / "obj"
        shutil.copytree(configured, self.obj, symlinks=True)  # copy2 keeps mtimes: make rebuilds nothing of it
        self.before = count_objects(self.obj)
        self.proc = None
        self.timeline: list[tuple[float, float]] = []
        self._sampling = threading.Event()
        self._sampler: threading.Thread | None = None
        self._metrics: dict[str, Any] | None = None

    def begin(self) -> None:
        self.started = time.monotonic()
        self.proc = self.ctx.launcher.spawn(
            "make", [str(MAKE), "-C", str(self.tree), f"O={self.obj}", f"-j{self.jobs}", *self.targets],
            self.ctx.group, env=make_env(self.ctx.scratch))
        self._sampler = threading.Thread(target=self._sample_cpus, daemon=True)
        self._sampler.start()

    def _sample_cpus(self) -> None:
        prev, prev_t = accounting.read_proc_stat(), time.monotonic()
        while not self._sampling.wait(TIMELINE_S):
            now, now_t = accounting.read_proc_stat(), time.monotonic()
            u = accounting.usage(prev, now, self.ctx.cpus)
            if now_t > prev_t:
                self.timeline.append((round(now_t - self.started, 3), (u.user + u.system) / (now_t - prev_t)))
            if self.proc is not None and self.proc.poll() is not None:
                return  # the job is over: idle steps after it would count as its tail
            prev, prev_t = now, now_t

    @property
    def finished(self) -> bool:
        return self.proc is not None and self.proc.poll() == 0

    def sample(self) -> Sample:
        return Sample(1.0 if self.finished else 0.0)

    def check(self) -> None:
        rc = self.proc.poll() if self.proc else None
        if rc is not None and rc != 0:
            raise PointFailed(f"make exited with status {rc}: {self._error()}")

    def _error(self) -> str:
        """The build's first error line (warnings may come before it on stderr), else make's last word."""
        lines = self.ctx.launcher.stderr_lines("make")
        # A compiler's "error:" comes before make's "***" echoes of it; without one, make's first "***".
        errors = [line for line in lines if re.search(r"\berror:|\*\*\*", line)]
        if errors:
            return errors[0].strip()
        return lines[-1].strip() if lines else "?"

    def stop(self) -> dict[str, Any]:
        if self._metrics is not None:
            return self._metrics
        self._metrics = {}
        self._sampling.set()
        if self._sampler:
            self._sampler.join()
        if self.proc is None:
            return {}
        if self.proc.poll() is None:
            self.ctx.launcher.stop(self.proc)
            return {}
        if self.proc.returncode != 0:
            return {}
        built = count_objects(self.obj) - self.before
        if built <= 0:
            raise PointFailed(f"make built no objects for {' '.join(self.targets)} (are they in defconfig?)")
        same_work(self.ctx.run.extra, built)
        metrics: dict[str, Any] = {"objects": built, "jobs": self.jobs, "targets": " ".join(self.targets)}
        metrics.update(serial_profile(self.timeline, len(self.ctx.cpus)))
        self._metrics = metrics
        return metrics

    def logs(self) -> str:
        return self.ctx.launcher.log_tail("make", 30)


class Gmake(Workload):
    name = "gmake"
    description = "GNU make building Linux kernel objects, -j twice the cores (process creation, exec, page cache)"
    unit = "build"
    kind = "job"
    variants = (Variant("j2", "make -j twice the point's cores over the configured tree (the paper's)"),)
    params = (
        Param("targets", "mm/", "make targets, comma-separated (mm/ takes about a minute on one core here; "
              "vmlinux is the paper's whole build)"),
    )
    paper = "section 5.6: the kernel build; fork, exec, mmap and the page cache, serial stages at either end"

    def check_available(self) -> None:
        if not MAKE.exists():
            raise UserError("make is not installed (Debian: apt-get install build-essential)")
        if not linuxsrc.LINUX_TARBALL.is_file():
            raise UserError(f"{linuxsrc.LINUX_TARBALL} is missing (`make deps` installs {linuxsrc.LINUX_TREE})")
        for tool in ("flex", "bison", "bc"):
            if not shutil.which(tool):
                raise UserError(f"building the kernel needs {tool} (Debian: apt-get install flex bison bc libelf-dev)")

    def check_params(self, params: dict[str, Any]) -> None:
        targets = targets_of(params["targets"])
        if not targets:
            raise UserError("gmake targets must name at least one make target")
        for t in targets:
            # A goal is a path in the kernel's tree (mm/, fs/ext4/, vmlinux, mm/slub.o): make reads ; : = $ % # * ?
            # | ( ) [ ] ~ \ and quotes as its own syntax, options and variables are the workload's, and a leading
            # / or a .. leaves the tree.
            if not TARGET.fullmatch(t) or t.startswith(("-", "/")) or ".." in t:
                raise UserError(f"gmake target {t!r} is not a make target of the kernel tree (a path in it of "
                                "letters, digits and _ . / + -: options and variables are the workload's)")

    def check_cores(self, params: dict[str, Any], cores: int) -> None:
        need = 2 * cores * MB_PER_JOB + (0 if (linuxsrc.tree_cache() / linuxsrc.LINUX_TREE).is_dir() else TREE_MB)
        have = mem_available_mb()
        if need > have:
            raise UserError(f"gmake at {cores} cores runs make -j{2 * cores}: about {need / 1024:.1f} GB of memory "
                            f"with the tree in tmpfs, and this machine has {have / 1024:.1f} GB available")

    def setup(self, ctx: RunContext) -> None:
        tree = linuxsrc.unpack_linux(linuxsrc.tree_cache(), ctx.run)
        configured = ctx.scratch / "configured"
        jobs = 2 * os.cpu_count() if os.cpu_count() else 2
        env = make_env(ctx.scratch)
        for step in (["defconfig"], [f"-j{jobs}", "prepare"]):
            status, last = ctx.run(f"gmake-{step[-1]}", [str(MAKE), "-C", str(tree), f"O={configured}", *step],
                                   env=env)
            if status != 0:
                raise UserError(f"gmake: make {step[-1]} of {tree} failed: {last or f'status {status}'}")
        ctx.extra.update(tree=tree, configured=configured)

    def start(self, ctx: PointContext) -> Instance:
        return GmakeInstance(ctx, ctx.run.extra["tree"], ctx.run.extra["configured"], targets_of(ctx.params["targets"]))
