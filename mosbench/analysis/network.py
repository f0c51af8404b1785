"""A server point's network side read back from its stored metrics: the client hosts that drove it, the
network work its window put on each CPU, and its flows' RSS hashes.

Points stored before any of this was measured, and loopback points (no NIC, no hosts, no flows), have
none of these keys: they read as None here, never as a network that did nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mosbench import cpulist
from mosbench.analysis.cells import Series
from mosbench.analysis.randomness import Randomness, randomness
from mosbench.workloads.server.hostresult import HOSTS_KEY, ClientSide

# Any one of these in a trial's metrics gives the point a network section. "net" is not among them:
# every server point stores it, loopback ones too, and it alone says nothing a reader has not seen.
NIC_KEY = "nic_dev"
FLOWS_KEY = "flow_hash_low_bytes"
KEYS = (HOSTS_KEY, NIC_KEY, FLOWS_KEY)

_QUEUE_KEY = re.compile(r"nic_(rx|tx)_packets_q(\d+)$")
# The default table's source names its queue count (workloads/server/flows.py, server_rss).
_DEFAULT_QUEUES = re.compile(r"over (\d+) queue")


def _float(x: Any) -> float | None:
    return None if x is None else float(x)


def _per_cpu(found: Mapping[str, Any] | None) -> dict[int, int]:
    """A {cpu: count} map as JSON stored it (string keys), CPUs in order."""
    return {int(cpu): int(n) for cpu, n in sorted((found or {}).items(), key=lambda kv: int(kv[0]))}


@dataclass(frozen=True)
class NetworkWork:
    """The network work over a point's window: softirqs and the NIC's interrupts per CPU, per queue
    packets, and the steering the point applied."""

    path: str | None  # "client hosts", "veth" or "loopback"
    device: str | None
    summary: str | None  # the sentence points stored before report/nic.py composed it; None since
    point_cpus: tuple[int, ...]
    net_rx: Mapping[int, int]  # NET_RX softirqs per CPU, the point's and any other
    net_tx: Mapping[int, int]
    irqs: Mapping[int, int]  # the device's queue interrupts per CPU
    net_rx_on_point: float | None  # share of NET_RX done on the point's CPUs
    steering: str | None
    rx_packets: Mapping[int, int | None]  # per queue; None where the driver does not count it
    tx_packets: Mapping[int, int | None]

    def on_point(self, counts: Mapping[int, int]) -> dict[int, int]:
        """Each of the point's CPUs' count, 0 for one that did none (the stored maps leave zeros out,
        and a server CPU that got none of the work is what this section is for)."""
        return {c: counts.get(c, 0) for c in self.point_cpus}

    def elsewhere(self, counts: Mapping[int, int]) -> dict[int, int]:
        return {c: n for c, n in counts.items() if c not in self.point_cpus and n}

    def least_of_even(self, counts: Mapping[int, int]) -> float | None:
        """The point CPU that did least, against an even split of what the point's CPUs did: 1.0 when
        each did its share, 0 when one did none."""
        mine = self.on_point(counts)
        done = sum(mine.values())
        return min(mine.values()) * len(mine) / done if done and mine else None


@dataclass(frozen=True)
class Flows:
    """The flows a point's generators used, hashed as the server's NIC hashes them."""

    count: int
    hash_low_bytes: bytes  # the low byte of each flow's Toeplitz hash, in flow order
    queues_predicted: Mapping[int, int]  # flows per receive queue, as the indirection table sends them
    queue_count: int | None  # the device's receive queues, where the point says how many
    rss_source: str | None  # where the key and table came from (ethtool -x, or the default stood in)
    rss_device: str | None
    chosen: str | None  # "kernel" (ephemeral source ports) or "balanced" (chosen per queue)

    def randomness(self) -> Randomness | None:
        """Veal & Foong's Table 3 of these bytes (ent's figures); None without a byte to test."""
        return randomness(self.hash_low_bytes) if self.hash_low_bytes else None

    def queue_spread(self) -> tuple[int, int] | None:
        """The fewest and the most flows any queue gets. A queue no flow hashed to is not in the stored
        map: where the queue count is known it counts as 0, else the least is of the queues hit."""
        if not self.queues_predicted:
            return None
        counts = dict(self.queues_predicted)
        if self.queue_count is not None:
            counts = {q: counts.get(q, 0) for q in range(max(self.queue_count, max(counts) + 1))}
        return min(counts.values()), max(counts.values())


@dataclass(frozen=True)
class PointNetwork:
    """One (test, variant, cores) point's network side, from its best trial."""

    name: str
    variant: str
    cores: int
    cpus: str
    clients: ClientSide | None
    work: NetworkWork | None
    flows: Flows | None


def _queue_packets(m: Mapping[str, Any], direction: str) -> dict[int, int | None]:
    found: dict[int, int | None] = {}
    for key, n in m.items():
        match = _QUEUE_KEY.match(key)
        if match and match.group(1) == direction:
            found[int(match.group(2))] = None if n is None else int(n)
    return dict(sorted(found.items()))


def work_of(m: Mapping[str, Any], point_cpus: Sequence[int]) -> NetworkWork | None:
    if m.get(NIC_KEY) is None:
        return None
    return NetworkWork(
        path=m.get("net"), device=m.get(NIC_KEY), summary=m.get("nic_summary"), point_cpus=tuple(point_cpus),
        net_rx=_per_cpu(m.get("nic_net_rx_per_cpu")), net_tx=_per_cpu(m.get("nic_net_tx_per_cpu")),
        irqs=_per_cpu(m.get("nic_irq_per_cpu")), net_rx_on_point=_float(m.get("nic_net_rx_on_point")),
        steering=m.get("nic_steering"), rx_packets=_queue_packets(m, "rx"), tx_packets=_queue_packets(m, "tx"))


def _queue_count(m: Mapping[str, Any]) -> int | None:
    """The receive queues of the device the flows were hashed for: its per-queue counters where that
    device is the one the window counted, else the number the default table was built over."""
    if m.get("rss_device") is not None and m.get("rss_device") == m.get(NIC_KEY):
        queues = _queue_packets(m, "rx")
        if queues:
            return len(queues)
    found = _DEFAULT_QUEUES.search(m.get("rss_source") or "")
    return int(found.group(1)) if found else None


def flows_of(m: Mapping[str, Any]) -> Flows | None:
    if m.get(FLOWS_KEY) is None:
        return None
    low = bytes.fromhex(m[FLOWS_KEY])
    return Flows(
        count=int(m.get("flows") or len(low)), hash_low_bytes=low,
        queues_predicted=_per_cpu(m.get("flow_queues_predicted")), queue_count=_queue_count(m),
        rss_source=m.get("rss_source"), rss_device=m.get("rss_device"), chosen=m.get("flows_chosen"))


def has_network(m: Mapping[str, Any]) -> bool:
    return any(m.get(k) is not None for k in KEYS)


def points(series: Iterable[Series]) -> list[PointNetwork]:
    """Every point whose best trial (the cells' rule: the fastest per core) carries a network key, in the
    series' order and by cores. The best trial, so these figures are those of the throughput shown."""
    found = []
    for s in series:
        for cores, c in sorted(s.cells.items()):
            best = c.best_trial
            if best is None or not has_network(best.metrics):
                continue
            m = best.metrics
            cpus = tuple(cpulist.parse(c.cpus)) if c.cpus else ()
            found.append(PointNetwork(s.name, s.variant, cores, c.cpus, ClientSide.read(m), work_of(m, cpus),
                                      flows_of(m)))
    return found
