"""Everything about the machine a result depends on, recorded with every run (one documented place)."""

from __future__ import annotations

import contextlib
import gzip
import os
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import mosbench
from mosbench.machine import isolation, topology
from mosbench.machine.memory import meminfo_kb

SYSCTLS = (
    "kernel.sched_autogroup_enabled", "kernel.numa_balancing", "kernel.perf_event_paranoid",
    "kernel.randomize_va_space", "vm.nr_hugepages", "vm.overcommit_memory", "vm.swappiness",
    "net.core.somaxconn", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_tw_reuse", "fs.file-max",
)
# Kernel options whose difference explains a scalability difference first (ab diffs them between two
# kernels; history between two runs).
KERNEL_OPTIONS = ("CONFIG_PREEMPT_RT", "CONFIG_PREEMPT", "CONFIG_PREEMPT_VOLUNTARY", "CONFIG_PREEMPT_NONE",
                  "CONFIG_PREEMPT_DYNAMIC", "CONFIG_HZ", "CONFIG_NO_HZ_FULL", "CONFIG_TRANSPARENT_HUGEPAGE",
                  "CONFIG_NR_CPUS", "CONFIG_NUMA", "CONFIG_LOCKDEP", "CONFIG_PROVE_LOCKING",
                  "CONFIG_DEBUG_SPINLOCK", "CONFIG_KASAN", "CONFIG_PARAVIRT_SPINLOCKS", "CONFIG_QUEUED_SPINLOCKS",
                  "CONFIG_SLUB_DEBUG_ON", "CONFIG_MEMCG", "CONFIG_SCHED_CORE")
TOOLS = {"gcc": ["gcc", "--version"], "perf": ["perf", "--version"], "python": None}


def _read(path: str) -> str | None:
    with contextlib.suppress(OSError):
        return Path(path).read_text().strip()
    return None


def _first_line(argv: list[str]) -> str | None:
    if not shutil.which(argv[0]):
        return None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else None
    return None


def git_commit() -> str | None:
    root = Path(mosbench.__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or None
    return None


def capture(topo: topology.Topology | None = None) -> dict[str, Any]:
    topo = topo or topology.read()
    cpu0 = "/sys/devices/system/cpu/cpu0"
    vulns = {}
    vdir = Path("/sys/devices/system/cpu/vulnerabilities")
    if vdir.is_dir():
        vulns = {p.name: p.read_text().strip() for p in sorted(vdir.iterdir())}
    mem_kb = meminfo_kb("MemTotal")
    tools = {name: (_first_line(argv) if argv else platform.python_version()) for name, argv in TOOLS.items()}
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        "kernel_cmdline": _read("/proc/cmdline"),
        "arch": platform.machine(),
        "cpu_model": topo.model,
        "topology": topo.to_json(),
        "topology_summary": topo.summary(),
        "memory_bytes": mem_kb * 1024 if mem_kb else None,
        "governor": _read(f"{cpu0}/cpufreq/scaling_governor"),
        "thp": _read("/sys/kernel/mm/transparent_hugepage/enabled"),
        "thp_defrag": _read("/sys/kernel/mm/transparent_hugepage/defrag"),
        "smt_control": _read("/sys/devices/system/cpu/smt/control"),
        "mitigations": vulns,
        "kernel_config": kernel_config(platform.release()),
        "microcode": microcode(),
        "cgroups": cgroups(),
        "sysctls": {k: _read("/proc/sys/" + k.replace(".", "/")) for k in SYSCTLS},
        "virtualization": _first_line(["systemd-detect-virt"]) or _hypervisor(),
        "tools": tools,
        "mosbench_version": mosbench.__version__,
        "mosbench_commit": git_commit(),
        "uid": os.getuid(),
    }


def kernel_config(release: str) -> dict[str, str] | None:
    """KERNEL_OPTIONS of the running kernel (unset ones as "n"), from /proc/config.gz or /boot's config
    for its release; None where neither exists."""
    text = None
    with contextlib.suppress(OSError):
        text = gzip.decompress(Path("/proc/config.gz").read_bytes()).decode(errors="replace")
    text = text or _read(f"/boot/config-{release}")
    if not text:
        return None
    found = dict(re.findall(r"^(CONFIG_\w+)=(.*)$", text, re.M))
    return {name: found.get(name, "n") for name in KERNEL_OPTIONS}


def microcode() -> str | None:
    """The CPU's microcode revision (the first CPU's: a machine runs one)."""
    found = re.search(r"^microcode\s*:\s*(\S+)", _read("/proc/cpuinfo") or "", re.M)
    return found.group(1) if found else None


def cgroups() -> str | None:
    """The cpuset hierarchy the run's isolation uses, as isolation finds it ("cgroup v2 cpuset at …")."""
    layout = isolation.detect_cgroups()
    return layout.describe() if layout else None


def _hypervisor() -> str | None:
    cpuinfo = _read("/proc/cpuinfo") or ""
    return "hypervisor" if " hypervisor" in cpuinfo else None
