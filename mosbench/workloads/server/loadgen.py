"""A load generator as a point sees it: started in its own group, sampled live, measured at the end.

The native generators (native/loadgen) share a small statistics file with the harness: per-thread
cumulative counters (requests sent, answered, lost, answered wrongly, answered late, the answers'
payload bytes, and in open loop the requests due by the schedule), a state, the
first failure's message, and a phase the harness writes when its window opens and closes, so the
generator's window counts and latency percentiles cover exactly the harness's window. At the end
the generator writes its window's result as JSON; `stop()` returns it as the point's client metrics.

`Client` is what a server point asks of any client, the native generators or a workload's own
(PostgreSQL's pgbench): the same calls, and a result in the same form.
"""

from __future__ import annotations

import json
import mmap
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from mosbench import cpulist
from mosbench.errors import PointFailed
from mosbench.launch.processes import Launcher, how_it_ended
from mosbench.launch.ready import file_ready, wait_ready
from mosbench.machine.isolation import Group

MAGIC = b"MOSLOAD1"
VERSION = 2
HEADER = struct.Struct("<8sIIIIIIII216s")
STARTING, RUNNING, FAILED, STOPPED = range(4)
WARMUP, WINDOW, AFTER = range(3)
COUNTERS = ("sent", "done", "lost", "errors", "late", "bytes", "due")
_PHASE_OFFSET = struct.calcsize("<8sIIIIII")  # magic, version, nthreads, stride, offset, ncounters, state


class Client(Protocol):
    """A server point's client, as the point drives and measures it."""

    name: str

    def done(self) -> float:
        """Units of work answered so far (cumulative: samples are differences)."""

    def set_phase(self, phase: int) -> None:
        """The harness's window opened (WINDOW) or closed (AFTER): the result covers exactly it."""

    def check(self) -> None:
        """PointFailed with the client's own word if it failed or ended."""

    def stop(self) -> dict[str, Any]:
        """Ends it and returns its window's result (counts by COUNTERS' names, "latency_ns"); {} without one."""

    def logs(self) -> str:
        """The tail of what it printed, kept with a failed point."""


class LoadGenerator:
    """One native load generator process on the point's load-generator CPUs."""

    def __init__(self, launcher: Launcher, name: str, argv: list[str], group: Group, cpus: tuple[int, ...],
                 scratch: Path, limit: float, enter: Callable[[], None] | None = None):
        self.launcher = launcher
        self.name = name
        self.stats_path = scratch / f"{name}.stats"
        self.result_path = scratch / f"{name}.json"
        self.proc: subprocess.Popen = launcher.spawn(name, [
            *argv, "--cpus", cpulist.format(cpus), "--stats", str(self.stats_path),
            "--result", str(self.result_path), "--limit", str(int(limit)),
        ], group, enter=enter)
        self._map: mmap.mmap | None = None
        self._result: dict[str, Any] | None = None
        try:
            wait_ready(file_ready(self.stats_path), what=f"{name}'s statistics file", timeout=30, proc=self.proc,
                       ended=self.failure)
            self._open()
        except BaseException:
            self.stop()
            raise

    def _open(self) -> None:
        with open(self.stats_path, "r+b") as f:
            self._map = mmap.mmap(f.fileno(), 0)
        magic, version, nthreads, stride, offset, ncounters, *_ = HEADER.unpack_from(self._map)
        if magic != MAGIC or version != VERSION or ncounters < len(COUNTERS):
            raise PointFailed(f"{self.name}: statistics file has magic {magic!r} version {version}: rebuild native/")
        self._nthreads, self._stride, self._offset = nthreads, stride, offset

    def _header(self) -> tuple:
        assert self._map is not None
        return HEADER.unpack_from(self._map)

    def counters(self) -> dict[str, int]:
        """Totals over threads since the generator started."""
        if self._map is None:
            return dict.fromkeys(COUNTERS, 0)
        totals = [0] * len(COUNTERS)
        for t in range(self._nthreads):
            values = struct.unpack_from(f"<{len(COUNTERS)}Q", self._map, self._offset + t * self._stride)
            totals = [a + b for a, b in zip(totals, values, strict=True)]
        return dict(zip(COUNTERS, totals, strict=True))

    def done(self) -> float:
        return float(self.counters()["done"])

    def set_phase(self, phase: int) -> None:
        if self._map is not None:
            struct.pack_into("<I", self._map, _PHASE_OFFSET, phase)

    def check(self) -> None:
        """PointFailed with the generator's own word if it failed or ended."""
        if self._map is not None and self._header()[6] == FAILED:
            raise PointFailed(self.failure())
        if self.proc.poll() is not None:
            raise PointFailed(self.failure())

    def failure(self) -> str:
        if self._map is not None:
            header = self._header()
            if header[6] == FAILED:
                return header[9].rstrip(b"\0").decode(errors="replace")
        last = self.launcher.last_error(self.name)
        if last:
            return last
        return f"{self.name} {how_it_ended(self.proc)} without a message"

    def stop(self) -> dict[str, Any]:
        """Stops it (SIGTERM: it writes its result) and returns the window's result; idempotent."""
        if self._result is None:
            self.launcher.stop(self.proc)
            try:
                self._result = json.loads(self.result_path.read_text())
            except (OSError, ValueError):
                self._result = {}
            if self._map is not None:
                self._map.close()
                self._map = None
        return self._result

    def outputs(self, path: Path) -> list[str | None]:
        """What it wrote to `path`, a file its arguments name (after stop()); None if it wrote nothing."""
        return [path.read_text() if path.exists() else None]

    def logs(self) -> str:
        return self.launcher.log_tail(self.name, 50)


# An open-loop client that sent fewer than this share of the requests its schedule made due fell behind:
# its latencies are still measured from the schedule, but the rate asked of the server was not the rate.
KEPT_SCHEDULE = 0.95


def client_metrics(result: dict[str, Any]) -> dict[str, Any]:
    """The generator's window result as flat point metrics: counts, latency percentiles in µs, and in
    open loop the rate asked, the rate sent and whether the client kept its schedule."""
    if not result:
        return {}
    out: dict[str, Any] = {f"client_{k}": result[k] for k in COUNTERS if k in result}
    lat = result.get("latency_ns") or {}
    for k in ("p50", "p90", "p99", "p999", "max"):
        if k in lat:
            out[f"latency_{k}_us"] = round(lat[k] / 1000, 1)
    if result.get("rate"):
        window = result.get("window_s") or 0.0
        out["rate_intended"] = result["rate"]
        out["rate_sent"] = round(result.get("sent", 0) / window, 1) if window else 0.0
        due = result.get("due", 0)
        out["schedule_kept"] = round(result.get("sent", 0) / due, 4) if due else None
        out["schedule_lag_max_ms"] = round(result.get("lag_max_ns", 0) / 1e6, 3)
    return out


def behind_schedule(metrics: dict[str, Any]) -> str | None:
    """The note for a point whose open-loop client fell behind its schedule, with the figures; None if kept."""
    kept = metrics.get("schedule_kept")
    if kept is None or kept >= KEPT_SCHEDULE:
        return None
    return (f"CLIENT BEHIND SCHEDULE: sent {metrics['rate_sent']:.0f}/s of {metrics['rate_intended']:.0f}/s asked "
            f"({kept:.0%} of the requests due; waited up to {metrics['schedule_lag_max_ms']:.1f} ms for a free "
            "connection)")
