"""The scale workload: per-test variants, and a real sweep through the harness into the report."""

import sqlite3

import pytest

from mosbench.errors import UserError
from mosbench.run import plan
from mosbench.store.db import Store
from tests.conftest import mosbench, needs_native

pytestmark = needs_native


def test_each_structure_has_its_forms():
    chosen = plan.resolve_selections(["scale"])
    tests = {t for _, t in chosen}
    assert {"counter", "lock", "dentry", "mount", "openlist", "freelist", "falseshare"} <= tests
    p = plan.Plan(selections=chosen, variants=plan.resolve_variants(chosen, None), cores=[1])
    forms = {}
    for k in p.points():
        forms.setdefault(k.test, set()).add(k.variant)
    assert forms["counter"] == {"stock", "scalable", "percpu"}
    assert forms["lock"] == {"stock", "scalable", "mutex", "ck-ticket", "ck-mcs"}
    assert forms["mount"] == {"stock", "scalable"}


def test_a_variant_a_test_lacks_is_refused():
    chosen = plan.resolve_selections(["scale/mount"])
    with pytest.raises(UserError, match="scale/mount has none of the variants percpu"):
        plan.resolve_variants(chosen, ["percpu"])


def test_sweep_report_and_model(tmp_path):
    db = tmp_path / "s.sqlite"
    r = mosbench("run", "scale/counter", "scale/lock", "--variant", "stock,scalable", "--cores", "1..max",
                 "--trials", "1", "--warmup", "0.3", "--duration", "0.7", "-p", "par_ns=2000", "--store", str(db))
    assert r.returncode == 0, r.stderr
    rows = sqlite3.connect(db).execute("select test, variant, status, throughput from points").fetchall()
    assert {(t, v) for t, v, *_ in rows} == {("counter", "stock"), ("counter", "scalable"), ("lock", "stock"),
                                             ("lock", "scalable")}
    assert all(s == "ok" and tp > 0 for *_, s, tp in rows)
    out = tmp_path / "r.html"
    rep = mosbench("report", "latest", "-o", str(out), "--store", str(db))
    assert rep.returncode == 0, rep.stderr
    text = out.read_text()  # the lock model with Amdahl and the USL, in the one scaling table
    assert "ticket lock model" in text and "scalable lock model" in text and "Scaling models" in text
    model = mosbench("model", "lock", "--cores", "64", "--store", str(db))
    assert model.returncode == 0 and "ticket" in model.stdout and "scalable" in model.stdout, model.stderr


def test_model_without_measurements_and_its_errors(tmp_path):
    r = mosbench("model", "lock", "--s", "200", "--c", "30", "--cores", "48", "-o", str(tmp_path / "m.png"))
    assert r.returncode == 0 and "at 26" in r.stdout, r.stdout + r.stderr
    assert (tmp_path / "m.png").stat().st_size > 1000
    half = mosbench("model", "lock", "--s", "200")
    assert half.returncode == 2 and "--s and --c together" in half.stderr
    Store(str(tmp_path / "none.sqlite"))  # a store without runs (model only reads: it makes none)
    empty = mosbench("model", "lock", "--store", str(tmp_path / "none.sqlite"))
    assert empty.returncode == 2 and "no run" in empty.stderr


@pytest.mark.parametrize(("max_cores", "par_ns"), [(1, 200), (2, 200), (3, 200), (4, 200), (16, 1400),
                                                   (64, 6200), (256, 25400)])
def test_the_lock_saturates_near_half_the_runs_cores(max_cores, par_ns):
    from mosbench.workloads.scale import lock_par_ns

    assert lock_par_ns(200, max_cores) == par_ns
    # n cores keep the lock busy once n · cs_ns covers one core's loop (par_ns + cs_ns).
    assert (par_ns + 200) / 200 == max(2, max_cores // 2)
    assert lock_par_ns(0, max_cores) == 1  # never 0: the model divides by it


def test_the_plan_stores_the_contention_it_chose_and_keeps_a_given_one(load_topology):
    from mosbench.run import start
    from mosbench.workloads.scale import lock_par_ns

    big = load_topology("4x64-smt2")

    def planned(*params: str):
        req = start.Request(["scale/lock"], "1..max", None, 1, 0.1, 0.1, 1.0, "pack", "affinity", list(params),
                            None, 0.02, 0)
        return start.new_plan(req, big)

    chosen = planned()
    assert max(chosen.cores) >= 128
    assert chosen.params["scale"]["par_ns"] == lock_par_ns(200, max(chosen.cores)) > 9800
    assert planned("par_ns=9800").params["scale"]["par_ns"] == 9800
    assert planned("cs_ns=100").params["scale"]["par_ns"] == lock_par_ns(100, max(chosen.cores))
