"""will-it-scale style microbenchmarks: one testcase per kernel path, in process and thread form.

The native runner (native/micro) pins a task per CPU and counts iterations in a shared-memory file;
`RunnerInstance` maps that file and reads the per-task counters whenever the harness samples. The
libscale benchmarks (workloads/scale.py) are testcases of the same runner, so they use it too.
"""

from __future__ import annotations

import functools
import mmap
import struct
import subprocess
from pathlib import Path
from typing import Any

from mosbench import cpulist, native
from mosbench.errors import PointFailed, UserError
from mosbench.processes import wait_for
from mosbench.workloads.base import Instance, Param, PointContext, Sample, TestInfo, Variant, Workload

# Must match struct micro_header in native/micro/runner.c.
MAGIC = b"MOSMICR1"
VERSION = 1
HEADER = struct.Struct("<8sIIIIIIIii128s")
STATE_STARTING, STATE_RUNNING, STATE_FAILED, STATE_STOPPED = range(4)


@functools.cache
def list_tests(binary: Path) -> tuple[TestInfo, ...]:
    """The runner's testcases: (name, description) from `--list`."""
    out = subprocess.run([binary, "--list"], capture_output=True, text=True, check=True).stdout
    return tuple(TestInfo(*line.split("\t", 1)) for line in out.splitlines() if line)


class RunnerInstance(Instance):
    """One native runner process on the point's CPUs: testcase `runner_test` in `mode`, one task per CPU."""

    def __init__(self, ctx: PointContext, binary: Path, runner_test: str, mode: str,
                 params: dict[str, int] | None = None):
        self.ctx = ctx
        self.name = f"{binary.name}-{runner_test.replace('/', '-')}-{mode}"
        counters = ctx.scratch / "counters"
        extra = [arg for k, v in (params or {}).items() for arg in ("--param", f"{k}={v}")]
        self.proc = ctx.launcher.spawn(self.name, [
            str(binary), "--test", runner_test, "--mode", mode, "--cpus", cpulist.format(ctx.cpus),
            "--counters", str(counters), "--workdir", ctx.params.get("fsdir") or str(ctx.scratch),
            "--timeout", str(int(ctx.timeout)), *extra,
        ], ctx.group)
        self._map: mmap.mmap | None = None
        self._counters: memoryview | None = None
        self._stopped = False
        try:
            if not wait_for(lambda: (counters.exists() and counters.stat().st_size > 0) or not self._alive(), 30):
                raise PointFailed(f"{self.name} did not create its counters within 30 s")
            if not self._alive():
                self.check()
            self._open(counters)
            if not wait_for(lambda: self._state() != STATE_STARTING or not self._alive(), 300):
                raise PointFailed("tasks were not ready within 300 s")
            self.check()
        except BaseException:
            self.stop()
            raise

    def _alive(self) -> bool:
        return self.proc.poll() is None

    def _open(self, path: Path) -> None:
        with open(path, "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        magic, version, ntasks, stride, offset, *_ = HEADER.unpack_from(self._map)
        if magic != MAGIC or version != VERSION:
            raise PointFailed(f"counter file has magic {magic!r} version {version}: rebuild native/")
        if ntasks != len(self.ctx.cpus):
            raise PointFailed(f"runner started {ntasks} tasks for {len(self.ctx.cpus)} CPUs")
        # An aligned 8-byte view: each element read is one 64-bit load, never a torn value.
        self._counters = memoryview(self._map)[offset: offset + ntasks * stride].cast("Q")
        self._step = stride // 8
        self._ntasks = ntasks

    def _state(self) -> int:
        return HEADER.unpack_from(self._map)[5] if self._map else STATE_STARTING

    def sample(self) -> Sample:
        per_task = [float(self._counters[i * self._step]) for i in range(self._ntasks)]
        return Sample(sum(per_task), per_task)

    def check(self) -> None:
        state = self._state()
        if state == STATE_FAILED or not self._alive():
            if self._alive():
                self.ctx.launcher.stop(self.proc)
            else:
                self.proc.wait()
            raise PointFailed(self._failure_reason())

    def _failure_reason(self) -> str:
        """The runner's own last word on stderr, else how it ended."""
        err = self.ctx.launcher.logdir / f"{self.name}.err"
        lines = err.read_text(errors="replace").strip().splitlines() if err.exists() else []
        if lines:
            return lines[-1]
        rc = self.proc.returncode
        how = f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exited with status {rc}"
        return f"{self.name} {how} without a message"

    def stop(self) -> dict[str, Any]:
        if not self._stopped:
            self._stopped = True
            self.ctx.launcher.stop(self.proc)
            if self._counters is not None:
                self._counters.release()
                self._counters = None
            if self._map is not None:
                self._map.close()
                self._map = None
        return {"runner_pid": self.proc.pid}

    def logs(self) -> str:
        return self.ctx.launcher.log_tail(self.name, 200)


class Micro(Workload):
    name = "micro"
    description = "will-it-scale style microbenchmarks of single kernel paths"
    unit = "op"
    variants = (
        Variant("procs", "one process per core (private address space and file table)"),
        Variant("threads", "one thread per core in one process (shared mm, files, signal handlers)"),
    )
    params = (
        Param("fsdir", "", "directory the file tests work in (default: the run's tmpfs scratch); "
              "point it at another filesystem to compare"),
    )
    paper = "Section 4's bottlenecks one at a time (dentry, vfsmount, mmap_lock, lseek, page faults)"

    def tests(self) -> list[TestInfo]:
        try:
            return list(list_tests(native.binary("mosbench-micro")))
        except UserError:
            return []

    def unit_for(self, test: str) -> str:
        return {"page_fault1": "fault", "page_fault2": "fault", "page_fault3": "fault",
                "context_switch1": "round trip", "futex2": "round trip", "unix1": "round trip",
                "tcp1": "round trip"}.get(test, self.unit)

    def check_available(self) -> None:
        native.binary("mosbench-micro")

    def start(self, ctx: PointContext) -> Instance:
        return RunnerInstance(ctx, native.binary("mosbench-micro"), ctx.test, ctx.variant)


