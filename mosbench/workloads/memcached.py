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
from pathlib import Path
from typing import Any

from mosbench import native
from mosbench.errors import PointFailed, UserError
from mosbench.workloads.base import Instance, Param, PointContext, Variant
from mosbench.workloads.server import flows, shares
from mosbench.workloads.server.base import ServerInstance, ServerWorkload
from mosbench.workloads.server.servers import Server

UNPRIVILEGED_PORT_START = Path("/proc/sys/net/ipv4/ip_unprivileged_port_start")


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


class MemcachedInstance(ServerInstance):
    def __init__(self, ctx: PointContext, binary: str):
        p = ctx.params
        per_core = ctx.variant == "per-core"
        count = len(ctx.cpus) if per_core else 1
        super().__init__(ctx, count, udp=True)
        try:
            for i, port in enumerate(self.ports):
                threads = 1 if per_core else len(ctx.cpus)
                argv = [binary, *server_user(), "-l", self.host, "-p", str(port), "-U", str(port),
                        "-t", str(threads), "-m", str(p["memory_mb"]), "-c", "4096"]
                self.servers.append(Server(ctx.launcher, f"memcached-{port}", argv, ctx.group, port,
                                           cpus=(ctx.cpus[i],) if per_core else None, host=self.host))
            self.wait_servers()
            # Contexts scale with the server's cores, whatever the number of ports they are spread over.
            per_port = max(1, p["contexts"] * len(ctx.cpus) // count)

            balanced = p["flows"] == "balanced"

            def share(host: int, hosts: int, source: str) -> list[str] | None:
                # From client hosts the contexts are shared, not multiplied: each port gets per_port in all.
                mine = shares.slot_share(self.ports, per_port, host, hosts)
                if mine is None:
                    return None
                ports, count = mine
                args = ["--ports", ",".join(map(str, ports)), "--contexts-per-port", str(count)]
                if balanced:
                    if not source:
                        raise PointFailed(f"client host {host + 1} of {hosts}: no source address in its route to "
                                          "the server, so no ports can be chosen for it")
                    chosen = flows.balanced_source_ports(self.server_rss(), source, self.host, ports, count)
                    args += ["--source-ports", ",".join(map(str, chosen))]
                return args

            self.start_client("memload", [
                str(native.binary("mosbench-memload")), "--batch", str(p["batch"]),
                "--timeout-ms", str(p["timeout_ms"]),
            ], for_host=share)
        except BaseException:
            self.stop()
            raise


class Memcached(ServerWorkload):
    name = "memcached"
    binds_udp = True
    balances_flows = True
    description = "UDP gets of missing keys against private memcached servers on loopback (the network stack)"
    variants = (
        Variant("per-core", "a memcached per core, pinned, -t 1, own UDP port (the paper's setup)"),
        Variant("threaded", "one memcached, a worker thread per core, one port (the common setup)"),
    )
    params = (
        Param("contexts", 8, "client contexts per server core, each with one batch in flight"),
        Param("batch", 20, "gets per batch (the paper: 20)"),
        Param("timeout_ms", 100, "a batch's missing replies count as lost after this (the paper: 100 ms)", "ms"),
        Param("memory_mb", 64, "each server's cache size (-m); misses store nothing", "MB"),
        *ServerWorkload.client_params,
    )
    paper = "section 5.3 and Figure 5: the network stack (dst_entry refcounts, socket and device locks)"

    def check_available(self) -> None:
        if not shutil.which("memcached"):
            raise UserError("memcached is not installed (Debian: apt-get install memcached)")
        native.binary("mosbench-memload")

    def check_params(self, params: dict[str, Any]) -> None:
        if not 1 <= params["batch"] <= 64:
            raise UserError("memcached batch must be 1..64")
        if params["contexts"] < 1 or params["timeout_ms"] < 1 or params["memory_mb"] < 1:
            raise UserError("memcached contexts, timeout_ms and memory_mb must be positive")
        super().check_params(params)
        server_user()
        port = params["port"]
        # memcached gives up root (-u) before it binds, and a port below the kernel's start needs root.
        start = int(UNPRIVILEGED_PORT_START.read_text()) if UNPRIVILEGED_PORT_START.exists() else 1024
        if 0 < port < start:
            raise UserError(f"memcached port {port} is below {start} (net.ipv4.ip_unprivileged_port_start): "
                            "memcached binds after giving up root, so only 0 (free ones) or a port from "
                            f"{start} can work")

    def start(self, ctx: PointContext) -> Instance:
        binary = shutil.which("memcached")
        if not binary:
            raise PointFailed("memcached is not installed")
        return MemcachedInstance(ctx, binary)
