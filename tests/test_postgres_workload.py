"""The postgres workload: pgbench's scripts and records read right, and real private servers at 1 core.

The real runs use a small table (the checks are the same at any size): every query pgbench counted
must be an index lookup the server counted, every UPDATE visible in the table, and nothing of a
point may outlive it, also when the harness is killed mid-window.
"""

import ctypes
import itertools
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mosbench import procfs
from mosbench.errors import PointFailed, UserError
from mosbench.machine import journal
from mosbench.store import db as store
from mosbench.workloads.postgres import cluster as pgcluster
from mosbench.workloads.postgres import pgbench, syscalls
from mosbench.workloads.postgres import workload as postgres
from tests.conftest import needs_native, needs_root, workload_cache
from tests.servers import needs_server, run_points, taken_port
from tests.test_run_system import ROOT, _our_cgroups

servers = needs_server(pgcluster.BIN / "postgres")
ROWS = 20_000


@given(st.integers(1, 2000), st.floats(0, 100))
def test_a_batch_has_its_queries_and_a_known_number_of_updates(batch, percent):
    text, updates = postgres.batch_script("read-write", batch, percent)
    lines = text.splitlines()
    assert updates == round(batch * percent / 100)
    assert sum(line.startswith("UPDATE") for line in lines) == updates
    assert sum(line.startswith("SELECT") for line in lines) == batch - updates
    assert sum(line == r"\set k random(1, :rows)" for line in lines) == batch
    assert not any(line.startswith("--") for line in lines)


def test_read_only_has_no_updates_and_updates_are_spread():
    text, updates = postgres.batch_script("read-only", 256, 5.0)
    assert updates == 0 and "UPDATE" not in text
    text, updates = postgres.batch_script("read-write", 256, 5.0)
    statements = [line for line in text.splitlines() if not line.startswith("\\")]
    places = [i for i, line in enumerate(statements) if line.startswith("UPDATE")]
    assert updates == 13 and len(places) == 13
    assert max(b - a for a, b in itertools.pairwise(places)) <= 20  # spread, not bunched


def test_the_large_cache_always_holds_the_table():
    assert postgres.cache_mb("small-cache", 300.0) is None
    assert postgres.cache_mb("large-cache", 300.0) == 2048
    assert postgres.cache_mb("large-cache", 1500.0) == 3000


def test_pgbench_summary_and_transaction_logs_are_read(tmp_path):
    out = ("transaction type: x.sql\nnumber of transactions actually processed: 670\n"
           "number of failed transactions: 2 (0.298%)\nlatency average = 8.951 ms\n")
    assert pgbench.summary_counts(out) == (670, 2)
    with pytest.raises(PointFailed, match="no summary"):
        pgbench.summary_counts("pgbench: error: connection to server failed\n")
    (tmp_path / "txn.123").write_text("0 1 12448 0 1795430923 260293\n0 2 10803 0 1795430923 271107\n")
    (tmp_path / "txn.123.1").write_text("1 1 9994 0 1795430924 5\n")
    ends, latencies, lags = pgbench.read_transaction_logs(tmp_path)
    assert sorted(ends.tolist()) == pytest.approx([1795430923.260293, 1795430923.271107, 1795430924.000005])
    assert sorted(latencies.tolist()) == [9994, 10803, 12448]
    assert lags.tolist() == [0, 0, 0]
    # Under -R pgbench adds each transaction's schedule lag (µs) as a seventh field.
    (tmp_path / "txn.123.1").write_text("1 1 9994 0 1795430924 5 1500\n")
    _, _, lags = pgbench.read_transaction_logs(tmp_path)
    assert sorted(lags.tolist()) == [0, 0, 1500]


def test_a_transaction_straddling_an_end_counts_for_the_part_inside():
    ends = np.array([10.0, 12.0, 13.0, 20.0])
    latencies_us = np.array([1e6, 2e6, 1e6, 1e6])  # runs [9,10], [10,12], [12,13], [19,20]
    assert pgbench.queries_between(ends, latencies_us, 10.0, 12.5, 256) == pytest.approx(256 + 128)
    assert pgbench.queries_between(ends, latencies_us, 11.0, 11.5, 256) == pytest.approx(64)
    assert pgbench.queries_between(ends, latencies_us, 14.0, 18.0, 256) == 0
    assert pgbench.queries_between(np.array([]), np.array([]), 0.0, 1.0, 256) == 0


def test_perf_counts_are_read_by_kind_and_unread_ones_left_out():
    text = ("# started on Mon Nov 23 10:50:56 2026\n\n"
            "261616,,raw_syscalls:sys_enter,1538741653,100.00,,\n"
            "130329,,syscalls:sys_enter_lseek,1538734903,100.00,,Events disabled\n"
            "<not counted>,,syscalls:sys_enter_futex,0,100.00,,\n"
            "Events enabled\nEvents disabled\n")
    counts = syscalls.parse(text)
    assert counts == {"all": 261616, "lseek": 130329}
    assert postgres.per_query(counts, 65000) == {"lseek_per_query": 2.005, "syscalls_per_query": 4.025}


def test_a_killed_servers_segment_is_removed_and_no_one_elses(tmp_path):
    libc = ctypes.CDLL(None, use_errno=True)
    ipc_private, ipc_creat = 0, 0o1000
    mine = libc.shmget(ipc_private, 56, ipc_creat | 0o600)
    assert mine >= 0
    try:
        # Another creator's segment with the same id is never touched: the journal names both.
        assert not journal.remove_sysv_shm(mine, os.getpid() + 1, wait=0)
        j = journal.Journal(tmp_path)
        j.add_shm(mine, os.getpid())
        assert journal.undo(j.data) == [f"removed shared memory segment {mine}"]
        assert f" {mine} " not in Path("/proc/sysvipc/shm").read_text()
    finally:
        subprocess.run(["ipcrm", "-m", str(mine)], capture_output=True, check=False)


# psycopg is the `postgres` extra: without it every other command works, and postgres says it is missing.
WITHOUT_PSYCOPG = "import sys; sys.modules['psycopg'] = None; from mosbench.cli import main; main()"


def _without_psycopg(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_PSYCOPG, *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "MOSBENCH_STATE": str(tmp_path / "state")}, timeout=300)


def test_without_psycopg_every_workload_is_listed_and_postgres_says_what_is_missing(tmp_path):
    listed = _without_psycopg(tmp_path, "list")
    assert listed.returncode == 0, listed.stderr
    assert "postgres/read-only" in listed.stdout and "micro/getppid1" in listed.stdout
    store_path = tmp_path / "s.sqlite"
    refused = _without_psycopg(tmp_path, "run", "postgres/read-only", "--cores", "1", "--store", str(store_path))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        "mosbench: psycopg, PostgreSQL's Python client, is not installed (the postgres extra: pip install "
        "'mosbench[postgres]')"]
    assert not store_path.exists()


@needs_native
@needs_root
def test_without_psycopg_a_micro_run_completes(tmp_path):
    store_path = tmp_path / "s.sqlite"
    run = _without_psycopg(tmp_path, "run", "micro/getppid1", "--cores", "1", "--trials", "1", "--warmup", "0.1",
                           "--duration", "0.3", "--store", str(store_path))
    assert run.returncode == 0, run.stderr
    db = store.Store(str(store_path))
    points = db.points(db.run("latest")["id"])
    assert points and all(p["status"] == "ok" and p["work"] > 0 for p in points)


def test_missing_package_is_one_clear_line(monkeypatch):
    monkeypatch.setattr(pgcluster, "BIN", Path("/nonexistent/postgresql/15/bin"))
    with pytest.raises(UserError, match=r"PostgreSQL 15 or later is not installed \(`make deps` installs the "
                                        r"distribution's: postgresql-15 on Debian 12\)"):
        postgres.Postgres().check_available()


def _defaults() -> dict:
    return {p.name: p.default for p in postgres.Postgres.params}


def test_256_cores_are_checked_for_memory_and_open_files(monkeypatch):
    w = postgres.Postgres()
    monkeypatch.setattr(postgres, "mem_available_mb", lambda: 24 * 1024.0)
    monkeypatch.setattr(postgres.resource, "getrlimit", lambda _: (20000, 20000))
    w.check_cores(_defaults(), 256)  # 512 backends, the default table and a 2 GB cache fit in 24 GB
    with pytest.raises(UserError, match=r"postgres at 256 cores with 200000000 rows needs about 3\d\.\d GB "
                                        r"of memory \(512 backends.* 24\.0 GB available"):
        w.check_cores(dict(_defaults(), rows=200_000_000), 256)  # the paper's table twenty times over
    monkeypatch.setattr(postgres, "mem_available_mb", lambda: 4 * 1024.0)
    with pytest.raises(UserError, match=r"512 backends.*4\.0 GB available"):
        w.check_cores(_defaults(), 256)
    w.check_cores(_defaults(), 2)
    monkeypatch.setattr(postgres, "mem_available_mb", lambda: 24 * 1024.0)
    monkeypatch.setattr(postgres.resource, "getrlimit", lambda _: (1024, 4096))
    with pytest.raises(UserError, match=r"pgbench with 1024 connections, and the open-file limit is 1024: "
                                        r"raise it \(ulimit -n 1088\)"):
        w.check_cores(dict(_defaults(), clients_per_core=4), 256)
    w.check_cores(_defaults(), 256)


@pytest.mark.parametrize(("param", "value", "said"), [
    ("protocol", "fast", "protocol must be one of simple, extended, prepared"),
    ("rows", 0, r"rows must be 1\.\.1099511627776 \(2\^40\)"),
    ("rows", 2**40 + 1, r"rows must be 1\.\.1099511627776"),
    ("update_percent", 101.0, "update_percent must be 0..100"),
    ("clients_per_core", 0, "clients_per_core must be at least 1"),
])
def test_bad_parameters_are_refused(param, value, said):
    w = postgres.Postgres()
    with pytest.raises(UserError, match=said):
        w.check_params({**{q.name: q.default for q in w.params}, param: value})


def _postgres_processes() -> set[int]:
    uid = pwd.getpwnam(pgcluster.USER).pw_uid
    found = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if d.stat().st_uid == uid and procfs.state(int(d.name)) not in (None, "Z"):
                    found.add(int(d.name))
            except OSError:
                continue
    return found


def _run(tmp_path, monkeypatch, home, **kw):
    """The points of a postgres run, on the test run's one loaded database (in home's cache)."""
    before = _postgres_processes()
    kw.setdefault("rows", ROWS)
    points = run_points(tmp_path, monkeypatch, "postgres", cache=workload_cache(home), **kw)
    assert not _postgres_processes() - before, "a server process outlived its point"
    return points


@servers
def test_every_test_and_variant_does_checked_work(tmp_path, monkeypatch, cache_home):
    points = _run(tmp_path, monkeypatch, cache_home, test="", variants=("small-cache", "large-cache"))
    assert {(p["test"], p["variant"]) for p in points} == {
        (t, v) for t in ("read-only", "read-write") for v in ("small-cache", "large-cache")}
    for p in points:
        assert p["status"] == "ok", p["reason"]
        m = p["metrics"]
        assert m["client_errors"] == 0 and m["transactions"] > 0 and m["clients"] == 2
        assert 0 < p["work"] <= m["transactions"] * 256  # the window's share of the transactions, in queries
        assert m["latency_p50_us"] <= m["latency_p99_us"] <= m["latency_max_us"]
        assert p["loadgen_user_s"] is not None  # pgbench's CPU time, apart from the server's
        if not syscalls.unavailable():
            # Simple protocol: each query is planned, and planning asks the table's and index's size.
            assert m["lseek_per_query"] >= 1.0 and m["sendto_per_query"] >= 0.9
            assert m["syscalls_counted_queries"] > 0  # over the warm-up, not the measured window
    env = store.Store(str(tmp_path / "s.sqlite")).run("latest")["environment"]["postgres"]
    assert env["rows"] == ROWS and env["updates_per_batch"] == {"read-only": 0, "read-write": 13}
    assert env["settings"]["large-cache"]["shared_buffers"] == "2GB"
    assert env["settings"]["small-cache"]["fsync"] == "off"


@servers
def test_the_client_behind_a_veth_pair_does_checked_work(tmp_path, monkeypatch, cache_home):
    (p,) = _run(tmp_path, monkeypatch, cache_home, test="read-write", variants=("small-cache",), syscalls=False,
                net="veth")
    assert p["status"] == "ok", p["reason"]
    m = p["metrics"]
    assert m["net"] == "veth" and m["instances"] == 1 and m["transactions"] > 0 and m["client_errors"] == 0
    assert not list(Path("/run/netns").glob(f"mosbench-{os.getpid()}-*"))


@servers
def test_prepared_statements_skip_the_planners_lseek_and_the_database_is_cached(tmp_path, monkeypatch,
                                                                                   cache_home):
    if syscalls.unavailable():
        pytest.skip(syscalls.unavailable())
    # Small batches: a prepared statement is planned afresh for its first five executions (PostgreSQL's
    # custom plans) before its generic plan is kept, and pgbench prepares each of a batch's statements.
    (simple,) = _run(tmp_path, monkeypatch, cache_home, test="read-only", variants=("large-cache",), batch=8)
    meta = next((workload_cache(cache_home) / "postgres").glob(f"kv-{ROWS}-*/meta.json"))
    loaded = meta.stat().st_mtime_ns
    (prepared,) = _run(tmp_path, monkeypatch, cache_home, test="read-only", variants=("large-cache",), batch=8,
                       protocol="prepared")
    assert meta.stat().st_mtime_ns == loaded, "the cached database was loaded again"
    assert simple["metrics"]["lseek_per_query"] >= 1.0
    # The prepared run's calls were counted (a kind it made none of is left out of its figures): its
    # lseeks are few, not merely uncounted.
    m = prepared["metrics"]
    assert prepared["status"] == "ok" and m["syscalls_counted_queries"] > 0 and m["syscalls_per_query"] > 0
    assert m.get("lseek_per_query", 0.0) < 0.05


@servers
def test_updates_that_do_not_show_in_the_table_fail_the_point(tmp_path, monkeypatch, cache_home):
    real = postgres.batch_script
    monkeypatch.setattr(postgres, "batch_script", lambda *a: (real(*a)[0], real(*a)[1] + 1))
    (p,) = _run(tmp_path, monkeypatch, cache_home, test="read-write", variants=("large-cache",), syscalls=False)
    assert p["status"] == "failed" and "UPDATEs are visible in the table, pgbench made" in p["reason"]


@servers
def test_a_port_taken_by_another_program_fails_the_point(tmp_path, monkeypatch, cache_home):
    with taken_port() as port:
        (p,) = _run(tmp_path, monkeypatch, cache_home, test="read-only", variants=("small-cache",), port=port)
    assert p["status"] == "failed"
    assert f"postgres (port {port})" in p["reason"] and "could not bind" in p["reason"]


@servers
def test_a_client_that_cannot_connect_fails_the_point_with_its_words(tmp_path, monkeypatch, cache_home):
    real = postgres.pgbench_argv
    monkeypatch.setattr(postgres, "pgbench_argv",
                        lambda host, port, *a: real(host, port + 1 if port < 65535 else 1, *a))
    (p,) = _run(tmp_path, monkeypatch, cache_home, test="read-only", variants=("small-cache",))
    assert p["status"] == "failed" and "0 of 2 clients connected" in p["reason"]
    assert "connection to server" in p["reason"]


@servers
def test_a_killed_harness_leaves_no_server_and_no_segment(tmp_path, cache_home):
    before = _postgres_processes()
    state = tmp_path / "state"
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "postgres/read-only", "--variant", "small-cache",
                             "--cores", "1", "--trials", "3", "--warmup", "0.2", "--duration", "3",
                             "-p", f"rows={ROWS}", "--store", str(tmp_path / "s.sqlite")],
                            cwd=ROOT, env={**os.environ, "MOSBENCH_STATE": str(state),
                                           "HOME": str(cache_home)},  # the test run's loaded database
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not any("pgbench" in _cmdline(pid) for pid in _all_pids()):
            assert time.monotonic() < deadline and proc.poll() is None, "no postgres point started"
            time.sleep(0.05)
        time.sleep(1.0)  # mid-window: the postmaster, its backends and pgbench are all running
        servers_then = _postgres_processes() - before
        assert servers_then
        segments = _segments_of(servers_then)
        assert segments, "no System V segment to leave behind"
    finally:
        proc.kill()  # no finally runs in the harness: its guardian must undo the journal
        proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (list(state.glob("run-*.json")) or _postgres_processes() - before):
        time.sleep(0.1)
    assert not list(state.glob("run-*.json")), "the guardian did not finish"
    assert not _postgres_processes() - before
    assert not [pid for pid in _all_pids() if "pgbench" in _cmdline(pid)]
    assert not set(_segments_of(servers_then)) & set(segments)
    assert not [c for c in _our_cgroups() if c.name == f"mosbench-{proc.pid}"]


def _all_pids() -> list[int]:
    return [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _segments_of(creators: set[int]) -> list[int]:
    rows = [line.split() for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]]
    return [int(r[1]) for r in rows if int(r[4]) in creators]


def test_stopping_the_servers_gives_them_the_smart_shutdowns_grace_and_restores_the_nics_steering():
    # A point over a NIC or veth steers its queues to the point's CPUs: the next point steers afresh, so
    # each point's end puts them back, postgres's as every other server's.
    stopped: list[tuple[list, float]] = []
    restored: list[str] = []

    class Launcher:
        journal = None

        def stop_many(self, procs, grace=5.0):
            stopped.append((procs, grace))
            return [0] * len(procs)

    class Steering:
        def restore(self):
            restored.append("eth0")

    class Ctx:
        launcher = Launcher()

    instance = object.__new__(postgres.PostgresInstance)
    instance.ctx = Ctx()
    instance.servers = []
    instance.steerings = [Steering()]
    instance._shm = None
    instance.stop_servers()
    assert stopped == [([], 30.0)] and restored == ["eth0"] and instance.steerings == []
