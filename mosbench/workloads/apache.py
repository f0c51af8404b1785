"""Apache: the paper's section 5.4, one small static file served over a new TCP connection per request.

`per-core` is the paper's setup: an apache2 per measured CPU, pinned there, each on its own port;
`single` is one apache2 on one port whose listener is split into SO_REUSEPORT buckets, one per CPU
(`ListenCoresBucketsRatio 1`): today's form of the paper's per-core accept queues. Each instance is
private: its own ServerRoot, config, pid file, mutexes and error log in the point's tmpfs, every
module loaded by hand from Debian's module directory, no access log, the event MPM sized above the
client's connections. The client is mosbench-httpload (native/loadgen/http.c): a GET of the 300-byte
file, the response checked (status 200, the file's length), then a new connection for the next
request; test `keepalive` keeps one connection for every request, for contrast.

Test `files` is Veal & Foong's method (paper 002): SPECweb2005 Support's downloads (fileset.py) over
kept connections, work counted in kilobytes sent (1000 bytes), so CPU time per unit is their CPU per
byte; each point first steps the connections up to the most that SPECweb2005's response rule allows
(steps.py) and is measured there. Test `baseline` is their one-core check: the file set's
closed-loop maximum, then open-loop rates from 10% to 100% of it, each with the server's CPU per
kilobyte; only at one core.
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path
from typing import Any

from mosbench import native
from mosbench.errors import PointFailed, UserError
from mosbench.workloads import fileset
from mosbench.workloads.base import (
    Instance,
    MetricColumn,
    Param,
    PointContext,
    Sample,
    TestInfo,
    Variant,
    open_path_to,
)
from mosbench.workloads.server import shares, steps
from mosbench.workloads.server.base import HostArgs, ServerInstance, ServerWorkload
from mosbench.workloads.server.loadgen import ClientResult, Generator
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


FILE_SET_TESTS = ("files", "baseline")


class ApacheInstance(ServerInstance):
    client: Generator | None

    def __init__(self, ctx: PointContext):
        per_core = ctx.variant == "per-core"
        count = len(ctx.cpus) if per_core else 1
        super().__init__(ctx, count)
        self.file_set = ctx.test in FILE_SET_TESTS
        self.extra: dict[str, Any] = {}
        self.files: tuple[Path, ...] = ()  # what the client reads: the file set's list
        self.steps_taken = 0
        connections = max(1, ctx.params["connections"] * len(ctx.cpus) // count)  # per port
        docroot = ctx.scratch / "htdocs"
        docroot.mkdir()
        # apache2's workers run as www-data: they must reach the files through the run's private scratch.
        open_path_to(docroot, ctx.run.scratch.parent)
        if self.file_set:
            listing = fileset.write(docroot, ctx.params["dirs"])
            target = ["--files", str(listing), "--keepalive", "--good-rate", str(ctx.params["good_rate"]),
                      "--tolerable-rate", str(ctx.params["tolerable_rate"])]
        else:
            (docroot / "index.html").write_bytes(page(FILE_BYTES))
            os.chmod(docroot / "index.html", 0o644)
            target = ["--expect-bytes", str(FILE_BYTES), *(["--keepalive"] if ctx.test == "keepalive" else [])]
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
            client = [str(native.binary("mosbench-httpload")), *target]
            self.files = (listing,) if self.file_set else ()  # client hosts take the file list along
            if ctx.test == "files" and ctx.params["qos_step_s"] > 0:
                connections = self._highest_meeting_qos(client, connections)
            elif ctx.test == "baseline":
                self._baseline(client, connections)
            self.start_client("httpload", client, files=self.files, for_host=self._share(connections))
        except BaseException:
            self.stop()
            raise

    def _step(self, client: list[str], connections: int, rate: float | None = None) -> steps.Step:
        self.steps_taken += 1
        return steps.run_step(self.ctx, f"httpload-step{self.steps_taken}",
                              lambda name, rate, limit: self.new_client(name, client, rate, limit, self.files,
                                                                        self._share(connections)),
                              connections, _step_s(self.ctx.params), rate)

    def _share(self, connections: int) -> HostArgs:
        """Each generator's ports and connections on each: from client hosts they are shared, so that every
        port has `connections` in all (its MaxRequestWorkers is sized from them)."""
        def share(host: int, hosts: int, source: str) -> list[str] | None:
            mine = shares.slot_share(self.ports, connections, host, hosts)
            if mine is None:
                return None
            return ["--ports", ",".join(map(str, mine[0])), "--connections-per-port", str(mine[1])]
        return share

    def _highest_meeting_qos(self, client: list[str], most: int) -> int:
        best, taken = steps.highest_meeting_qos(lambda c: self._step(client, c), most)
        self.extra["qos_steps"] = [s.as_metrics() for s in taken]
        self.extra["qos_connections"] = best
        return best

    def _baseline(self, client: list[str], connections: int) -> None:
        top, curve = steps.baseline(lambda rate: self._step(client, connections, rate))
        self.extra["baseline_max"] = top.as_metrics()
        self.extra["baseline"] = [s.as_metrics() for s in curve]

    def sample(self) -> Sample:
        if not self.file_set:
            return super().sample()
        assert self.client is not None
        return Sample(self.client.counters()["bytes"] / 1000)

    def metrics(self, result: ClientResult | None) -> dict[str, Any]:
        out = super().metrics(result)
        out.update(self.extra)
        if self.file_set and result is not None and result.done:
            out["mean_response_bytes"] = round((result.bytes or 0) / result.done)
            out["good_share"] = round((result.good or 0) / result.done, 4)
            out["tolerable_share"] = round((result.tolerable or 0) / result.done, 4)
        return out

    def logs(self) -> str:
        parts = [super().logs()]
        for s in self.servers[:4]:
            log = self.ctx.scratch / f"apache-{s.port}" / "error.log"
            if log.exists():
                parts.append("\n".join(log.read_text(errors="replace").splitlines()[-10:]))
        return "\n".join(p for p in parts if p)


def _step_s(params: dict[str, Any]) -> float:
    """A step's window: qos_step_s, which is 0 when files skips its search (the baseline still steps)."""
    return params.get("qos_step_s") or 1.0


def _per_request(metrics: dict[str, Any], key: str) -> str:
    done = metrics.get("client_done")
    if key not in metrics or not done:
        return "–"  # not kept by this kernel (no /proc/<tid>/sched), or nothing answered: absent, not zero
    return f"{metrics[key] / done:.3g}"


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
    description = ("private apache2 servers: a 300-byte static file over a new TCP connection per request (the "
                   "paper's), or SPECweb2005 Support's downloads over kept connections (Veal & Foong's)")
    variants = (
        Variant("per-core", "an apache2 per core, pinned, own port (the paper's setup)"),
        Variant("single", "one apache2, one port, a SO_REUSEPORT listener bucket per CPU"),
    )
    params = (
        Param("connections", 8, "client connections per server core, each with one request in flight (files: "
              "the most the response-rule search tries)"),
        Param("dirs", 2, "files, baseline: directories of SPECweb2005 Support's 16 downloads (68.5 MB each)"),
        Param("good_rate", 99000, "files: a download is good at this many bytes/s or more (or within 3 s); "
              "SPECweb2005's BYTE_RATE_GOOD", "bytes/s"),
        Param("tolerable_rate", 95000, "files: tolerable at this many bytes/s (or within 5 s); BYTE_RATE_TOLERABLE",
              "bytes/s"),
        Param("qos_step_s", 1.0, "files: each step of the search for the most connections that keep 95% of "
              "downloads good and 99% tolerable (0: no search); baseline: each rate's window", "s"),
        *ServerWorkload.client_params,
    )
    paper = ("section 5.4 and Figure 6: accept queues, dentry and file references, the network stack; files and "
             "baseline: Veal & Foong's Figures 2, 3, 6 and 7 (CPU per byte sent)")

    def tests(self) -> list[TestInfo]:
        return [TestInfo("close", "a new connection per request (the paper's)"),
                TestInfo("keepalive", "every request on one kept connection, for contrast"),
                TestInfo("files", "SPECweb2005 Support's downloads over kept connections, at the most connections "
                         "meeting its response rule; work in kilobytes sent"),
                TestInfo("baseline", "one core only: the file set's closed-loop maximum, then 10% to 100% of it "
                         "at a set rate; CPU per kilobyte must stay flat")]

    def unit_for(self, test: str) -> str:
        return "kilobyte" if test in FILE_SET_TESTS else self.unit

    def measures(self, test: str, variant: str, cores: int) -> bool:
        return test != "baseline" or cores == 1

    def setup_seconds(self, test: str, params: dict[str, Any]) -> float:
        step = steps.step_seconds(_step_s(params))
        if test == "files" and params.get("qos_step_s"):
            return len(steps.connection_steps(params.get("connections", 8))) * step
        if test == "baseline":
            return (1 + len(steps.BASELINE_SHARES)) * step
        return 0.0

    def columns_for(self, test: str) -> tuple[MetricColumn, ...]:
        """Veal & Foong's section 5.2 figures per request (the scheduler's, of the servers' threads), the load
        imbalance across the server CPUs, and for the file set the load the response rule allowed."""
        columns = (
            MetricColumn("switches/req", lambda m: _per_request(m, "context_switches")),
            MetricColumn("migrations/req", lambda m: _per_request(m, "migrations")),
            MetricColumn("busy spread", lambda m: f"{m['busy_spread']:.0%}" if "busy_spread" in m else "–"),
        )
        if test == "files":
            columns += (MetricColumn("conns/port", lambda m: str(m.get("qos_connections", "–"))),
                        MetricColumn("good", lambda m: f"{m['good_share']:.1%}" if "good_share" in m else "–"))
        return columns

    def check_available(self) -> None:
        if not APACHE.exists() or not (MODULES / "mod_mpm_event.so").exists():
            raise UserError("apache2 is not installed (Debian: apt-get install apache2)")
        native.binary("mosbench-httpload")

    def check_params(self, params: dict[str, Any]) -> None:
        if params["connections"] < 1:
            raise UserError("apache connections must be at least 1")
        if not 1 <= params["dirs"] <= 4096:
            raise UserError(f"apache dirs must be 1..4096, not {params['dirs']}")
        for name in ("good_rate", "tolerable_rate"):
            if not 1 <= params[name] <= 1 << 40:
                raise UserError(f"apache {name} must be 1..2^40 bytes/s, not {params[name]}")
        if not 0 <= params["qos_step_s"] <= 600:
            raise UserError(f"apache qos_step_s must be 0..600 seconds, not {params['qos_step_s']}")
        super().check_params(params)
        _user()

    def start(self, ctx: PointContext) -> Instance:
        if not APACHE.exists():
            raise PointFailed("apache2 is not installed")
        return ApacheInstance(ctx)
