"""FxMark's file-system microbenchmarks (Min et al., "Understanding Manycore Scalability of File Systems",
USENIX ATC 2016) under their own names, one test per operation and sharing level, one variant per file
system: `mosbench run fxmark --variant tmpfs,ext4,xfs,btrfs` draws one line per file system in every
operation's figure.

Each point gets a file system of its own, made fresh (machine/filesystem.py: a loop device over a sparse
file on tmpfs, or the user's device with -p device=... -p wipe=yes), mounted under the point's scratch and
gone when the point ends, whatever ends it. The operations are testcases of the micro driver
(native/fxmark), one task per core in processes as FxMark's, working in the mounted file system.

Seven operations refill a pool when it runs out (FxMark stops there): the time a task spends refilling is
published beside its count and left out of its window, so the throughput is FxMark's, work over the time
spent working (docs/FXMARK.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosbench import native
from mosbench.errors import PointFailed, UserError
from mosbench.machine import filesystem
from mosbench.machine.filesystem import Mounted
from mosbench.workloads.base import (
    Instance,
    MetricColumn,
    Param,
    PointContext,
    RunContext,
    TestInfo,
    Variant,
    Workload,
    mem_available_mb,
)
from mosbench.workloads.micro import MicroInstance, list_tests

BINARY = "mosbench-fxmark"
SHARING = {"L": "low", "M": "medium", "H": "high"}
# A slot's words (native/fxmark/fxmark.h): the count, nanoseconds spent refilling, a refill's start.
REFILL_WORD, REFILL_SINCE_WORD = 1, 2
# Below this share of the window spent working, a task's rate is too little time to stand on.
MIN_WORKED = 0.1


@dataclass(frozen=True)
class Operation:
    name: str  # FxMark's: DRBL
    does: str
    unit: str  # one counted call
    refills: bool = False  # its pool runs out and is refilled uncounted (fxmark.h)

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
    Operation("DWAL", "append a block to a private file (block allocation)", "append", refills=True),
    Operation("DWTL", "truncate a private file by a block (block freeing)", "truncate", refills=True),
    Operation("DWSL", "overwrite a block of a private file and fsync it (the journal)", "write+fsync"),
    Operation("MRPL", "path resolution: stat a private file five levels down", "stat"),
    Operation("MRPM", "path resolution: stat files of a shared five-level tree (FxMark's eight paths)", "stat"),
    Operation("MRPH", "path resolution: stat the same file of a shared five-level tree", "stat"),
    Operation("MRDL", "read the entries of a private directory", "entry"),
    Operation("MRDM", "read the entries of the shared directory (its lock, read)", "entry"),
    Operation("MWCL", "create an empty file in a private directory", "create", refills=True),
    Operation("MWCM", "create a file in the shared directory (its lock)", "create", refills=True),
    Operation("MWUL", "unlink an empty file in a private directory", "unlink", refills=True),
    Operation("MWUM", "unlink an empty file in the shared directory (its lock)", "unlink", refills=True),
    Operation("MWRL", "rename a file in a private directory (the rename lock)", "rename"),
    Operation("MWRM", "move a file from a private directory into the shared one", "rename", refills=True),
)
BY_NAME = {op.name: op for op in OPERATIONS}
# Files beyond the tasks' own: MRPM and MRPH's tree (37,448 entries), and room to spare.
EXTRA_INODES = 50_000


class FxmarkInstance(MicroInstance):
    """The driver on a freshly mounted file system, which goes with it (stop() releases it). Reads each
    task's refill time at the window's ends, so window_work() is the work over the time spent working."""

    def __init__(self, ctx: PointContext, binary: Path, mounted: Mounted, params: dict[str, int],
                 metrics: dict[str, Any]):
        self.mounted = mounted
        self.op = BY_NAME[ctx.test]
        self._ends: list[tuple[int, list[float], list[int]]] = []
        self._worked: float | None = None  # the window's work over the time worked, once stopped
        self._too_little: str | None = None
        super().__init__(ctx, binary, ctx.test, "procs", mounted.path, params, metrics)
        if self._step <= REFILL_SINCE_WORD:
            self.stop()
            raise PointFailed(f"{binary.name}'s counter slots hold {self._step} words, fewer than 3: rebuild native/")

    def _refill_ns(self) -> list[int]:
        """Each task's nanoseconds spent refilling up to now, the refill in progress included. The task
        writes its total, then clears its mark: a mark unchanged around the total's read is consistent."""
        out = []
        for i in range(self._ntasks):
            base = i * self._step
            while True:
                since = self._counters[base + REFILL_SINCE_WORD]
                total = self._counters[base + REFILL_WORD]
                if self._counters[base + REFILL_SINCE_WORD] == since:
                    break
            now = time.monotonic_ns()  # CLOCK_MONOTONIC, the task's clock
            out.append(total + (max(0, now - since) if since else 0))
        return out

    def _mark(self) -> None:
        if self._counters is not None:
            self._ends.append((time.monotonic_ns(), self.sample().per_task or [], self._refill_ns()))

    def window_opened(self) -> None:
        self._mark()

    def window_closed(self) -> None:
        self._mark()

    def stop(self) -> dict[str, Any]:
        metrics = super().stop()  # the driver first: then nothing holds the file system
        self.mounted.release()
        metrics.update(self.mounted.facts())
        if self.op.refills and len(self._ends) == 2:
            (t0, c0, r0), (t1, c1, r1) = self._ends
            span = t1 - t0
            worked = [span - (b - a) for a, b in zip(r0, r1, strict=True)]
            metrics["refill_share"] = round(1 - sum(worked) / (span * len(worked)), 4)
            if min(worked) < MIN_WORKED * span:
                self._too_little = f"a task spent {1 - min(worked) / span:.0%} of the window refilling its pool"
            else:
                self._worked = sum((b - a) * span / w for a, b, w in zip(c0, c1, worked, strict=True))
        return metrics

    def window_work(self) -> float | None:
        if self._too_little:
            raise PointFailed(f"{self._too_little}: too little work to rate (a larger -p files or -p blocks)")
        return self._worked


def estimate_mb(params: dict[str, Any], cores: int) -> float:
    """Memory a point may take at most: the file system's own (a journal, trees), and per task the most
    any operation keeps (DRBM's 8 MiB region, DWAL's and DWTL's file, MWCM's files of a block), each
    in the page cache and again in the tmpfs file under the loop device."""
    per_task_kib = max(2 * 8 * 1024, 2 * 4 * params["blocks"], params["files"] * (2 * 4 + 2))
    return 512 + cores * per_task_kib / 1024


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
              "only what is written takes memory); tmpfs's limit", "GiB"),
        Param("files", 10_000, "files each task makes for MRDL, MRDM, MWUL, MWUM and MWRM, and makes in MWCL and "
              "MWCM before they are cleared (FxMark: until the time is up or the file system is full)"),
        Param("blocks", 4096, "4 KiB blocks of DWTL's file, and of DWAL's before it is cut back (FxMark: until "
              "the file system is full)"),
    )
    paper = ("beyond the paper: FxMark (Min et al., ATC 2016) measured the file-system layer MOSBENCH kept on "
             "tmpfs; its Figure 2 is the report's file-system table")
    metrics_shown_apart = ("refill_share",)

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
        for name, least in (("files", 1), ("blocks", 2), ("size_gib", 1)):
            if params[name] < least:
                raise UserError(f"fxmark -p {name}={params[name]}: at least {least}")
        if params["device"] and not params["wipe"]:
            raise UserError(f"-p device={params['device']}: every point makes a new file system on it, destroying "
                            "what it holds; add -p wipe=yes to agree")

    def check_cores(self, params: dict[str, Any], cores: int) -> None:
        """This machine's: the device free, and the memory the largest point may take."""
        if params["device"]:
            filesystem.check_device(params["device"])
        need = estimate_mb(params, cores)
        if need > (have := mem_available_mb()):
            raise UserError(f"fxmark at {cores} cores may take {need:,.0f} MB of memory and {have:,.0f} MB is "
                            "available: fewer cores, or a smaller -p files or -p blocks")
        # The loop devices' images are in the run's scratch on tmpfs (run/sweep.py's /dev/shm).
        shm = Path("/dev/shm")
        if not params["device"] and shm.is_dir() and need / 2 > (free := shutil.disk_usage(shm).free / 2**20):
            raise UserError(f"fxmark at {cores} cores may write {need / 2:,.0f} MB into {shm}, which has "
                            f"{free:,.0f} MB free: fewer cores, or a smaller -p files or -p blocks")

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
            mounted = filesystem.mount_fresh(
                fs, ctx.scratch / "fs", ctx.launcher.journal, size=int(p["size_gib"]) << 30,
                inodes=len(ctx.cpus) * p["files"] + EXTRA_INODES, device=device,
                image=None if device or fs.memory else ctx.scratch / "fs.img")
            ctx.run.facts.setdefault("mount_options", {})[fs.name] = mounted.options
            direct = bool(p["directio"]) and op.data and not fs.memory
            metrics = {"io": "direct" if direct else "buffered"} if op.data else {}
            return FxmarkInstance(ctx, native.binary(BINARY), mounted,
                                  {"files": p["files"], "blocks": p["blocks"], "directio": int(direct)}, metrics)
        except BaseException:
            if mounted is not None:
                mounted.release()
            raise

    def columns_for(self, test: str) -> tuple[MetricColumn, ...]:
        if not BY_NAME.get(test, OPERATIONS[0]).refills:
            return ()
        return (MetricColumn("refill", lambda m: f"{m['refill_share']:.0%}" if "refill_share" in m else ""),)


def _version(fs: filesystem.FileSystem) -> str:
    """The mkfs's own version line (mke2fs -V writes it to stderr)."""
    try:
        done = subprocess.run([fs.mkfs[0], "-V"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = (done.stdout.strip() or done.stderr.strip()).splitlines()
    return lines[0] if lines else "unknown"
