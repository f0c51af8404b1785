"""will-it-scale's testcases under their names, in process and thread form, plus a few of our own.

Each will-it-scale test (open1, page_fault2, context_switch1, ...) does the same operation with the
same counting as will-it-scale's, in the same directory (/tmp) at the same path depth, so
"micro/open1 procs" is the number the kernel test robot calls will-it-scale.per_process_ops on open1.
Tests of mosbench's own have names will-it-scale cannot have (tcp_pingpong, lseek_end_shared, ...).

The native driver (native/micro) pins a task per CPU and counts iterations in a shared-memory file;
`MicroInstance` maps that file and reads the per-task counters whenever the harness samples. The
libscale benchmarks (workloads/scale.py) are testcases of the same driver, so they use it too.
"""

from __future__ import annotations

import functools
import mmap
import os
import struct
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from mosbench import cpulist, native
from mosbench.errors import PointFailed, UserError
from mosbench.launch.processes import how_it_ended
from mosbench.launch.ready import file_ready, wait_ready
from mosbench.machine import filesystem
from mosbench.workloads.base import (
    Instance,
    Param,
    PointContext,
    RunContext,
    Sample,
    TestInfo,
    Variant,
    Workload,
)

# Must match struct micro_header in native/micro/driver.c.
MAGIC = b"MOSMICR1"
VERSION = 1
HEADER = struct.Struct("<8sIIIIIIIii128s")
STATE_STARTING, STATE_RUNNING, STATE_FAILED, STATE_STOPPED = range(4)


@functools.cache
def list_tests(binary: Path) -> tuple[TestInfo, ...]:
    """The runner's testcases: (name, description) from `--list`."""
    out = subprocess.run([binary, "--list"], capture_output=True, text=True, check=True).stdout
    return tuple(TestInfo(*line.split("\t", 1)) for line in out.splitlines() if line)


ADDR_NO_RANDOMIZE = 0x0040000  # <linux/personality.h>


def address_layout(pid: int) -> str:
    """How the driver's address space is laid out, as its tasks inherit it: "fixed" (setarch -R, or
    kernel.randomize_va_space 0) or "randomised"."""
    try:
        persona = int(Path(f"/proc/{pid}/personality").read_text(), 16)
        system = int(Path("/proc/sys/kernel/randomize_va_space").read_text())
    except (OSError, ValueError):
        return "unknown"
    return "fixed" if persona & ADDR_NO_RANDOMIZE or not system else "randomised"


class MicroInstance(Instance):
    """One native driver process on the point's CPUs: testcase `test` in `mode`, one task per CPU.

    `workdir` is the directory the driver makes its scratch directory in (the file tests' files);
    `aslr` keeps address-space randomisation on (the driver turns it off, as will-it-scale's runtest does).
    """

    def __init__(self, ctx: PointContext, binary: Path, test: str, mode: str, workdir: Path,
                 params: dict[str, int] | None = None, metrics: dict[str, Any] | None = None,
                 aslr: bool = False):
        self.ctx = ctx
        self._metrics = {"driver_pid": None, **(metrics or {})}
        self.name = f"{binary.name}-{test.replace('/', '-')}-{mode}"
        counters = ctx.scratch / "counters"
        extra = [arg for k, v in (params or {}).items() for arg in ("--param", f"{k}={v}")]
        self.proc = ctx.launcher.spawn(self.name, [
            str(binary), "--test", test, "--mode", mode, "--cpus", cpulist.format(ctx.cpus),
            "--counters", str(counters), "--workdir", str(workdir), "--timeout", str(int(ctx.timeout)), *extra,
            *(["--aslr"] if aslr else []),
        ], ctx.group)
        self._map: mmap.mmap | None = None
        self._counters: memoryview | None = None
        self._stopped = False
        try:
            wait_ready(file_ready(counters), what=f"{self.name}'s counter file", timeout=30, proc=self.proc,
                       ended=self._failure_reason)
            self._open(counters)
            self._metrics["address_layout"] = address_layout(self.proc.pid)
            wait_ready(lambda: self._state() != STATE_STARTING, what="every task ready", timeout=300,
                       proc=self.proc, ended=self._failure_reason)
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
            raise PointFailed(f"driver started {ntasks} tasks for {len(self.ctx.cpus)} CPUs")
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
        """The driver's own last word on stderr, else how it ended."""
        last = self.ctx.launcher.last_error(self.name)
        if last:
            return last
        return f"{self.name} {how_it_ended(self.proc)} without a message"

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
        return {**self._metrics, "driver_pid": self.proc.pid}

    def logs(self) -> str:
        return self.ctx.launcher.log_tail(self.name, 200)


# What one counted iteration is, where it is more than an "op" (will-it-scale counts ops throughout).
UNITS = {"page_fault1": "fault", "page_fault2": "fault", "page_fault3": "fault",
         "tcp_pingpong": "round trip", "futex_pingpong": "round trip"}
FSDIR_DEFAULT = "/tmp"  # will-it-scale's


def filesystem_type(path: Path, mountinfo: str | None = None) -> str:
    """The type of the filesystem holding path (ext4, tmpfs, ...), from the longest matching mount."""
    try:
        found = filesystem.mounts(mountinfo)
    except OSError:
        return "unknown"
    target = os.path.realpath(path)
    best, kind = "", "unknown"
    for m in found:
        inside = target == m.point or target.startswith(m.point.rstrip("/") + "/")
        if inside and len(m.point) >= len(best):
            best, kind = m.point, m.fstype
    return kind


class Micro(Workload):
    name = "micro"
    description = "will-it-scale's testcases under their names, and a few of mosbench's own"
    unit = "op"
    variants = (
        Variant("threads", "one thread per core in one process (shared mm, files, signal handlers)"),
        Variant("procs", "one process per core (private address space and file table)"),
    )
    params = (
        Param("fsdir", FSDIR_DEFAULT, "directory the file tests work in, as will-it-scale's /tmp; point it at "
              "another filesystem (/dev/shm for tmpfs) to compare"),
    )
    paper = "Section 4's bottlenecks one at a time (dentry, vfsmount, mmap_lock, lseek, page faults)"

    def tests(self) -> list[TestInfo]:
        try:
            return list(list_tests(native.binary("mosbench-micro")))
        except UserError:
            return []

    def unit_for(self, test: str) -> str:
        return UNITS.get(test, self.unit)

    def check_available(self) -> None:
        native.binary("mosbench-micro")

    def check_params(self, params: dict[str, Any]) -> None:
        fsdir = Path(params["fsdir"])
        try:
            found = fsdir.is_dir()
        except OSError as e:  # a name longer than the file system takes
            raise UserError(f"micro fsdir {fsdir}: {e.strerror}") from None
        if not found:
            raise UserError(f"micro fsdir {fsdir} is not a directory")
        try:  # the only sure test of "can the tests make their files there" (root passes access())
            os.rmdir(tempfile.mkdtemp(prefix="mosbench-check-", dir=fsdir))
        except OSError as e:
            raise UserError(f"micro fsdir {fsdir}: cannot make a directory there ({e.strerror})") from None

    def setup(self, ctx: RunContext) -> None:
        fsdir = Path(ctx.params["fsdir"])
        ctx.extra["workdir"] = ctx.scratch_in(fsdir, "micro")
        ctx.extra["fs"] = filesystem_type(fsdir)

    def teardown(self, ctx: RunContext) -> None:
        if "workdir" in ctx.extra:
            ctx.remove_scratch(ctx.extra.pop("workdir"))

    def start(self, ctx: PointContext) -> Instance:
        return MicroInstance(ctx, native.binary("mosbench-micro"), ctx.test, ctx.variant, ctx.run.extra["workdir"],
                             metrics={"fs": ctx.run.extra["fs"]})
