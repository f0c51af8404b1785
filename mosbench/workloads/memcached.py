"""memcached: the paper's section 5.3, UDP gets of missing keys against private servers on loopback.

`per-core` is the paper's setup: one memcached process per measured CPU, pinned there, `-t 1`, each
on its own port; `threaded` is what most installations run: one memcached with a worker thread per
core on one port. The client is mosbench-memload (native/loadgen/memcached.c), the paper's client:
contexts that each send a batch of 20 gets and wait for the replies (100 ms time-out), spread
evenly over the ports, a thread per load-generator CPU, in a group of its own. Work is the replies
received, each checked to be memcached's answer to a miss.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from mosbench import native, ports
from mosbench.errors import PointFailed, UserError
from mosbench.loadgen import AFTER, WINDOW, LoadGenerator, client_metrics
from mosbench.servers import Server
from mosbench.workloads.base import Instance, Param, PointContext, Sample, Variant, Workload


def server_user() -> list[str]:
    """memcached refuses to run as root without -u: Debian's memcache user, else nobody."""
    if os.geteuid() != 0:
        return []
    import pwd

    for user in ("memcache", "nobody"):
        try:
            pwd.getpwnam(user)
            return ["-u", user]
        except KeyError:
            continue
    raise UserError("memcached runs as root only with -u, and neither user memcache nor nobody exists")


class MemcachedInstance(Instance):
    def __init__(self, ctx: PointContext, binary: str, variant: str):
        self.ctx = ctx
        p = ctx.params
        per_core = variant == "per-core"
        count = len(ctx.cpus) if per_core else 1
        try:
            self.ports = ports.ports_for(p["port"], count, udp=True)
        except UserError as e:
            raise PointFailed(str(e)) from None
        self.servers: list[Server] = []
        self.client: LoadGenerator | None = None
        try:
            for i, port in enumerate(self.ports):
                threads = 1 if per_core else len(ctx.cpus)
                argv = [binary, *server_user(), "-l", ports.HOST, "-p", str(port), "-U", str(port),
                        "-t", str(threads), "-m", str(p["memory_mb"]), "-c", "4096"]
                name = f"memcached-{port}"
                pin = (ctx.cpus[i],) if per_core else None
                self.servers.append(Server(ctx.launcher, name, argv, ctx.group, port, cpus=pin))
            for s in self.servers:
                s.wait_ready()
            if not ctx.loadgen_group:
                raise PointFailed("memcached needs a load generator group")
            # Contexts scale with the server's cores, whatever the number of ports they are spread over.
            per_port = max(1, p["contexts"] * len(ctx.cpus) // count)
            self.client = LoadGenerator(ctx.launcher, "memload", [
                str(native.binary("mosbench-memload")), "--ports", ",".join(map(str, self.ports)),
                "--contexts-per-port", str(per_port), "--batch", str(p["batch"]),
                "--timeout-ms", str(p["timeout_ms"]),
            ], ctx.loadgen_group, ctx.loadgen_cpus, ctx.scratch, ctx.timeout)
            self.check()
        except BaseException:
            self.stop()
            raise

    def sample(self) -> Sample:
        assert self.client is not None
        return Sample(float(self.client.counters()["done"]))

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
        for s in self.servers:
            s.stop()
        metrics: dict[str, Any] = {"instances": len(self.servers), "ports": f"{self.ports[0]}-{self.ports[-1]}"}
        metrics.update(client_metrics(result))
        for k in ("contexts", "batch"):
            if k in result:
                metrics[f"client_{k}"] = result[k]
        return metrics

    def logs(self) -> str:
        parts = [s.logs(10) for s in self.servers[:4]]
        if self.client:
            parts.append(self.client.logs())
        return "\n".join(p for p in parts if p)


class Memcached(Workload):
    name = "memcached"
    description = "UDP gets of missing keys against private memcached servers on loopback (the network stack)"
    unit = "request"
    variants = (
        Variant("per-core", "a memcached per core, pinned, -t 1, own UDP port (the paper's setup)"),
        Variant("threaded", "one memcached, a worker thread per core, one port (the common setup)"),
    )
    params = (
        Param("contexts", 8, "client contexts per server core, each with one batch in flight"),
        Param("batch", 20, "gets per batch (the paper: 20)"),
        Param("timeout_ms", 100, "a batch's missing replies count as lost after this (the paper: 100 ms)", "ms"),
        Param("client_cpus", 1.0, "load-generator CPUs per server core, from the spare ones"),
        Param("memory_mb", 64, "each server's cache size (-m); misses store nothing", "MB"),
        Param("port", 0, "first port of the servers (0: free ones found per point)"),
    )
    paper = "section 5.3 and Figure 5: the network stack (dst_entry refcounts, socket and device locks)"

    def loadgen_cores(self, cores: int, params: dict[str, Any]) -> int:
        return max(1, round(cores * params["client_cpus"]))

    def check_available(self) -> None:
        if not shutil.which("memcached"):
            raise UserError("memcached is not installed (Debian: apt-get install memcached)")
        native.binary("mosbench-memload")

    def check_params(self, params: dict[str, Any]) -> None:
        if not 1 <= params["batch"] <= 64:
            raise UserError("memcached batch must be 1..64")
        if params["contexts"] < 1 or params["timeout_ms"] < 1 or params["memory_mb"] < 1:
            raise UserError("memcached contexts, timeout_ms and memory_mb must be positive")
        if not 0 < params["client_cpus"] <= 64:
            raise UserError("memcached client_cpus must be above 0")
        if not 0 <= params["port"] <= 65535:
            raise UserError("memcached port must be 0 (choose) or a port number")
        server_user()

    def start(self, ctx: PointContext) -> Instance:
        binary = shutil.which("memcached")
        if not binary:
            raise PointFailed("memcached is not installed")
        return MemcachedInstance(ctx, binary, ctx.variant)
