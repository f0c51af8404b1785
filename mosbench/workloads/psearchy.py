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
from pathlib import Path, PurePosixPath
from typing import Any

from mosbench import native
from mosbench.errors import UserError
from mosbench.workloads import linuxsrc
from mosbench.workloads.base import Instance, Param, PointContext, RunContext, Variant, Workload
from mosbench.workloads.job import JobInstance
from mosbench.workloads.linuxsrc import LINUX_TREE

BINARY = "mosbench-psearchy"
METRICS = ("job_s", "phase1_s", "phase2_s", "files", "bytes", "words", "entries", "flushes", "merge_passes", "dbs",
           "postings_bytes", "minor_faults", "major_faults")


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
        elif not linuxsrc.LINUX_TARBALL.is_file():
            raise UserError(f"{linuxsrc.LINUX_TARBALL} is missing: `make deps` installs {LINUX_TREE}, or give "
                            "-p corpus=DIR")
        sub = PurePosixPath(params["subdir"])
        if sub.is_absolute() or ".." in sub.parts:
            raise UserError(f"psearchy subdir {params['subdir']!r} must be a path inside the Linux tree")
        if params["subdir"] and not params["corpus"] and not linuxsrc.is_linux_dir(linuxsrc.tree_cache(), str(sub)):
            raise UserError(f"psearchy subdir {params['subdir']!r} is not a directory of {LINUX_TREE}")
        if params["mem_mb"] < 1 or params["dblim"] < 1:
            raise UserError("psearchy needs mem_mb >= 1 and dblim >= 1")

    def setup(self, ctx: RunContext) -> None:
        if ctx.params["corpus"]:
            ctx.extra["corpus"] = Path(ctx.params["corpus"]).resolve()
            return
        ctx.extra["corpus"] = linuxsrc.unpack_linux(linuxsrc.tree_cache(), ctx.run) / ctx.params["subdir"]

    def start(self, ctx: PointContext) -> Instance:
        return PsearchyInstance(ctx, native.binary(BINARY), ctx.run.extra["corpus"])
