"""--resume checks a stored plan exactly as a new run's is checked, before the run is reopened: the
machine, its software and the plan's parameters may have changed since it was planned."""

from __future__ import annotations

from pathlib import Path

import pytest

from mosbench.errors import UserError
from mosbench.machine import topology
from mosbench.run import start
from mosbench.run.plan import Plan
from mosbench.store.db import Store
from tests.conftest import mosbench_here


def stored_run(path: Path, **changes) -> Store:
    plan = Plan(selections=[("micro", "getppid1")], variants={"micro": ["procs"]}, cores=[1], trials=1,
                params={"micro": {"fsdir": "/tmp"}})
    for k, v in changes.items():
        setattr(plan, k, v)
    db = Store(str(path))
    run_id = db.create_run(plan.to_json(), {"hostname": "h", "kernel": "k"}, "mosbench run micro/getppid1")
    db.finish_run(run_id, "incomplete")
    return db


@pytest.mark.parametrize(("changes", "said"), [
    ({"cores": [1, 4096]}, "4096"),  # a core count this machine does not have
    ({"params": {"micro": {"fsdir": "/nonexistent/dir"}}}, "fsdir /nonexistent/dir is not a directory"),
    ({"isolation": "no-such-isolation"}, "isolation"),
])
def test_resume_refuses_what_a_new_run_would_refuse_and_leaves_the_run_alone(tmp_path, changes, said):
    path = tmp_path / "s.sqlite"
    db = stored_run(path, **changes)
    r = mosbench_here("run", "--resume", "latest", "--store", str(path))
    assert r.returncode == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert db.run("latest")["status"] == "incomplete"  # not reopened


def test_new_and_resumed_plans_go_through_the_same_checks(tmp_path, monkeypatch):
    checked: list[Plan] = []
    monkeypatch.setattr(start, "check_machine", lambda p, topo: checked.append(p))
    topo = topology.read()
    new = start.new_plan(start.Request(["micro/getppid1"], "1", ["procs"], 1, 0.0, 0.2, 0.0, "pack", "cgroup",
                                       [], None, 0.02, 0), topo)
    db = stored_run(tmp_path / "s.sqlite")
    _, resumed = start.stored_plan(db, "latest", topo)
    assert checked == [new, resumed]


def test_a_complete_run_is_not_resumed(tmp_path):
    db = stored_run(tmp_path / "s.sqlite")
    db.finish_run(1, "complete")
    with pytest.raises(UserError, match="already complete"):
        start.stored_plan(db, "latest", topology.read())


def test_reopening_skips_the_trials_the_run_has(tmp_path):
    """The store's rows come back as the plan's own keys, so the sweep measures exactly the rest."""
    from tests.test_store import _point

    db = stored_run(tmp_path / "s.sqlite", cores=[1, 2])
    db.add_point(1, **_point(cores=2, status="failed", reason="boom", throughput=None, work=None))
    previous, the_plan = db.run("latest"), Plan.from_json(db.run("latest")["plan"])
    run_id, skip = start.reopen(db, previous)
    assert run_id == 1 and db.run(1)["status"] == "running"
    assert [(k.cores, k.trial) for k in the_plan.points() if k not in skip] == [(1, 1)]
