"""Receive-side scaling: Microsoft's published Toeplitz vectors, ethtool -x as ethtool 6.1 prints it, and
client ports chosen so that a server's receive queues share the flows evenly."""

from __future__ import annotations

import collections
import ipaddress

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mosbench.machine import rss
from tests.conftest import FIXTURES

ETHTOOL = FIXTURES / "ethtool"

# "Verifying the RSS Hash Calculation" (Windows driver docs), IPv4 table, written out again here rather
# than read from the module: (destination, source, IPv4 only, IPv4 with TCP).
PUBLISHED = [
    ("161.142.100.80", 1766, "66.9.149.187", 2794, 0x323E8FC2, 0x51CCC178),
    ("65.69.140.83", 4739, "199.92.111.2", 14230, 0xD718262A, 0xC626B0EA),
    ("12.22.207.184", 38024, "24.19.198.95", 12898, 0xD2D0A5DE, 0x5C2B394A),
    ("209.142.163.6", 2217, "38.27.205.30", 48228, 0x82989176, 0xAFC7327F),
    ("202.188.127.2", 1303, "153.39.163.191", 44251, 0x5D1809C5, 0x10E828A2),
]


def test_microsoft_key() -> None:
    assert rss.MICROSOFT_KEY.hex(":") == (
        "6d:5a:56:da:25:5b:0e:c2:41:67:25:3d:43:a3:8f:b0:d0:ca:2b:cb:"
        "ae:7b:30:b4:77:cb:2d:a3:80:30:f2:0c:6a:42:b7:3b:be:ac:01:fa")


@pytest.mark.parametrize(("dst", "dport", "src", "sport", "ip_only", "with_tcp"), PUBLISHED)
def test_published_ipv4_vectors(dst: str, dport: int, src: str, sport: int, ip_only: int, with_tcp: int) -> None:
    assert rss.toeplitz(rss.MICROSOFT_KEY, rss.flow_input(src, dst)) == ip_only
    assert rss.toeplitz(rss.MICROSOFT_KEY, rss.flow_input(src, dst, sport, dport)) == with_tcp


def test_module_vectors_are_the_published_ones() -> None:
    assert [(v.dst_ip, v.dst_port, v.src_ip, v.src_port, v.ipv4_only, v.ipv4_tcp) for v in rss.IPV4_VECTORS] \
        == PUBLISHED


def test_flow_input_order_and_errors() -> None:
    assert rss.flow_input("1.2.3.4", "5.6.7.8") == bytes([1, 2, 3, 4, 5, 6, 7, 8])
    assert rss.flow_input(ipaddress.IPv4Address("1.2.3.4"), "5.6.7.8", 0x0A0B, 0x0C0D) \
        == bytes([1, 2, 3, 4, 5, 6, 7, 8, 0x0A, 0x0B, 0x0C, 0x0D])
    with pytest.raises(ValueError, match="both ports or neither"):
        rss.flow_input("1.2.3.4", "5.6.7.8", 80)
    with pytest.raises(ValueError, match="only IPv4"):
        rss.flow_input("::1", "5.6.7.8")
    with pytest.raises(ValueError, match="not an IP address"):
        rss.flow_input("1.2.3", "5.6.7.8")
    with pytest.raises(ValueError, match="65536 is not a port"):
        rss.flow_input("1.2.3.4", "5.6.7.8", 1, 65536)


def test_toeplitz_key_must_cover_the_input() -> None:
    assert rss.toeplitz(bytes(16), bytes(12)) == 0
    with pytest.raises(ValueError, match="a 15-byte key hashes at most 11 bytes, not 12"):
        rss.toeplitz(bytes(15), bytes(12))


@settings(max_examples=200, deadline=None)
@given(key=st.binary(min_size=16, max_size=40), a=st.binary(min_size=12, max_size=12),
       b=st.binary(min_size=12, max_size=12))
def test_toeplitz_is_linear(key: bytes, a: bytes, b: bytes) -> None:
    """What the batched hashing of source ports rests on: hash(a xor b) = hash(a) xor hash(b)."""
    both = bytes(x ^ y for x, y in zip(a, b, strict=True))
    assert rss.toeplitz(key, both) == rss.toeplitz(key, a) ^ rss.toeplitz(key, b)


def test_queue_of_takes_the_low_bits() -> None:
    r = rss.Rss.default(16)
    assert r.table == tuple(i % 16 for i in range(128)) and r.rings == 16 and r.queues == tuple(range(16))
    # the first vector with TCP: 0x51ccc178 mod 128 = 0x78 = 120, and entry 120 is queue 120 mod 16 = 8
    assert r.queue_of(0x51CCC178) == 8
    assert r.flow_queue("66.9.149.187", "161.142.100.80", 2794, 1766) == 8
    shuffled = rss.Rss(key=rss.MICROSOFT_KEY, table=(3, 1, 2, 0))
    assert [shuffled.queue_of(h) for h in (0, 1, 2, 3, 4, 0xFFFFFFFF)] == [3, 1, 2, 0, 3, 0]
    assert shuffled.rings == 4
    with pytest.raises(ValueError, match="32 bits"):
        r.queue_of(1 << 32)
    with pytest.raises(ValueError, match="at least one queue"):
        rss.Rss.default(0)
    with pytest.raises(ValueError, match="queue 4 of only 4"):
        rss.Rss(key=rss.MICROSOFT_KEY, table=(0, 4), rings=4)


def test_another_hash_function_cannot_be_predicted() -> None:
    r = rss.Rss(key=rss.MICROSOFT_KEY, table=(0, 1), hash_function="xor", device="ens4")
    with pytest.raises(ValueError, match="ens4 hashes with xor, not toeplitz"):
        r.flow_queue("1.2.3.4", "5.6.7.8", 1, 2)


def test_batched_queues_match_the_hash_one_flow_at_a_time() -> None:
    r = rss.Rss(key=bytes(range(7, 47)), table=tuple((i * 5) % 13 for i in range(64)))
    ports = np.arange(0, 65536, 97)
    batched = r.src_port_queues("192.168.7.1", "192.168.7.2", 11211, ports)
    assert batched.tolist() == [r.flow_queue("192.168.7.1", "192.168.7.2", int(p), 11211) for p in ports]


# --- ethtool -x ----------------------------------------------------------------------------------

def test_ixgbe_fixture() -> None:
    r = rss.parse_ethtool_x((ETHTOOL / "ixgbe-82599-16rings.txt").read_text())
    assert (len(r.key), len(r.table), r.rings, r.device, r.hash_function) == (40, 128, 16, "enp3s0f0", "toeplitz")
    assert r.queues == tuple(range(16))
    assert r.table == rss.Rss.default(16, 128).table  # ixgbe_setup_reta's round robin
    assert r.key.hex().startswith("fd5d6ea4")


def test_mlx5_fixture() -> None:
    r = rss.parse_ethtool_x((ETHTOOL / "mlx5-connectx5-64rings.txt").read_text())
    assert (len(r.key), len(r.table), r.rings, r.device, r.hash_function) == (40, 256, 64, "enp65s0f0np0", "toeplitz")
    assert r.queues == tuple(range(64))
    assert r.table[250:] == (58, 59, 60, 61, 62, 63)


def test_virtio_fixture_without_table_or_key() -> None:
    """Recorded in a VM: one ring, the table and key "Operation not supported", toeplitz still named."""
    r = rss.parse_ethtool_x((ETHTOOL / "virtio_net-1ring.txt").read_text())
    assert (r.key, r.table, r.rings, r.device, r.hash_function) == (b"", (), 1, "eth0", "toeplitz")
    assert r.queues == (0,)
    assert r.flow_queue("10.0.0.1", "10.0.0.2", 40000, 80) == 0
    flows = rss.balanced_ports(r, "10.0.0.1", "10.0.0.2", [80, 81], 3)
    assert {f.queue for f in flows} == {0} and len({f.src_port for f in flows}) == 6


def test_later_sections_and_a_key_on_the_heading_line_are_read() -> None:
    text = (ETHTOOL / "ixgbe-82599-16rings.txt").read_text()
    later = text + "RSS input transformation:\n    symmetric-xor: off\n"
    assert rss.parse_ethtool_x(later) == rss.parse_ethtool_x(text)
    lines = text.splitlines()
    at = lines.index("RSS hash key:")
    joined = [*lines[:at], f"RSS hash key: {lines[at + 1]}", *lines[at + 2:]]
    assert rss.parse_ethtool_x("\n".join(joined)).key == rss.parse_ethtool_x(text).key


def _ixgbe_with(old: str, new: str) -> str:
    text = (ETHTOOL / "ixgbe-82599-16rings.txt").read_text()
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(("text", "message"), [
    ("", "no 'RX flow hash indirection table"),
    ("Cannot get RX ring count: Operation not supported\n",
     "reports no RSS: Cannot get RX ring count: Operation not supported"),
    (_ixgbe_with("    8:      8", "   16:      8"), "line 3: table row 8 expected, found 16"),
    (_ixgbe_with("    8:      8", "    8:      x"), "line 3 is not an indirection table row"),
    (_ixgbe_with("fd:5d:", "fd:5g:"), "an RSS key is colon-separated hex bytes"),
    (_ixgbe_with("RSS hash key:\n", "").replace("fd:5d:", "    fd:5d:"), "is not an indirection table row"),
    (_ixgbe_with("    0:      0     1", "    0:     16     1"), "enp3s0f0: the indirection table names queue 16"),
    (_ixgbe_with("xor: off", "xor: on"), "more than one hash function on: toeplitz, xor"),
    (_ixgbe_with("    xor: off", "    xor: maybe"), "is not 'name: on|off'"),
    (_ixgbe_with("RSS hash function:", "Something else"), "a second RSS key line: 'Something else'"),
    (_ixgbe_with("    crc32: off\n", "    crc32: off\nRSS input transformation:\n    symmetric-xor: off\ngarbage\n"),
     "line 26 not understood: 'garbage'"),
])
def test_malformed_ethtool_output(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as e:
        rss.parse_ethtool_x(text)
    assert "\n" not in str(e.value)


def test_a_missing_key_section() -> None:
    text = (ETHTOOL / "ixgbe-82599-16rings.txt").read_text().split("RSS hash key:")[0]
    with pytest.raises(ValueError, match="no 'RSS hash key:' section"):
        rss.parse_ethtool_x(text)


def test_a_devices_rss_is_one_with_a_key_and_a_table_to_hash_with() -> None:
    """The one reading of `ethtool -x DEV` that flows and doctor share: what hashes, or why nothing does."""
    recorded = {name: (ETHTOOL / f"{name}.txt").read_text() for name in ("ixgbe-82599-16rings", "virtio_net-1ring")}
    assert rss.device_rss("ixgbe-82599-16rings", recorded.get) == rss.parse_ethtool_x(recorded["ixgbe-82599-16rings"])
    with pytest.raises(ValueError, match="virtio_net-1ring reports no RSS indirection table"):
        rss.device_rss("virtio_net-1ring", recorded.get)
    keyless = _ixgbe_with("RSS hash key:\n", "RSS hash key:\nOperation not supported\n").split("\n")
    keyless.pop(keyless.index("Operation not supported") + 1)  # the key's bytes
    with pytest.raises(ValueError, match="reports no RSS key"):
        rss.device_rss("ixgbe", lambda dev: "\n".join(keyless))

    def veth(dev: str) -> str:
        raise ValueError("Cannot get RX ring count: Operation not supported")

    with pytest.raises(ValueError, match="Cannot get RX ring count"):
        rss.device_rss("veth0", veth)


def test_flows_stand_in_the_verification_key_where_ethtool_is_missing(monkeypatch) -> None:
    from mosbench.machine import nic
    from mosbench.workloads.server import flows

    def missing(dev: str) -> str:
        raise FileNotFoundError("ethtool")

    monkeypatch.setattr(nic, "device_of", lambda address: "eth9")
    monkeypatch.setattr(nic, "queue_count", lambda dev, kind: 4)
    monkeypatch.setattr(rss, "device_rss", lambda dev: rss.parse_ethtool_x(missing(dev)))
    found = flows.server_rss("10.0.0.1")
    assert found.rss == rss.Rss.default(4) and found.source.startswith("eth9 reports no RSS key or table")


# --- balanced ports ------------------------------------------------------------------------------

def _check(r: rss.Rss, flows: list[rss.Flow], src: str, dst: str, dst_ports: list[int], per_port: int,
           wanted: tuple[int, ...], low: int = 1024, high: int = 65535) -> None:
    assert len(flows) == len(dst_ports) * per_port
    assert len({f.src_port for f in flows}) == len(flows)
    assert all(low <= f.src_port <= high for f in flows)
    assert collections.Counter(f.dst_port for f in flows) == {d: per_port for d in dst_ports}
    for f in flows:
        assert f.queue == r.flow_queue(src, dst, f.src_port, f.dst_port)
    counts = collections.Counter(f.queue for f in flows)
    assert set(counts) <= set(wanted)
    per_queue = [counts.get(q, 0) for q in wanted]
    assert max(per_queue) - min(per_queue) <= 1


def test_balanced_over_every_queue_of_a_recorded_table() -> None:
    r = rss.parse_ethtool_x((ETHTOOL / "ixgbe-82599-16rings.txt").read_text())
    ports = [11211, 11212, 11213]
    flows = rss.balanced_ports(r, "10.1.0.2", "10.1.0.1", ports, 7)
    _check(r, flows, "10.1.0.2", "10.1.0.1", ports, 7, r.queues)
    assert flows == rss.balanced_ports(r, "10.1.0.2", "10.1.0.1", ports, 7)  # deterministic


def test_balanced_over_the_wanted_queues_only() -> None:
    r = rss.parse_ethtool_x((ETHTOOL / "mlx5-connectx5-64rings.txt").read_text())
    wanted = (0, 5, 6, 40)
    flows = rss.balanced_ports(r, "10.1.0.2", "10.1.0.1", [80], 10, queues_wanted=[40, 6, 5, 0], low=20000,
                               high=30000)
    _check(r, flows, "10.1.0.2", "10.1.0.1", [80], 10, wanted, 20000, 30000)


def test_792_flows_over_256_queues() -> None:
    r = rss.Rss.default(256, size=256)
    ports = list(range(11211, 11211 + 24))
    flows = rss.balanced_ports(r, "192.168.0.2", "192.168.0.1", ports, 33)
    _check(r, flows, "192.168.0.2", "192.168.0.1", ports, 33, r.queues)
    assert sorted(collections.Counter(f.queue for f in flows).values()) == [3] * 232 + [4] * 24


def test_balanced_ports_refusals() -> None:
    r = rss.Rss.default(4)
    with pytest.raises(ValueError, match="12 flows need as many source ports; 2000-2009 has 10"):
        rss.balanced_ports(r, "10.0.0.1", "10.0.0.2", [80, 81], 6, low=2000, high=2009)
    with pytest.raises(ValueError, match="queue 4 is not in"):
        rss.balanced_ports(r, "10.0.0.1", "10.0.0.2", [80], 6, queues_wanted=[0, 4])
    with pytest.raises(ValueError, match="listed twice"):
        rss.balanced_ports(r, "10.0.0.1", "10.0.0.2", [80, 80], 6)
    with pytest.raises(ValueError, match="not a range"):
        rss.balanced_ports(r, "10.0.0.1", "10.0.0.2", [80], 6, low=5000, high=4000)
    with pytest.raises(ValueError, match="not negative"):
        rss.balanced_ports(r, "10.0.0.1", "10.0.0.2", [80], -1)
    assert rss.balanced_ports(r, "10.0.0.1", "10.0.0.2", [80], 0) == []
    # A zero key hashes every flow to 0: only the table's first entry is ever reached.
    dead = rss.Rss(key=bytes(40), table=(0, 1, 2, 3))
    unreached = r"no source port in 1024-65535 reaches queue 1 from 10\.0\.0\.1 to 10\.0\.0\.2"
    with pytest.raises(ValueError, match=unreached):
        rss.balanced_ports(dead, "10.0.0.1", "10.0.0.2", [80], 8)
    # Too narrow a range: 16 ports of which 4 reach queue 1, where an even spread of 16 flows needs 8.
    lopsided = rss.Rss(key=rss.MICROSOFT_KEY, table=(0, 0, 0, 1))
    reached = lopsided.src_port_queues("10.0.0.1", "10.0.0.2", 80, np.arange(1024, 1040))
    assert collections.Counter(reached.tolist()) == {0: 12, 1: 4}
    with pytest.raises(ValueError, match="cannot spread 16 flows evenly: queue 1 gets 4 against 12"):
        rss.balanced_ports(lopsided, "10.0.0.1", "10.0.0.2", [80], 16, low=1024, high=1039)


@settings(max_examples=60, deadline=None)
@given(key=st.binary(min_size=40, max_size=40),
       table=st.lists(st.integers(0, 7), min_size=1, max_size=64),
       src=st.integers(0, 2**32 - 1), dst=st.integers(0, 2**32 - 1),
       dst_ports=st.lists(st.integers(1, 65535), min_size=1, max_size=3, unique=True),
       per_port=st.integers(1, 8), low=st.sampled_from([1, 1024, 30000, 60000]))
def test_balanced_or_refused(key: bytes, table: list[int], src: int, dst: int, dst_ports: list[int],
                             per_port: int, low: int) -> None:
    """Any key and table: flows spread within one over the table's queues, or a ValueError; and never
    a refusal where every queue is reachable from every destination port through plenty of ports."""
    r = rss.Rss(key=key, table=tuple(table), rings=8)
    src_ip, dst_ip = str(ipaddress.IPv4Address(src)), str(ipaddress.IPv4Address(dst))
    try:
        flows = rss.balanced_ports(r, src_ip, dst_ip, dst_ports, per_port, low=low)
    except ValueError:
        flows = None
    candidates = np.arange(low, 65536)
    plenty = all(
        min(collections.Counter(r.src_port_queues(src_ip, dst_ip, d, candidates).tolist()).get(q, 0)
            for q in r.queues) > len(dst_ports) * per_port
        for d in dst_ports)
    if flows is None:
        assert not plenty
        return
    _check(r, flows, src_ip, dst_ip, dst_ports, per_port, r.queues, low)
