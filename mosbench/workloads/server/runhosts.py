"""The client hosts of a run (`RunContext.client_hosts`): each reached once through its SSH master and
probed over it when the run's workload is set up, closed at its teardown; a point starts its client's
sessions on them through `start_each`, which ends the ones it started if a later host fails."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from mosbench.launch.processes import Launcher
from mosbench.machine.isolation import Group
from mosbench.workloads.server.flows import route_source
from mosbench.workloads.server.hosts import ClientHost
from mosbench.workloads.server.probe import HostFacts, host_cpus, probe
from mosbench.workloads.server.ssh import Master, RemoteSession

Session = TypeVar("Session", bound=RemoteSession)


@dataclass(frozen=True)
class RunHost:
    """One client host as the run holds it: its place in the list, what it is, its master connection."""

    index: int
    host: ClientHost
    facts: HostFacts
    master: Master

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def source(self) -> str | None:
        """Its address toward the server's (the source of its route there)."""
        return route_source(self.facts.route)

    def cpus(self, count: int) -> tuple[int, ...]:
        return host_cpus(self.host, self.facts, count)


@dataclass(frozen=True)
class RunHosts:
    """Every client host of a run, in the order the user named them."""

    hosts: tuple[RunHost, ...]

    @staticmethod
    def open(launcher: Launcher, group: Group, hosts: Sequence[ClientHost], config: str, server_address: str,
             control_dir: Path) -> RunHosts:
        """A master to every host (its sessions run in `group`), each host probed over its own."""
        opened: list[RunHost] = []
        try:
            for i, host in enumerate(hosts):
                master = Master(launcher, group, host.name, i, config, control_dir)
                try:
                    opened.append(RunHost(i, host, probe(host, config, server_address, master.path), master))
                except BaseException:
                    master.close()
                    raise
        except BaseException:
            RunHosts(tuple(opened)).close()
            raise
        return RunHosts(tuple(opened))

    def __len__(self) -> int:
        return len(self.hosts)

    def facts(self) -> dict[str, dict[str, Any]]:
        """What every host is, as the run's environment records it."""
        return {h.name: h.facts.as_fact() for h in self.hosts}

    def start_each(self, start: Callable[[RunHost], Session | None]) -> list[Session]:
        """`start` on every host in order (None: that host has no share of the point's work); if one
        fails, the sessions already started are ended before its error goes on."""
        started: list[Session] = []
        try:
            for h in self.hosts:
                session = start(h)
                if session is not None:
                    started.append(session)
        except BaseException:
            for s in started:
                s.end(0)
            raise
        return started

    def close(self) -> None:
        for h in self.hosts:
            h.master.close()
