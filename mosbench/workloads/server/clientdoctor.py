"""`mosbench doctor --clients`: each client host's reach, CPUs, route to the server, clock and whether
the generators run there, one row each (docs/CLIENTS.md)."""

from __future__ import annotations

import platform
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from mosbench import cpulist
from mosbench.errors import UserError
from mosbench.workloads.server.hostresult import CLOCK_SKEW_NOTE_S
from mosbench.workloads.server.hosts import ClientHost
from mosbench.workloads.server.probe import probe
from mosbench.workloads.server.ssh import CONNECT_TIMEOUT, clock_offset, remote_command, run, ssh_base, ssh_words


def clock_offset_over_ssh(host: ClientHost, config: str, probes: int = 7) -> tuple[float, float]:
    """The host's clock minus ours and its uncertainty, from one session answering `probes` reads of its
    clock (the shortest round trip wins, as in NTP): no connection set-up inside a measured trip."""
    script = f"for i in $(seq {probes}); do read x || exit 0; date +%s%N; done"
    proc = subprocess.Popen([*ssh_base(config), host.name, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def read_clock() -> tuple[int, float] | None:
        stdin.write("\n")
        stdin.flush()
        line = stdout.readline()
        return (int(line), time.monotonic()) if line.strip() else None

    try:
        best = clock_offset(read_clock, probes)
    finally:
        proc.kill()
        proc.wait()
    if best is None:
        raise UserError(f"client host {host.name}: its clock could not be read")
    return best


def generator_runs(host: ClientHost, config: str, binary: Path) -> str | None:
    """None if our generator runs on the host (copied as a point copies it); else its words."""
    data = binary.read_bytes()
    out = subprocess.run([*ssh_base(config), host.name, remote_command([len(data)], ["--help"], [])], input=data,
                         capture_output=True, timeout=CONNECT_TIMEOUT + 20)
    if out.returncode == 0:
        return None
    return ssh_words(out.stderr.decode(errors="replace")) or f"exit {out.returncode}"


# Every native generator a server workload copies to its client hosts (memcached's, apache's, exim's).
GENERATORS = ("mosbench-memload", "mosbench-httpload", "mosbench-smtpload")
# A program a client host must have installed itself (pgbench), with the reading of its `--version`: None
# where that version will do, else why not.
VersionCheck = Callable[[str, str], str | None]


def clients_rows(clients: str, server_address: str | None, ssh_config: str | None) -> list[tuple[str, str, bool]]:
    """`mosbench doctor --clients`: the NIC the hosts reach this machine through, then each host."""
    from mosbench import native
    from mosbench.machine.doctor import server_nic_rows
    from mosbench.workloads.postgres.pgbench import check_version
    from mosbench.workloads.server.hosts import parse_clients

    hosts = parse_clients(clients)
    if not server_address:
        raise UserError("doctor --clients needs --server-address: the address the hosts reach this machine at")
    return [*server_nic_rows(server_address),
            *doctor_rows(hosts, str(Path(ssh_config).resolve()) if ssh_config else "", server_address,
                         [native.binary(n) for n in GENERATORS], {"pgbench": check_version})]


def doctor_rows(hosts: tuple[ClientHost, ...], config: str, server_address: str, binaries: list[Path],
                installed: Mapping[str, VersionCheck] | None = None) -> list[tuple[str, str, bool]]:
    """Each host's reach, CPUs, route to the server, clock, generators and installed programs."""
    rows: list[tuple[str, str, bool]] = []
    for host in hosts:
        try:
            facts = probe(host, config, server_address)
        except UserError as e:
            rows.append((f"client {host.name}", str(e), False))
            continue
        here = platform.machine()
        rows.append((f"client {host.name}", f"{facts.hostname}: {facts.arch}, kernel {facts.kernel}, CPUs "
                     f"{cpulist.format(facts.online)} ({len(facts.online)})", facts.arch == here))
        routed = " dev " in f" {facts.route}"
        rows.append((f"  route to {server_address}", facts.route, routed))
        offset, error = clock_offset_over_ssh(host, config)
        rows.append(("  clock offset", f"{offset * 1000:+.3f} ms ± {error * 1000:.3f} ms",
                     abs(offset) < CLOCK_SKEW_NOTE_S))
        for binary in binaries:
            words = generator_runs(host, config, binary) if facts.arch == here else f"built for {here}"
            rows.append((f"  {binary.name}", "runs there (copied with each point)" if words is None else words,
                         words is None))
        for name, check in (installed or {}).items():
            problem = check(run(host.name, config, f"{name} --version 2>&1 || true"), host.name)
            rows.append((f"  {name}", problem or "installed, a version mosbench reads", problem is None))
    return rows
