"""FxMark's file-system microbenchmarks (Min et al., "Understanding Manycore Scalability of File Systems",
USENIX ATC 2016) under their own names, one test per operation and sharing level, one variant per file
system: `mosbench run fxmark --variant tmpfs,ext4,xfs,btrfs` draws one line per file system in every
operation's figure.

Each point gets a file system of its own, made fresh (machine/filesystem.py: a loop device over a sparse
file on tmpfs, or the user's device with -p device=... -p wipe=yes), mounted under the point's scratch and
gone when the point ends, whatever ends it. The operations are testcases of the micro driver
(native/fxmark), one task per core in processes as FxMark's, working in the mounted file system.

Each operation does and counts what FxMark's program does under the same name (benchmarks/vs_fxmark.py
runs both side by side): its pools made before the start as FxMark makes them, never refilled. A task
whose pool runs out or whose file system fills stops there, as FxMark's worker does, and says when, so
its work is rated over the time it worked, FxMark's works over seconds (docs/FXMARK.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosbench import native, procfs
from mosbench.errors import PointFailed, UserError
from mosbench.machine import filesystem
from mosbench.machine.filesystem import Mounted
from mosbench.machine.memory import meminfo_kb
from mosbench.workloads.base import (
    Instance,
    MetricColumn,
    Param,
    PointContext,
    PointNote,
    RunContext,
    Sample,
    TestInfo,
    Variant,
    Workload,
    mem_available_mb,
)
from mosbench.workloads.micro import MicroInstance, list_tests

BINARY = "mosbench-fxmark"
SHARING = {"L": "low", "M": "medium", "H": "high"}
# A slot's words (native/fxmark/fxmark.h): the count, and when the task stopped (0 while it works).
STOPPED_WORD = 1
# Below this share of the window spent working, a task's rate is too little time to stand on.
MIN_WORKED = 0.1
# A task still working whose count has not moved for this long when the window closes is in one call
# that outlasts the window's end: ext4 writing its dirty data back, the appender waiting, when delayed
# allocation reaches half the free space (DWAL on a 4 GiB ext4: 6 s; docs/FXMARK.md). The window counts
# the stall up to its end; FxMark's program waits for the call and counts all of it.
STALL_S = 0.5
# A point's file system takes at most this share of the machine's memory (tmpfs, or the loop device's
# image on tmpfs, which holds no more than /dev/shm's size): the operations that fill it stop at ENOSPC,
# as FxMark's, before the machine (or /dev/shm) runs out.
MEMORY_SHARE = 0.5
SHM = Path("/dev/shm")


@dataclass(frozen=True)
class Operation:
    name: str  # FxMark's: DRBL
    does: str
    unit: str  # one counted call
    stops: bool = False  # its pool can run out or its file system fill: the task stops there (fxmark.h)

    @property
    def data(self) -> bool:
        """A D* operation: its files take -p directio."""
        return self.name.startswith("D")

    @property
    def sharing(self) -> str:
        return SHARING[self.name[-1]]


# FxMark's Figure 2 order: data reads, data writes, then metadata reads and writes.
OPERATIONS = (
    Operation("DRBL", "read a block of a private file", "read"),
    Operation("DRBM", "read a private block of a shared file", "read"),
    Operation("DRBH", "read the same block of a shared file", "read"),
    Operation("DWOL", "overwrite a block of a private file", "write"),
    Operation("DWOM", "overwrite a private block of a shared file (the inode's lock)", "write"),
    Operation("DWAL", "append a block to a private file (block allocation)", "append", stops=True),
    Operation("DWTL", "truncate a private file by a block (block freeing)", "truncate", stops=True),
    Operation("DWSL", "overwrite a block of a private file and fsync it (the journal)", "write+fsync"),
    Operation("MRPL", "path resolution: stat a private file five levels down", "stat"),
    Operation("MRPM", "path resolution: stat files of a shared five-level tree (FxMark's eight paths)", "stat"),
    Operation("MRPH", "path resolution: stat the same file of a shared five-level tree", "stat"),
    Operation("MRDL", "read a private directory, on past its end (FxMark's readdir loop)", "readdir"),
    Operation("MRDM", "read the shared directory, on past its end (its lock, read)", "readdir"),
    Operation("MWCL", "create an empty file in a private directory", "create", stops=True),
    Operation("MWCM", "create a file in the shared directory (its lock)", "create", stops=True),
    Operation("MWUL", "unlink an empty file in a private directory", "unlink", stops=True),
    Operation("MWUM", "unlink an empty file in the shared directory (its lock)", "unlink", stops=True),
    Operation("MWRL", "rename a file in a private directory (the rename lock)", "rename"),
    Operation("MWRM", "move a file from a private directory into the shared one", "rename", stops=True),
)
BY_NAME = {op.name: op for op in OPERATIONS}


def memory_bytes() -> int:
    return (meminfo_kb("MemTotal") or 0) * 1024


def fs_size(params: dict[str, Any]) -> int:
    """A point's file system's size in bytes: -p size_gib (FxMark's 32 GiB), at most MEMORY_SHARE of the
    machine's memory and /dev/shm's size, in whole GiB (and at least 1)."""
    room = memory_bytes() * MEMORY_SHARE
    if SHM.is_dir():
        room = min(room, shutil.disk_usage(SHM).total)
    return min(int(params["size_gib"]), max(1, int(room) >> 30)) << 30


class FxmarkInstance(MicroInstance):
    """The driver on a freshly mounted file system, which goes with it (stop() releases it). Reads when
    each task stopped at the window's end, so window_work() is the work over the time worked."""

    def __init__(self, ctx: PointContext, binary: Path, mounted: Mounted, params: dict[str, int],
                 metrics: dict[str, Any]):
        self.mounted = mounted
        self.op = BY_NAME[ctx.test]
        self._ends: list[tuple[int, list[float]]] = []
        self._stopped_at: list[int] = []
        self._worked: float | None = None  # the window's work over the time worked, once stopped
        self._too_little: str | None = None
        self._last_counts: list[float] | None = None
        self._moved_at: list[int] = []  # each task's last sample (monotonic ns) that found its count moved
        self._stall: dict[str, Any] = {}
        # Randomised, as FxMark's program runs: the driver's fixed layout is one draw of them, a slow one
        # here (MRPM 0.92 of FxMark's, as FxMark's own under setarch -R: docs/FXMARK.md).
        super().__init__(ctx, binary, ctx.test, "procs", mounted.path, params, metrics, aslr=True)
        if self._step <= STOPPED_WORD:
            self.stop()
            raise PointFailed(f"{binary.name}'s counter slots hold {self._step} words, fewer than 2: rebuild native/")

    def _mark(self) -> None:
        if self._counters is not None:
            # The count first: a task that stops after it was read stopped after this mark.
            self._ends.append((time.monotonic_ns(), self.sample().per_task or []))
            self._stopped_at = [int(self._counters[i * self._step + STOPPED_WORD]) for i in range(self._ntasks)]

    def sample(self) -> Sample:
        s = super().sample()
        now = time.monotonic_ns()
        if s.per_task is not None:
            if self._last_counts is None:
                self._moved_at = [now] * len(s.per_task)
            else:
                self._moved_at = [now if a != b else at
                                  for a, b, at in zip(s.per_task, self._last_counts, self._moved_at, strict=True)]
            self._last_counts = s.per_task
        return s

    def window_opened(self) -> None:
        self._mark()

    def window_closed(self) -> None:
        self._mark()
        quiet = stalled_s(self._moved_at, self._stopped_at, time.monotonic_ns())
        if quiet >= STALL_S:
            self._stall = {"stalled_s": round(quiet, 2), "stalled_in": blocked_in(self.ctx.group.threads() or [])}

    def stop(self) -> dict[str, Any]:
        metrics = super().stop()  # the driver first: then nothing holds the file system
        self.mounted.release()
        metrics.update(self.mounted.facts(), **self._stall)
        if self.op.stops and len(self._ends) == 2:
            (t0, c0), (t1, c1) = self._ends
            rated = over_time_worked(t0, t1, c0, c1, self._stopped_at)
            metrics["stopped_share"] = rated.stopped_share
            self._worked, self._too_little = rated.work, rated.too_little
        return metrics

    def window_work(self) -> float | None:
        if self._too_little:
            raise PointFailed(f"{self._too_little}: too little work to rate (a shorter --warmup and --duration, "
                              "a larger -p size_gib, or no -p files or -p blocks)")
        return self._worked


def stalled_s(moved_at: list[int], stopped_at: list[int], now: int) -> float:
    """The longest time (s) any task that has not stopped went without its count moving, up to now."""
    return max(((now - at) / 1e9 for at, stopped in zip(moved_at, stopped_at, strict=False) if not stopped),
               default=0.0)


def blocked_in(threads: list[int]) -> str:
    """Where the threads that sleep uninterruptibly (D) wait in the kernel, their wchan's, one each."""
    where = set()
    for tid in threads:
        if procfs.state(tid) == "D":
            with contextlib.suppress(OSError):  # it woke and ended meanwhile
                where.add(Path(f"/proc/{tid}/wchan").read_text().strip() or "?")
    return ",".join(sorted(where))


@dataclass(frozen=True)
class Rated:
    """A window's work at the rate each task worked, FxMark's works over each worker's seconds."""

    work: float | None  # None: a task worked too little of the window to rate
    stopped_share: float  # of the tasks' window time, after they stopped
    too_little: str | None = None


def over_time_worked(t0: int, t1: int, c0: list[float], c1: list[float], stopped_at: list[int]) -> Rated:
    """The window [t0, t1] (CLOCK_MONOTONIC ns, the tasks' clock) with each task's counts at its ends and
    when it stopped (0: it did not): each task's count over the time it worked, scaled to the window."""
    span = t1 - t0
    worked = [span if not at or at >= t1 else max(0, at - t0) for at in stopped_at]
    share = round(1 - sum(worked) / (span * len(worked)), 4)
    if min(worked) < MIN_WORKED * span:
        return Rated(None, share, f"a task stopped {min(worked) / span:.0%} into the window (its pool ran out or "
                                  "its file system filled, where FxMark's stops too)")
    return Rated(sum((b - a) * span / w for a, b, w in zip(c0, c1, worked, strict=True)), share)


def estimate_mb(cores: int) -> float:
    """Memory a point needs: the file system's own (a journal, trees), and DRBM's 8 MiB region a task in
    the page cache and again in the tmpfs file under the loop device. What the operations that fill the
    file system write is bounded by its size, at most MEMORY_SHARE of the memory (fs_size)."""
    return 512 + cores * 2 * 8


class Fxmark(Workload):
    name = "fxmark"
    description = "FxMark's file-system operations at three sharing levels, one line per file system"
    unit = "op"
    variants = tuple(Variant(fs.name, fs.description) for fs in filesystem.KNOWN.values())
    params = (
        Param("directio", False, "the D* operations' files opened O_DIRECT (FxMark's --directio); tmpfs stays "
              "buffered, as in FxMark"),
        Param("device", "", "make each point's file system on this block device instead of a loop device over "
              "tmpfs: what it holds is destroyed, so it needs -p wipe=yes"),
        Param("wipe", False, "agree that -p device's contents are destroyed"),
        Param("size_gib", 32, "each file system's size on its loop device (FxMark's 32G; a sparse file on tmpfs: "
              "only what is written takes memory), at most half the machine's memory; tmpfs's limit", "GiB"),
        Param("files", 0, "the most files a task makes: MWCL and MWCM's creates, and the pool MRDL, MRDM, MWUL, "
              "MWUM and MWRM make first (0: FxMark's, until the file system is full or, for MRD* and MWRM, for "
              "the warm-up and window)"),
        Param("blocks", 0, "the most 4 KiB blocks DWAL appends and DWTL's file holds (0: FxMark's, until the "
              "file system is full)"),
    )
    paper = ("beyond the paper: FxMark (Min et al., ATC 2016) measured the file-system layer MOSBENCH kept on "
             "tmpfs; its Figure 2 is the report's file-system table")
    metrics_shown_apart = ("stopped_share",)

    def tests(self) -> list[TestInfo]:
        try:
            built = {t.name for t in list_tests(native.binary(BINARY))}
        except UserError:
            return []
        return [TestInfo(op.name, f"{op.sharing} sharing: {op.does}") for op in OPERATIONS if op.name in built]

    def unit_for(self, test: str) -> str:
        op = BY_NAME.get(test)
        return op.unit if op else self.unit

    def check_available(self) -> None:
        native.binary(BINARY)
        if os.geteuid() != 0:
            raise UserError("fxmark makes and mounts a file system for every point: run it as root")
        for tool in ("losetup", "mount", "umount"):
            if shutil.which(tool) is None:
                raise UserError(f"fxmark needs {tool} (util-linux, mount)")

    def measures(self, test: str, variant: str, cores: int) -> bool:
        """Every point; a file system this machine cannot make is refused here, where the plan's points
        are first listed, before the run exists."""
        fs = filesystem.KNOWN.get(variant)
        if fs is not None and (missing := fs.missing()):
            others = [f.name for f in filesystem.KNOWN.values() if not f.missing()]
            raise UserError(f"fxmark's {variant} points need {missing}, which this machine lacks: "
                            f"`bash scripts/install-deps` installs it, or leave {variant} out "
                            f"(--variant {','.join(others)})")
        return True

    def check_params(self, params: dict[str, Any]) -> None:
        for name, least in (("files", 0), ("blocks", 0), ("size_gib", 1)):
            if params[name] < least:
                raise UserError(f"fxmark -p {name}={params[name]}: at least {least}")
        if device := params["device"]:
            # What the device is comes first: "add wipe=yes" to a device that is not there helps no one.
            filesystem.check_device(device)
            check_device_size(device)
            if not params["wipe"]:
                raise UserError(f"-p device={device}: every point makes a new file system on it, destroying "
                                "what it holds; add -p wipe=yes to agree")

    def check_cores(self, params: dict[str, Any], cores: int) -> None:
        """This machine's: the memory the largest point may take."""
        need = estimate_mb(cores)
        if need > (have := mem_available_mb()):
            raise UserError(f"fxmark at {cores} cores may take {need:,.0f} MB of memory and {have:,.0f} MB is "
                            "available: fewer cores")
        # The loop devices' images are in the run's scratch on tmpfs (run/sweep.py's /dev/shm).
        shm = SHM
        if not params["device"] and shm.is_dir() and need / 2 > (free := shutil.disk_usage(shm).free / 2**20):
            raise UserError(f"fxmark at {cores} cores may write {need / 2:,.0f} MB into {shm}, which has "
                            f"{free:,.0f} MB free: fewer cores")

    def setup(self, ctx: RunContext) -> None:
        ctx.facts["mkfs"] = {fs.name: _version(fs) for fs in filesystem.KNOWN.values()
                             if fs.mkfs and not fs.missing()}
        ctx.facts["mount_options"] = {}

    def start(self, ctx: PointContext) -> Instance:
        op = BY_NAME[ctx.test]
        fs = filesystem.KNOWN.get(ctx.variant)
        if fs is None:
            raise PointFailed(f"fxmark knows no file system {ctx.variant!r}")
        p = ctx.params
        device = Path(p["device"]) if p["device"] and not fs.memory else None
        mounted: Mounted | None = None
        try:
            # FxMark's file system: mkfs's own inode count, the pools filling it as FxMark's fill theirs.
            mounted = filesystem.mount_fresh(
                fs, ctx.scratch / "fs", ctx.launcher.journal, size=fs_size(p),
                device=device, image=None if device or fs.memory else ctx.scratch / "fs.img")
            ctx.run.facts.setdefault("mount_options", {})[fs.name] = mounted.options
            direct = bool(p["directio"]) and op.data and not fs.memory
            metrics = {"io": "direct" if direct else "buffered"} if op.data else {}
            # MRD* and MWRM fill their pool for "the run's length", FxMark's duration: here warm-up and window.
            return FxmarkInstance(ctx, native.binary(BINARY), mounted,
                                  {"files": p["files"], "blocks": p["blocks"], "directio": int(direct),
                                   "fill_ms": round(ctx.window_end * 1000)}, metrics)
        except BaseException:
            if mounted is not None:
                mounted.release()
            raise

    def columns_for(self, test: str) -> tuple[MetricColumn, ...]:
        if not BY_NAME.get(test, OPERATIONS[0]).stops:
            return ()
        return (MetricColumn("stopped", lambda m: f"{m['stopped_share']:.0%}" if "stopped_share" in m else ""),)

    def point_notes(self, metrics: dict[str, Any]) -> list[PointNote]:
        """A task in one call across the window's end: the rate counts the stall up to the end alone."""
        notes = super().point_notes(metrics)
        if "stalled_s" in metrics:
            where = f" in {metrics['stalled_in']}" if metrics.get("stalled_in") else ""
            notes.append(PointNote("stalled at the end", f"STALLED (a task's count stood still the window's last "
                                                         f"{metrics['stalled_s']:.1f} s{where})"))
        return notes


def check_device_size(device: str) -> None:
    """A device smaller than the least file system fxmark makes (-p size_gib's least, 1 GiB; xfs's own
    least is 300 MiB) is refused before the run, as is one that holds nothing (a loop device with no file
    attached reads as size 0)."""
    try:
        size = filesystem.block_device_size(Path(device))
    except OSError as e:
        raise UserError(f"-p device={device}: {e.strerror}") from None
    if size == 0:
        raise UserError(f"-p device={device} holds nothing (size 0: a loop device with no file attached?)")
    if size < 1 << 30:
        raise UserError(f"-p device={device} holds {size / 2**20:,.0f} MiB: fxmark's file systems take at least "
                        "1 GiB")


def _version(fs: filesystem.FileSystem) -> str:
    """The mkfs's own version line (mke2fs -V writes it to stderr)."""
    try:
        done = subprocess.run([fs.mkfs[0], "-V"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
    return lines[0] if lines else "unknown"
