"""What this machine supports, checked rather than assumed."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from mosbench import native
from mosbench.errors import UserError
from mosbench.machine import isolation, topology

PERF_EVENTS = ("task-clock", "context-switches", "page-faults", "cycles", "instructions", "cache-misses",
               "LLC-load-misses")
# Versioned ones by pattern: the distribution's version is what scripts/apt.sh installed (postgresql-16,
# linux-source-6.8.0 and linux-tools on Ubuntu 24.04).
PACKAGES = ("build-essential", "linux-perf|linux-tools-common", "memcached", "apache2", "postgresql-1[5-9]",
            "exim4-daemon-light", "linux-source-[0-9]*", "libdb-dev", "libck-dev", "libmemcached-tools")


def _perf_events() -> dict[str, bool]:
    if not shutil.which("perf"):
        return {}
    result = {}
    for ev in PERF_EVENTS:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(["perf", "stat", "-x,", "-e", ev, "true"], capture_output=True, text=True,
                                 timeout=10)
            result[ev] = out.returncode == 0 and "<not supported>" not in out.stderr \
                and "<not counted>" not in out.stderr
    return result


def _installed(pkg: str) -> str | None:
    """The installed package's name for a name or pattern ("a|b": either), or None."""
    for name in pkg.split("|"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Status}\\n", name], capture_output=True,
                                 text=True, timeout=10)
            found = [line.split()[0] for line in out.stdout.splitlines() if line.endswith("install ok installed")]
            if found:
                return found[-1]
    return None


def _server_limits(ncpus: int) -> tuple[str, str, bool]:
    """What server workloads at every core count need: descriptors for a client's sockets, ephemeral
    ports for a connection per request, a deep accept queue."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    def sysctl(rel: str) -> list[str]:
        path = Path("/proc/sys/net") / rel
        return path.read_text().split() if path.exists() else ["?", "?"]

    low, high = sysctl("ipv4/ip_local_port_range")[:2]
    somaxconn = sysctl("core/somaxconn")[0]
    need = 64 * ncpus  # 8 client sockets per core for memcached, 8 connections per core for Apache, and margin
    ok = hard == resource.RLIM_INFINITY or hard >= need
    return ("server limits", f"open files {soft} (hard {hard}, {need} wanted at {ncpus} cores); ephemeral ports "
            f"{low}-{high}; somaxconn {somaxconn}", ok)


def checks() -> list[tuple[str, str, bool]]:
    """(what, finding, ok) rows."""
    rows: list[tuple[str, str, bool]] = []
    topo = topology.read()
    rows.append(("CPUs", f"{topo.summary()}; {topo.model}", True))
    layout = isolation.detect_cgroups()
    writable = layout is not None and os.access(layout.cpuset, os.W_OK)
    rows.append(("cpuset cgroups", layout.describe() + ("" if writable else " (not writable: need root)")
                 if layout else "none mounted: affinity only", writable))
    hotplug = isolation.pluggable_cpus()
    writable = bool(hotplug) and os.access(isolation.SYS_CPU / f"cpu{hotplug[0]}" / "online", os.W_OK)
    rows.append(("CPU hotplug", f"{len(hotplug)} CPUs can go offline" + ("" if writable else " (not writable)")
                 if hotplug else "no CPU can go offline", writable))
    events = _perf_events()
    if events:
        ok = [e for e, v in events.items() if v]
        missing = [e for e, v in events.items() if not v]
        rows.append(("perf events", f"works: {', '.join(ok) or 'none'}"
                     + (f"; not supported: {', '.join(missing)}" if missing else ""), bool(ok)))
    else:
        rows.append(("perf", "not installed (Debian package linux-perf)", False))
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    hp = Path("/proc/sys/vm/nr_hugepages")
    rows.append(("huge pages", f"THP {thp.read_text().strip() if thp.exists() else 'absent'}; "
                 f"nr_hugepages {hp.read_text().strip() if hp.exists() else '?'}", thp.exists()))
    shm = Path("/dev/shm")
    st = os.statvfs(shm) if shm.is_dir() else None
    rows.append(("tmpfs", f"/dev/shm, {st.f_bavail * st.f_frsize / 2**30:.1f} GiB free" if st else "no /dev/shm",
                 st is not None))
    rows.append(_server_limits(len(topo.cpus)))
    try:
        native.binary("mosbench-micro")
        rows.append(("native build", str(native.build_dir()), True))
    except UserError as e:
        rows.append(("native build", str(e), False))
    found = {p: _installed(p) for p in PACKAGES}
    present = [name for name in found.values() if name]
    absent = [p for p, name in found.items() if not name]
    rows.append(("packages", f"present: {', '.join(present) or 'none'}; absent: {', '.join(absent) or 'none'}",
                 True))
    return rows


def server_nic_rows(address: str, root: Path = Path("/")) -> list[tuple[str, str, bool]]:
    """The server side of `doctor --clients`: the device holding the servers' address, its queues, its
    RSS key and table, its queue interrupts and where they go, and whether irqbalance may move them
    (root: /proc and /sys under it, a fake tree in the tests)."""
    from mosbench.machine import nic, rss

    dev = nic.device_of(address)
    if dev is None:
        return [("server address", f"{address} is not an address of this machine", False)]
    rx, tx = nic.queue_count(dev, "rx", root), nic.queue_count(dev, "tx", root)
    rows = [("server NIC", f"{address} on {dev}: {rx} receive and {tx} transmit queues", True)]
    try:
        found = rss.device_rss(dev)
    except FileNotFoundError:
        rows.append(("  RSS", "ethtool is not installed (Debian: ethtool)", False))
    except (OSError, ValueError) as e:
        rows.append(("  RSS", f"none reported ({e}): flows are predicted with the verification key", False))
    else:
        rows.append(("  RSS", f"{found.hash_function or 'hash'} over {len(found.table)} entries, queues "
                     f"{len(found.queues)}, key {len(found.key)} bytes", True))
    try:
        irqs = nic.device_queue_irqs(dev, root)
    except OSError:
        irqs = []
    if irqs:
        affinity = []
        for q in irqs[:8]:
            with contextlib.suppress(OSError):
                cpus = (root / f"proc/irq/{q.irq}/smp_affinity_list").read_text().strip()
                affinity.append(f"{q.irq}→{cpus}")
        more = f" (first 8: {', '.join(affinity)})" if affinity else ""
        rows.append(("  queue interrupts", f"{len(irqs)}{more}", True))
    else:
        rows.append(("  queue interrupts", f"none: {dev} has no interrupts of its own (a virtual device: its "
                     "receive work is RPS's, steered per point)", True))
    pid = nic.irqbalance_running(root)
    rows.append(("  irqbalance", f"running (PID {pid}): it may move the queues' interrupts during a window"
                 if pid else "not running", not pid))
    return rows
