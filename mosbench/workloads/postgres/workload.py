"""PostgreSQL: the paper's section 5.5, point queries on an indexed key/value table by pgbench.

A server workload: a private server per point, Debian's PostgreSQL 15 run as the postgres user from
a copy of a cached, loaded data directory in the point's tmpfs, its own port and its own socket
directory, durability off (pgcluster.BENCHMARK_SETTINGS), the table and its index pre-warmed into
shared buffers. Its client is pgbench (not a native load generator) on the load-generator CPUs, in
its own group (and with `net=veth` in its own network namespace, as every server workload's
client), one connection per server core: each pgbench transaction is a batch of `batch` queries (the
paper's 256), each on a key uniform over the table, built from the statement scripts in sql/. Work
is queries. From client hosts (`--clients`) a pgbench on each host takes its share of the connections
(postgres/pgbench.py), the server trusting their addresses in its pg_hba.conf.

`small-cache` keeps PostgreSQL's default shared_buffers (128 MB; the default table does not fit, so
reads miss into the kernel's page cache and the buffer free list's lock is busy); `large-cache` is
the paper's 2 GB choice (or twice the database where that is more): the table fits.

The work is checked three ways: pgbench must report no failed transaction, its transaction log must
hold every transaction its summary counted, and the server must have run exactly the index lookups
pgbench counted (its own statistics); in read-write, the table's update counters must sum to the
UPDATEs made. With `syscalls` the server's system calls per query are counted by kind over the
warm-up, never the window, whose throughput counting would cost (perf on the syscall tracepoints):
the paper's collapse was an lseek per query on one
inode's mutex, and a user sees here how many lseeks a query costs on their PostgreSQL and kernel.

psycopg (the `postgres` extra) is imported where a query is made, so an install without it runs
every other workload; check_available says it is missing.
"""

from __future__ import annotations

import contextlib
import json
import math
import resource
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosbench import procfs
from mosbench.errors import PointFailed, UserError
from mosbench.launch.ready import wait_ready
from mosbench.workloads.base import (
    Instance,
    MetricFigure,
    Param,
    PointContext,
    RunContext,
    TestInfo,
    Variant,
    mem_available_mb,
    open_path_to,
)
from mosbench.workloads.postgres import cluster as pgcluster
from mosbench.workloads.postgres import syscalls
from mosbench.workloads.postgres.pgbench import (
    LOG_WORD,
    SCRIPT_WORD,
    TAIL_S,
    HostPgbench,
    Pgbench,
    PgbenchClient,
    PgbenchHosts,
    check_version,
    pgbench_argv,
)
from mosbench.workloads.server import netns, ports, shares, ssh
from mosbench.workloads.server.base import ServerInstance, ServerWorkload, per_host_cpus, rate_at, remote_hosts
from mosbench.workloads.server.loadgen import ClientResult
from mosbench.workloads.server.runhosts import RunHost, RunHosts
from mosbench.workloads.server.servers import Server

if TYPE_CHECKING:
    import psycopg

SQL = Path(__file__).with_name("sql")
SCHEMA = 1  # bump with sql/load.sql: a cached database of another schema is rebuilt
PROTOCOLS = ("simple", "extended", "prepared")
LARGE_CACHE_MB = 2048  # the paper's shared_buffers for its 600 MB table
MAX_ROWS = 2**40
HOST = ports.HOST
# For the check before a run: the table with its primary key (10M rows took 560 MB), and what a backend
# holds beside shared_buffers for point queries (catalog caches, plans; work_mem is never reached).
BYTES_PER_ROW = 60
MB_PER_BACKEND = 10
FDS_SPARE = 64  # pgbench's own files beside one socket per connection


def batch_script(test: str, batch: int, update_percent: float) -> tuple[str, int]:
    """pgbench's script for one transaction of `batch` queries, and the UPDATEs among them.

    The UPDATEs sit at the same evenly spread places in every batch, so their number per transaction
    is known and the table's counters can be checked against pgbench's transaction count.
    """
    updates = round(batch * update_percent / 100) if test == "read-write" else 0
    places = {i * batch // updates for i in range(updates)} if updates else set()

    def statement(name: str) -> str:
        return "".join(line + "\n" for line in (SQL / name).read_text().splitlines() if not line.startswith("--"))

    select, update = statement("point-select.sql"), statement("point-update.sql")
    return "".join(update if i in places else select for i in range(batch)), updates


def cache_mb(variant: str, database_mb: float) -> int | None:
    """shared_buffers in MB for a variant; None keeps PostgreSQL's default."""
    if variant == "large-cache":
        return max(LARGE_CACHE_MB, math.ceil(2 * database_mb))
    return None


def connect(host: str, port: int) -> psycopg.Connection:
    import psycopg

    try:
        return psycopg.connect(host=host, port=port, user=pgcluster.USER, dbname="postgres", connect_timeout=10,
                               autocommit=True)
    except psycopg.OperationalError as e:
        said = str(e).strip().splitlines()
        raise PointFailed(f"cannot query PostgreSQL on port {port}: {said[-1] if said else type(e).__name__}") from None


def start_server(launcher, name: str, group, data: Path, host: str, port: int, socket_dir: Path,
                 settings: dict[str, str], last_words=None) -> Server:
    """`postgres` as the postgres user in group, returned once it accepts queries: its postmaster.pid
    says "ready" (listening alone is not: it listens while it starts up, and a port another program
    holds would look open)."""
    opts = pgcluster.server_options(host, port, socket_dir, settings)
    server = Server(launcher, name, [str(pgcluster.BIN / "postgres"), "-D", str(data),
                                     *(f"-c{k}={v}" for k, v in opts.items())],
                    group, port, last_words=last_words, host=host, env=pgcluster.ENV, user=pgcluster.USER)
    pidfile = data / "postmaster.pid"

    def ready() -> bool:
        try:
            lines = pidfile.read_text().splitlines()
        except OSError:
            return False
        return len(lines) > 7 and lines[7].strip() == "ready"

    wait_ready(ready, what=f"{name} ready on port {port}", timeout=60, proc=server.proc, ended=server.failure)
    return server


@contextlib.contextmanager
def querying(what: str) -> Iterator[None]:
    """A server that fails a query (or goes away) fails the point with its own line."""
    import psycopg

    try:
        yield
    except psycopg.Error as e:
        said = str(e).strip().splitlines()
        raise PointFailed(f"{what}: {said[0] if said else type(e).__name__}") from None


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


class PostgresInstance(ServerInstance):
    client: PgbenchClient | None
    stop_grace_s = 30.0  # SIGTERM: a smart shutdown, prompt once pgbench's connections are gone

    def __init__(self, ctx: PointContext, database: Path, script: Path, updates: int, database_mb: float):
        super().__init__(ctx, 1)
        p = ctx.params
        self.port = self.ports[0]
        self.batch = p["batch"]
        self.updates = updates
        self.clients = len(ctx.cpus) * p["clients_per_core"]
        self.root = ctx.scratch / "pg"  # the data directory and the server's socket, the postgres user's
        self.counter: syscalls.SyscallCounter | None = None
        self.syscalls_absent = syscalls.unavailable() if p["syscalls"] else None
        self.counted_from: float | None = None  # system calls are counted from here to the window
        self._window_work: float | None = None
        self._metrics: dict[str, Any] | None = None
        self._own_backends: list[int] = []  # the harness's connections' server processes
        self._shm: tuple[int, int] | None = None
        try:
            self._start_server(database, database_mb)
            self._start_pgbench(script)
            if p["syscalls"] and not self.syscalls_absent:
                self._start_counter()
                # Counted over the warm-up, never the window: the tracepoints cost each call kernel time
                # (12-18% of this server's throughput here, `make bench-syscalls`), and a count per
                # query is a property of the code path, the same in both.
                self._switch_counter("enable")
                self.counted_from = time.time()
        except BaseException:
            self._end_processes()
            raise

    # --- starting -------------------------------------------------------------------------------

    def _start_server(self, database: Path, database_mb: float) -> None:
        ctx = self.ctx
        shutil.copytree(database, self.root / "data", symlinks=True)
        # initdb trusts loopback alone: the clients come from the veth pair's far end or the client hosts'
        # addresses, the harness from the server's own address.
        if self.link or self.client_hosts is not None:
            with open(self.root / "data" / "pg_hba.conf", "a") as f:
                f.writelines(f"host all all {addr}/32 trust\n" for addr in (*self._client_addresses(), self.host))
        pgcluster.chown_tree(self.root)
        open_path_to(self.root, ctx.run.scratch.parent)
        settings = dict(pgcluster.BENCHMARK_SETTINGS, max_connections=str(self.clients + 10))
        if mb := cache_mb(ctx.variant, database_mb):
            settings["shared_buffers"] = f"{mb}MB"
        self.servers.append(start_server(ctx.launcher, "postgres", ctx.group, self.root / "data", self.host,
                                         self.port, self.root, settings, self._server_said))
        self._journal_shm()
        with querying("warming the cache"), connect(self.host, self.port) as conn:
            self._own_backends.append(conn.info.backend_pid)
            conn.execute("SELECT pg_prewarm('kv'), pg_prewarm('kv_pkey')")
            self._lookups_before = self._index_lookups(conn)
            seen = conn.execute("SELECT name, current_setting(name) FROM pg_settings WHERE source NOT IN "
                                "('default', 'override') ORDER BY name").fetchall()
        # What the server ran with, as it says (initdb's postgresql.conf, then ours), once per variant.
        ctx.run.facts.setdefault("settings", {}).setdefault(ctx.variant, dict(seen))

    def _client_addresses(self) -> list[str]:
        if self.link:
            return [self.link.client_addr]
        assert self.client_hosts is not None
        sources = [h.source for h in self.client_hosts.hosts]
        missing = [h.name for h, src in zip(self.client_hosts.hosts, sources, strict=True) if src is None]
        if missing:
            raise PointFailed(f"client host {missing[0]}: no source address in its route to the server")
        return [src for src in sources if src]

    def _journal_shm(self) -> None:
        """PostgreSQL's System V segment (its interlock; the buffers are mmap'd) outlives a killed
        postmaster: journaled, so the run removes it whatever ends the server."""
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (self.root / "data" / "postmaster.pid").read_text().splitlines()[6].split()
            self._shm = (int(fields[1]), self.servers[0].proc.pid)
            self.ctx.launcher.journal.add_shm(*self._shm)

    def _server_said(self) -> str:
        """The server's last FATAL or PANIC lines (a taken port's "could not bind" among them): its final
        line is only "database system is shut down"."""
        lines = self.ctx.launcher.stderr_lines("postgres")
        said = [line.strip() for line in lines if any(w in line for w in ("FATAL:", "PANIC:", "could not bind"))]
        return " / ".join(said[-2:]) if said else (lines[-1].strip() if lines else "")

    def _start_pgbench(self, script: Path) -> None:
        ctx = self.ctx
        seconds = math.ceil(ctx.window_end + TAIL_S)
        rate = rate_at(ctx.params, len(ctx.cpus))
        if self.client_hosts is not None:
            self.client = client = self._host_pgbenches(self.client_hosts, script, seconds, rate)
        else:
            txn_logs = ctx.scratch / "pgbench"
            txn_logs.mkdir()
            self.client = client = Pgbench(ctx, pgbench_argv(
                self.host, self.port, self.clients, min(self.clients, len(ctx.loadgen_cpus)), seconds,
                ctx.params["protocol"], script, ctx.params["rows"], txn_logs / "txn", rate),
                txn_logs, self.batch, netns.entering(self.link) if self.link else None)
        # pgbench connects every client before its clock starts: wait for them, so the warm-up is load.
        deadline = time.monotonic() + 60
        with querying("waiting for pgbench's connections"), connect(self.host, self.port) as conn:
            self._own_backends.append(conn.info.backend_pid)
            while True:
                n = self._pgbench_backends(conn)
                if n >= self.clients:
                    return
                if client.ended() or time.monotonic() > deadline:
                    raise PointFailed(client.reason(f"{n} of {self.clients} clients connected"))
                time.sleep(0.02)

    def _host_pgbenches(self, hosts: RunHosts, script: Path, seconds: int, rate: float | None) -> PgbenchHosts:
        """A pgbench on every client host with a share of the connections (and of the rate), each sent
        the batch script and pinned to its host's CPUs."""
        ctx = self.ctx
        count = per_host_cpus(len(ctx.cpus), ctx.params, len(hosts))
        payload = script.read_bytes()

        def start(h: RunHost) -> HostPgbench | None:
            share = shares.share(self.clients, h.index, len(hosts))
            if not share:
                return None
            cpus = h.cpus(count)
            argv = pgbench_argv(self.host, self.port, share, min(share, len(cpus)), seconds,
                                ctx.params["protocol"], SCRIPT_WORD, ctx.params["rows"], LOG_WORD,
                                rate * share / self.clients if rate else None, binary="pgbench")
            return HostPgbench(h, f"pgbench-{h.index}", argv[1:], payload, cpus)

        return PgbenchHosts(hosts.start_each(start), self.batch)

    def _start_counter(self) -> None:
        postmaster = self.servers[0].proc.pid
        # perf refuses a list naming a process that has ended: the harness's own closed connections
        # must be gone before the server's processes are listed.
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() for pid in self._own_backends) and time.monotonic() < deadline:
            time.sleep(0.01)
        try:
            self.counter = syscalls.SyscallCounter(self.ctx.launcher, self.ctx.run.group,
                                                   [postmaster, *procfs.children_of(postmaster)], self.ctx.scratch)
        except OSError as e:
            self.syscalls_absent = str(e)

    # --- during the point -----------------------------------------------------------------------

    def window_opened(self) -> None:
        self._switch_counter("disable")
        if self.counter is not None:
            self.counter.end()
        super().window_opened()

    def _switch_counter(self, word: str) -> None:
        if self.counter is None:
            return
        try:
            getattr(self.counter, word)()
        except OSError as e:
            self.syscalls_absent = str(e)
            self.counter.finish()
            self.counter = None

    # --- after the window -----------------------------------------------------------------------

    def window_work(self) -> float | None:
        return self._window_work

    def stop(self) -> dict[str, Any]:
        if self._metrics is not None:
            return self._metrics
        self._metrics = {}
        try:
            result = self.client.stop() if self.client else None
            if result is not None:
                counts = self.counter.finish() if self.counter else {}
                self.counter = None
                self._metrics = self._check_work(result, counts)
        finally:
            self._end_processes()
        return self._metrics

    def _check_work(self, result: ClientResult, counts: dict[str, int]) -> dict[str, Any]:
        client = self.client
        assert client is not None and client.opened is not None and client.closed is not None
        assert result.transactions is not None  # pgbench's result
        self._window_work = client.queries(client.opened, client.closed)
        done = result.transactions
        self._check_server(done)
        metrics: dict[str, Any] = {"clients": self.clients, "transactions": done, **self.metrics(result)}
        counted = client.queries(self.counted_from, client.opened) if self.counted_from else 0.0
        if counts and counted >= 1:
            metrics.update(per_query(counts, counted))
            metrics["syscalls_counted_queries"] = round(counted)
        elif self.ctx.params["syscalls"]:
            why = self.syscalls_absent or ("perf wrote no counts" if not counts else
                                           "no query in the warm-up, where they are counted (give --warmup)")
            metrics["syscalls"] = f"not counted: {why}"
        return metrics

    def _check_server(self, transactions: int) -> None:
        """The server's own count of index lookups, and in read-write the UPDATEs in the table."""
        with querying("checking the work"), connect(self.host, self.port) as conn:
            # A backend's statistics are flushed as it exits, before it leaves pg_stat_activity.
            deadline = time.monotonic() + 30
            while self._pgbench_backends(conn) and time.monotonic() < deadline:
                time.sleep(0.02)
            lookups = self._index_lookups(conn) - self._lookups_before
            if lookups != transactions * self.batch:
                raise PointFailed(f"the server ran {lookups} index lookups, pgbench counted "
                                  f"{transactions * self.batch} queries")
            if self.updates:
                made = transactions * self.updates
                seen = conn.execute("SELECT sum(v) FROM kv").fetchone()[0]
                if seen != made:
                    raise PointFailed(f"{seen} UPDATEs are visible in the table, pgbench made {made}")

    @staticmethod
    def _pgbench_backends(conn: psycopg.Connection) -> int:
        return int(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgbench'"
                                ).fetchone()[0])

    @staticmethod
    def _index_lookups(conn: psycopg.Connection) -> int:
        return int(conn.execute("SELECT idx_scan FROM pg_stat_user_tables WHERE relname = 'kv'").fetchone()[0])

    def _end_processes(self) -> None:
        if self.client is not None:
            self.client.kill()
        if self.counter is not None:
            with contextlib.suppress(Exception):
                self.counter.finish()
            self.counter = None
        self.stop_servers()

    def stop_servers(self) -> None:
        super().stop_servers()
        if self._shm:
            self.ctx.launcher.journal.remove_shm(*self._shm)
            self._shm = None


def per_query(counts: dict[str, int], queries: float) -> dict[str, float]:
    """System calls per query by kind (kinds the server made none of are left out), and in all."""
    out = {f"{kind}_per_query": round(counts[kind] / queries, 3) for kind in syscalls.KINDS if counts.get(kind)}
    if syscalls.ALL in counts:
        out["syscalls_per_query"] = round(counts[syscalls.ALL] / queries, 3)
    return out


# per_query's metrics, drawn by the report.
SYSCALLS_FIGURE = MetricFigure(
    name="syscalls", heading="System calls per unit of work",
    note="""Counted over each point's warm-up (never its window: counting costs the server
throughput) on the server's processes by the kernel's syscall tracepoints (perf), divided by the
warm-up's work. A call whose count grows with cores, or one made on a
shared kernel object (PostgreSQL's lseek on a table's file, the paper's inode mutex), is where to look first.""",
    title="The server's system calls by kind (syscall tracepoints over the warm-up)",
    y_label="system calls per {unit}", suffix="_per_query", total="syscalls_per_query")


class Postgres(ServerWorkload):
    name = "postgres"
    description = "point queries on an indexed key/value table in a private PostgreSQL, pgbench as the client"
    unit = "query"
    variants = (
        Variant("small-cache", "PostgreSQL's default shared_buffers (128 MB): the default table does not fit"),
        Variant("large-cache", "shared_buffers of 2 GB or twice the database: the table fits (the paper's choice)"),
    )
    params = (
        Param("rows", 4_000_000, "rows in the key/value table (the paper: 10000000, about 600 MB)"),
        Param("batch", 256, "queries per pgbench transaction (the paper's batches of 256)"),
        Param("update_percent", 5.0, "read-write: the share of a batch's queries that are UPDATEs", "%"),
        Param("protocol", "simple", "pgbench -M: simple or extended plan every query (the paper's lseek per "
              "query); prepared keeps a generic plan after a statement's first five executions"),
        Param("clients_per_core", 2, "pgbench connections per server core (the paper: one, which leaves a core "
              "idle a third of its time while each query's round trip is at the client)"),
        Param("syscalls", True, "count the server's system calls per query by kind (perf on syscall tracepoints)"),
        *ServerWorkload.client_params,
    )
    paper = "section 5.5 and Figures 7 and 8: lseek on one inode's mutex, the buffer free list's lock"

    def tests(self) -> list[TestInfo]:
        return [TestInfo("read-only", "transactions of point SELECTs"),
                TestInfo("read-write", "point SELECTs with UPDATEs among them (5% by default)")]

    def check_available(self) -> None:
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise UserError("psycopg, PostgreSQL's Python client, is not installed "
                            "(the postgres extra: pip install 'mosbench[postgres]')") from None
        pgcluster.check_available()
        for tool in ("pgbench", "psql", "postgres"):
            if not (pgcluster.BIN / tool).exists():
                raise UserError(f"{pgcluster.BIN / tool} is missing (`make deps` installs {pgcluster.PACKAGE})")

    def check_params(self, params: dict[str, Any]) -> None:
        if not 1 <= params["rows"] <= MAX_ROWS:
            raise UserError(f"postgres rows must be 1..{MAX_ROWS} (2^40)")
        if not 1 <= params["batch"] <= 100_000:
            raise UserError("postgres batch must be 1..100000")
        if not 0 <= params["update_percent"] <= 100:
            raise UserError("postgres update_percent must be 0..100")
        if params["protocol"] not in PROTOCOLS:
            raise UserError(f"postgres protocol must be one of {', '.join(PROTOCOLS)}, not {params['protocol']!r}")
        if params["clients_per_core"] < 1:
            raise UserError("postgres clients_per_core must be at least 1")
        super().check_params(params)

    def ports_at(self, cores: int) -> int:
        return 1  # one server, whatever the cores

    def check_cores(self, params: dict[str, Any], cores: int) -> None:
        """256 cores are 256 connections (times clients_per_core): a backend each, max_connections
        sized from them (PostgreSQL 15 on Linux keeps its semaphores in its shared memory, so no
        System V semaphore limit applies), one pgbench holding every socket, and the point's copy of
        the table in tmpfs beside the large cache."""
        super().check_cores(params, cores)
        clients = cores * params["clients_per_core"]
        database_mb = params["rows"] * BYTES_PER_ROW / 2**20
        need = database_mb + (cache_mb("large-cache", database_mb) or 0) + clients * MB_PER_BACKEND
        have = mem_available_mb()
        if need > have:
            raise UserError(f"postgres at {cores} cores with {params['rows']} rows needs about {need / 1024:.1f} GB "
                            f"of memory ({clients} backends, the table in tmpfs and a cache that holds it), and "
                            f"this machine has {have / 1024:.1f} GB available")
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and clients + FDS_SPARE > soft:
            raise UserError(f"postgres at {cores} cores runs pgbench with {clients} connections, and the open-file "
                            f"limit is {soft}: raise it (ulimit -n {clients + FDS_SPARE}) or lower clients_per_core")

    def check_clients(self, params: dict[str, Any], cores: int) -> None:
        """As every server workload's, and each host's pgbench one whose counts mosbench reads."""
        super().check_clients(params, cores)
        for host in remote_hosts(params):
            problem = check_version(ssh.run(host.name, params["ssh_config"], "pgbench --version 2>&1 || true"),
                                    host.name)
            if problem:
                raise UserError(problem)

    def setup(self, ctx: RunContext) -> None:
        p = ctx.params
        version = pgcluster.version()
        database, meta = self._database(ctx, version.split()[0])
        scripts = {}
        for t in self.tests():
            text, updates = batch_script(t.name, p["batch"], p["update_percent"])
            path = ctx.scratch / f"{t.name}.sql"
            path.write_text(text)
            scripts[t.name] = (path, updates)
        ctx.extra.update(database=database, database_mb=meta["database_mb"], scripts=scripts)
        ctx.facts.update(version=version, rows=p["rows"], database_mb=meta["database_mb"],
                         protocol=p["protocol"], batch=p["batch"],
                         updates_per_batch={t: u for t, (_, u) in scripts.items()})
        super().setup(ctx)  # the veth link, with net=veth

    def _database(self, ctx: RunContext, version: str) -> tuple[Path, dict[str, Any]]:
        """The loaded data directory, from the cache or loaded now (once per rows, schema and version)."""
        rows = ctx.params["rows"]
        cached = ctx.cache / f"kv-{rows}-schema{SCHEMA}-pg{version}"
        with contextlib.suppress(OSError, ValueError):
            return cached / "data", json.loads((cached / "meta.json").read_text())
        build = ctx.scratch / "load"
        build.mkdir()
        pgcluster.chown_tree(build)
        open_path_to(build, ctx.scratch.parent)
        try:
            status, said = ctx.run("initdb", pgcluster.initdb_argv(build / "data"), timeout=600, env=pgcluster.ENV,
                                   user=pgcluster.USER)
            if status != 0:
                raise UserError(f"initdb failed: {said or f'status {status}'}")
            self._load(ctx, build, rows)
            partial = cached.with_name(cached.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(build / "data", partial / "data", symlinks=True)
            meta = {"rows": rows, "version": version, "schema": SCHEMA,
                    "database_mb": round(dir_mb(build / "data" / "base"), 1)}
            (partial / "meta.json").write_text(json.dumps(meta))
            shutil.rmtree(cached, ignore_errors=True)
            partial.rename(cached)
            return cached / "data", meta
        finally:
            shutil.rmtree(build, ignore_errors=True)

    def _load(self, ctx: RunContext, build: Path, rows: int) -> None:
        port = ports.free_ports(1)[0]
        settings = dict(pgcluster.BENCHMARK_SETTINGS, maintenance_work_mem="1GB", max_wal_size="8GB")
        try:
            server = start_server(ctx.launcher, "postgres-load", ctx.group, build / "data", HOST, port, build,
                                  settings)
        except PointFailed as e:
            raise UserError(f"the loading server did not start: {e}") from None
        try:
            status, said = ctx.run("psql-load", [
                str(pgcluster.BIN / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-v", f"rows={rows}",
                "-h", HOST, "-p", str(port), "-U", pgcluster.USER, "-d", "postgres", "-f", str(SQL / "load.sql"),
            ], timeout=3600, env=pgcluster.ENV)
            if status != 0:
                raise UserError(f"loading {rows} rows failed: {said or f'status {status}'}")
        finally:
            # SIGTERM, a smart shutdown: its checkpoint leaves a clean data directory to copy.
            status = ctx.launcher.stop(server.proc, grace=300)
        if status != 0:
            raise UserError(f"the loading server did not shut down cleanly: {ctx.launcher.last_error('postgres-load')}")

    def start(self, ctx: PointContext) -> Instance:
        script, updates = ctx.run.extra["scripts"][ctx.test]
        return PostgresInstance(ctx, ctx.run.extra["database"], script, updates, ctx.run.extra["database_mb"])

    def figures_for(self, test: str) -> tuple[MetricFigure, ...]:
        return (SYSCALLS_FIGURE,)
