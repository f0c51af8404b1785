"""A server point's flows against the server NIC's RSS: their hashes, predicted queues, chosen ports.

The generators list every flow they used (memload: a UDP socket a context). Each is hashed as the
server's NIC hashes what it receives (machine/rss.py), with the key and indirection table `ethtool -x`
reports for the device holding the server's address. A device that reports none (loopback, veth, a
bridge: their queues are RPS's, which hashes with the kernel's own function, not Toeplitz) is hashed
with the RSS specification's verification key over a round-robin table of its receive queues, and
the point says so: the prediction is then the Toeplitz hash's spread, not that device's.

`-p flows=balanced` chooses memload's source ports so its flows spread evenly over those queues (the
original MOSBENCH chose its clients' ports this way), instead of the kernel's ephemeral ports.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from mosbench.errors import PointFailed
from mosbench.machine import nic, rss

FLOWS = ("kernel", "balanced")
# Chosen source ports come from above Linux's default ephemeral range (32768-60999), where neither the
# kernel's own choices nor the servers' ports (below it) are.
CHOSEN_PORTS = (61000, 65535)


@dataclass(frozen=True)
class ServerRss:
    device: str
    rss: rss.Rss
    source: str  # "ethtool -x DEV", or why the default table stands in


def server_rss(address: str) -> ServerRss:
    device = nic.device_of(address) or "lo"
    try:
        return ServerRss(device, rss.device_rss(device), f"ethtool -x {device}")
    except (OSError, ValueError):
        pass
    queues = max(1, nic.queue_count(device, "rx"))
    return ServerRss(device, rss.Rss.default(queues),
                     f"{device} reports no RSS key or table: the verification key over {queues} queue(s) round "
                     "robin")


def flow_metrics(flows: list[tuple[str, int, str, int]], server: ServerRss) -> dict[str, Any]:
    """What a point keeps of its flows: the hashes' low bytes (Veal & Foong's randomness tests read
    them), the queues they predict, where the key came from."""
    if not flows:
        return {}
    hashes = [rss.toeplitz(server.rss.key, rss.flow_input(s, d, sp, dp)) for s, sp, d, dp in flows]
    queues = Counter(server.rss.queue_of(h) for h in hashes)
    return {
        "flows": len(flows),
        "flow_hash_low_bytes": bytes(h & 0xFF for h in hashes).hex(),
        "flow_queues_predicted": {str(q): queues[q] for q in sorted(queues)},
        "rss_device": server.device,
        "rss_source": server.source,
    }


def route_source(route: str) -> str | None:
    """The source address in `ip route get`'s answer."""
    m = re.search(r"\bsrc (\S+)", route)
    return m.group(1) if m else None


def balanced_source_ports(server: ServerRss, client_ip: str, server_ip: str, ports: list[int],
                          per_port: int) -> list[int]:
    """memload's --source-ports: context i (which sends to ports[i mod len(ports)]) gets a port whose
    flow lands where the queues stay even."""
    try:
        chosen = rss.balanced_ports(server.rss, client_ip, server_ip, ports, per_port, low=CHOSEN_PORTS[0],
                                    high=CHOSEN_PORTS[1])
    except ValueError as e:
        raise PointFailed(f"-p flows=balanced: {e}") from None
    by_port: dict[int, list[int]] = {p: [] for p in ports}
    for flow in chosen:
        by_port[flow.dst_port].append(flow.src_port)
    return [by_port[ports[i % len(ports)]][i // len(ports)] for i in range(len(ports) * per_port)]
