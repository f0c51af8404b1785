"""Was the client the limit? A point's evidence on whether its load generator, not the server, capped it.

The paper lost the top of its Apache and memcached curves to the NIC and to a lack of load; on one
machine the load generator competes with the server for CPUs. A point is client-bound when the
client's CPUs were saturated while the server's had time to spare, or, where both share the
measured CPUs, when the client took at least half of their busy time. The evidence is kept as a
sentence with the numbers, whichever way the verdict goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mosbench.machine.accounting import server_seconds, shares

SATURATED = 0.9  # a client CPU share this busy has nothing left to give
SPARE = 0.1  # server CPUs this idle could have served more
CLIENT_MAJORITY = 0.5  # on shared CPUs, a client taking this much of the busy time is the bigger consumer


@dataclass(frozen=True)
class Verdict:
    client_bound: bool
    evidence: str


def judge(point: dict[str, Any], loadgen_cpus: int) -> Verdict | None:
    """The verdict for a measured point with a load generator; None without the numbers to judge."""
    window = point.get("window_s") or 0.0
    client = (point.get("loadgen_user_s") or 0.0) + (point.get("loadgen_system_s") or 0.0)
    if window <= 0 or loadgen_cpus <= 0 or point.get("loadgen_user_s") is None:
        return None
    _, idle, _ = shares(point["user_s"], point["system_s"], point["idle_s"], point.get("steal_s") or 0.0)
    if point.get("loadgen_shared"):
        server = sum(server_seconds(point))
        if client + server <= 0:
            return None
        part = client / (client + server)
        bound = part >= CLIENT_MAJORITY
        return Verdict(bound, f"client shares the measured CPUs and took {part:.0%} of their busy time"
                              f" (server {1 - part:.0%}), {idle:.0%} idle")
    busy = client / (window * loadgen_cpus)
    if busy >= SATURATED and idle >= SPARE:
        return Verdict(True, f"client CPUs {busy:.0%} busy while the server's were {idle:.0%} idle")
    if busy >= SATURATED:
        return Verdict(False, f"client CPUs {busy:.0%} busy and server CPUs {idle:.0%} idle: both saturated")
    return Verdict(False, f"client CPUs {busy:.0%} busy, server CPUs {idle:.0%} idle")


def judge_hosts(point: dict[str, Any], hosts: list[dict[str, Any]]) -> Verdict | None:
    """The verdict for a point driven from client hosts: the busiest host's generator CPUs (its own
    /proc/stat over the window) against the server's idle share; None without the numbers."""
    measured = [h for h in hosts if h.get("busy") is not None]
    if not measured or not point.get("window_s"):
        return None
    _, idle, _ = shares(point["user_s"], point["system_s"], point["idle_s"], point.get("steal_s") or 0.0)
    top = max(measured, key=lambda h: h["busy"])
    others = "" if len(measured) == 1 else f" (the other hosts at most {_second(measured):.0%})"
    if top["busy"] >= SATURATED and idle >= SPARE:
        return Verdict(True, f"client host {top['host']} at {top['busy']:.0%} busy while the server's CPUs "
                             f"idled {idle:.0%}{others}")
    if top["busy"] >= SATURATED:
        return Verdict(False, f"client host {top['host']} at {top['busy']:.0%} busy and the server's CPUs "
                              f"{idle:.0%} idle: both saturated")
    return Verdict(False, f"client hosts at most {top['busy']:.0%} busy ({top['host']}), server CPUs "
                          f"{idle:.0%} idle")


def _second(hosts: list[dict[str, Any]]) -> float:
    return sorted(h["busy"] for h in hosts)[-2]
