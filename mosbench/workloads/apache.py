"""Apache: the paper's section 5.4, one small static file served over a new TCP connection per request.

`per-core` is the paper's setup: an apache2 per measured CPU, pinned there, each on its own port;
`single` is one apache2 on one port whose listener is split into SO_REUSEPORT buckets, one per CPU
(`ListenCoresBucketsRatio 1`): today's form of the paper's per-core accept queues. Each instance is
private: its own ServerRoot, config, pid file, mutexes and error log in the point's tmpfs, every
module loaded by hand from Debian's module directory, no access log, the event MPM sized above the
client's connections. The client is mosbench-httpload (native/loadgen/http.c): a GET of the 300-byte
file, the response checked (status 200, the file's length), then a new connection for the next
request; test `keepalive` keeps one connection for every request, for contrast.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from typing import Any

from mosbench import native
from mosbench.errors import PointFailed, UserError
from mosbench.workloads.base import Instance, Param, PointContext, TestInfo, Variant, open_path_to
from mosbench.workloads.server.base import ServerInstance, ServerWorkload
from mosbench.workloads.server.servers import Server

APACHE = Path("/usr/sbin/apache2")
MODULES = Path("/usr/lib/apache2/modules")
# The event MPM and just what serving a static file needs.
LOADED = ("mpm_event", "authz_core", "mime")  # unixd (User, Group) is built in
FILE_BYTES = 300  # the paper's file
THREADS_PER_CHILD = 64


def page(size: int) -> bytes:
    """The served file: size bytes of text."""
    return b"m" * (size - 1) + b"\n"


def _user() -> str:
    for user in ("www-data", "nobody"):
        try:
            pwd.getpwnam(user)
            return user
        except KeyError:
            continue
    raise UserError("apache2 needs a user to serve as: neither www-data nor nobody exists")


def config(root: Path, docroot: Path, host: str, port: int, workers: int, buckets: int = 0) -> str:
    """A complete apache2.conf of its own: nothing read from /etc/apache2.

    With buckets (the online CPU count), the listener is split into that many SO_REUSEPORT sockets,
    and the event MPM serves each bucket from children of its own: fewer children than buckets
    leave connections unaccepted in the others' queues ("scoreboard is full"), so there are at
    least as many children as buckets, with the threads divided among them.
    """
    children = max(1, -(-workers // THREADS_PER_CHILD), buckets)
    threads = max(8, -(-workers // children))
    lines = [f"LoadModule {m}_module {MODULES}/mod_{m}.so" for m in LOADED]
    user = _user()
    lines += [
        f'ServerRoot "{root}"', f'DefaultRuntimeDir "{root}"', f'PidFile "{root}/apache2.pid"',
        f'Mutex file:{root} default', f'ErrorLog "{root}/error.log"', "LogLevel warn",
        "ServerName 127.0.0.1", f"Listen {host}:{port}", f"User {user}", f"Group {user}",
        "TypesConfig /dev/null", "AddType text/html .html",  # mod_mime without /etc/mime.types
        f'DocumentRoot "{docroot}"', f'<Directory "{docroot}">', "    Require all granted", "</Directory>",
        "KeepAlive On", "MaxKeepAliveRequests 0", "KeepAliveTimeout 5",
        "ListenBacklog 4096", "EnableSendfile On", "EnableMMAP On",
        f"StartServers {children}", f"ServerLimit {children}", f"ThreadsPerChild {threads}",
        f"ThreadLimit {threads}", f"MaxRequestWorkers {children * threads}",
        f"MinSpareThreads {threads}", f"MaxSpareThreads {children * threads}",
        "MaxConnectionsPerChild 0",
    ]
    if buckets:
        lines.append("ListenCoresBucketsRatio 1")  # one SO_REUSEPORT listener per online CPU
    return "\n".join(lines) + "\n"


class ApacheInstance(ServerInstance):
    def __init__(self, ctx: PointContext, keepalive: bool):
        per_core = ctx.variant == "per-core"
        count = len(ctx.cpus) if per_core else 1
        super().__init__(ctx, count)
        connections = max(1, ctx.params["connections"] * len(ctx.cpus) // count)  # per port
        docroot = ctx.scratch / "htdocs"
        docroot.mkdir()
        (docroot / "index.html").write_bytes(page(FILE_BYTES))
        # apache2's workers run as www-data: they must reach the file through the run's private scratch.
        open_path_to(docroot, ctx.run.scratch.parent)
        os.chmod(docroot / "index.html", 0o644)
        try:
            for i, port in enumerate(self.ports):
                root = ctx.scratch / f"apache-{port}"
                root.mkdir()
                conf = root / "apache2.conf"
                # apache2 makes a bucket per online CPU of the machine (not of its cpuset).
                buckets = 0 if per_core else os.sysconf("SC_NPROCESSORS_ONLN")
                conf.write_text(config(root, docroot, self.host, port, connections * 2, buckets))
                name = f"apache2-{port}"
                self.servers.append(Server(
                    ctx.launcher, name, [str(APACHE), "-f", str(conf), "-DFOREGROUND"], ctx.group,
                    port, cpus=(ctx.cpus[i],) if per_core else None, last_words=_cause(root / "error.log", ctx, name),
                    host=self.host))
            self.wait_servers()
            self.start_client("httpload", [
                str(native.binary("mosbench-httpload")), "--ports", ",".join(map(str, self.ports)),
                "--connections-per-port", str(connections), "--expect-bytes", str(FILE_BYTES),
                *(["--keepalive"] if keepalive else []),
            ])
        except BaseException:
            self.stop()
            raise

    def logs(self) -> str:
        parts = [super().logs()]
        for s in self.servers[:4]:
            log = self.ctx.scratch / f"apache-{s.port}" / "error.log"
            if log.exists():
                parts.append("\n".join(log.read_text(errors="replace").splitlines()[-10:]))
        return "\n".join(p for p in parts if p)


def _cause(log: Path, ctx: PointContext, name: str):
    """Why apache2 stopped: its error log's last cause, else the first line of its stderr (before the
    log is open, apache2 prints the cause first and then its echoes: "Unable to open logs")."""
    def read() -> str:
        try:
            lines = log.read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        causes = [line for line in lines if "AH00016" not in line]  # "Configuration Failed" follows the cause
        return causes[-1] if causes else ctx.launcher.first_error(name)
    return read


class Apache(ServerWorkload):
    name = "apache"
    description = "a 300-byte static file over a new TCP connection per request, private apache2 servers"
    variants = (
        Variant("per-core", "an apache2 per core, pinned, own port (the paper's setup)"),
        Variant("single", "one apache2, one port, a SO_REUSEPORT listener bucket per CPU"),
    )
    params = (
        Param("connections", 8, "client connections per server core, each with one request in flight"),
        *ServerWorkload.client_params,
    )
    paper = "section 5.4 and Figure 6: accept queues, dentry and file references, the network stack"

    def tests(self) -> list[TestInfo]:
        return [TestInfo("close", "a new connection per request (the paper's)"),
                TestInfo("keepalive", "every request on one kept connection, for contrast")]

    def check_available(self) -> None:
        if not APACHE.exists() or not (MODULES / "mod_mpm_event.so").exists():
            raise UserError("apache2 is not installed (Debian: apt-get install apache2)")
        native.binary("mosbench-httpload")

    def check_params(self, params: dict[str, Any]) -> None:
        if params["connections"] < 1:
            raise UserError("apache connections must be at least 1")
        super().check_params(params)
        _user()

    def start(self, ctx: PointContext) -> Instance:
        if not APACHE.exists():
            raise PointFailed("apache2 is not installed")
        return ApacheInstance(ctx, keepalive=ctx.test == "keepalive")
