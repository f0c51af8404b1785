"""A private PostgreSQL cluster driven with pg_ctl, for the tests of the store on PostgreSQL.

The workload runs `postgres` through its launcher (mosbench/workloads/postgres/cluster.py has what both share).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa

from mosbench.errors import UserError
from mosbench.workloads.postgres.cluster import BIN, ENV, USER, initdb_argv, server_options


class Cluster:
    """A cluster in a directory of its own, started and stopped with pg_ctl."""

    def __init__(self, root: Path, port: int, host: str = "127.0.0.1"):
        self.root = root
        self.data = root / "data"
        self.port = port
        self.host = host
        self.log = root / "server.log"

    def _as_postgres(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        pw = pwd.getpwnam(USER)
        r = subprocess.run(argv, capture_output=True, text=True, user=pw.pw_uid, group=pw.pw_gid,
                           extra_groups=[], cwd="/", env=ENV)
        if check and r.returncode != 0:
            said = (r.stderr.strip() or r.stdout.strip()).splitlines()
            raise UserError(f"{Path(argv[0]).name} failed: {said[-1] if said else f'status {r.returncode}'}")
        return r

    def init(self) -> None:
        """An empty cluster; its directory (and the way to it) must be reachable by the postgres user."""
        self.root.mkdir(parents=True, exist_ok=True)
        pw = pwd.getpwnam(USER)
        os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self._as_postgres(initdb_argv(self.data))

    def start(self, settings: dict[str, str] | None = None) -> None:
        """Starts the server and waits until it accepts connections."""
        opts = server_options(self.host, self.port, self.root, settings or {})
        line = " ".join(f"-c {k}={v}" for k, v in opts.items())
        self._as_postgres([str(BIN / "pg_ctl"), "-D", str(self.data), "-o", line, "-l", str(self.log), "-w",
                           "-t", "60", "start"])

    def stop(self, mode: str = "fast") -> None:
        if (self.data / "postmaster.pid").exists():
            self._as_postgres([str(BIN / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"], check=False)

    def url(self, database: str = USER) -> str:
        return f"postgresql+psycopg://{USER}@{self.host}:{self.port}/{database}"

    def fresh_database(self, name: str) -> str:
        """A database of this name made anew (dropped first where it is there): its URL."""
        admin = sa.create_engine(self.url(), isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        return self.url(name)

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def private(settings: dict[str, str] | None = None) -> Iterator[Cluster]:
    """A cluster of its own, started on a free loopback port, in memory where /dev/shm is (no fsync: a test's
    data need not outlive it); stopped and removed afterwards, whatever happened."""
    root = Path(tempfile.mkdtemp(prefix="mosbench-test-pg-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    os.chmod(root, 0o755)  # the postgres user reaches its cluster's directory through it
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = Cluster(root / "cluster", port)
    try:
        c.init()
        c.start({"fsync": "off", **(settings or {})})
        yield c
    finally:
        c.remove()
        shutil.rmtree(root, ignore_errors=True)
