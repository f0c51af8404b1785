"""Everything about the machine a result depends on, recorded with every run (one documented place)."""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import mosbench
from mosbench.machine import topology

SYSCTLS = (
    "kernel.sched_autogroup_enabled", "kernel.numa_balancing", "kernel.perf_event_paranoid",
    "kernel.randomize_va_space", "vm.nr_hugepages", "vm.overcommit_memory", "vm.swappiness",
    "net.core.somaxconn", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_tw_reuse", "fs.file-max",
)
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
    meminfo = _read("/proc/meminfo") or ""
    mem_kb = next((int(line.split()[1]) for line in meminfo.splitlines() if line.startswith("MemTotal")), None)
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
        "sysctls": {k: _read("/proc/sys/" + k.replace(".", "/")) for k in SYSCTLS},
        "virtualization": _first_line(["systemd-detect-virt"]) or _hypervisor(),
        "tools": tools,
        "mosbench_version": mosbench.__version__,
        "mosbench_commit": git_commit(),
        "uid": os.getuid(),
    }


def _hypervisor() -> str | None:
    cpuinfo = _read("/proc/cpuinfo") or ""
    return "hypervisor" if " hypervisor" in cpuinfo else None
