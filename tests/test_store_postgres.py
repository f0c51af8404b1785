"""The results store on a real PostgreSQL: a private cluster of Debian's PostgreSQL 15 on tmpfs.

The schema and its migrations, two runs writing at once, a resumed run, an export read back the same
as from SQLite, and the server going away mid-run (one clear line; the points committed before stay).
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import sqlalchemy as sa

from mosbench.store import db as store
from mosbench.workloads.postgres import cluster as pgcluster
from tests.conftest import ROOT, needs_native, needs_root
from tests.pgcluster import private
from tests.test_run_system import _leftovers, _our_cgroups

pytestmark = [needs_root, pytest.mark.skipif(not (pgcluster.BIN / "initdb").exists(),
                                             reason="PostgreSQL 15 not installed")]


@pytest.fixture(scope="module")
def cluster():
    # Commits stay synchronous (written to the kernel before they return): the test of a server that
    # goes away counts on what was committed surviving an immediate shutdown.
    with private() as c:
        yield c


@pytest.fixture
def database(cluster, request):
    """A fresh database of the cluster per test: its URL."""
    return cluster.fresh_database("t_" + request.node.name.lower().replace("[", "_").replace("]", "")[:50])


def test_schema_and_migrations_from_v1(database):
    engine = sa.create_engine(database)
    with engine.begin() as conn:  # a store made by a mosbench at schema v1: no load-generator columns
        store.schema_version.create(conn)
        conn.execute(store.schema_version.insert().values(version=1))
        store.runs.create(conn)
        conn.execute(sa.text("CREATE TABLE points (id SERIAL PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),"
                             " workload VARCHAR(100) NOT NULL, test VARCHAR(100) NOT NULL, variant VARCHAR(100) NOT "
                             "NULL, cores INTEGER NOT NULL, trial INTEGER NOT NULL, status VARCHAR(20) NOT NULL, "
                             "reason TEXT, started_at TIMESTAMPTZ NOT NULL, cpus TEXT NOT NULL, loadgen_cpus TEXT, "
                             "loadgen_shared BOOLEAN, unit VARCHAR(50), window_s FLOAT, work FLOAT, throughput FLOAT, "
                             "user_s FLOAT, system_s FLOAT, idle_s FLOAT, steal_s FLOAT, cgroup_user_s FLOAT, "
                             "cgroup_system_s FLOAT, metrics JSON, samples JSON, logs TEXT)"))
    db = store.Store(database)
    with db.engine.connect() as conn:
        assert conn.execute(sa.select(store.schema_version.c.version)).scalar() == store.SCHEMA_VERSION
        cols = {c["name"] for c in sa.inspect(conn).get_columns("points")}
    assert {"loadgen_user_s", "loadgen_system_s", "profile"} <= cols
    run_id = db.create_run({"p": 1}, {"hostname": "h"}, "test")
    db.add_point(run_id, **_point(1, loadgen_user_s=0.5))
    assert db.points(run_id)[0]["loadgen_user_s"] == 0.5
    store.Store(database)  # opening again changes nothing


def _point(cores: int, trial: int = 1, **extra) -> dict:
    return {"workload": "micro", "test": "getppid1", "variant": "procs", "cores": cores, "trial": trial,
            "status": "ok", "started_at": store.now(), "cpus": "0", "unit": "op", "window_s": 1.0, "work": 10.0,
            "throughput": 10.0, "user_s": 0.5, "system_s": 0.4, "idle_s": 0.1, "steal_s": 0.0,
            "metrics": {"k": cores}, "samples": [{"t": 0.5, "rate": 10.0}], **extra}


def test_two_runs_write_at_once(database):
    db = store.Store(database)
    ids = [db.create_run({"n": i}, {"hostname": "h"}, "test") for i in range(2)]
    errors = []

    def write(run_id: int) -> None:
        try:
            mine = store.Store(database)  # each harness has its own connections
            for trial in range(1, 41):
                mine.add_point(run_id, **_point(1 + trial % 2, trial))
        except Exception as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [len(db.points(i)) for i in ids] == [40, 40]
    assert {r["id"]: r["points"] for r in db.list_runs()} == {ids[0]: 40, ids[1]: 40}


def _mosbench(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mosbench", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)


def _run_until(database: str, state: dict, trials: int, points: int) -> tuple[subprocess.Popen, store.Store]:
    """A real run of one-second getppid1 points into the store, returned once `points` are committed."""
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "micro/getppid1", "--cores", "1", "--trials",
                             str(trials), "--warmup", "0.2", "--duration", "1", "--store", database],
                            cwd=ROOT, env={**os.environ, **state}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    db = store.Store(database)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (db.list_runs() and db.list_runs()[0]["points"] >= points):
        time.sleep(0.2)
    return proc, db


@needs_native
def test_resume_and_export_read_back_as_from_sqlite(database, tmp_path):
    state = {"MOSBENCH_STATE": str(tmp_path / "state")}
    proc, db = _run_until(database, state, trials=4, points=1)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert db.run("latest")["status"] == "incomplete"
    r = _mosbench("run", "--resume", "latest", "--store", database, env=state)
    assert r.returncode == 0, r.stderr
    assert db.run("latest")["status"] == "complete" and len(db.points(db.run("latest")["id"])) == 8

    # The same run copied into SQLite exports the same rows.
    lite = store.Store(str(tmp_path / "copy.sqlite"))
    run = db.run("latest")
    copy_id = lite.create_run(run["plan"], run["environment"], run["command"], run["label"])
    for p in db.points(run["id"], with_logs=True):
        lite.add_point(copy_id, **{k: v for k, v in p.items() if k not in ("id", "run_id")})
    exports = []
    for url, rid in ((database, run["id"]), (str(tmp_path / "copy.sqlite"), copy_id)):
        r = _mosbench("export", str(rid), "--format", "json", "--store", url)
        assert r.returncode == 0, r.stderr
        data = json.loads(r.stdout)
        exports.append(({k: data["run"][k] for k in ("plan", "environment", "command", "label")},
                        [{k: v for k, v in p.items() if k not in ("id", "run_id")} for p in data["points"]]))
    for a, b in zip(exports[0][1], exports[1][1], strict=True):
        assert {k: (a[k], b[k]) for k in a if a[k] != b[k]} == {}
    assert exports[0] == exports[1]
    r = _mosbench("report", str(run["id"]), "-o", str(tmp_path / "pg.html"), "--store", database)
    assert r.returncode == 0, r.stderr


@needs_native
def test_a_server_that_goes_away_stops_the_run_with_one_line(cluster, database, tmp_path):
    state = {"MOSBENCH_STATE": str(tmp_path / "state")}
    proc, db = _run_until(database, state, trials=20, points=2)
    try:
        db.engine.dispose()
        cluster.stop("immediate")
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        cluster.start({"fsync": "off"})
    assert proc.returncode == 2
    lines = [line for line in err.splitlines() if line.startswith("mosbench:")]
    assert len(lines) == 1 and "the results store" in lines[0] and "failed" in lines[0], err
    assert "Traceback" not in err
    assert len(db.points(db.list_runs()[0]["id"])) >= 2  # what was committed before stays
    assert not _leftovers("mosbench-run") and not _our_cgroups()


def test_a_server_that_stops_answering_mid_command_fails_it_within_bounded_time(cluster, database):
    """Its network gone (tests/store_netns.py: a namespace's loopback taken down under its connections), a
    query waiting for its answer and a write both fail within the keepalives' and tcp_user_timeout's bound,
    in one line each; the points committed before stay, and nothing after."""
    socket_path = cluster.root / f".s.PGSQL.{cluster.port}"
    started = time.monotonic()
    r = subprocess.run(["unshare", "-n", sys.executable, "-m", "tests.store_netns", str(socket_path),
                        database.rsplit("/", 1)[1]], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)
    for what in ("query", "write"):
        line, seconds = said[what]
        assert line.startswith("the results store postgresql+psycopg://postgres@127.0.0.1:") and " failed: " in line
        assert "\n" not in line and seconds < 10, (what, line, seconds)
    assert "timed out" in said["query"][0]
    assert time.monotonic() - started < 30
    assert sorted(p["trial"] for p in store.Store(database).points(said["run"])) == [1, 2]
