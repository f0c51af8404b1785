"""Psearchy: pedsort, the parallel indexer of the paper's sections 3.6 and 5.7.

A point is one job: `mosbench-psearchy` indexes a directory tree with one worker per CPU of the point,
each pinned, sharing a queue of files largest first. The default corpus is the Linux source tree from
Debian's linux-source-6.1, unpacked once into a tmpfs cache (the paper indexed Linux 2.6.35 with the
files in the buffer cache); the index is written to the point's tmpfs scratch. Variants are the
paper's: `threads` (one process, stdio streams shared by threads) and `procs` (a process per core);
spread placement gives its "RR" line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from mosbench import native
from mosbench.errors import UserError
from mosbench.workloads.base import Instance, Param, PointContext, RunContext, Variant, Workload, cache_root
from mosbench.workloads.job import JobInstance

BINARY = "mosbench-psearchy"
LINUX_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
LINUX_TREE = "linux-source-6.1"
METRICS = ("job_s", "phase1_s", "phase2_s", "files", "bytes", "words", "entries", "flushes", "merge_passes", "dbs",
           "postings_bytes", "minor_faults", "major_faults")


def tmpfs_cache(fallback: Path) -> Path:
    """The corpus lives in memory, as the paper's did; /dev/shm where there is one."""
    shm = Path("/dev/shm")
    return shm / f"mosbench-cache-{os.getuid()}" / "psearchy" if shm.is_dir() else fallback


# Runs a program to its end: (name, argv) -> (exit status, its last line on stderr).
Run = Callable[[str, list[str]], tuple[int, str]]


def run_here(name: str, argv: list[str]) -> tuple[int, str]:
    r = subprocess.run(argv, capture_output=True, text=True)
    return r.returncode, (r.stderr.strip().splitlines() or [""])[-1]


def is_linux_dir(cache: Path, subdir: str) -> bool:
    """Whether subdir is a directory of the Linux tree: looked up in the tree if it is unpacked, else in
    the tarball's listing, kept beside the cache (listing takes ~20 s once, unpacking a minute)."""
    tree = cache / LINUX_TREE
    if tree.is_dir():
        return (tree / subdir).is_dir()
    listing = cache / f"{LINUX_TREE}.dirs"
    if not listing.exists():
        r = subprocess.run(["tar", "-tJf", str(LINUX_TARBALL)], capture_output=True, text=True)
        if r.returncode != 0:
            raise UserError(f"cannot read {LINUX_TARBALL}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        dirs: set[str] = set()
        for member in r.stdout.splitlines():
            parts = PurePosixPath(member).parts[1:]  # below linux-source-6.1/
            dirs.update("/".join(parts[:n]) for n in range(1, len(parts)))  # every parent of the member
        cache.mkdir(parents=True, exist_ok=True)
        partial = listing.with_suffix(".partial")
        partial.write_text("\n".join(sorted(dirs)) + "\n")
        partial.replace(listing)
    return str(PurePosixPath(subdir)) in set(listing.read_text().splitlines())


def unpack_linux(cache: Path, run: Run = run_here) -> Path:
    """The Linux tree, unpacked once: into a temporary directory renamed into place when complete."""
    tree = cache / LINUX_TREE
    if tree.is_dir():
        return tree
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{LINUX_TREE}.partial-", dir=cache))
    try:
        print(f"psearchy: unpacking {LINUX_TARBALL} into {cache} (once; about 1.4 GB)", file=sys.stderr)
        status, last = run("psearchy-unpack", ["tar", "-xJf", str(LINUX_TARBALL), "-C", str(partial)])
        if status != 0:
            raise UserError(f"cannot unpack {LINUX_TARBALL}: {last or f'tar exited with status {status}'}")
        try:
            (partial / LINUX_TREE).rename(tree)
        except OSError:
            if not tree.is_dir():  # not another run's copy that landed first
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return tree


class PsearchyInstance(JobInstance):
    program = BINARY

    def __init__(self, ctx: PointContext, binary: Path, corpus: Path):
        args = [str(binary), "index", "--corpus", str(corpus), "--out", str(ctx.scratch / "index"),
                "--cpus", ",".join(map(str, ctx.cpus)), "--mode", ctx.variant,
                "--mem", f"{ctx.params['mem_mb']}M", "--dblim", str(ctx.params["dblim"]),
                "--result", str(self.result_path(ctx)), "--wait-signal"]
        super().__init__(ctx, f"psearchy-{ctx.variant}", args)

    def metrics(self, result: dict[str, Any]) -> dict[str, Any]:
        return {k: result[k] for k in METRICS}


class Psearchy(Workload):
    name = "psearchy"
    description = "Psearchy's pedsort: index a source tree with a worker per core"
    unit = "job"
    kind = "job"
    variants = (
        Variant("threads", "one process, a thread per core, stdio streams: the paper's Stock + Threads"),
        Variant("procs", "a process per core: the paper's Stock + Procs"),
    )
    params = (
        Param("corpus", "", f"directory tree to index (default: {LINUX_TREE} unpacked once into a tmpfs cache)"),
        Param("subdir", "", "index only this part of the default tree (e.g. fs, for quicker points)"),
        Param("mem_mb", 48, "each worker's word table; full tables are sorted and flushed", "MB"),
        Param("dblim", 200000, "entries per Berkeley DB: total work independent of the core count", "words"),
    )
    paper = "3.6 and 5.7: pedsort on the Linux tree; Figure 10's Stock + Threads against Stock + Procs"

    def check_available(self) -> None:
        native.binary(BINARY)

    def check_params(self, params: dict[str, Any]) -> None:
        if params["corpus"]:
            path = Path(params["corpus"])
            if not path.is_dir() or not os.access(path, os.R_OK | os.X_OK):
                raise UserError(f"psearchy corpus {path} is not a readable directory")
            if params["subdir"]:
                raise UserError("psearchy: subdir selects part of the default tree; give corpus=DIR alone")
        elif not LINUX_TARBALL.is_file():
            raise UserError(f"{LINUX_TARBALL} is missing: apt-get install {LINUX_TREE}, or give -p corpus=DIR")
        sub = PurePosixPath(params["subdir"])
        if sub.is_absolute() or ".." in sub.parts:
            raise UserError(f"psearchy subdir {params['subdir']!r} must be a path inside the Linux tree")
        cache = tmpfs_cache(cache_root() / self.name)
        if params["subdir"] and not params["corpus"] and not is_linux_dir(cache, str(sub)):
            raise UserError(f"psearchy subdir {params['subdir']!r} is not a directory of {LINUX_TREE}")
        if params["mem_mb"] < 1 or params["dblim"] < 1:
            raise UserError("psearchy needs mem_mb >= 1 and dblim >= 1")

    def setup(self, ctx: RunContext) -> None:
        if ctx.params["corpus"]:
            ctx.extra["corpus"] = Path(ctx.params["corpus"]).resolve()
            return
        ctx.extra["corpus"] = unpack_linux(tmpfs_cache(ctx.cache), ctx.run) / ctx.params["subdir"]

    def start(self, ctx: PointContext) -> Instance:
        return PsearchyInstance(ctx, native.binary(BINARY), ctx.run.extra["corpus"])
