"""What the server workloads share: servers on loopback (or behind a veth pair), a measured client.

A `ServerWorkload` has the client's parameters (its CPUs per server core, the first port, the
network path) and makes the veth link once per run when asked. A `ServerInstance` holds a point's
servers and its client (a native load generator, or a workload's own such as pgbench): its work is
the client's answered requests, its window is the client's window, and it fails when any of them stops.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mosbench.errors import PointFailed, UserError
from mosbench.machine import nic
from mosbench.workloads.base import Instance, Param, PointContext, PointNote, RunContext, Sample, Workload
from mosbench.workloads.server import flows, netns, ports, probe
from mosbench.workloads.server.hostresult import host_notes
from mosbench.workloads.server.hosts import ClientHost, parse_clients
from mosbench.workloads.server.loadgen import (
    AFTER,
    WINDOW,
    Client,
    ClientResult,
    Generator,
    LoadGenerator,
    behind_schedule,
    client_metrics,
)
from mosbench.workloads.server.remote import RemoteClients, RemoteGenerator
from mosbench.workloads.server.runhosts import RunHost, RunHosts
from mosbench.workloads.server.servers import Server

NETS = ("loopback", "veth")
STEERS = ("irq", "irq+rps", "irq+rps+xps", "none")
CLIENT_CPUS = Param("client_cpus", 1.0, "load-generator CPUs per server core, from the spare ones")
PORT = Param("port", 0, "first port of the servers (0: free ones found per point)")
RATE = Param("rate", "", "open loop: requests per second in all (N) or per server core (N/core), sent on a "
             "schedule, latency from each one's intended send time; empty: closed loop")


def parse_rate(text: str) -> tuple[float, bool] | None:
    """`-p rate=` as (requests per second, per server core?); None for closed loop; ValueError if malformed."""
    text = text.strip()
    if not text:
        return None
    per_core = text.endswith("/core")
    value = float(text.removesuffix("/core"))
    if not value > 0 or value == float("inf"):
        raise ValueError(text)
    return value, per_core


def rate_at(params: dict[str, Any], cores: int) -> float | None:
    """The open-loop rate, in requests per second over the whole client, of a point on `cores` server CPUs."""
    rate = parse_rate(params.get("rate", ""))
    if rate is None:
        return None
    value, per_core = rate
    return value * cores if per_core else value


def client_cores(cores: int, params: dict[str, Any]) -> int:
    """The load generator's CPUs for a point on `cores` CPUs: client_cpus per server core, at least one."""
    return max(1, round(cores * params["client_cpus"]))


def check_client_params(workload: str, params: dict[str, Any]) -> None:
    """The client's CPUs and the servers' first port, as every server workload takes them."""
    if not 0 < params["client_cpus"] <= 64:
        raise UserError(f"{workload} client_cpus must be above 0 and at most 64, not {params['client_cpus']}")
    if not 0 <= params["port"] <= 65535:
        raise UserError(f"{workload} port must be 0 (choose) or a port number")
    try:
        parse_rate(params.get("rate", ""))
    except ValueError:
        raise UserError(f"{workload} rate must be a number of requests per second above 0, in all (50000) or "
                        f"per server core (20000/core), not {params['rate']!r}") from None


def check_server_address(address: str) -> None:
    """An address of this machine the servers can bind (they listen there alone)."""
    try:
        socket.inet_pton(socket.AF_INET, address)
    except OSError:
        raise UserError(f"--server-address must be an IPv4 address, not {address!r}") from None
    with socket.socket() as s:
        try:
            s.bind((address, 0))
        except OSError as e:
            raise UserError(f"--server-address {address} is not an address of this machine ({e.strerror})") from None


def remote_hosts(params: dict[str, Any]) -> tuple[ClientHost, ...]:
    return parse_clients(params.get("client_hosts", ""))


# A generator's own arguments for client host i of n sending from an address; None: no share there.
HostArgs = Callable[[int, int, str], "list[str] | None"]


def per_host_cpus(cores: int, params: dict[str, Any], hosts: int) -> int:
    """Each client host's share of a point's generator CPUs (client_cpus per server core, all hosts)."""
    return max(1, math.ceil(client_cores(cores, params) / hosts))


class ServerWorkload(Workload):
    unit = "request"
    client_params = (
        CLIENT_CPUS,
        PORT,
        RATE,
        Param("net", "loopback", "the client's path: loopback, or veth (its own network namespace, a veth pair, "
              "RPS over the server's CPUs)"),
        Param("client_hosts", "", "client hosts (HOST,HOST or @FILE of `HOST [CPUS]` lines), reached over ssh, each "
              "running the generator; empty: on this machine (--clients)"),
        Param("server_address", "", "the address the servers listen on and the clients reach, alone "
              "(--server-address; empty: 127.0.0.1, or the veth end)"),
        Param("ssh_config", "", "an ssh_config file for the client hosts (--ssh-config; empty: the user's)"),
        Param("steer", "irq", "the server NIC's queues each point: irq (queue i's interrupt to the point's CPU i "
              "mod n), irq+rps (and receive packet steering over its CPUs), irq+rps+xps, or none; journaled and "
              "restored after the point (-p net=veth: RPS on its end)"),
        Param("flows", "kernel", "the client's source ports: kernel (its ephemeral ones) or balanced (chosen so the "
              "flows spread evenly over the server NIC's receive queues by its RSS hash)"),
    )

    # Whether the server also binds its port for UDP (memcached), so a free one must be free for both.
    binds_udp = False
    # Whether its generator takes chosen source ports (-p flows=balanced).
    balances_flows = False

    def point_notes(self, metrics: dict[str, Any]) -> list[PointNote]:
        """An open-loop client that could not keep its schedule: the rate asked was not the rate sent;
        client hosts whose clocks or windows were apart."""
        notes = [PointNote("client hosts", n) for n in host_notes(metrics)]
        note = behind_schedule(metrics)
        return [*notes, PointNote("client behind", note)] if note else notes

    def loadgen_cores(self, cores: int, params: dict[str, Any]) -> int:
        # Client hosts bring their own CPUs: none of this machine's is taken from the sweep.
        return 0 if params.get("client_hosts") else client_cores(cores, params)

    def ports_at(self, cores: int) -> int:
        """How many ports from the user's first a point at `cores` binds: one a core where a variant runs
        a server per core."""
        return cores

    def check_cores(self, params: dict[str, Any], cores: int) -> None:
        """The client hosts can take a point at `cores`; the user's ports are free now (a port taken
        later still fails its point, with the server's own words). The servers bind as root or drop root
        after binding, so any free port will do."""
        if remote_hosts(params):
            self.check_clients(params, cores)
        first = params["port"]
        if not first:
            return
        last = first + self.ports_at(cores) - 1
        if last > 65535:
            raise UserError(f"{self.name} port {first}: {cores} cores need ports {first}..{last}, past 65535")
        taken = [p for p in range(first, last + 1) if not ports.is_free(p, udp=self.binds_udp)]
        if taken:
            kind = "TCP or UDP " if self.binds_udp else ""
            uses = f" ({cores} cores use {first}..{last})" if last > first else ""
            raise UserError(f"{self.name} {kind}port {taken[0]} is taken on {ports.HOST}{uses}: "
                            f"give free ones, or 0")

    def check_clients(self, params: dict[str, Any], cores: int) -> None:
        """Every client host reachable, the same architecture, with the CPUs a point at `cores` wants there."""
        hosts = remote_hosts(params)
        for host in hosts:
            facts = probe.probe(host, params["ssh_config"], params["server_address"])
            probe.check_host(facts, host, per_host_cpus(cores, params, len(hosts)))

    def check_params(self, params: dict[str, Any]) -> None:
        check_client_params(self.name, params)
        if params["net"] not in NETS:
            raise UserError(f"{self.name} net must be one of {', '.join(NETS)}, not {params['net']!r}")
        if params["net"] == "veth":
            netns.check_available()
        if params["server_address"]:
            check_server_address(params["server_address"])
        if params["steer"] not in STEERS:
            raise UserError(f"{self.name} steer must be one of {', '.join(STEERS)}, not {params['steer']!r}")
        if params["flows"] not in flows.FLOWS:
            raise UserError(f"{self.name} flows must be one of {', '.join(flows.FLOWS)}, not {params['flows']!r}")
        if params["flows"] == "balanced" and not self.balances_flows:
            raise UserError(f"{self.name} cannot choose its client's source ports (-p flows=balanced): its "
                            "connections come and go (only memcached's contexts keep theirs)")
        if params["ssh_config"] and not Path(params["ssh_config"]).is_file():
            raise UserError(f"--ssh-config {params['ssh_config']}: no such file")
        if remote_hosts(params):
            if params["net"] != "loopback":
                raise UserError("--clients and -p net=veth are two client paths: give one")
            if not params["server_address"] or params["server_address"].startswith("127."):
                raise UserError("--clients needs --server-address: the address of this machine the client hosts "
                                "reach (the servers listen there alone)")

    def setup(self, ctx: RunContext) -> None:
        if ctx.params["net"] == "veth":
            ctx.extra["link"] = netns.create(ctx.launcher.journal, self.name)
        hosts = remote_hosts(ctx.params)
        if hosts:
            ctx.client_hosts = RunHosts.open(ctx.launcher, ctx.group, hosts, ctx.params["ssh_config"],
                                             ctx.params["server_address"], ctx.scratch)
            ctx.facts["client_hosts"] = ctx.client_hosts.facts()
        irqbalance = nic.irqbalance_warning()
        if irqbalance:
            ctx.facts["irqbalance"] = irqbalance

    def teardown(self, ctx: RunContext) -> None:
        link = ctx.extra.pop("link", None)
        if link:
            netns.remove(ctx.launcher.journal, link)
        if ctx.client_hosts is not None:
            ctx.client_hosts.close()
            ctx.client_hosts = None


class ServerInstance(Instance):
    """A point's servers and client; subclasses start them in __init__ through start_servers/start_client."""

    stop_grace_s = 5.0  # from SIGTERM to SIGKILL, one for all of a point's servers

    def __init__(self, ctx: PointContext, count: int, udp: bool = False):
        self.ctx = ctx
        self.link: netns.VethLink | None = ctx.run.extra.get("link")
        self.host = self.link.server_addr if self.link else (ctx.params.get("server_address") or ports.HOST)
        self.client_hosts: RunHosts | None = ctx.run.client_hosts
        # The device the requests arrive on: its queues' work is part of the point.
        self.nic_dev = self.link.server_if if self.link else (nic.device_of(self.host) or "lo")
        self.steerings: list[nic.Steering] = []
        self.steered = ""
        self._nic_before: nic.NicSnapshot | None = None
        self.nic_window: nic.NicWindow | None = None
        self._steer(ctx)
        self.servers: list[Server] = []
        self.client: Client | None = None
        self.client_result: ClientResult | None = None
        self._server_rss: flows.ServerRss | None = None
        self.ports: list[int] = []
        try:
            self.ports = ports.ports_for(ctx.params["port"], count, udp=udp, host=self.host)
        except UserError as e:
            raise PointFailed(str(e)) from None

    def wait_servers(self) -> None:
        for s in self.servers:
            s.wait_ready()

    def _steer(self, ctx: PointContext) -> None:
        """The NIC's queues to the point's CPUs as -p steer asks (a veth end: RPS, its only steering)."""
        asked = ctx.params.get("steer", "irq")
        if asked == "none" or self.nic_dev == "lo":
            return
        # A bridge receives through its ports (veth ends, a VM's taps): their queues are the ones to steer.
        ports_dir = Path("/sys/class/net", self.nic_dev, "brif")
        devices = sorted(p.name for p in ports_dir.iterdir()) if ports_dir.is_dir() else [self.nic_dev]
        reports = []
        for dev in devices:
            try:
                irqs = nic.device_queue_irqs(dev)
            except OSError:
                irqs = []
            # A device with no interrupts of its own (veth, a bridge's port) has RPS as its only steering.
            steering = nic.Steering(dev, ctx.cpus, ctx.launcher.journal, irq=bool(irqs),
                                    rps="rps" in asked or not irqs, xps="xps" in asked)
            self.steerings.append(steering)
            try:
                reports.append(f"{dev}: {steering.apply().describe()}")
            except OSError as e:
                reports.append(f"{dev}: not steered: {e}")
        self.steered = "; ".join(reports)

    def _unsteer(self) -> None:
        while self.steerings:
            self.steerings.pop().restore()

    def _nic_snapshot(self) -> nic.NicSnapshot | None:
        try:
            return nic.snapshot(self.nic_dev)
        except OSError:
            return None

    def server_rss(self) -> flows.ServerRss:
        """The RSS key and table of the device holding the servers' address, read once a point."""
        if self._server_rss is None:
            self._server_rss = flows.server_rss(self.host)
        return self._server_rss

    def start_client(self, name: str, argv: list[str], files: tuple[Path, ...] = (),
                     for_host: HostArgs | None = None, outputs: tuple[Path, ...] = ()) -> None:
        """A native load generator (native/loadgen) as the point's client: here, or one on every client
        host. files: local files the arguments name, taken along; for_host: each generator's own
        arguments, for host i of n sending from that source address (here: 0 of 1), None for a host with
        no share of the work; outputs: files the arguments name that the generator writes, brought back
        from every host (RemoteClients.outputs) or written here."""
        self.client = self.new_client(name, argv, rate_at(self.ctx.params, len(self.ctx.cpus)), self.ctx.timeout,
                                      files, for_host, outputs)
        self.check()

    def new_client(self, name: str, argv: list[str], rate: float | None, limit: float, files: tuple[Path, ...] = (),
                   for_host: HostArgs | None = None, outputs: tuple[Path, ...] = ()) -> Generator:
        """A generator started as start_client's (rate: requests per second in all; limit: its own stop in
        seconds): the point's client, or a brief step's before it (steps.py)."""
        if self.client_hosts is not None:
            return self._remote_clients(self.client_hosts, name, argv, files, rate, for_host, outputs, limit)
        if not self.ctx.loadgen_group:
            raise PointFailed(f"{name} needs a load generator group")
        if rate is not None:
            argv = [*argv, "--rate", f"{rate:.6g}"]
        if for_host:
            argv = [*argv, *(for_host(0, 1, self.link.client_addr if self.link else self.host) or [])]
        return LoadGenerator(self.ctx.launcher, name, [*argv, "--host", self.host], self.ctx.loadgen_group,
                             self.ctx.loadgen_cpus, self.ctx.scratch, limit,
                             enter=netns.entering(self.link) if self.link else None)

    def _remote_clients(self, hosts: RunHosts, name: str, argv: list[str], files: tuple[Path, ...],
                        rate: float | None, for_host: HostArgs | None, outputs: tuple[Path, ...],
                        limit: float) -> RemoteClients:
        count = per_host_cpus(len(self.ctx.cpus), self.ctx.params, len(hosts))
        owns = [for_host(h.index, len(hosts), h.source or "") if for_host else [] for h in hosts.hosts]
        running = sum(own is not None for own in owns)
        args = [*argv[1:], "--host", self.host]
        if rate is not None:  # the rate is the whole client's: each running host sends its share
            args += ["--rate", f"{rate / running:.6g}"]

        def start(h: RunHost) -> RemoteGenerator | None:
            own = owns[h.index]
            if own is None:
                return None
            return RemoteGenerator(h, f"{name}-{h.index}", Path(argv[0]), [*args, *own], h.cpus(count), limit,
                                   files, outputs)

        return RemoteClients(name, hosts.start_each(start))

    def sample(self) -> Sample:
        assert self.client is not None
        return Sample(self.client.done())

    def window_opened(self) -> None:
        if self.client:
            self.client.set_phase(WINDOW)
        # After the clients are told: reading the NIC must not delay their windows.
        self._nic_before = self._nic_snapshot()

    def window_closed(self) -> None:
        if self.client:
            self.client.set_phase(AFTER)
        after = self._nic_snapshot()
        if self._nic_before is not None and after is not None:
            self.nic_window = nic.delta(self._nic_before, after)

    def check(self) -> None:
        for s in self.servers:
            s.check()
        if self.client:
            self.client.check()

    def stop(self) -> dict[str, Any]:
        result = self.client.stop() if self.client else None
        self.client_result = result
        self.stop_servers()
        return self.metrics(result)

    def window_work(self) -> float | None:
        """Client hosts count their windows exactly, opened and closed by message: their sum is the work
        (sampling them at the window's edges would add a round trip's requests of error)."""
        if self.client_hosts is not None and self.client_result is not None:
            return float(self.client_result.done or 0)
        return None

    def stop_servers(self) -> None:
        self.ctx.launcher.stop_many([s.proc for s in self.servers], grace=self.stop_grace_s)
        self._unsteer()

    def metrics(self, result: ClientResult | None) -> dict[str, Any]:
        """The point's metrics from the client's window result: counts, latencies, the network path."""
        net = "client hosts" if self.client_hosts is not None else "veth" if self.link else "loopback"
        metrics: dict[str, Any] = {"instances": len(self.servers), "net": net}
        if self.ports:
            metrics["ports"] = f"{self.ports[0]}-{self.ports[-1]}"
        metrics.update(client_metrics(result))
        if result is not None and result.hosts is not None:
            metrics.update(result.hosts.metrics())
        for key in ("contexts", "connections", "sessions"):
            if result is not None and (opened := getattr(result, key)) is not None:
                metrics[f"client_{key}"] = opened
        if self.nic_window is not None:
            metrics.update(self.nic_window.metrics(self.ctx.cpus))
        if self.steered:
            metrics["nic_steering"] = self.steered
        if result is not None and result.flows:
            metrics.update(flows.flow_metrics(list(result.flows), self.server_rss()))
            metrics["flows_chosen"] = self.ctx.params.get("flows", "kernel")
        return metrics

    def logs(self) -> str:
        parts = [s.logs(10) for s in self.servers[:4]]
        if self.client:
            parts.append(self.client.logs())
        return "\n".join(p for p in parts if p)
