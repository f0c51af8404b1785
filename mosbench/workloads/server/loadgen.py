"""A load generator as a point sees it: started in its own group, sampled live, measured at the end.

The native generators (native/loadgen) share a small statistics file with the harness: per-thread
cumulative counters (requests sent, answered, lost, answered wrongly, answered late, the answers'
payload bytes, and in open loop the requests due by the schedule), a state, the
first failure's message, and a phase the harness writes when its window opens and closes, so the
generator's window counts and latency percentiles cover exactly the harness's window. At the end
the generator writes its window's result as JSON; `stop()` returns it as a `ClientResult`.

`Client` is what a server point asks of any client, the native generators or a workload's own
(PostgreSQL's pgbench): the same calls, and a `ClientResult`. `Generator` is a native generator's,
here or on client hosts: its live counters and the files it wrote besides.
"""

from __future__ import annotations

import json
import mmap
import struct
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mosbench import cpulist
from mosbench.errors import PointFailed
from mosbench.launch.processes import Launcher, how_it_ended
from mosbench.launch.ready import file_ready, wait_ready
from mosbench.machine.isolation import Group
from mosbench.workloads.server.hostresult import ClientSide

MAGIC = b"MOSLOAD1"
VERSION = 2
HEADER = struct.Struct("<8sIIIIIIII216s")
STARTING, RUNNING, FAILED, STOPPED = range(4)
WARMUP, WINDOW, AFTER = range(3)
COUNTERS = ("sent", "done", "lost", "errors", "late", "bytes", "due")
# A generator's result figures beside COUNTERS that are counts, so that client hosts' add up: httpload's
# answers judged good and tolerable, the connections, contexts or sessions each opened.
ADDED = ("good", "tolerable", "connections", "contexts", "sessions")
_PHASE_OFFSET = struct.calcsize("<8sIIIIII")  # magic, version, nthreads, stride, offset, ncounters, state

Flow = tuple[str, int, str, int]  # a client socket's source address and port, the server's address and port


@dataclass(frozen=True)
class ClientResult:
    """A client's window as it ended: the counts it keeps (None: one it does not count, such as pgbench's
    requests sent), its latency percentiles (ns), and what only some clients know."""

    sent: int | None = None
    done: int | None = None
    lost: int | None = None
    errors: int | None = None
    late: int | None = None
    bytes: int | None = None
    due: int | None = None  # open loop: requests the schedule made due
    latency_ns: Mapping[str, float] = field(default_factory=dict)  # p50, p90, p99, p999, max
    window_s: float | None = None  # the window by the client's own clock
    rate: float | None = None  # open loop: the requests per second asked of it
    lag_max_ns: float = 0  # open loop: the longest a due request waited for a free connection
    good: int | None = None  # httpload: answers fast enough for SPECweb2005's rule, and tolerably fast
    tolerable: int | None = None
    connections: int | None = None  # what the client opened: httpload's, memload's, smtpload's
    contexts: int | None = None
    sessions: int | None = None
    connection_ns: Mapping[str, float] = field(default_factory=dict)  # smtpload: a connection's time
    flows: tuple[Flow, ...] = ()  # memload: every context's flow
    hosts: ClientSide | None = None  # from client hosts: each one's window
    transactions: int | None = None  # pgbench: transactions in all, the window's and the rest

    @staticmethod
    def parse(raw: Mapping[str, Any]) -> ClientResult:
        """A native generator's result as it writes it (JSON)."""
        return ClientResult(
            **{k: int(raw[k]) for k in (*COUNTERS, *ADDED) if k in raw},
            latency_ns=raw.get("latency_ns") or {}, window_s=raw.get("window_s"), rate=raw.get("rate"),
            lag_max_ns=raw.get("lag_max_ns", 0), connection_ns=raw.get("connection_ns") or {},
            flows=tuple((str(f[0]), int(f[1]), str(f[2]), int(f[3])) for f in raw.get("flows") or []))


class Client(Protocol):
    """A server point's client, as the point drives and measures it."""

    name: str

    def done(self) -> float:
        """Units of work answered so far (cumulative: samples are differences)."""

    def set_phase(self, phase: int) -> None:
        """The harness's window opened (WINDOW) or closed (AFTER): the result covers exactly it."""

    def check(self) -> None:
        """PointFailed with the client's own word if it failed or ended."""

    def stop(self) -> ClientResult | None:
        """Ends it and returns its window's result; None without one (idempotent)."""

    def logs(self) -> str:
        """The tail of what it printed, kept with a failed point."""


class Generator(Client, Protocol):
    """A native load generator as a client (here, or one on every client host as one)."""

    def counters(self) -> dict[str, int]:
        """COUNTERS' totals so far, live."""

    def outputs(self, path: Path) -> list[str | None]:
        """What it wrote to `path`, a file its arguments name, once stopped: one text per generator (one
        per client host, in their order), None for a generator that wrote nothing."""


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
        self._stopped = False
        self._result: ClientResult | None = None
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

    def stop(self) -> ClientResult | None:
        """Stops it (SIGTERM: it writes its result) and returns the window's result; idempotent."""
        if not self._stopped:
            self._stopped = True
            self.launcher.stop(self.proc)
            try:
                raw = json.loads(self.result_path.read_text())
                self._result = ClientResult.parse(raw) if raw else None
            except (OSError, ValueError):
                self._result = None
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


def client_metrics(result: ClientResult | None) -> dict[str, Any]:
    """The client's window result as flat point metrics: counts, latency percentiles in µs, and in
    open loop the rate asked, the rate sent and whether the client kept its schedule."""
    if result is None:
        return {}
    out: dict[str, Any] = {f"client_{k}": getattr(result, k) for k in COUNTERS if getattr(result, k) is not None}
    for k in ("p50", "p90", "p99", "p999", "max"):
        if k in result.latency_ns:
            out[f"latency_{k}_us"] = round(result.latency_ns[k] / 1000, 1)
    if result.rate:
        window = result.window_s or 0.0
        sent = result.sent or 0
        out["rate_intended"] = result.rate
        out["rate_sent"] = round(sent / window, 1) if window else 0.0
        out["schedule_kept"] = round(sent / result.due, 4) if result.due else None
        out["schedule_lag_max_ms"] = round(result.lag_max_ns / 1e6, 3)
    return out


def behind_schedule(metrics: dict[str, Any]) -> str | None:
    """The note for a point whose open-loop client fell behind its schedule, with the figures; None if kept."""
    kept = metrics.get("schedule_kept")
    if kept is None or kept >= KEPT_SCHEDULE:
        return None
    return (f"CLIENT BEHIND SCHEDULE: sent {metrics['rate_sent']:.0f}/s of {metrics['rate_intended']:.0f}/s asked "
            f"({kept:.0%} of the requests due; waited up to {metrics['schedule_lag_max_ms']:.1f} ms for a free "
            "connection)")
