"""What the command line hands to the layers below it (issue 46): the export's formats, the CI gates' one
format, a guest's time limit and success rule, a run's estimate, a bisection's cost; each checked where
it now lives, without a command."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from mosbench.analysis.cells import PointKey
from mosbench.analysis.significance import Difference
from mosbench.errors import UserError
from mosbench.guest import host
from mosbench.report import gate, terminal
from mosbench.store.db import Store
from mosbench.store.export import NOT_IN_CSV, Format, export
from mosbench.testing.history_stores import fill


def test_the_csv_holds_a_row_a_point_without_its_nested_columns_and_the_json_everything(tmp_path: Path):
    db = Store(str(tmp_path / "s.sqlite"))
    ids = fill(db, 2, [], seed=1, tests=1, trials=2)
    rows = list(csv.DictReader(io.StringIO(export(db, str(ids[1]), Format.CSV))))
    assert len(rows) == len(db.points(ids[1])) == 4 * 2
    assert not set(NOT_IN_CSV) & set(rows[0]) and rows[0]["run_id"] == str(ids[1])
    whole = json.loads(export(db, "latest", Format.JSON))
    assert whole["run"]["id"] == ids[1] and len(whole["points"]) == 8
    assert "samples" in whole["points"][0] and whole["run"]["started_at"].startswith("2026-01-02")


def test_both_gates_print_one_format_the_p_without_an_exponent():
    point = PointKey("micro", "t1", "procs", 8)
    regression = gate.Breach("B", point, Difference(0.769, 0.70, 0.84, 0.0123), 0.0123)
    change = gate.Breach("at the newest run #9", point, Difference(0.6, 0.55, 0.65, 1e-7), 3e-6, adjusted=True)
    assert gate.lines(gate.REGRESSION, [regression], 10) == [
        "REGRESSION B: micro/t1 procs at 8 cores: 0.769× the baseline [0.700, 0.840], p 0.012",
        "1 point significantly slower than the baseline by more than 10%"]
    assert gate.lines(gate.CHANGE, [change, change], 30) == [
        "CHANGE at the newest run #9: micro/t1 procs at 8 cores: 0.600× the level before [0.550, 0.650], "
        "p adj. <0.0001"] * 2 + ["2 points significantly slower from the newest run on by more than 30%"]
    assert gate.lines(gate.CHANGE, [], 50) == ["no point is significantly slower from the newest run on by more "
                                               "than 50%"]


def test_a_guest_passes_where_every_step_did_and_a_suite_reached_its_checks():
    result = host.GuestResult(0, 1.0, Path("/nonexistent"), False)
    ok, failed = {"name": "sweep", "returncode": 0, "seconds": 1}, {"name": "sweep", "returncode": 1, "seconds": 1}
    checks = {"name": "checks", "returncode": 0, "seconds": 1}
    assert host.SuiteRun(result, [ok, checks], []).passed("ci")
    assert not host.SuiteRun(result, [ok], []).passed("ci")  # ended before the checks
    assert not host.SuiteRun(result, [failed, checks], []).passed("ci")
    assert host.SuiteRun(result, [ok], []).passed(None)  # a selection has no checks step
    assert not host.SuiteRun(result, [], []).passed("full")


def test_a_guest_s_time_limit_and_the_options_it_sets_itself():
    assert host.timeout_s("full", None) == 240 * 60
    assert host.timeout_s("ci", None) == host.timeout_s(None, None) == 20 * 60
    assert host.timeout_s("full", 5) == 5 * 60
    assert host.host_sized_shape("2x2x1").vcpus == 4
    assert host.host_sized_shape(None).sockets == 1
    host.refuse_owned_options(("micro/getppid1", "--cores", "1,2"))
    with pytest.raises(UserError, match="--label is set by mosbench"):
        host.refuse_owned_options(("micro/getppid1", "--label=x"))


def test_a_bisection_s_cost_names_the_upper_median_boot():
    assert terminal.bisection_cost([60.0, 120.0], [60.0, 180.0, 120.0, 240.0]) == \
        "2 builds (1.0, 2.0 min), 4 boots (median 3.0 min each)"


def test_a_run_s_estimate_covers_what_it_has_left_and_with_auto_trials_the_most_it_may_take():
    from mosbench.run.plan import Plan
    from mosbench.run.start import opened

    fixed = Plan(selections=[("micro", "getppid1")], variants={"micro": ["procs"]}, cores=[1, 2], trials=2)
    done = set(fixed.points()[:1])
    begun = opened(fixed, 7, done)
    assert begun.run_id == 7 and len(begun.left) == 3 and begun.most_minutes is None
    assert begun.minutes == pytest.approx(fixed.seconds(begun.left) / 60)
    auto = Plan(selections=[("micro", "getppid1")], variants={"micro": ["procs"]}, cores=[1, 2], trials=3,
                trials_max=9)
    assert opened(auto, 1, set()).most_minutes == pytest.approx(3 * opened(auto, 1, set()).minutes)


def test_a_new_run_records_the_kernel_commit_it_was_given_and_none_otherwise(tmp_path: Path):
    from mosbench.machine import topology
    from mosbench.run import start
    from mosbench.run.plan import Plan

    db = Store(str(tmp_path / "s.sqlite"))
    plan = Plan(selections=[("micro", "getppid1")], variants={"micro": ["procs"]}, cores=[1], trials=1)
    topo = topology.read()
    given = start.create(db, plan, topo, "mosbench run micro/getppid1", None, "abcdef1")
    assert db.run(str(given))["environment"]["kernel_commit"] == "abcdef1"
    assert "kernel_commit" not in db.run(str(start.create(db, plan, topo, "mosbench run", None)))["environment"]
