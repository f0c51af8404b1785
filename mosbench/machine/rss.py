"""Receive-side scaling as the NIC does it: which receive queue a flow's packets land on.

A multi-queue NIC hashes each received packet's addresses and ports with the Toeplitz function and a
secret key, and the hash's low bits index an indirection table whose entries are queue numbers; each
queue's interrupt goes to one core. Veal & Foong (paper 002) measured how evenly that spreads a web
server's connections, and the original MOSBENCH chose its clients' source ports so that each server
core's queue received its share. This module predicts a flow's queue from what `ethtool -x` reports,
and picks such ports.

The hash input is the packet as the receiving NIC sees it: for a request from client to server the
source is the client. The Toeplitz function is linear over GF(2) in its input, so a flow's hash is the
XOR of one 32-bit word per input byte; `_byte_words` tabulates those once per key, and every port of
a range is hashed at once with numpy.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# Microsoft's verification key ("Verifying the RSS Hash Calculation"), also many drivers' example key.
MICROSOFT_KEY = bytes.fromhex(
    "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa")


@dataclass(frozen=True)
class Vector:
    """One row of Microsoft's IPv4 verification table: the hashes with and without the TCP ports."""

    src_ip: str
    src_port: int
    dst_ip: str
    dst_port: int
    ipv4_only: int
    ipv4_tcp: int


# The five IPv4 rows of "Verifying the RSS Hash Calculation" (Windows driver documentation), with
# MICROSOFT_KEY: the only way to know this file's hash is the hardware's.
IPV4_VECTORS: tuple[Vector, ...] = (
    Vector("66.9.149.187", 2794, "161.142.100.80", 1766, 0x323E8FC2, 0x51CCC178),
    Vector("199.92.111.2", 14230, "65.69.140.83", 4739, 0xD718262A, 0xC626B0EA),
    Vector("24.19.198.95", 12898, "12.22.207.184", 38024, 0xD2D0A5DE, 0x5C2B394A),
    Vector("38.27.205.30", 48228, "209.142.163.6", 2217, 0x82989176, 0xAFC7327F),
    Vector("153.39.163.191", 44251, "202.188.127.2", 1303, 0x5D1809C5, 0x10E828A2),
)

IPV4_INPUT = 8  # bytes: source and destination address
IPV4_TCP_INPUT = 12  # and the two ports


def toeplitz(key: bytes, data: bytes) -> int:
    """The 32-bit Microsoft RSS Toeplitz hash of `data`: for each input bit, most significant first,
    that is set, the 32 key bits starting at its position are XORed into the result."""
    if len(key) < len(data) + 4:
        raise ValueError(f"a {len(key)}-byte key hashes at most {max(0, len(key) - 4)} bytes, not {len(data)}")
    k = int.from_bytes(key, "big")
    key_bits = 8 * len(key)
    d = int.from_bytes(data, "big")
    bits = 8 * len(data)
    result = 0
    for n in range(bits):
        if d >> (bits - 1 - n) & 1:
            result ^= (k >> (key_bits - 32 - n)) & 0xFFFFFFFF
    return result


def _ipv4(address: str | ipaddress.IPv4Address) -> bytes:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise ValueError(f"not an IP address: {address!r}") from None
    if ip.version != 4:
        raise ValueError(f"only IPv4 flows are hashed here, not {address}")
    return ip.packed


def _port(port: int, what: str) -> bytes:
    if not 0 <= port <= 0xFFFF:
        raise ValueError(f"{what} {port} is not a port (0-65535)")
    return port.to_bytes(2, "big")


def flow_input(src_ip: str | ipaddress.IPv4Address, dst_ip: str | ipaddress.IPv4Address,
               src_port: int | None = None, dst_port: int | None = None) -> bytes:
    """The hash input of an IPv4 packet as the receiving NIC sees it, in the specification's order:
    source address, destination address and, for TCP (and UDP where the NIC hashes its ports), source
    port and destination port; network byte order throughout."""
    if (src_port is None) != (dst_port is None):
        raise ValueError("a flow's hash takes both ports or neither")
    head = _ipv4(src_ip) + _ipv4(dst_ip)
    if src_port is None or dst_port is None:
        return head
    return head + _port(src_port, "source port") + _port(dst_port, "destination port")


@functools.lru_cache(maxsize=16)
def _byte_words(key: bytes, length: int) -> np.ndarray:
    """For each input byte position and value, the XOR of the key windows of its set bits: shape
    (length, 256), uint32. Toeplitz is linear, so a hash is the XOR of one entry per input byte."""
    if len(key) < length + 4:
        raise ValueError(f"a {len(key)}-byte key hashes at most {max(0, len(key) - 4)} bytes, not {length}")
    words = np.zeros((length, 256), dtype=np.uint32)
    for position in range(length):
        # A byte's bits at this position meet the key's bits from 8 × position on: five key bytes hold
        # every 32-bit window its eight bits start.
        window = key[position:position + 5]
        words[position] = [toeplitz(window, bytes([value])) for value in range(256)]
    words.setflags(write=False)  # cached and shared
    return words


def _src_port_hashes(key: bytes, head: bytes, dst_port: int, src_ports: np.ndarray) -> np.ndarray:
    """The 4-tuple hashes of many source ports towards one destination (IPv4, `head` = both addresses)."""
    words = _byte_words(key, IPV4_TCP_INPUT)
    fixed = np.uint32(0)
    # bytes 0-7 the addresses, 8-9 the source port (varying), 10-11 the destination port
    for position, value in (*enumerate(head), (10, dst_port >> 8), (11, dst_port & 0xFF)):
        fixed ^= words[position, value]
    return fixed ^ words[8, src_ports >> 8] ^ words[9, src_ports & 0xFF]


@dataclass(frozen=True)
class Rss:
    """A device's receive-side scaling: its key, its indirection table (entry → receive queue), the
    number of receive rings it reports and the hash function that is on (None where not reported).

    A device that reports no table (a single-queue virtio_net: "Operation not supported") has an
    empty `table`; with one ring everything lands on queue 0."""

    key: bytes
    table: tuple[int, ...]
    rings: int = 0  # as ethtool reports; 0 here means "one more than the highest queue in the table"
    hash_function: str | None = "toeplitz"
    device: str = ""

    def __post_init__(self) -> None:
        if any(q < 0 for q in self.table):
            raise ValueError("an indirection table holds queue numbers, never negative ones")
        if self.rings == 0:
            object.__setattr__(self, "rings", max(self.table, default=0) + 1)
        if self.table and max(self.table) >= self.rings:
            raise ValueError(f"the indirection table names queue {max(self.table)} of only {self.rings} ring(s)")

    @classmethod
    def default(cls, queues: int, size: int = 128, key: bytes = MICROSOFT_KEY) -> Rss:
        """A device as its driver leaves it: entry i → queue i mod queues (ethtool_rxfh_indir_default)."""
        if queues < 1 or size < 1:
            raise ValueError(f"an indirection table needs at least one queue and one entry, not {queues} and {size}")
        return cls(key=key, table=tuple(i % queues for i in range(size)), rings=queues)

    @property
    def queues(self) -> tuple[int, ...]:
        """The queues the table spreads flows over, in order."""
        return tuple(sorted(set(self.table))) if self.table else self._tableless()

    def _tableless(self) -> tuple[int, ...]:
        if self.rings > 1:
            raise ValueError(f"{self.device or 'the device'} reports {self.rings} rings but no indirection table")
        return (0,)

    def queue_of(self, hash: int) -> int:
        """The queue a packet with this RSS hash lands on: the hash's low bits index the table (the
        kernel's and ethtool's convention, hash mod the table's size)."""
        if not 0 <= hash <= 0xFFFFFFFF:
            raise ValueError(f"an RSS hash is 32 bits, not {hash}")
        if not self.table:
            return self._tableless()[0]
        return self.table[hash % len(self.table)]

    def _check_toeplitz(self) -> None:
        if self.hash_function not in (None, "toeplitz"):
            raise ValueError(f"{self.device or 'the device'} hashes with {self.hash_function}, not toeplitz")
        if not self.key:
            raise ValueError(f"{self.device or 'the device'} does not report its RSS key")

    def flow_queue(self, src_ip: str, dst_ip: str, src_port: int | None = None, dst_port: int | None = None) -> int:
        """The queue a received packet of this flow lands on (src: the sender, seen from this NIC)."""
        data = flow_input(src_ip, dst_ip, src_port, dst_port)
        if not self.table:
            return self._tableless()[0]
        self._check_toeplitz()
        return self.queue_of(toeplitz(self.key, data))

    def src_port_queues(self, src_ip: str, dst_ip: str, dst_port: int, src_ports: np.ndarray) -> np.ndarray:
        """The queue of each source port's TCP flow to dst_ip:dst_port, for many ports at once."""
        ports = np.asarray(src_ports, dtype=np.int64)
        if ports.size and (ports.min() < 0 or ports.max() > 0xFFFF):
            raise ValueError("source ports are 0-65535")
        head = flow_input(src_ip, dst_ip)
        _port(dst_port, "destination port")
        if not self.table:
            return np.full(ports.shape, self._tableless()[0], dtype=np.int64)
        self._check_toeplitz()
        hashes = _src_port_hashes(self.key, head, dst_port, ports).astype(np.int64)
        return np.asarray(self.table, dtype=np.int64)[hashes % len(self.table)]


# --- ethtool -x ----------------------------------------------------------------------------------

_HEADER = re.compile(r"RX flow hash indirection table for (\S+) with (\d+) RX ring\(s\)(?:, context \d+)?:")
_ROW = re.compile(r"\s*(\d+):((?:\s+\d+)+)\s*")
_HASH_FUNCTION = re.compile(r"\s+(\S+):\s+(on|off)\s*")
_UNSUPPORTED = "Operation not supported"


def _key(text: str, line_number: int) -> bytes:
    parts = text.strip().split(":")
    if not all(re.fullmatch(r"[0-9a-fA-F]{2}", p) for p in parts):
        raise ValueError(f"ethtool -x: line {line_number}: an RSS key is colon-separated hex bytes, "
                         f"not {text.strip()!r}")
    return bytes(int(p, 16) for p in parts)


def parse_ethtool_x(text: str) -> Rss:
    """The RSS of one device from `ethtool -x DEV` (ethtool 6.1's layout: the table's rows of eight
    entries after their first index, "RSS hash key:" and its colon-separated bytes on the next line,
    "RSS hash function:" and one indented `name: on|off` line per function). Sections added by later
    versions (an indented list under an unknown heading) are passed over."""
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if _HEADER.fullmatch(line.strip())), None)
    if header is None:
        cannot = next((line.strip() for line in lines if line.strip().startswith("Cannot ")), None)
        if cannot:
            raise ValueError(f"ethtool -x reports no RSS: {cannot}")
        raise ValueError("ethtool -x: no 'RX flow hash indirection table for DEV with N RX ring(s):' line")
    m = _HEADER.fullmatch(lines[header].strip())
    assert m is not None
    device, rings = m.group(1), int(m.group(2))
    table: list[int] = []
    key: bytes | None = None
    functions: dict[str, bool] = {}
    section = "table"
    i = header + 1
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        number = i + 1
        i += 1
        if not stripped:
            continue
        if stripped.startswith("RSS hash key:"):
            section = "key"
            rest = stripped[len("RSS hash key:"):].strip()
            if rest:
                key = b"" if rest == _UNSUPPORTED else _key(rest, number)
            continue
        if stripped == "RSS hash function:":
            section = "function"
            continue
        if not line[0].isspace() and stripped.endswith(":") and section != "table":
            section = "other"  # a heading a later ethtool prints (e.g. "RSS input transformation:")
            continue
        if section == "table":
            row = _ROW.fullmatch(line)
            if stripped == _UNSUPPORTED and not table:
                continue
            if row is None:
                raise ValueError(f"ethtool -x: line {number} is not an indirection table row: {stripped!r}")
            if int(row.group(1)) != len(table):
                raise ValueError(f"ethtool -x: line {number}: table row {len(table)} expected, found {row.group(1)}")
            table.extend(int(v) for v in row.group(2).split())
        elif section == "key":
            if key is not None:
                raise ValueError(f"ethtool -x: line {number}: a second RSS key line: {stripped!r}")
            key = b"" if stripped == _UNSUPPORTED else _key(stripped, number)
        elif section == "function":
            f = _HASH_FUNCTION.fullmatch(line)
            if stripped == _UNSUPPORTED:
                continue
            if f is None:
                raise ValueError(f"ethtool -x: line {number} is not 'name: on|off' under the hash function: "
                                 f"{stripped!r}")
            functions[f.group(1)] = f.group(2) == "on"
        elif line[0].isspace():
            continue  # an entry of a section read past
        else:
            raise ValueError(f"ethtool -x: line {number} not understood: {stripped!r}")
    if key is None:
        raise ValueError("ethtool -x: no 'RSS hash key:' section")
    on = [name for name, enabled in functions.items() if enabled]
    if len(on) > 1:
        raise ValueError(f"ethtool -x: more than one hash function on: {', '.join(on)}")
    try:
        return Rss(key=key, table=tuple(table), rings=rings, hash_function=on[0] if on else None, device=device)
    except ValueError as e:
        raise ValueError(f"ethtool -x: {device}: {e}") from None


def ethtool_x(dev: str) -> str:
    """`ethtool -x DEV`'s output; OSError where ethtool cannot be run (FileNotFoundError: not installed),
    ValueError with its words where it reports no RSS for the device (a veth, loopback)."""
    try:
        out = subprocess.run(["ethtool", "-x", dev], capture_output=True, text=True, timeout=10)
    except subprocess.TimeoutExpired:
        raise OSError(f"ethtool -x {dev} gave no answer in 10 s") from None
    if out.returncode:
        raise ValueError(out.stderr.strip() or f"ethtool -x {dev}: exit {out.returncode}")
    return out.stdout


def device_rss(dev: str, read: Callable[[str], str] = ethtool_x) -> Rss:
    """The device's RSS as `ethtool -x` reports it (read: a recording in a test), with a key and a table to
    hash flows with; OSError where ethtool cannot be run, ValueError saying why there is nothing to hash with."""
    found = parse_ethtool_x(read(dev))
    if not found.table or not found.key:
        raise ValueError(f"{dev} reports no RSS {'indirection table' if not found.table else 'key'}")
    return found


# --- choosing client ports -----------------------------------------------------------------------

@dataclass(frozen=True)
class Flow:
    """One client connection of `balanced_ports`, with the queue its packets reach on the server."""

    src_port: int
    dst_port: int
    queue: int  # where the server's NIC receives it


def balanced_ports(rss: Rss, src_ip: str, dst_ip: str, dst_ports: Sequence[int], count_per_port: int,
                   queues_wanted: Sequence[int] | None = None, low: int = 1024, high: int = 65535) -> list[Flow]:
    """Client source ports for `count_per_port` TCP connections from src_ip to each of dst_ip's
    `dst_ports`, such that the server's NIC spreads them evenly: every wanted queue (all the table's
    by default) receives the same number of flows, within one, and no flow lands on another queue.

    Source ports are unique over all flows (so a client can bind each without SO_REUSEADDR) and taken
    from low..high. The answer is deterministic: flows in rounds over dst_ports, each round's flow
    given to the least loaded queue it can reach (the lowest numbered on a tie) through the lowest
    free port. This holds only where the NIC hashes the ports: for UDP many drivers (ixgbe's default)
    hash the addresses alone, and no choice of port moves a flow. ValueError when the range cannot
    give such a spread (too few ports, a wanted queue the table never names or no port reaches).
    """
    if count_per_port < 0:
        raise ValueError(f"a count of connections per port is not negative: {count_per_port}")
    if not 1 <= low <= high <= 0xFFFF:
        raise ValueError(f"source ports {low}-{high} are not a range within 1-65535")
    for d in dst_ports:
        _port(d, "destination port")
    if len(set(dst_ports)) != len(dst_ports):
        raise ValueError("a destination port is listed twice")
    wanted = tuple(sorted(set(queues_wanted))) if queues_wanted is not None else rss.queues
    if not wanted:
        raise ValueError("no queue wanted")
    absent = [q for q in wanted if q not in set(rss.queues)]
    if absent:
        raise ValueError(f"queue {absent[0]} is not in {rss.device or 'the device'}'s indirection table")
    total = len(dst_ports) * count_per_port
    candidates = np.arange(low, high + 1, dtype=np.int64)
    if total > candidates.size:
        raise ValueError(f"{total} flows need as many source ports; {low}-{high} has {candidates.size}")
    if total == 0:
        return []

    # Per destination port: the candidate ports by wanted queue (index into `wanted`), ascending.
    index_of = np.full(max(rss.queues) + 1, -1, dtype=np.int64)
    index_of[list(wanted)] = np.arange(len(wanted))
    by_queue: list[list[np.ndarray]] = []
    for d in dst_ports:
        w = index_of[rss.src_port_queues(src_ip, dst_ip, d, candidates)]
        order = np.argsort(w, kind="stable")
        bounds = np.searchsorted(w[order], np.arange(len(wanted) + 1))
        by_queue.append([candidates[order[bounds[j]:bounds[j + 1]]] for j in range(len(wanted))])

    counts = np.zeros(len(wanted), dtype=np.int64)
    next_at = np.zeros((len(dst_ports), len(wanted)), dtype=np.int64)
    reachable = np.array([[arr.size > 0 for arr in ports] for ports in by_queue])
    unreached = [wanted[j] for j in np.flatnonzero(~reachable.any(axis=0))]
    if unreached and total >= len(wanted):  # then every wanted queue must get a flow
        raise ValueError(f"no source port in {low}-{high} reaches queue {unreached[0]} from {src_ip} to {dst_ip}")
    used: set[int] = set()
    flows: list[Flow] = []
    never = np.iinfo(np.int64).max
    for _ in range(count_per_port):
        for di, d in enumerate(dst_ports):
            while True:
                load = np.where(reachable[di], counts, never)
                j = int(np.argmin(load))
                if load[j] == never:
                    raise ValueError(f"no free source port in {low}-{high} reaches a wanted queue for port {d}")
                ports = by_queue[di][j]
                at = int(next_at[di, j])
                while at < ports.size and int(ports[at]) in used:
                    at += 1
                if at == ports.size:
                    reachable[di, j] = False
                    continue
                next_at[di, j] = at + 1
                break
            port = int(ports[at])
            used.add(port)
            counts[j] += 1
            flows.append(Flow(port, d, wanted[j]))
    if counts.max() - counts.min() > 1:
        short = wanted[int(np.argmin(counts))]
        raise ValueError(f"source ports {low}-{high} cannot spread {total} flows evenly: queue {short} gets "
                         f"{counts.min()} against {counts.max()} (too few ports reach it)")
    return flows
