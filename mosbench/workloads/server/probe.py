"""What a client host is, read before a run and again once per run over its master: its architecture,
kernel, name, online CPUs and route to the server's address; the hosts a run cannot use refused with
the fix; the CPUs a point's client takes there."""

from __future__ import annotations

import platform
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosbench import cpulist
from mosbench.errors import UserError
from mosbench.workloads.server import ssh
from mosbench.workloads.server.hosts import ClientHost


@dataclass(frozen=True)
class HostFacts:
    """What a client host is, read once per run and kept with it."""

    host: str
    hostname: str
    arch: str
    kernel: str
    online: tuple[int, ...]
    route: str  # `ip route get` to the server's address: the device and source the clients use

    def as_fact(self) -> dict[str, Any]:
        return {"hostname": self.hostname, "arch": self.arch, "kernel": self.kernel,
                "cpus": cpulist.format(self.online), "route": self.route}


PROBE = ("uname -m; uname -r; hostname; cat /sys/devices/system/cpu/online; "
         "ip -o route get {addr} 2>/dev/null | head -1 || echo none")


def probe(host: ClientHost, config: str, server_address: str, control_path: Path | None = None) -> HostFacts:
    """One command on the host: its architecture, kernel, name, CPUs and route to the server; UserError
    naming the host and ssh's reason if it cannot be reached."""
    lines = ssh.run(host.name, config, PROBE.format(addr=shlex.quote(server_address)), control_path).splitlines()
    if len(lines) < 5:
        raise UserError(f"client host {host.name}: unexpected answer to the probe: {chr(10).join(lines)!r}")
    try:
        online = tuple(cpulist.parse(lines[3].strip()))
    except ValueError:
        raise UserError(f"client host {host.name}: online CPUs {lines[3]!r} unreadable") from None
    route = re.sub(r"\s+", " ", lines[4].replace("\\", " ")).strip()
    return HostFacts(host.name, lines[2].strip(), lines[0].strip(), lines[1].strip(), online, route)


def check_host(facts: HostFacts, host: ClientHost, cpus_wanted: int) -> None:
    """A host the run cannot use, refused before anything is measured, with the fix."""
    here = platform.machine()
    if facts.arch != here:
        raise UserError(f"client host {host.name} is {facts.arch} and this machine {here}: the generators are "
                        f"copied built for {here} (build native/ on a {here} client, or use one)")
    if host.cpus is not None and not set(host.cpus) <= set(facts.online):
        raise UserError(f"client host {host.name}: CPUs {cpulist.format(host.cpus)} asked, "
                        f"{cpulist.format(facts.online)} online")
    if host.cpus is None and cpus_wanted > len(facts.online):
        raise UserError(f"client host {host.name} has {len(facts.online)} CPUs and a point wants "
                        f"{cpus_wanted} there: lower client_cpus or add hosts")
    if facts.route.startswith("none") or " dev " not in f" {facts.route}":
        raise UserError(f"client host {host.name} has no route to the server's address ({facts.route})")


def host_cpus(host: ClientHost, facts: HostFacts, count: int) -> tuple[int, ...]:
    """The client's CPUs on a host: the ones given, else `count` of its online CPUs from the top (a
    host that is also the server's machine, as in tests, keeps clear of the server's from CPU 0)."""
    if host.cpus is not None:
        return host.cpus
    return tuple(sorted(facts.online[-count:]))
