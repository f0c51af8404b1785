"""`mosbench doctor --clients` checks on each host what every server workload's client needs there: the
native generators it copies (memcached's, apache's, exim's) and pgbench, which postgres runs from the
host's own installation. Without hosts: ssh's answers stood in (tests/test_remote_clients.py has real ones)."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from mosbench.errors import UserError
from mosbench.workloads.postgres.pgbench import check_version
from mosbench.workloads.server import clientdoctor
from mosbench.workloads.server.hosts import ClientHost
from mosbench.workloads.server.probe import HostFacts

PGBENCH = {"c1": "pgbench (PostgreSQL) 16.4 (Ubuntu 16.4-0ubuntu0.24.04.2)\n",
           "c2": "pgbench (PostgreSQL) 13.16\n", "c3": "bash: line 1: pgbench: command not found\n"}


@pytest.fixture
def hosts(monkeypatch) -> list[str]:
    """Hosts c1-c3 that answer; c4 that does not. What each was asked, in order."""
    asked: list[str] = []

    def probe(host: ClientHost, config: str, address: str) -> HostFacts:
        if host.name == "c4":
            raise UserError("client host c4: ssh: connect to host c4 port 22: No route to host")
        return HostFacts(host.name, host.name, platform.machine(), "6.8.0", (0, 1), f"{address} dev eth0 src x")

    def generator_runs(host: ClientHost, config: str, binary: Path) -> str | None:
        asked.append(f"{host.name} {binary.name}")
        return None

    def run(host: str, config: str, command: str) -> str:
        asked.append(f"{host} {command}")
        return PGBENCH[host]

    monkeypatch.setattr(clientdoctor, "probe", probe)
    monkeypatch.setattr(clientdoctor, "clock_offset_over_ssh", lambda host, config: (0.0002, 0.00005))
    monkeypatch.setattr(clientdoctor, "generator_runs", generator_runs)
    monkeypatch.setattr(clientdoctor, "run", run)
    return asked


def test_every_generator_and_pgbench_is_checked_on_each_host(hosts):
    binaries = [Path("/build") / name for name in clientdoctor.GENERATORS]
    rows = clientdoctor.doctor_rows(tuple(ClientHost(f"c{i}") for i in range(1, 5)), "", "10.0.0.1", binaries,
                                    {"pgbench": check_version})
    for generator in ("mosbench-memload", "mosbench-httpload", "mosbench-smtpload"):
        assert [h for h in hosts if h.endswith(generator)] == [f"c{i} {generator}" for i in (1, 2, 3)]
    pgbench = [(finding, ok) for what, finding, ok in rows if what == "  pgbench"]
    assert pgbench == [
        ("installed, a version mosbench reads", True),
        ("client host c2 has pgbench 13; mosbench reads the failed-transaction counts of pgbench 15 or later",
         False),
        ("client host c3: pgbench is not installed (Debian: apt-get install postgresql-client)", False)]
    # The host that cannot be reached is one row, asked nothing more.
    assert ("client c4", "client host c4: ssh: connect to host c4 port 22: No route to host", False) in rows
    assert not [h for h in hosts if h.startswith("c4")]
