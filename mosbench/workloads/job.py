"""A job program on a point's CPUs: the protocol mosbench-metis and mosbench-psearchy share.

The program prepares (loads its input, walks its corpus), prints a line starting "ready", and starts
the job on SIGUSR1, which the harness sends as its window opens; the window closes when the job's
result file (JSON, written whole or not at all) appears and the program has exited 0.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from mosbench.errors import PointFailed
from mosbench.launch.ready import line_printed, wait_ready
from mosbench.workloads.base import Instance, PointContext, Sample


class JobInstance(Instance):
    program = ""  # for messages
    ready_timeout_s = 600.0

    def __init__(self, ctx: PointContext, name: str, args: list[str]):
        """`args` must make the program write its result to result_path(ctx) and wait for the signal."""
        self.ctx = ctx
        self.name = name
        self.proc = ctx.launcher.spawn(name, args, ctx.group)
        self._stopped = False
        try:
            wait_ready(line_printed(ctx.launcher.logdir / f"{name}.out", "ready"), what=f"{self.program} ready",
                       timeout=self.ready_timeout_s, proc=self.proc, ended=self._failure_reason, interval=0.02)
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def result_path(ctx: PointContext) -> Path:
        """Where the program must write its result: give it this in `args`."""
        return ctx.scratch / "result.json"

    @property
    def result(self) -> Path:
        return self.result_path(self.ctx)

    def begin(self) -> None:
        self.proc.send_signal(signal.SIGUSR1)

    @property
    def finished(self) -> bool:
        return self.proc.poll() == 0 and self.result.exists()

    def sample(self) -> Sample:
        return Sample(1.0 if self.finished else 0.0)

    def check(self) -> None:
        rc = self.proc.poll()
        if rc is not None and rc != 0:
            raise PointFailed(self._failure_reason())

    def _failure_reason(self) -> str:
        return self.ctx.launcher.last_error(self.name) or f"{self.program} exited with status {self.proc.returncode}"

    def stop(self) -> dict[str, Any]:
        if not self._stopped:
            self._stopped = True
            self.ctx.launcher.stop(self.proc)
        if not self.result.exists():
            return {}
        return self.metrics(json.loads(self.result.read_text()))

    def metrics(self, result: dict[str, Any]) -> dict[str, Any]:
        """The workload's own metrics from the program's result."""
        return {}

    def logs(self) -> str:
        return self.ctx.launcher.log_tail(self.name, 50)
