"""The NIC as part of a point, against recorded /proc/interrupts, /proc/softirqs and `ethtool -S` output
(tests/fixtures/nic/README.md says where each comes from), a fake /proc and /sys, and one live veth pair."""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

from mosbench.analysis import network
from mosbench.machine import doctor, nic, rss
from mosbench.machine import journal as journal_mod
from mosbench.machine.journal import Journal
from mosbench.machine.nic import DeviceIds, QueuePackets
from mosbench.report import nic as nic_words

FIX = Path(__file__).parent / "fixtures" / "nic"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


def header(n: int) -> str:
    """The kernel's /proc/interrupts header for CPUs 0..n-1 (fewer than 1000 IRQs)."""
    return " " * 11 + "".join(f"CPU{c:<8d}" for c in range(n)) + "\n"


def mlx5_interrupts() -> str:
    # recorded with grep, which dropped the header: the kernel's for the machine's 12 CPUs
    return header(12) + fixture("interrupts-12cpu-mlx5-grep.txt")


def queues(irqs: list[nic.QueueIrq]) -> list[tuple[int, int, str]]:
    return [(q.irq, q.queue, q.direction) for q in irqs]


# --- parsing ---------------------------------------------------------------------------------------------------

def test_interrupts_of_a_16_cpu_server_with_short_lines_and_spaced_names():
    table = nic.parse_interrupts(fixture("interrupts-16cpu-TxRx-2.6.32-before.txt"))
    assert table.cpus == tuple(range(16))
    lines = {line.name: line for line in table.lines}
    assert table.per_cpu(lines["85"])[3] == 107490
    assert lines["ERR"].counts == (15,) and lines["ERR"].irq is None  # one column, whatever the CPUs
    assert lines["103"].actions == ("ib_qib (buf avail)",)
    assert lines["NMI"].counts[15] == 111916


def test_interrupts_shared_irqs_and_a_32_cpu_header():
    table = nic.parse_interrupts(fixture("interrupts-32cpu-tg3-4.13.txt"))
    assert table.cpus == tuple(range(32))
    lines = table.by_irq()
    assert lines[18].actions == ("i801_smbus", "ehci_hcd:usb4", "ehci_hcd:usb5")
    assert table.per_cpu(lines[121])[16] == 35790


def test_interrupts_of_256_cpus_two_offline():
    table = nic.parse_interrupts(fixture("interrupts-256cpu-ena-built.txt"))
    assert len(table.cpus) == 254 and 3 not in table.cpus and 130 not in table.cpus
    lines = table.by_irq()
    last = table.per_cpu(lines[1057 + 31])
    assert last[248] == 131_000 and last[255] == 31 and 130 not in last
    assert {line.name: line.counts for line in table.lines}["ERR"] == (0,)


def test_interrupts_without_a_header_are_refused():
    with pytest.raises(ValueError):
        nic.parse_interrupts(fixture("interrupts-12cpu-mlx5-grep.txt"))


def test_softirqs():
    here = nic.softirqs(fixture("softirqs-2cpu-6.18-here.txt"))
    assert here.net_rx == {0: 74006639, 1: 65829645} and here.net_tx == {0: 90, 1: 48}
    blog = nic.softirqs(fixture("softirqs-2cpu-blog.txt"))
    assert blog.net_rx == {0: 799145, 1: 645134}
    wide = nic.softirqs(fixture("softirqs-256cpu-built-after.txt"))
    assert len(wide.net_rx) == 256 and wide.net_rx[130] == 1300  # an offline CPU keeps its column here
    assert wide.net_rx[31] == 25_310


# --- a device's queue interrupts, per driver -----------------------------------------------------------------

def test_queue_irqs_ixgbe_style():
    found = nic.queue_irqs("eth0", fixture("interrupts-16cpu-TxRx-2.6.32-before.txt"), None)
    assert queues(found) == [(85 + q, q, "TxRx") for q in range(8)]  # not IRQ 84, the link's "eth0"
    assert found[5].action == "eth0-TxRx-5"


def test_queue_irqs_split_rx_and_tx_of_one_device_among_four():
    text = fixture("interrupts-32cpu-tg3-4.13.txt")
    assert queues(nic.queue_irqs("eth0", text, None)) == [
        (121, 0, "tx"), (122, 1, "rx"), (123, 2, "rx"), (124, 3, "rx"), (125, 4, "rx")]
    assert [q.irq for q in nic.queue_irqs("eth3", text, None)] == [136, 137, 138, 139, 140]


def test_queue_irqs_i40e():
    found = nic.queue_irqs("enP1s15", fixture("interrupts-4cpu-i40e-head.txt"), None)
    assert queues(found) == [(10, 0, "TxRx"), (11, 1, "TxRx"), (12, 2, "TxRx")]  # not i40e-…:misc
    assert found[0].driver == "i40e/iavf"


def test_queue_irqs_mlx5_by_pci_address():
    text = mlx5_interrupts()
    port0 = nic.queue_irqs("enp1s0f0np0", text, None, DeviceIds("enp1s0f0np0", pci="0000:01:00.0"))
    # the same IRQs mlnx-tools' set_irq_affinity_cpulist.sh discovered on that machine
    assert [q.irq for q in port0] == [99, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119]
    assert [q.queue for q in port0] == list(range(12)) and {q.direction for q in port0} == {"TxRx"}
    port1 = nic.queue_irqs("enp1s0f1np1", text, None, DeviceIds("enp1s0f1np1", pci="0000:01:00.1"))
    assert [q.irq for q in port1] == [102]
    assert nic.queue_irqs("enp1s0f0np0", text, None) == []  # its names carry no interface name


def test_queue_irqs_virtio():
    mq = fixture("interrupts-2cpu-virtio-mq.txt")
    found = nic.queue_irqs("eth0", mq, None, DeviceIds("eth0", virtio="virtio0"))
    assert queues(found) == [(27, 0, "rx"), (28, 0, "tx"), (29, 1, "rx"), (30, 1, "tx")]
    here = fixture("interrupts-2cpu-virtio-6.18-here.txt")
    assert queues(nic.queue_irqs("eth0", here, {37, 38, 39}, DeviceIds("eth0", "0000:00:03.0", "virtio2"))) == [
        (38, 0, "rx"), (39, 0, "tx")]
    # virtio3's rx and tx here are a console's, not a network device's queues
    assert nic.queue_irqs("x", here, None, DeviceIds("x", virtio="virtio3")) == []


def test_queue_irqs_ena_on_256_cpus():
    found = nic.queue_irqs("ens5", fixture("interrupts-256cpu-ena-built.txt"), None)
    assert [q.queue for q in found] == list(range(32)) and found[0].irq == 1057  # not ena-mgmnt
    assert {q.direction for q in found} == {"TxRx"} and found[0].driver == "ena"


def test_queue_irqs_msi_irqs_exclude_and_rescue():
    text = mlx5_interrupts()
    ids = DeviceIds("enp1s0f0np0", pci="0000:01:00.0")
    assert [q.irq for q in nic.queue_irqs("enp1s0f0np0", text, {98, 99, 109}, ids)] == [99, 109]
    # renamed after its IRQs were requested: no name carries it, its own MSI IRQs shaped like queues do
    msi = {98, 99, *range(109, 120)}
    assert [q.irq for q in nic.queue_irqs("renamed0", text, msi)] == [99, *range(109, 120)]


def fake_device(root: Path, dev: str, device: str, msi: set[int] | None, rx: int = 1, tx: int = 1,
                rps: str = "0", xps: str | None = "0") -> None:
    """/sys/class/net/DEV with its device link, the PCI function's msi_irqs (None: a device without, as
    virtio over MMIO is) and the queues' steering files."""
    target = root / "sys/devices/pci0000:00" / device
    target.mkdir(parents=True, exist_ok=True)
    if msi is not None:
        msi_dir = (target.parent if target.name.startswith("virtio") else target) / "msi_irqs"
        msi_dir.mkdir(exist_ok=True)
        for irq in msi:
            (msi_dir / str(irq)).write_text("msix\n")
    net = root / "sys/class/net" / dev
    net.mkdir(parents=True)
    (net / "device").symlink_to(os.path.relpath(target, net))
    for q in range(rx):
        (net / f"queues/rx-{q}").mkdir(parents=True)
        (net / f"queues/rx-{q}/rps_cpus").write_text(rps + "\n")
    for q in range(tx):
        (net / f"queues/tx-{q}").mkdir(parents=True)
        if xps is not None:
            (net / f"queues/tx-{q}/xps_cpus").write_text(xps + "\n")


def fake_proc(root: Path, interrupts: str, softirqs: str = "", affinity: str = "0-11") -> None:
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc/interrupts").write_text(interrupts)
    (root / "proc/softirqs").write_text(softirqs or fixture("softirqs-2cpu-blog.txt"))
    for line in nic.parse_interrupts(interrupts).lines:
        if line.irq is not None:
            (root / f"proc/irq/{line.irq}").mkdir(parents=True, exist_ok=True)
            (root / f"proc/irq/{line.irq}/smp_affinity_list").write_text(affinity + "\n")


def test_device_ids_and_msi_irqs_from_sysfs(tmp_path):
    fake_device(tmp_path, "eth0", "0000:00:03.0/virtio2", {37, 38, 39})
    fake_device(tmp_path, "ens1f0", "0000:3b:00.0", {64, 65})
    assert nic.device_ids("eth0", tmp_path) == DeviceIds("eth0", "0000:00:03.0", "virtio2")
    assert nic.device_msi_irqs("eth0", tmp_path) == {37, 38, 39}  # the PCI device's, under the virtio one
    assert nic.device_ids("ens1f0", tmp_path) == DeviceIds("ens1f0", "0000:3b:00.0")
    assert nic.device_ids("veth0", tmp_path) == DeviceIds("veth0")
    assert nic.device_msi_irqs("veth0", tmp_path) is None


# One machine per driver family: its /proc/interrupts as recorded, its device as sysfs links it (the PCI
# function, or the virtio device under it) and the function's MSI IRQs, and the queues each must find.
# Without a list of MSI IRQs, only names find them: mlx5's carry the PCI address, virtio_net's the virtio
# device, never the interface's name.
MACHINES = {
    "ixgbe": ("eth0", "0000:03:00.0", set(range(84, 93)), "interrupts-16cpu-TxRx-2.6.32-before.txt",
              [(85 + q, q, "TxRx") for q in range(8)]),
    "i40e": ("enP1s15", "0001:00:0f.0", {9, 10, 11, 12}, "interrupts-4cpu-i40e-head.txt",
             [(10, 0, "TxRx"), (11, 1, "TxRx"), (12, 2, "TxRx")]),
    "mlx5": ("enp1s0f0np0", "0000:01:00.0", {98, 99, *range(109, 120)}, None,
             [(irq, q, "TxRx") for q, irq in enumerate([99, *range(109, 120)])]),
    "virtio_net": ("eth0", "0000:00:03.0/virtio2", {37, 38, 39}, "interrupts-2cpu-virtio-6.18-here.txt",
                   [(38, 0, "rx"), (39, 0, "tx")]),
    "mlx5 without msi_irqs": ("enp1s0f0np0", "0000:01:00.0", None, None,
                              [(irq, q, "TxRx") for q, irq in enumerate([99, *range(109, 120)])]),
    "virtio_net over MMIO": ("eth0", "a003e00.virtio_mmio/virtio2", None, "interrupts-2cpu-virtio-6.18-here.txt",
                             [(38, 0, "rx"), (39, 0, "tx")]),
}


def fake_machine(root: Path, driver: str) -> str:
    dev, device, msi, interrupts, _ = MACHINES[driver]
    fake_proc(root, fixture(interrupts) if interrupts else mlx5_interrupts())
    fake_device(root, dev, device, msi)
    return dev


@pytest.mark.parametrize("driver", MACHINES)
def test_the_one_lookup_finds_each_drivers_queues_from_the_machine(tmp_path, driver):
    dev = fake_machine(tmp_path, driver)
    assert queues(nic.device_queue_irqs(dev, tmp_path)) == MACHINES[driver][4]


@pytest.mark.parametrize("driver", MACHINES)
def test_doctor_counts_each_drivers_queue_interrupts(tmp_path, monkeypatch, driver):
    dev = fake_machine(tmp_path, driver)
    monkeypatch.setattr(nic, "device_of", lambda address: dev)
    monkeypatch.setattr(rss, "device_rss", lambda dev: rss.Rss.default(4))
    rows = {what.strip(): (finding, ok) for what, finding, ok in doctor.server_nic_rows("10.0.0.1", tmp_path)}
    found = MACHINES[driver][4]
    assert rows["queue interrupts"][0].startswith(f"{len(found)} (first 8: {found[0][0]}→0-11")
    assert rows["RSS"] == ("toeplitz over 128 entries, queues 4, key 40 bytes", True)


# --- packets per queue ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "expected"), [
    ("ethtool-S-virtio_net-ens3.txt", {0: QueuePackets(857, 668)}),
    ("ethtool-S-mlx5-6.5.txt", {0: QueuePackets(7282880, None)}),  # recorded without its zero counters
    ("ethtool-S-mlx5-rx0-3-grep.txt", {0: QueuePackets(10799916, None), 1: QueuePackets(26170804, None),
                                       2: QueuePackets(11901885, None), 3: QueuePackets(13219784, None)}),
    ("ethtool-S-i40e-rx0-1-grep.txt", {0: QueuePackets(57112, None), 1: QueuePackets(31256, None)}),
    ("ethtool-S-iavf-enp94s10.txt", {0: QueuePackets(0, 134), 1: QueuePackets(0, 53), 2: QueuePackets(142, 7),
                                     3: QueuePackets(0, 0)}),
    ("ethtool-S-ena.txt", {0: QueuePackets(183700, 33539), 1: QueuePackets(34538, 32452)}),
    ("ethtool-S-bnxt.txt", {0: QueuePackets(1418 + 178 + 0, 1734)}),  # unicast, multicast and broadcast
    ("ethtool-S-veth-6.18-here-after.txt", {0: QueuePackets(12, None)}),
    ("ethtool-S-virtio_net-6.18-here.txt", {}),  # since 6.10 only through netlink; rx0_xdp_packets is not it
])
def test_queue_packets_per_driver(name, expected):
    assert nic.queue_packets(fixture(name)) == expected


def test_queue_packets_ixgbe_add_up_to_the_device_totals():
    text = fixture("ethtool-S-ixgbe-eno2.txt")
    found = nic.queue_packets(text)
    stats = nic.ethtool_stats(text)
    assert len(found) == 64 and found[20] == QueuePackets(146646, 0) and found[60] == QueuePackets(0, 1061658)
    assert sum(p.rx for p in found.values()) == stats["rx_packets"]
    assert sum(p.tx for p in found.values()) == stats["tx_packets"]


# --- windows -------------------------------------------------------------------------------------------------

def stats_from(*texts: str):
    """`ethtool -S` as recorded, one text per snapshot."""
    left = list(texts)
    return lambda dev: left.pop(0)


def test_window_of_a_real_recording_one_core_took_every_interrupt(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    fake_proc(before, fixture("interrupts-16cpu-TxRx-2.6.32-before.txt"))
    fake_proc(after, fixture("interrupts-16cpu-TxRx-2.6.32-after.txt"))
    none = stats_from("", "")
    window = nic.delta(nic.snapshot("eth0", before, none), nic.snapshot("eth0", after, none))
    assert window.queue_irqs == 8 and {c: n for c, n in window.interrupts.items() if n} == {8: 69}
    assert window.note == "ethtool -S eth0 shows no packets per queue"
    assert words(window, [8, 9, 10, 11]) == (
        "NIC interrupts: 100% on the point's 4 CPUs (min 0%, max 100% of it per CPU); none elsewhere")


def test_window_on_256_cpus_and_its_metrics(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    wide = fixture("interrupts-256cpu-ena-built.txt")
    fake_proc(before, wide, fixture("softirqs-256cpu-built-before.txt"))
    fake_proc(after, wide, fixture("softirqs-256cpu-built-after.txt"))
    stats = stats_from(fixture("ethtool-S-ena.txt"), fixture("ethtool-S-ena.txt").replace(
        "queue_0_rx_cnt: 183700", "queue_0_rx_cnt: 183900"))
    window = nic.delta(nic.snapshot("ens5", before, stats), nic.snapshot("ens5", after, stats))
    point = range(32)
    assert words(window, point) == (
        "NET_RX: >99% on the point's 32 CPUs (min 3%, max 3% of it per CPU); <1% elsewhere (CPU 200) | "
        "NET_TX: 100% on the point's 32 CPUs (min 3%, max 3% of it per CPU); none elsewhere")
    assert window.packets == {0: QueuePackets(200, 0), 1: QueuePackets(0, 0)}
    metrics = window.metrics(point)
    json.dumps(metrics)  # JSON-able
    assert metrics["nic_net_rx_total"] == 32 * 25_000 + 400
    assert metrics["nic_net_rx_elsewhere_cpus"] == "200" and metrics["nic_irq_total"] == 0
    assert metrics["nic_rx_packets"] == 200 and metrics["nic_rx_packets_q0"] == 200
    assert metrics["nic_net_tx_min_part"] == pytest.approx(300 / sum(300 + c for c in point))


def test_summary_names_where_the_rest_went():
    window = nic.NicWindow("eth0", {}, {0: 2400, 1: 2100, 2: 2800, 3: 2500, 7: 200, 9: 0}, {}, {}, 0)
    assert words(window, [0, 1, 2, 3]) == (
        "NET_RX: 98% on the point's 4 CPUs (min 21%, max 29% of it per CPU); 2% elsewhere (CPU 7)")
    spread = nic.NicWindow("eth0", {}, {0: 10, 4: 50, 5: 20, 6: 10, 7: 10}, {}, {}, 0)
    assert words(spread, [0]) == "NET_RX: 10% on the point's CPU; 90% elsewhere (CPUs 4, 5, 6 and 1 more)"
    assert words(nic.NicWindow("eth0", {}, {}, {}, {}, 0), [0]) == "no network work on eth0 in the window"


def test_a_point_stores_counts_and_one_stored_before_keeps_its_sentence():
    window = nic.NicWindow("eth0", {}, {0: 2400, 1: 2100, 7: 200}, {}, {}, 0)
    stored = window.metrics([0, 1])
    assert not [k for k, v in stored.items() if isinstance(v, str) and " " in v]  # no sentence among them
    old = {**stored, "nic_summary": "NET_RX: 92% on the point's 2 CPUs, as an older mosbench worded it"}
    assert nic_words.summary(network.work_of(old, (0, 1))) == old["nic_summary"]


def words(window: nic.NicWindow, cpus) -> str:
    """The report's sentence of a window, from what its point stores (through JSON, as the store keeps it)."""
    stored = json.loads(json.dumps(window.metrics(cpus)))
    return nic_words.summary(network.work_of(stored, tuple(cpus)))


def test_counters_that_went_back_are_not_a_window():
    a = nic.NicSnapshot("eth0", (), {}, nic.Softirqs({}, {}), {0: QueuePackets(100, 50)})
    b = nic.NicSnapshot("eth0", (), {}, nic.Softirqs({}, {}), {0: QueuePackets(10, 60)})
    assert nic.delta(a, b).packets == {0: QueuePackets(None, 10)}
    assert nic.delta(a, b).metrics([0])["nic_rx_packets"] is None


def test_snapshot_without_ethtool(tmp_path):
    fake_proc(tmp_path, fixture("interrupts-2cpu-virtio-mq.txt"))

    def missing(dev: str) -> str:
        raise FileNotFoundError("ethtool")

    assert nic.snapshot("eth0", tmp_path, missing).note == "ethtool is not installed (Debian: ethtool)"


def state_journal(tmp_path: Path) -> Journal:
    (tmp_path / "state").mkdir(exist_ok=True)
    return Journal(tmp_path / "state")


# --- steering ------------------------------------------------------------------------------------------------

def mlx5_machine(root: Path) -> None:
    fake_proc(root, mlx5_interrupts())
    fake_device(root, "enp1s0f0np0", "0000:01:00.0", {98, 99, *range(109, 120)}, rx=12, tx=12,
                rps="000", xps="000")


def steering_files(root: Path) -> dict[str, str]:
    files = [*root.glob("proc/irq/*/smp_affinity_list"), *root.glob("sys/class/net/*/queues/*/*_cpus")]
    return {str(p.relative_to(root)): p.read_text().strip() for p in files}


def test_steering_writes_each_queue_to_its_cpu(tmp_path):
    mlx5_machine(tmp_path)
    journal = state_journal(tmp_path)
    report = nic.Steering("enp1s0f0np0", (4, 5, 6), journal, rps=True, xps=True, root=tmp_path).apply()
    files = steering_files(tmp_path)
    comp = [99, *range(109, 120)]  # queues 0-11
    assert [files[f"proc/irq/{irq}/smp_affinity_list"] for irq in comp] == ["4", "5", "6"] * 4
    assert files["proc/irq/98/smp_affinity_list"] == "0-11"  # the async vector is not a queue's
    assert files["proc/irq/102/smp_affinity_list"] == "0-11"  # nor the other port's
    assert files["sys/class/net/enp1s0f0np0/queues/rx-7/rps_cpus"] == "00000070"
    assert files["sys/class/net/enp1s0f0np0/queues/tx-4/xps_cpus"] == "00000020"
    assert len(report.changed) == 12 + 12 + 12 and not report.refused
    assert journal.setting(tmp_path / "proc/irq/99/smp_affinity_list") == "0-11"


def test_steering_restore_and_masks_as_wide_as_the_kernels(tmp_path):
    mlx5_machine(tmp_path)
    (tmp_path / "sys/class/net/enp1s0f0np0/queues/rx-0/rps_cpus").write_text("00000000,00000000\n")
    before = steering_files(tmp_path)
    journal = state_journal(tmp_path)
    steering = nic.Steering("enp1s0f0np0", (33, 1), journal, rps=True, root=tmp_path)
    steering.apply()
    assert steering_files(tmp_path)["sys/class/net/enp1s0f0np0/queues/rx-0/rps_cpus"] == "00000002,00000002"
    assert nic.Steering("enp1s0f0np0", (33, 1), journal, rps=True, root=tmp_path).apply().changed == ()
    assert steering.restore() == ()
    assert steering_files(tmp_path) == before and journal.data["settings"] == []


def test_managed_irq_is_reported_and_every_value_is_journaled_first(tmp_path, monkeypatch):
    mlx5_machine(tmp_path)
    journal = state_journal(tmp_path)
    managed = tmp_path / "proc/irq/110/smp_affinity_list"
    real_write = Path.write_text
    seen: list[bool] = []

    def write(self: Path, text: str, *args, **kw):
        if self.name in ("smp_affinity_list", "rps_cpus", "xps_cpus"):
            on_disk = json.loads(journal.path.read_text())["settings"]
            seen.append(any(p == str(self) for p, _ in on_disk))
            if self == managed:
                raise OSError(errno.EIO, "Input/output error")
        return real_write(self, text, *args, **kw)

    monkeypatch.setattr(Path, "write_text", write)
    report = nic.Steering("enp1s0f0np0", (4, 5, 6), journal, rps=True, root=tmp_path).apply()
    assert seen and all(seen)  # in the journal's file before each write
    assert report.refused == (nic.Refused(str(managed), "the kernel manages this IRQ's affinity (EIO)"),)
    assert journal.setting(managed) is None and len(report.changed) == 11 + 12
    assert "EIO" in report.describe()


def test_a_crash_leaves_the_journal_to_put_the_steering_back(tmp_path):
    mlx5_machine(tmp_path)
    before = steering_files(tmp_path)
    journal = state_journal(tmp_path)
    nic.Steering("enp1s0f0np0", (2, 3), journal, rps=True, xps=True, root=tmp_path).apply()
    assert steering_files(tmp_path) != before
    data = json.loads(journal.path.read_text())  # what the guardian reads once the harness is gone
    outside = tmp_path / "etc/hosts"
    outside.parent.mkdir()
    outside.write_text("127.0.0.1 localhost\n")
    data["settings"] += [[str(outside), "0"], [str(tmp_path / "proc/irq/99/../../../etc/hosts"), "1"],
                         [str(tmp_path / "proc/irq/98/smp_affinity_list"), "1; reboot"],
                         [str(tmp_path / "proc/irq/4242/smp_affinity_list"), "1"]]
    done = journal_mod.undo(data, root=tmp_path)
    assert steering_files(tmp_path) == before
    assert len(done) == 12 + 12 + 12
    assert outside.read_text() == "127.0.0.1 localhost\n"
    assert not (tmp_path / "proc/irq/4242").exists()  # a setting that is gone is not made


def test_steering_a_device_without_queue_interrupts_or_xps(tmp_path):
    fake_proc(tmp_path, fixture("interrupts-2cpu-virtio-6.18-here.txt"))
    net = tmp_path / "sys/class/net/veth0/queues"
    (net / "rx-0").mkdir(parents=True)
    (net / "rx-0/rps_cpus").write_text("0\n")
    (net / "tx-0").mkdir()
    report = nic.Steering("veth0", (1,), state_journal(tmp_path), rps=True, xps=True, root=tmp_path).apply()
    assert report.changed == (str(net / "rx-0/rps_cpus"),)
    assert [r.reason for r in report.refused] == [
        "no queue interrupts (a virtual device, or names DRIVERS lacks)", "absent"]
    assert (net / "rx-0/rps_cpus").read_text() == "00000002"


def test_irqbalance_is_named_never_stopped(tmp_path):
    for pid, comm in ((1, "systemd"), (812, "irqbalance"), (900, "irqbalance-ui")):
        (tmp_path / f"proc/{pid}").mkdir(parents=True)
        (tmp_path / f"proc/{pid}/comm").write_text(comm + "\n")
    (tmp_path / "proc/self").mkdir()
    assert nic.irqbalance_running(tmp_path) == 812
    assert nic.irqbalance_warning(tmp_path) == (
        "irqbalance (PID 812) is running and may move the NIC's interrupts back during the window")
    (tmp_path / "proc/812/comm").write_text("bash\n")
    assert nic.irqbalance_running(tmp_path) is None and nic.irqbalance_warning(tmp_path) is None


# --- a live veth pair ----------------------------------------------------------------------------------------

live = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("ethtool"),
                          reason="needs root, ip and ethtool")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _ping(address: str, count: int) -> int:
    """ICMP echo over a raw socket (no ping needed); the replies received."""
    replies = 0
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        s.settimeout(1.0)
        for seq in range(count):
            body = struct.pack("!BBHHH", 8, 0, 0, os.getpid() & 0xFFFF, seq) + b"mosbench-test"
            words = sum(struct.unpack(f"!{len(body) // 2}H", body[:len(body) // 2 * 2])) + (
                body[-1] << 8 if len(body) % 2 else 0)
            words = (words >> 16) + (words & 0xFFFF)
            checksum = ~(words + (words >> 16)) & 0xFFFF
            s.sendto(body[:2] + struct.pack("!H", checksum) + body[4:], (address, 0))
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                try:
                    reply = s.recv(256)
                except TimeoutError:
                    break
                if reply[20] == 0 and struct.unpack("!H", reply[26:28])[0] == seq:
                    replies += 1
                    break
    return replies


@live
def test_live_veth_counts_its_queue_and_takes_steering_back(tmp_path):
    pid = os.getpid()
    ns, a, b = f"mosbench-test-{pid}", f"mbt{pid % 100000}a", f"mbt{pid % 100000}b"
    third = 1 + pid % 254
    try:
        _ip("netns", "add", ns)
        _ip("link", "add", a, "type", "veth", "peer", "name", b, "netns", ns)
        _ip("addr", "add", f"169.254.{third}.1/30", "dev", a)
        _ip("link", "set", a, "up")
        _ip("-n", ns, "addr", "add", f"169.254.{third}.2/30", "dev", b)
        _ip("-n", ns, "link", "set", b, "up")
        # a veth counts a queue's packets only through its NAPI: GRO on, TSO off at the sender
        subprocess.run(["ethtool", "-K", a, "gro", "on", "tso", "off"], check=True, capture_output=True)
        subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-K", b, "gro", "on", "tso", "off"],
                       check=True, capture_output=True)
        before = nic.snapshot(a)
        assert _ping(f"169.254.{third}.2", 5) == 5
        window = nic.delta(before, nic.snapshot(a))
        assert window.packets[0].rx >= 5 and window.packets[0].tx is None
        assert window.queue_irqs == 0 and "NET_RX" in words(window, range(os.cpu_count() or 1))

        rps = Path(f"/sys/class/net/{a}/queues/rx-0/rps_cpus")
        old = rps.read_text().strip()
        journal = Journal(tmp_path)
        steering = nic.Steering(a, (0,), journal, irq=False, rps=True)
        assert steering.apply().changed == (str(rps),)
        assert int(rps.read_text().replace(",", ""), 16) == 1
        assert steering.restore() == () and rps.read_text().strip() == old and journal.is_clean()
    finally:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
        subprocess.run(["ip", "link", "delete", a], capture_output=True)
