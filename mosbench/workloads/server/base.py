"""What the server workloads share: servers on loopback (or behind a veth pair), a measured client.

A `ServerWorkload` has the client's parameters (its CPUs per server core, the first port, the
network path) and makes the veth link once per run when asked. A `ServerInstance` holds a point's
servers and its client (a native load generator, or a workload's own such as pgbench): its work is
the client's answered requests, its window is the client's window, and it fails when any of them stops.
"""

from __future__ import annotations

from typing import Any

from mosbench.errors import PointFailed, UserError
from mosbench.workloads.base import Instance, Param, PointContext, PointNote, RunContext, Sample, Workload
from mosbench.workloads.server import netns, ports
from mosbench.workloads.server.loadgen import AFTER, WINDOW, Client, LoadGenerator, behind_schedule, client_metrics
from mosbench.workloads.server.servers import Server

NETS = ("loopback", "veth")
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


class ServerWorkload(Workload):
    unit = "request"
    client_params = (
        CLIENT_CPUS,
        PORT,
        RATE,
        Param("net", "loopback", "the client's path: loopback, or veth (its own network namespace, a veth pair, "
              "RPS over the server's CPUs)"),
    )

    # Whether the server also binds its port for UDP (memcached), so a free one must be free for both.
    binds_udp = False

    def point_notes(self, metrics: dict[str, Any]) -> list[PointNote]:
        """An open-loop client that could not keep its schedule: the rate asked was not the rate sent."""
        note = behind_schedule(metrics)
        return [PointNote("client behind", note)] if note else []

    def loadgen_cores(self, cores: int, params: dict[str, Any]) -> int:
        return client_cores(cores, params)

    def ports_at(self, cores: int) -> int:
        """How many ports from the user's first a point at `cores` binds: one a core where a variant runs
        a server per core."""
        return cores

    def check_cores(self, params: dict[str, Any], cores: int) -> None:
        """The user's ports are free now (a port taken later still fails its point, with the server's
        own words). The servers bind as root or drop root after binding, so any free port will do."""
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

    def check_params(self, params: dict[str, Any]) -> None:
        check_client_params(self.name, params)
        if params["net"] not in NETS:
            raise UserError(f"{self.name} net must be one of {', '.join(NETS)}, not {params['net']!r}")
        if params["net"] == "veth":
            netns.check_available()

    def setup(self, ctx: RunContext) -> None:
        if ctx.params["net"] == "veth":
            ctx.extra["link"] = netns.create(ctx.launcher.journal, self.name)

    def teardown(self, ctx: RunContext) -> None:
        link = ctx.extra.pop("link", None)
        if link:
            netns.remove(ctx.launcher.journal, link)


class ServerInstance(Instance):
    """A point's servers and client; subclasses start them in __init__ through start_servers/start_client."""

    def __init__(self, ctx: PointContext, count: int, udp: bool = False):
        self.ctx = ctx
        self.link: netns.VethLink | None = ctx.run.extra.get("link")
        self.host = self.link.server_addr if self.link else ports.HOST
        if self.link:
            netns.steer(self.link, ctx.cpus)
        self.servers: list[Server] = []
        self.client: Client | None = None
        self.ports: list[int] = []
        try:
            self.ports = ports.ports_for(ctx.params["port"], count, udp=udp, host=self.host)
        except UserError as e:
            raise PointFailed(str(e)) from None

    def wait_servers(self) -> None:
        for s in self.servers:
            s.wait_ready()

    def start_client(self, name: str, argv: list[str]) -> None:
        """A native load generator (native/loadgen) as the point's client."""
        if not self.ctx.loadgen_group:
            raise PointFailed(f"{name} needs a load generator group")
        rate = rate_at(self.ctx.params, len(self.ctx.cpus))
        if rate is not None:
            argv = [*argv, "--rate", f"{rate:g}"]
        self.client = LoadGenerator(self.ctx.launcher, name, [*argv, "--host", self.host], self.ctx.loadgen_group,
                                    self.ctx.loadgen_cpus, self.ctx.scratch, self.ctx.timeout,
                                    enter=netns.entering(self.link) if self.link else None)
        self.check()

    def sample(self) -> Sample:
        assert self.client is not None
        return Sample(self.client.done())

    def window_opened(self) -> None:
        if self.client:
            self.client.set_phase(WINDOW)

    def window_closed(self) -> None:
        if self.client:
            self.client.set_phase(AFTER)

    def check(self) -> None:
        for s in self.servers:
            s.check()
        if self.client:
            self.client.check()

    def stop(self) -> dict[str, Any]:
        result = self.client.stop() if self.client else {}
        self.stop_servers()
        return self.metrics(result)

    def stop_servers(self) -> None:
        for s in self.servers:
            s.stop()

    def metrics(self, result: dict[str, Any]) -> dict[str, Any]:
        """The point's metrics from the client's window result: counts, latencies, the network path."""
        metrics: dict[str, Any] = {"instances": len(self.servers), "net": "veth" if self.link else "loopback"}
        if self.ports:
            metrics["ports"] = f"{self.ports[0]}-{self.ports[-1]}"
        metrics.update(client_metrics(result))
        for key in ("contexts", "connections", "sessions"):
            if key in result:
                metrics[f"client_{key}"] = result[key]
        return metrics

    def logs(self) -> str:
        parts = [s.logs(10) for s in self.servers[:4]]
        if self.client:
            parts.append(self.client.logs())
        return "\n".join(p for p in parts if p)
