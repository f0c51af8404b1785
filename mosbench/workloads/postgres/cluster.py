"""A private PostgreSQL cluster: the distribution's PostgreSQL binaries (Debian 12's 15, or the newest
15 or later installed: Ubuntu 24.04's 16), a data directory of its own, its own
port on 127.0.0.1 and its own socket directory, run as the `postgres` user (initdb refuses root).

Never the machine's service: nothing is read from /etc/postgresql, and the cluster lives only in the
directory given to it. (The store's tests drive one with pg_ctl: tests/pgcluster.py.)
"""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from mosbench.errors import UserError

LISTED_MAJOR = 15  # scripts/apt-packages.txt's, Debian 12's; pgbench.MIN_MAJOR is the oldest that works
USER = "postgres"


def find_bin(root: Path = Path("/usr/lib/postgresql")) -> Path:
    """The listed version's binaries where installed, else the newest of 15 or later with pgbench (the rule
    scripts/apt.sh installs by); the listed path where there is none, for the message that says so."""
    listed = root / str(LISTED_MAJOR) / "bin"
    if (listed / "initdb").exists():
        return listed
    found = [d / "bin" for d in root.glob("*") if d.name.isdigit() and int(d.name) >= LISTED_MAJOR
             and (d / "bin" / "pgbench").exists()]
    return max(found, key=lambda b: int(b.parent.name)) if found else listed


BIN = find_bin()
PACKAGE = f"postgresql-{BIN.parent.name}"


def check_available() -> None:
    if not (BIN / "initdb").exists():
        raise UserError(f"PostgreSQL {LISTED_MAJOR} or later is not installed (`make deps` installs the "
                        f"distribution's: postgresql-{LISTED_MAJOR} on Debian 12)")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        raise UserError(f"user {USER} is missing ({PACKAGE} makes it)") from None


# The settings that keep PostgreSQL off the disk path: a benchmark's data is thrown away, so nothing is
# made durable (PLATFORM.md); dynamic shared memory lives in the data directory, not /dev/shm, so a
# server that is killed leaves nothing outside it.
BENCHMARK_SETTINGS = {
    "fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "wal_level": "minimal",
    "max_wal_senders": "0", "autovacuum": "off", "dynamic_shared_memory_type": "mmap",
}
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def initdb_argv(data: Path) -> list[str]:
    return [str(BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", USER, "--no-sync", "-E", "UTF8",
            "--locale", "C"]


def server_options(host: str, port: int, socket_dir: Path, settings: dict[str, str]) -> dict[str, str]:
    return {"listen_addresses": host, "port": str(port), "unix_socket_directories": str(socket_dir), **settings}


def version() -> str:
    """The server's version, as `postgres --version` says it ("15.18 (Debian 15.18-0+deb12u1)")."""
    out = subprocess.run([str(BIN / "postgres"), "--version"], capture_output=True, text=True, env=ENV)
    return out.stdout.strip().removeprefix("postgres (PostgreSQL) ")


def chown_tree(root: Path) -> None:
    """Gives a tree to the postgres user (a data directory copied by root)."""
    pw = pwd.getpwnam(USER)
    os.chown(root, pw.pw_uid, pw.pw_gid)
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(parent, name), pw.pw_uid, pw.pw_gid, follow_symlinks=False)
