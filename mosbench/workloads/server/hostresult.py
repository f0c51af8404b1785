"""A client host's window, one record from the moment a point's client ends to the report: built from
what the host measured (`HostResult.of_window`), stored with the point as its metrics (`metrics`) and
read back from them (`read`); `ClientSide` is every host of a point together, the same way.

A host's busy share is of its client's CPUs over the window, from the host's own /proc/stat, whichever
client measured it (a native generator's control.c, or the shell loop around pgbench).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mosbench.machine.accounting import shares

# A clock this far off ours is named with the point: the window opens by message, not by clock, so it
# does not skew the counts, but the host's timestamps (its logs, its window stamps) are that far off.
CLOCK_SKEW_NOTE_S = 0.5
# Hosts whose windows opened further apart than this did not measure the same interval.
WINDOW_SPREAD_NOTE_S = 0.05
HOSTS_KEY = "client_hosts"


def busy_share(busy_s: float, idle_s: float) -> float | None:
    """accounting's busy share of a host's client CPUs with steal left out, as control.c reads them
    (it keeps no steal): a host's share is the same whichever client measured it. None: no time seen."""
    return shares(busy_s, 0.0, idle_s, 0.0)[0] if busy_s + idle_s > 0 else None


def _float(x: Any) -> float | None:
    return None if x is None else float(x)


def _int(x: Any) -> int:
    return int(x or 0)


@dataclass(frozen=True)
class HostResult:
    """One client host's window, in the units and roundings the point stores."""

    host: str
    sent: int
    done: int  # requests (or queries) answered in its window
    lost: int
    errors: int
    latency_p50_us: float | None
    latency_p99_us: float | None
    cpus: int | None  # the client's CPUs on that host
    cpu_us_per_request: float | None  # the client's own user + system time per answered request
    busy: float | None  # busy_share of its client CPUs over the window
    clock_offset_ms: float | None  # its clock against ours
    clock_offset_error_ms: float | None
    # Known while the point runs, not stored: the point stores them over all hosts (ClientSide).
    cpu_s: float | None = field(default=None, compare=False)
    window_open_s: float | None = field(default=None, compare=False)  # its window's opening on our clock

    @staticmethod
    def of_window(host: str, sent: int, done: int, lost: int, errors: int, latency_ns: Mapping[str, float],
                  cpus: int, cpu_s: float, busy_s: float, idle_s: float, offset_s: float, offset_error_s: float,
                  opened_ns: int | None) -> HostResult:
        """From what the host measured over its window: its client's counts and latencies (ns), its CPU
        time, its client CPUs' busy and idle seconds, its clock's offset from ours and where its window
        opened on its own clock (ns; None: not marked)."""
        busy = busy_share(busy_s, idle_s)
        return HostResult(
            host, sent, done, lost, errors,
            latency_p50_us=round(latency_ns.get("p50", 0) / 1000, 1),
            latency_p99_us=round(latency_ns.get("p99", 0) / 1000, 1),
            cpus=cpus, cpu_us_per_request=round(cpu_s / done * 1e6, 3) if done else None,
            busy=None if busy is None else round(busy, 4),
            clock_offset_ms=round(offset_s * 1000, 3), clock_offset_error_ms=round(offset_error_s * 1000, 3),
            cpu_s=cpu_s, window_open_s=opened_ns / 1e9 - offset_s if opened_ns else None)

    def metrics(self) -> dict[str, Any]:
        return {
            "host": self.host, "sent": self.sent, "done": self.done, "lost": self.lost, "errors": self.errors,
            "latency_p50_us": self.latency_p50_us, "latency_p99_us": self.latency_p99_us, "cpus": self.cpus,
            "cpu_us_per_request": self.cpu_us_per_request, "busy": self.busy,
            "clock_offset_ms": self.clock_offset_ms, "clock_offset_error_ms": self.clock_offset_error_ms,
        }

    @staticmethod
    def read(m: Mapping[str, Any]) -> HostResult:
        return HostResult(
            host=str(m.get("host", "?")), sent=_int(m.get("sent")), done=_int(m.get("done")),
            lost=_int(m.get("lost")), errors=_int(m.get("errors")),
            latency_p50_us=_float(m.get("latency_p50_us")), latency_p99_us=_float(m.get("latency_p99_us")),
            cpus=None if m.get("cpus") is None else int(m["cpus"]),
            cpu_us_per_request=_float(m.get("cpu_us_per_request")), busy=_float(m.get("busy")),
            clock_offset_ms=_float(m.get("clock_offset_ms")),
            clock_offset_error_ms=_float(m.get("clock_offset_error_ms")))


@dataclass(frozen=True)
class ClientSide:
    """The hosts that drove a point, and how far apart their windows opened on our clock."""

    hosts: tuple[HostResult, ...]
    window_spread_ms: float | None
    cpu_us_per_request: float | None  # every host's client time over every answered request

    @staticmethod
    def of(hosts: Sequence[HostResult]) -> ClientSide:
        opens = [h.window_open_s for h in hosts if h.window_open_s is not None]
        spread_s = max(opens) - min(opens) if len(opens) > 1 else 0.0
        done = sum(h.done for h in hosts)
        cpu_s = sum(h.cpu_s or 0.0 for h in hosts)
        return ClientSide(tuple(hosts), round(spread_s * 1000, 3), round(cpu_s / done * 1e6, 3) if done else None)

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {HOSTS_KEY: [h.metrics() for h in self.hosts]}
        if self.window_spread_ms is not None:
            out["client_window_spread_ms"] = self.window_spread_ms
        if self.cpu_us_per_request is not None:
            out["client_cpu_us_per_request"] = self.cpu_us_per_request
        return out

    @staticmethod
    def read(m: Mapping[str, Any]) -> ClientSide | None:
        """A point's hosts from its stored metrics; None for a point without client hosts."""
        hosts = m.get(HOSTS_KEY)
        if not hosts:
            return None
        return ClientSide(tuple(HostResult.read(h) for h in hosts), _float(m.get("client_window_spread_ms")),
                          _float(m.get("client_cpu_us_per_request")))

    @property
    def done(self) -> int:
        return sum(h.done for h in self.hosts)

    @property
    def lost(self) -> int:
        return sum(h.lost for h in self.hosts)

    @property
    def errors(self) -> int:
        return sum(h.errors for h in self.hosts)

    @property
    def busy(self) -> float | None:
        """The share of all the hosts' client CPUs busy: each host weighed by its CPUs, since a host of
        eight busy CPUs is not outweighed by one of a single idle CPU."""
        known = [(h.busy, h.cpus or 1) for h in self.hosts if h.busy is not None]
        cpus = sum(n for _, n in known)
        return sum(b * n for b, n in known) / cpus if cpus else None


def host_notes(metrics: Mapping[str, Any]) -> list[str]:
    """What a point driven from client hosts must say: a host's clock far off ours, windows that did not
    open together."""
    side = ClientSide.read(metrics)
    if side is None:
        return []
    notes = []
    for h in side.hosts:
        offset = h.clock_offset_ms or 0.0
        if abs(offset) >= CLOCK_SKEW_NOTE_S * 1000:
            notes.append(f"client host {h.host}'s clock is {offset / 1000:+.3f} s off ours "
                         f"(±{h.clock_offset_error_ms or 0.0:.1f} ms): the window opened by message, so its "
                         "counts hold; its own timestamps are shifted by that")
    spread = side.window_spread_ms
    if spread is not None and spread >= WINDOW_SPREAD_NOTE_S * 1000:
        notes.append(f"CLIENT WINDOWS APART: the hosts' windows opened up to {spread:.0f} ms apart")
    return notes
