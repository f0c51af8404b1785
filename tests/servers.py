"""Running a server workload for real from a test: one sweep, then a check that nothing was left."""

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from mosbench.machine import topology
from mosbench.machine.journal import Journal
from mosbench.run.plan import Plan, resolve_selections
from mosbench.run.sweep import Sweep
from mosbench.store import db as store
from mosbench.workloads import registry
from tests.conftest import needs_native, needs_root
from tests.test_run_system import _leftovers, _our_cgroups


def needs_server(binary: Path):
    """Marks a test that runs a real server: it needs the native clients, root (cgroups, the servers'
    users) and the server's binary."""
    def mark(test):
        for m in (needs_native, needs_root, pytest.mark.skipif(not binary.exists(), reason=f"{binary} not installed")):
            test = m(test)
        return test
    return mark


def run_points(tmp_path: Path, monkeypatch, workload: str, test: str = "", variants=(), cores=None,
               cache: Path | None = None, **params) -> list[dict]:
    """Sweeps workload/test (every test of it without one) at cores (default [1]) with short windows,
    keeping what the workload prepares in cache (default the test's own); returns the stored points, once
    nothing of the run is left (its processes, its cgroups)."""
    monkeypatch.setenv("MOSBENCH_STATE", str(tmp_path / "state"))
    scratch: list[Path] = []  # the run's own, so that another run on this machine is never taken for a leftover
    add_dir = Journal.add_dir
    monkeypatch.setattr(Journal, "add_dir", lambda self, path: scratch.append(path) or add_dir(self, path))
    topo = topology.read()
    w = registry.get(workload)
    p = {**{q.name: q.default for q in w.params}, **params}
    w.check_params(p)
    selections = resolve_selections([f"{workload}/{test}" if test else workload])
    plan = Plan(selections=selections, variants={workload: list(variants) or [v.name for v in w.variants]},
                cores=cores or [1], trials=1, warmup=0.3, duration=1.0, interval=0.5, params={workload: p})
    db = store.Store(str(tmp_path / "s.sqlite"))
    run_id = db.create_run(plan.to_json(), {"hostname": "h"}, "test")
    outcome = Sweep(db, plan, topo, cache=cache or tmp_path / "cache").run(run_id)
    assert outcome.status == "complete"
    # The run's guardian lives as long as its harness (this test process); nothing else may.
    assert scratch
    left = [p for marker in (tmp_path, *scratch) for p in _leftovers(str(marker))
            if "mosbench.machine.guardian" not in p]
    cgroups = [c for c in _our_cgroups() if c.name == f"mosbench-{os.getpid()}"]
    assert not left and not cgroups, (left, cgroups)
    return db.points(run_id)


@contextlib.contextmanager
def taken_port() -> Iterator[int]:
    """A loopback port another program holds (listening) for as long as the block runs."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]
