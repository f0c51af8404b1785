import pytest
import sqlalchemy as sa

from mosbench.errors import UserError
from mosbench.store import db as store


def _point(**kw):
    base = dict(workload="micro", test="getppid1", variant="procs", cores=1, trial=1, status="ok",
                started_at=store.now(), cpus="0", unit="op", window_s=1.0, work=100.0, throughput=100.0,
                user_s=0.1, system_s=0.2, idle_s=0.7, steal_s=0.0, samples=[{"t": 1.0, "rate": 100.0}])
    base.update(kw)
    return base


def test_points_and_resume_keys(tmp_path):
    db = store.Store(str(tmp_path / "r.sqlite"))
    run_id = db.create_run({"cores": [1, 2]}, {"hostname": "h"}, "mosbench run micro")
    db.add_point(run_id, **_point())
    db.add_point(run_id, **_point(cores=2, status="failed", reason="boom", throughput=None, work=None))
    assert db.done_keys(run_id) == {("micro", "getppid1", "procs", 1, 1), ("micro", "getppid1", "procs", 2, 1)}
    pts = db.points(run_id)
    assert [p["status"] for p in pts] == ["ok", "failed"] and pts[0]["samples"][0]["rate"] == 100.0
    with pytest.raises(sa.exc.IntegrityError):  # one row per point: a resumed run cannot double count
        db.add_point(run_id, **_point())
    db.finish_run(run_id, "incomplete")
    assert db.run("latest")["status"] == "incomplete"
    assert db.list_runs()[0]["failed"] == 1


def test_wal_and_schema_version(tmp_path):
    db = store.Store(str(tmp_path / "r.sqlite"))
    with db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.execute(sa.select(store.schema_version.c.version)).scalar() == store.SCHEMA_VERSION


def test_newer_schema_refused(tmp_path):
    path = str(tmp_path / "r.sqlite")
    db = store.Store(path)
    with db.engine.begin() as conn:
        conn.execute(store.schema_version.update().values(version=99))
    with pytest.raises(UserError, match="newer"):
        store.Store(path)


@pytest.mark.parametrize("url", ["nosuchdb://x/y", "postgresql+nosuchdriver://u@localhost/db"])
def test_bad_urls(url):
    with pytest.raises(UserError):
        store.Store(url)


def test_unknown_run(tmp_path):
    db = store.Store(str(tmp_path / "r.sqlite"))
    with pytest.raises(UserError, match="no run 7"):
        db.run(7)
    with pytest.raises(UserError, match="bad run reference"):
        db.run("x")


def test_a_v1_store_gains_the_load_generator_columns(tmp_path):
    """A store written by the mosbench before v2: its points stay, the client's CPU time columns appear."""
    path = tmp_path / "old.sqlite"
    old = store.Store(str(path))
    run_id = old.create_run({}, {"hostname": "h"}, "mosbench run micro")
    old.add_point(run_id, **_point())
    with old.engine.begin() as conn:  # back to the v1 shape
        for name in ("loadgen_user_s", "loadgen_system_s", "profile"):
            conn.exec_driver_sql(f"ALTER TABLE points DROP COLUMN {name}")
        conn.execute(store.schema_version.update().values(version=1))
    old.engine.dispose()
    db = store.Store(str(path))
    with db.engine.connect() as conn:
        assert conn.execute(sa.select(store.schema_version.c.version)).scalar() == store.SCHEMA_VERSION == 5
    (p,) = db.points(1)
    assert p["work"] == 100.0 and p["loadgen_user_s"] is None
    db.add_point(1, **_point(cores=2, loadgen_cpus="1", loadgen_shared=True, loadgen_user_s=0.3,
                             loadgen_system_s=0.4))
    assert [q["loadgen_system_s"] for q in db.points(1)] == [None, 0.4]
    db.add_point(1, **_point(cores=4, profile={"stacks": {"a;b": 3}}))
    assert "profile" not in db.points(1)[0]  # large: read only when asked for
    assert [q["profile"] for q in db.points(1, with_profiles=True)] == [None, None, {"stacks": {"a;b": 3}}]


def test_killed_runs_are_marked_once(tmp_path):
    db = store.Store(str(tmp_path / "r.sqlite"))
    run_id = db.create_run({}, {"hostname": "h"}, "mosbench run micro")
    assert db.mark_killed(run_id) and db.run(run_id)["status"] == "killed"
    assert not db.mark_killed(run_id)  # only a running run can be found killed
    done = db.create_run({}, {"hostname": "h"}, "mosbench run micro")
    db.finish_run(done, "complete")
    assert not db.mark_killed(done) and db.run(done)["status"] == "complete"
