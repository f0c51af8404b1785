"""Metis: MapReduce on one multicore machine (the paper's sections 3.7 and 5.8), the inverted index.

A point is one job on the point's CPUs: `mosbench-metis` loads the input into memory, says "ready",
and starts the job on SIGUSR1, which the harness sends as its window opens; the window closes when
the job's result file appears. Variants are the page size of the job's large tables: `4k` (the
paper's "Stock + 4 KB pages") and `2m` (its "PK + 2 MB pages"). The program also measures the CPUs'
memory bandwidth (a STREAM triad) before the job, the yardstick for the reduce phase's traffic.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mosbench import native
from mosbench.errors import UserError
from mosbench.workloads.base import Instance, Param, PointContext, RunContext, TestInfo, Variant, Workload
from mosbench.workloads.job import JobInstance

BINARY = "mosbench-metis"
MAX_U32, MAX_U64 = (1 << 32) - 1, (1 << 64) - 1


def default_size_mb(cores: int, memory_bytes: int) -> int:
    """64 MB per core, as the paper's 2 GB was for 48 cores (about 43 MB each), within an eighth of memory."""
    return max(64, min(64 * cores, memory_bytes // 8 >> 20))


class MetisInstance(JobInstance):
    program = BINARY

    def __init__(self, ctx: PointContext, binary: Path, input_path: Path):
        args = [str(binary), "--app", ctx.test, "--input", str(input_path), "--cpus",
                ",".join(map(str, ctx.cpus)), "--pages", ctx.variant, "--result", str(self.result_path(ctx)),
                "--wait-signal", "--stream"]
        if ctx.params["partitions"]:
            args += ["--partitions", str(ctx.params["partitions"])]
        super().__init__(ctx, f"metis-{ctx.test}-{ctx.variant}", args)

    def metrics(self, r: dict[str, Any]) -> dict[str, Any]:
        metrics = {k: r[k] for k in ("job_s", "map_s", "reduce_s", "merge_s", "keys", "minor_faults",
                                     "major_faults", "pages")}
        if r["reduce_s"] > 0:
            metrics["reduce_bytes_per_s"] = r["reduce_bytes"] / r["reduce_s"]
        metrics["stream_triad_bytes_per_s"] = r["stream_triad_bytes_per_s"]
        return metrics


class Metis(Workload):
    name = "metis"
    description = "Metis MapReduce: an inverted index (and word count) of a text in memory"
    unit = "job"
    kind = "job"
    variants = (
        Variant("4k", "large tables in 4 KB pages: the paper's Stock + 4 KB pages"),
        Variant("2m", "large tables in 2 MB pages, reserved else transparent: the paper's PK + 2 MB pages"),
    )
    params = (
        Param("size_mb", 0, "generated input size (0: 64 MB per CPU of the machine, at most 1/8 of memory)", "MB"),
        Param("seed", 1, "seed of the generated input"),
        Param("vocab", 1000000, "vocabulary of the generated input (Zipf, exponent 1)", "words"),
        Param("input", "", "a text file to index instead of the generated input"),
        Param("partitions", 0, "reduce partitions (0: 4 per worker)"),
    )
    paper = "3.7 and 5.8: Metis inverted index; Figure 11's Stock + 4 KB pages against PK + 2 MB pages"

    def tests(self) -> list[TestInfo]:
        return [TestInfo("invindex", "inverted index: each word to the sorted byte offsets where it occurs"),
                TestInfo("wordcount", "word count: each word to its number of occurrences")]

    def check_available(self) -> None:
        native.binary(BINARY)

    def check_params(self, params: dict[str, Any]) -> None:
        if params["input"]:
            path = Path(params["input"])
            if not path.is_file() or not os.access(path, os.R_OK):
                raise UserError(f"metis input {path} is not a readable file")
            if path.stat().st_size == 0:
                raise UserError(f"metis input {path} is empty")
        # The ranges mosbench-metis parses (native/metis/apps/main.c): refused here, not by every point.
        for name, least, most in (("size_mb", 0, MAX_U64 >> 20), ("seed", 0, MAX_U64), ("vocab", 1, MAX_U32),
                                  ("partitions", 0, MAX_U32)):
            if not least <= params[name] <= most:
                raise UserError(f"metis {name} must be {least}..{most}, not {params[name]}")

    def setup(self, ctx: RunContext) -> None:
        if ctx.params["input"]:
            ctx.extra["input"] = Path(ctx.params["input"])
            return
        size = ctx.params["size_mb"] or default_size_mb(os.cpu_count() or 1,
                                                        os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        path = ctx.cache / f"zipf-{size}mb-seed{ctx.params['seed']}-vocab{ctx.params['vocab']}.txt"
        if not path.exists():
            # The generator writes a temporary file and renames it when complete: a cached input is whole.
            status, last = ctx.run("metis-generate", [
                str(native.binary(BINARY)), "--generate", str(path), "--size-mb", str(size),
                "--seed", str(ctx.params["seed"]), "--vocab", str(ctx.params["vocab"])])
            if status != 0:
                raise UserError(f"cannot generate the metis input: {last or f'exit status {status}'}")
        ctx.extra["input"] = path

    def start(self, ctx: PointContext) -> Instance:
        return MetisInstance(ctx, native.binary(BINARY), ctx.run.extra["input"])
