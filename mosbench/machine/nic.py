"""The NIC as part of a point: where its work went over the window, and its queues steered to the point's CPUs.

The paper (sections 5.3 and 5.4) gave every server core its own NIC queue and that queue's interrupt, so that no
core handled another's packets. Reading: which IRQs are a device's queue interrupts (from the names its driver
gives them, found by `device_queue_irqs` alone), how often each fired on each CPU, the NET_RX and NET_TX softirqs
per CPU and the packets per queue (`ethtool -S`); a `NicWindow` holds a point's share of that work and where the
rest went, as counts (report/nic.py words them). Steering: each queue's IRQ to one of the point's CPUs (queue i
to the point's CPU i mod n), receive packet steering over all of them, transmit packet steering per queue; every
value is written to the run's journal before it changes, so the guardian puts it back after a crash (journal.py).

Every path comes through a root: / in a run, a fake tree in the tests.
"""

from __future__ import annotations

import errno
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosbench import cpulist
from mosbench.machine.journal import Journal

ROOT = Path("/")
NETDEV, PCI, VIRTIO = "netdev", "pci", "virtio"
_KIND = {None: "TxRx", "TxRx": "TxRx", "rxtx": "TxRx", "rx": "rx", "tx": "tx", "input": "rx", "output": "tx"}
_QUEUE = r"(?P<queue>\d+)"
_INTEL_KIND = r"(?P<kind>TxRx|rx|tx)"


@dataclass(frozen=True)
class Driver:
    """How one family of drivers names its queue interrupts and its per-queue packet counters."""

    name: str
    by: str  # what its IRQ names carry: the interface's name, its PCI address or its virtioN device
    irq: str | None  # a queue interrupt's action name, {id} standing for that; groups: queue, kind
    rx: str | None = None  # `ethtool -S` names of a queue's received packets (summed); group: queue
    tx: str | None = None


# The only driver-specific knowledge here. Order matters for the counters: the first row whose names appear in
# a device's `ethtool -S` is its format (virtio_net before 6.10 also counts rx_queue_N_xdp_packets, which on a
# veth are the only per-queue packets).
DRIVERS = (
    Driver("ixgbe/igb/bnxt", NETDEV, rf"{{id}}-{_INTEL_KIND}-{_QUEUE}",
           rf"rx_queue_{_QUEUE}_packets", rf"tx_queue_{_QUEUE}_packets"),
    Driver("ice", NETDEV, rf"ice-{{id}}-{_INTEL_KIND}-{_QUEUE}",
           rf"rx_queue_{_QUEUE}_packets", rf"tx_queue_{_QUEUE}_packets"),
    Driver("i40e/iavf", NETDEV, rf"(?:i40e|iavf)-{{id}}-{_INTEL_KIND}-{_QUEUE}",
           rf"rx-{_QUEUE}\.(?:rx_)?packets", rf"tx-{_QUEUE}\.(?:tx_)?packets"),
    # bnxt names its interrupts as ixgbe does: the first row finds them.
    Driver("bnxt", NETDEV, None,
           rf"\[{_QUEUE}\]: rx_(?:ucast|mcast|bcast)_packets", rf"\[{_QUEUE}\]: tx_(?:ucast|mcast|bcast)_packets"),
    Driver("mlx5", PCI, rf"mlx5_comp{_QUEUE}@pci:{{id}}", rf"rx{_QUEUE}_packets", rf"tx{_QUEUE}_packets"),
    # Since 6.10 virtio_net reports its queues' packets through netlink (qstats) only, not `ethtool -S`.
    Driver("virtio_net", VIRTIO, rf"{{id}}-(?P<kind>input|output)\.{_QUEUE}",
           rf"rx_queue_{_QUEUE}_packets", rf"tx_queue_{_QUEUE}_packets"),
    Driver("ena", NETDEV, rf"{{id}}-Tx-Rx-{_QUEUE}", rf"queue_{_QUEUE}_rx_cnt", rf"queue_{_QUEUE}_tx_cnt"),
    Driver("vmxnet3", NETDEV, rf"{{id}}-(?P<kind>rxtx)-{_QUEUE}"),
    # A veth counts a queue's packets only when they pass its NAPI (GRO on with TSO off at the sender, or XDP),
    # and nothing per transmit queue.
    Driver("veth", NETDEV, None, rf"rx_queue_{_QUEUE}_xdp_packets"),
)


# --- /proc/interrupts and /proc/softirqs ---------------------------------------------------------------------

@dataclass(frozen=True)
class InterruptLine:
    name: str  # the IRQ's number, or an architecture's counter ("NMI", "LOC", "ERR")
    counts: tuple[int, ...]  # one per CPU of the header, in its order; fewer where the kernel prints fewer
    description: str  # chip, hardware IRQ and trigger, then the actions' names

    @property
    def irq(self) -> int | None:
        return int(self.name) if self.name.isdigit() else None

    @property
    def actions(self) -> tuple[str, ...]:
        """The names of the handlers: the kernel sets them off by two spaces and joins them with ', '."""
        last = re.split(r"\s{2,}", self.description)[-1] if self.description else ""
        return tuple(a for a in last.split(", ") if a)


@dataclass(frozen=True)
class Interrupts:
    cpus: tuple[int, ...]  # the online CPUs, as the header names them (an offline CPU has no column)
    lines: tuple[InterruptLine, ...]

    def per_cpu(self, line: InterruptLine) -> dict[int, int]:
        return dict(zip(self.cpus, line.counts, strict=False))

    def by_irq(self) -> dict[int, InterruptLine]:
        return {line.irq: line for line in self.lines if line.irq is not None}


_CPU = re.compile(r"CPU(\d+)")
_COUNT = re.compile(r"\s*(\d+)(?=\s|$)")


def _table(text: str) -> tuple[tuple[int, ...], list[InterruptLine]]:
    """The shape /proc/interrupts and /proc/softirqs share: a header of CPUn, then NAME: counts [text]."""
    cpus: tuple[int, ...] | None = None
    rows: list[InterruptLine] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if cpus is None:
            tokens = line.split()
            if not all(_CPU.fullmatch(t) for t in tokens):
                raise ValueError(f"no CPU header before {line.strip()[:40]!r}")
            cpus = tuple(int(t[3:]) for t in tokens)
            continue
        name, sep, rest = line.partition(":")
        if sep:
            counts, pos = _counts(rest, len(cpus))
            rows.append(InterruptLine(name.strip(), counts, rest[pos:].strip()))
    if cpus is None:
        raise ValueError("empty: no CPU header")
    return cpus, rows


def _counts(rest: str, most: int) -> tuple[tuple[int, ...], int]:
    # At most one count per CPU: what follows (an ARM GIC's hardware IRQ number) may be a number too.
    counts: list[int] = []
    pos = 0
    while len(counts) < most and (m := _COUNT.match(rest, pos)):
        counts.append(int(m.group(1)))
        pos = m.end()
    return tuple(counts), pos


def parse_interrupts(text: str) -> Interrupts:
    cpus, rows = _table(text)
    return Interrupts(cpus, tuple(rows))


@dataclass(frozen=True)
class Softirqs:
    net_rx: Mapping[int, int]  # CPU → count (every possible CPU, online or not)
    net_tx: Mapping[int, int]


def softirqs(text: str) -> Softirqs:
    cpus, rows = _table(text)
    named = {row.name: dict(zip(cpus, row.counts, strict=False)) for row in rows}
    return Softirqs(named.get("NET_RX", {}), named.get("NET_TX", {}))


# --- which IRQs are a device's queues ------------------------------------------------------------------------

@dataclass(frozen=True)
class DeviceIds:
    """What a device's queue interrupts may be named after."""

    name: str
    pci: str | None = None  # 0000:3b:00.0, for mlx5's names
    virtio: str | None = None  # virtio2, for virtio_net's

    def of(self, by: str) -> str | None:
        return {NETDEV: self.name, PCI: self.pci, VIRTIO: self.virtio}[by]


@dataclass(frozen=True)
class QueueIrq:
    irq: int
    queue: int
    direction: str  # "rx", "tx" or "TxRx" (one vector for both, as mlx5's completion vectors are)
    action: str  # the name in /proc/interrupts
    driver: str  # the row of DRIVERS that knew it


_PCI_ADDRESS = re.compile(r"[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_VIRTIO_DEVICE = re.compile(r"virtio\d+")
_ANY_ID = r"\S+?"


def _device_dir(dev: str, root: Path) -> Path | None:
    link = root / "sys/class/net" / dev / "device"
    return link.resolve() if link.exists() else None


def device_ids(dev: str, root: Path = ROOT) -> DeviceIds:
    """The device's PCI address and virtio device from /sys/class/net/DEV/device (a veth has neither)."""
    device = _device_dir(dev, root)
    if device is None:
        return DeviceIds(dev)
    if _VIRTIO_DEVICE.fullmatch(device.name):
        pci = device.parent.name if _PCI_ADDRESS.fullmatch(device.parent.name) else None
        return DeviceIds(dev, pci, device.name)
    return DeviceIds(dev, device.name if _PCI_ADDRESS.fullmatch(device.name) else None)


def device_msi_irqs(dev: str, root: Path = ROOT) -> set[int] | None:
    """The IRQs the device's PCI function was given (its msi_irqs); None where it has no such list."""
    device = _device_dir(dev, root)
    if device is None:
        return None
    # A virtio device's interrupts belong to the PCI device it sits on.
    function = device.parent if _VIRTIO_DEVICE.fullmatch(device.name) else device
    listing = function / "msi_irqs"
    if not listing.is_dir():
        return None
    return {int(p.name) for p in listing.iterdir() if p.name.isdigit()}


def queue_irqs(dev: str, interrupts_text: str | Interrupts, msi_irqs: set[int] | None,
               ids: DeviceIds | None = None) -> list[QueueIrq]:
    """dev's queue interrupts, by queue. A name counts when it carries one of the device's ids (ids: its
    PCI address and virtio device too, from device_ids); with msi_irqs, only IRQs among them. Names are
    given when the IRQs are requested, so a renamed interface keeps its old ones: where no name carries
    an id, msi_irqs' IRQs named like a queue are the device's."""
    table = interrupts_text if isinstance(interrupts_text, Interrupts) else parse_interrupts(interrupts_text)
    ids = ids or DeviceIds(dev)
    found = _matching(table, ids, msi_irqs)
    if not found and msi_irqs:
        found = _matching(table, None, msi_irqs)
    order = {"rx": 0, "TxRx": 1, "tx": 2}
    return sorted(found, key=lambda q: (q.queue, order[q.direction], q.irq))


def read_interrupts(root: Path = ROOT) -> Interrupts:
    return parse_interrupts((root / "proc/interrupts").read_text())


def device_queue_irqs(dev: str, root: Path = ROOT, table: Interrupts | None = None) -> list[QueueIrq]:
    """dev's queue interrupts on this machine (table: /proc/interrupts, read now where not given), found
    by every id its driver may name them after and among its PCI function's IRQs: the one lookup that
    the counters, the steering and doctor share. OSError where /proc/interrupts cannot be read."""
    table = table if table is not None else read_interrupts(root)
    return queue_irqs(dev, table, device_msi_irqs(dev, root), device_ids(dev, root))


def _matching(table: Interrupts, ids: DeviceIds | None, msi_irqs: set[int] | None) -> list[QueueIrq]:
    patterns = []
    for driver in DRIVERS:
        ident = ids.of(driver.by) if ids else None
        if driver.irq and (ids is None or ident):
            patterns.append((driver, re.compile(driver.irq.format(id=re.escape(ident) if ident else _ANY_ID))))
    found = []
    for line in table.lines:
        irq = line.irq
        if irq is None or (msi_irqs is not None and irq not in msi_irqs):
            continue
        hit = next(((d, m, a) for a in line.actions for d, p in patterns if (m := p.fullmatch(a))), None)
        if hit:
            driver, m, action = hit
            kind = m.groupdict().get("kind")
            found.append(QueueIrq(irq, int(m.group("queue")), _KIND[kind], action, driver.name))
    return found


# --- packets per queue (ethtool -S) --------------------------------------------------------------------------

@dataclass(frozen=True)
class QueuePackets:
    rx: int | None  # None: the driver does not count this direction per queue
    tx: int | None


def ethtool_stats(text: str) -> dict[str, int]:
    """`ethtool -S` as name → value ("[0]: rx_ucast_packets" is bnxt's name for its ring 0's)."""
    stats: dict[str, int] = {}
    for line in text.splitlines():
        name, sep, value = line.rpartition(":")
        if sep and value.strip().isdigit():
            stats[name.strip()] = int(value)
    return stats


def queue_packets(stats: str | Mapping[str, int]) -> dict[int, QueuePackets]:
    """Packets per queue in the first format of DRIVERS that the statistics use; {} when none does."""
    named = ethtool_stats(stats) if isinstance(stats, str) else stats
    for driver in DRIVERS:
        rx = _per_queue(named, driver.rx)
        tx = _per_queue(named, driver.tx)
        if rx or tx:
            return {q: QueuePackets(rx.get(q) if driver.rx else None, tx.get(q) if driver.tx else None)
                    for q in sorted(rx.keys() | tx.keys())}
    return {}


def _per_queue(named: Mapping[str, int], pattern: str | None) -> dict[int, int]:
    sums: dict[int, int] = {}
    if pattern:
        compiled = re.compile(pattern)
        for name, value in named.items():
            if m := compiled.fullmatch(name):
                sums[int(m.group("queue"))] = sums.get(int(m.group("queue")), 0) + value
    return sums


def ethtool_output(dev: str) -> str:
    """`ethtool -S DEV`; OSError (FileNotFoundError: not installed) where it cannot be had."""
    out = subprocess.run(["ethtool", "-S", dev], capture_output=True, text=True, timeout=10)
    if out.returncode:
        raise OSError(f"ethtool -S {dev}: {out.stderr.strip() or out.returncode}")
    return out.stdout


# --- a snapshot, and a window's worth ------------------------------------------------------------------------

@dataclass(frozen=True)
class NicSnapshot:
    dev: str
    irqs: tuple[QueueIrq, ...]
    interrupts: Mapping[int, Mapping[int, int]]  # queue IRQ → CPU → count
    softirqs: Softirqs
    queues: Mapping[int, QueuePackets]
    note: str | None = None  # why there are no per-queue packets, when there are none


def snapshot(dev: str, root: Path = ROOT, stats: Callable[[str], str] = ethtool_output) -> NicSnapshot:
    """The device's counters now (stats: `ethtool -S` in a run, a recording in a test)."""
    table = read_interrupts(root)
    irqs = device_queue_irqs(dev, root, table)
    lines = table.by_irq()
    counts = {q.irq: table.per_cpu(lines[q.irq]) for q in irqs}
    queues, note = _queues(dev, stats)
    return NicSnapshot(dev, tuple(irqs), counts, softirqs((root / "proc/softirqs").read_text()), queues, note)


def _queues(dev: str, stats: Callable[[str], str]) -> tuple[dict[int, QueuePackets], str | None]:
    try:
        text = stats(dev)
    except FileNotFoundError:
        return {}, "ethtool is not installed (Debian: ethtool)"
    except (OSError, subprocess.SubprocessError) as e:
        return {}, str(e)
    queues = queue_packets(text)
    return queues, None if queues else f"ethtool -S {dev} shows no packets per queue"


def _minus(after: Mapping[int, int], before: Mapping[int, int]) -> dict[int, int]:
    # A CPU in only one of them went offline or came back between the two: its part is not known.
    return {c: max(0, after[c] - before[c]) for c in after.keys() & before.keys()}


def _count_delta(after: int | None, before: int | None) -> int | None:
    # A counter that went back (a driver reset, ethtool -Z) says nothing of the window.
    if after is None or before is None or after < before:
        return None
    return after - before


@dataclass(frozen=True)
class Share:
    """How one kind of network work split between the point's CPUs and the rest."""

    what: str
    point: Mapping[int, int]  # each of the point's CPUs
    elsewhere: Mapping[int, int]  # the other CPUs that did any

    @property
    def total(self) -> int:
        return sum(self.point.values()) + sum(self.elsewhere.values())

    @property
    def on_point(self) -> float | None:
        return sum(self.point.values()) / self.total if self.total else None

    def parts(self) -> tuple[float, float] | None:
        """The least and the most any one of the point's CPUs did, as parts of what the point did."""
        done = sum(self.point.values())
        return (min(self.point.values()) / done, max(self.point.values()) / done) if done else None


@dataclass(frozen=True)
class NicWindow:
    dev: str
    packets: Mapping[int, QueuePackets]  # per queue; None where not counted or not known
    net_rx: Mapping[int, int]  # softirqs per CPU
    net_tx: Mapping[int, int]
    interrupts: Mapping[int, int]  # the device's queue interrupts per CPU
    queue_irqs: int
    note: str | None = None

    def shares(self, cpus: Iterable[int]) -> tuple[Share, ...]:
        point = sorted(set(cpus))
        return tuple(_share(what, counts, point) for what, counts in
                     (("NET_RX", self.net_rx), ("NET_TX", self.net_tx), ("NIC interrupts", self.interrupts)))

    def metrics(self, cpus: Iterable[int]) -> dict[str, Any]:
        """JSON-able, for the point's metrics: counts and shares only (report/nic.py puts them in words)."""
        out: dict[str, Any] = {"nic_dev": self.dev, "nic_queue_irqs": self.queue_irqs}
        for share in self.shares(cpus):
            key = {"NET_RX": "nic_net_rx", "NET_TX": "nic_net_tx"}.get(share.what, "nic_irq")
            parts = share.parts()
            out[f"{key}_total"] = share.total
            out[f"{key}_on_point"] = share.on_point
            out[f"{key}_min_part"] = parts[0] if parts else None
            out[f"{key}_max_part"] = parts[1] if parts else None
            out[f"{key}_elsewhere_cpus"] = cpulist.format(share.elsewhere)
        for direction in ("rx", "tx"):
            counts = [getattr(p, direction) for p in self.packets.values()]
            known = [c for c in counts if c is not None]
            out[f"nic_{direction}_packets"] = sum(known) if counts and len(known) == len(counts) else None
            for q, p in self.packets.items():
                out[f"nic_{direction}_packets_q{q}"] = getattr(p, direction)
        out["nic_queue_note"] = self.note
        # Per CPU without the zeros: a point's CPU that is absent did none (analysis/network.py reads it so).
        for key, counts in (("nic_net_rx_per_cpu", self.net_rx), ("nic_net_tx_per_cpu", self.net_tx),
                            ("nic_irq_per_cpu", self.interrupts)):
            out[key] = {str(c): n for c, n in sorted(counts.items()) if n}
        return out


def _share(what: str, counts: Mapping[int, int], point: Sequence[int]) -> Share:
    inside = {c: counts.get(c, 0) for c in point}
    outside = {c: n for c, n in counts.items() if c not in inside and n}
    return Share(what, inside, outside)


def delta(before: NicSnapshot, after: NicSnapshot) -> NicWindow:
    # Queues or IRQs that came or went between the two (a channel count changed) are left out.
    irqs = [q for q in after.irqs if q.irq in before.interrupts]
    interrupts: dict[int, int] = {}
    for q in irqs:
        for cpu, n in _minus(after.interrupts[q.irq], before.interrupts[q.irq]).items():
            interrupts[cpu] = interrupts.get(cpu, 0) + n
    packets = {q: QueuePackets(_count_delta(p.rx, before.queues[q].rx), _count_delta(p.tx, before.queues[q].tx))
               for q, p in after.queues.items() if q in before.queues}
    return NicWindow(after.dev, packets, _minus(after.softirqs.net_rx, before.softirqs.net_rx),
                     _minus(after.softirqs.net_tx, before.softirqs.net_tx), interrupts, len(irqs),
                     after.note or before.note)


# --- steering ------------------------------------------------------------------------------------------------

def cpu_mask(cpus: Iterable[int], words: int = 1) -> str:
    """The kernel's CPU mask: hex, comma-separated 32-bit words, most significant first, at least `words`."""
    mask = 0
    for c in cpus:
        mask |= 1 << c
    parts = []
    while mask or len(parts) < words:
        parts.append(f"{mask & 0xFFFFFFFF:08x}")
        mask >>= 32
    return ",".join(reversed(parts))


@dataclass(frozen=True)
class _Target:
    """One setting to steer: a CPU list (smp_affinity_list) or the kernel's hex mask (rps_cpus, xps_cpus)."""

    path: Path
    cpus: tuple[int, ...]
    mask: bool

    def value(self, old: str) -> str:
        # As many words as the kernel shows, so the file reads as it always does.
        return cpu_mask(self.cpus, len(old.split(","))) if self.mask else cpulist.format(self.cpus)

    def holds(self, old: str) -> bool:
        try:
            if self.mask:
                return int(old.replace(",", ""), 16) == int(cpu_mask(self.cpus).replace(",", ""), 16)
            return set(cpulist.parse(old)) == set(self.cpus)
        except ValueError:
            return False


@dataclass(frozen=True)
class Refused:
    path: str
    reason: str


@dataclass(frozen=True)
class SteeringReport:
    changed: tuple[str, ...]
    refused: tuple[Refused, ...]

    def describe(self) -> str:
        text = f"steered {len(self.changed)} setting{'s' * (len(self.changed) != 1)}"
        if self.refused:
            text += "; not: " + "; ".join(f"{r.path} ({r.reason})" for r in self.refused)
        return text


def _reason(e: OSError) -> str:
    if e.errno == errno.EIO:
        return "the kernel manages this IRQ's affinity (EIO)"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "no permission (needs root)"
    if isinstance(e, FileNotFoundError):
        return "absent"
    return e.strerror or str(e)


class Steering:
    """A point's share of the NIC: queue i's interrupt to the point's CPU i mod n (irq), receive packet
    steering over all of its CPUs (rps), queue i's transmit packet steering to CPU i mod n (xps).
    apply() journals every old value before it writes; restore() puts them back."""

    def __init__(self, dev: str, cpus: Sequence[int], journal: Journal, *, irq: bool = True,
                 rps: bool = False, xps: bool = False, root: Path = ROOT):
        if not cpus:
            raise ValueError("steering needs the point's CPUs")
        self.dev = dev
        self.cpus = tuple(cpus)  # in the point's order: queue 0 goes to the first
        self.journal = journal
        self.irq, self.rps, self.xps = irq, rps, xps
        self.root = root
        self._mine: list[Path] = []

    def apply(self) -> SteeringReport:
        changed: list[str] = []
        refused: list[Refused] = []
        for target in self._targets(refused):
            self._set(target, changed, refused)
        return SteeringReport(tuple(changed), tuple(refused))

    def _cpu_of(self, queue: int) -> tuple[int, ...]:
        return (self.cpus[queue % len(self.cpus)],)

    def _targets(self, refused: list[Refused]) -> list[_Target]:
        targets: list[_Target] = []
        if self.irq:
            irqs = device_queue_irqs(self.dev, self.root)
            if not irqs:
                refused.append(Refused(self.dev, "no queue interrupts (a virtual device, or names DRIVERS lacks)"))
            targets += [_Target(self.root / f"proc/irq/{q.irq}/smp_affinity_list", self._cpu_of(q.queue), False)
                        for q in irqs]
        queues = self.root / "sys/class/net" / self.dev / "queues"
        if self.rps:
            targets += [_Target(q / "rps_cpus", self.cpus, True) for q in _queue_dirs(queues, "rx")]
        if self.xps:
            targets += [_Target(q / "xps_cpus", self._cpu_of(int(q.name[3:])), True) for q in _queue_dirs(queues, "tx")]
        return targets

    def _set(self, target: _Target, changed: list[str], refused: list[Refused]) -> None:
        try:
            old = target.path.read_text().strip()
        except OSError as e:  # no rps_cpus or xps_cpus: a kernel without RPS or XPS
            refused.append(Refused(str(target.path), _reason(e)))
            return
        if target.holds(old):
            return
        added = self.journal.add_setting(target.path, old)  # written down before it changes
        try:
            target.path.write_text(target.value(old))
        except OSError as e:
            if added:
                self.journal.remove_setting(target.path)
            refused.append(Refused(str(target.path), _reason(e)))
            return
        if target.path not in self._mine:
            self._mine.append(target.path)
        changed.append(str(target.path))

    def restore(self) -> tuple[Refused, ...]:
        """Puts back what apply() changed; what cannot be put back stays in the journal for the guardian."""
        failed: list[Refused] = []
        for path in reversed(self._mine):
            old = self.journal.setting(path)
            # An IRQ or a device that is gone took its setting with it: nothing to put back.
            if old is not None and path.is_file():
                try:
                    path.write_text(old)
                except OSError as e:
                    failed.append(Refused(str(path), _reason(e)))
                    continue
            self.journal.remove_setting(path)
        self._mine = []
        return tuple(failed)


def _queue_dirs(queues: Path, kind: str) -> list[Path]:
    found = [p for p in queues.glob(f"{kind}-*") if p.name[3:].isdigit()] if queues.is_dir() else []
    return sorted(found, key=lambda p: int(p.name[3:]))


# --- irqbalance ----------------------------------------------------------------------------------------------

def irqbalance_running(root: Path = ROOT) -> int | None:
    """irqbalance's PID, from /proc/*/comm. Only named, never stopped: the machine is not ours to change."""
    proc = root / "proc"
    for pid in sorted(int(p.name) for p in proc.iterdir() if p.name.isdigit()):
        try:
            if (proc / str(pid) / "comm").read_text().strip() == "irqbalance":
                return pid
        except OSError:
            continue  # gone meanwhile
    return None


def irqbalance_warning(root: Path = ROOT) -> str | None:
    pid = irqbalance_running(root)
    if pid is None:
        return None
    return f"irqbalance (PID {pid}) is running and may move the NIC's interrupts back during the window"


def device_of(address: str) -> str | None:
    """The device that holds `address` on this machine (the servers' NIC), None if none does."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "to", address], capture_output=True, text=True)
    words = out.stdout.split()
    return words[1].rstrip(":").split("@")[0] if out.returncode == 0 and len(words) > 1 else None


def queue_count(dev: str, kind: str, root: Path = ROOT) -> int:
    """How many rx or tx queues the device has in sysfs."""
    return len(_queue_dirs(root / "sys/class/net" / dev / "queues", kind))

