"""The lab's alerts (analysis/alerts.py): every change `history` confirms on every machine, grouped into one
summary per pair of sides, with the machines that ran both sides and did not move; kept per machine until its
newest run changes."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path

import pytest

from mosbench.analysis import alerts
from mosbench.analysis import history as hist
from mosbench.store.db import Store
from mosbench.testing.history_stores import LAB_COMMITS, environment, fill, fill_lab
from tests.conftest import mosbench_here


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> tuple[Path, dict[str, list[int]]]:
    path = tmp_path_factory.mktemp("lab") / "lab.sqlite"
    ids = fill_lab(Store(str(path)))
    return path, ids


@pytest.fixture(scope="module")
def summaries(lab) -> dict[str, alerts.Summary]:
    return {s.key: s for s in alerts.AlertIndex(Store(str(lab[0]))).summaries()}


@pytest.mark.parametrize(("release", "base"), [
    ("6.18.3-amd64", "6.18.3"), ("6.18.3-arm64", "6.18.3"),
    ("6.1.0-26-amd64", "6.1.0-26"), ("6.1.0-26-rt-amd64", "6.1.0-26"), ("6.1.0-26-cloud-arm64", "6.1.0-26"),
    ("6.8.0-45-generic", "6.8.0-45"), ("6.8.0-1012-aws", "6.8.0-1012"), ("6.12.9+bpo-amd64", "6.12.9+bpo"),
    ("6.10.0-rc7", "6.10.0-rc7"), ("6.10.0-rc7-amd64", "6.10.0-rc7"),
    ("6.6.0-rc1-00042-gdeadbeef1234", "6.6.0-rc1-00042-gdeadbeef1234"),
    ("6.11.4-301.fc41.x86_64", "6.11.4-301.fc41"), ("6.11.4-301.fc41.aarch64", "6.11.4-301.fc41"),
    ("6.1.0", "6.1.0"), ("?", "?"),
])
def test_a_release_loses_its_flavour_and_keeps_its_version(release, base):
    assert alerts.release_base(release) == base


def test_a_change_that_hurt_two_machines_is_one_summary_and_names_the_one_it_did_not(summaries):
    """big4s (amd64) and arm (arm64) both fell when 6.1.0-22 came: one summary, their flavours merged; small2s
    ran both releases and did not move."""
    s = summaries["6.1.0-21..6.1.0-22"]
    assert (s.before, s.after, s.by) == ("6.1.0-21", "6.1.0-22", alerts.SIDE_BY_RELEASE)
    assert s.machines() == ("arm", "big4s") and s.unmoved == ("small2s",)
    assert s.direction() == "regression" and s.bisect_command is None
    big = next(a for a in s.alerts if a.hostname == "big4s")
    arm = next(a for a in s.alerts if a.hostname == "arm")
    assert (big.workload, big.test, big.variant, big.cores) == ("micro", "t1", "procs", 8)
    assert big.kind == "scalability" and arm.kind == "every core"  # the 4-socket lost scaling, arm every core
    assert 0.6 < big.low < big.ratio < big.high < 0.8 and big.direction == "regression"
    assert [c[0] for c in big.changes] == [4, 8] and big.shape == "step"
    assert big.kernels == ("6.1.0-21-amd64", "6.1.0-22-amd64") and arm.kernels[1] == "6.1.0-22-arm64"
    # Nothing was profiled: the exact command that would profile both kernels is what history prints.
    assert big.profile_commands == ("mosbench ab --kernel 6.1.0-21-amd64 --kernel 6.1.0-22-amd64 micro/t1 "
                                    "--profile micro/t1 --cores 4,8 --variant procs --trials 3",)
    assert big.explanation[-1] == big.profile_commands[0]


def test_commit_sides_name_the_summary_and_give_the_bisect_command(summaries):
    good, bad = LAB_COMMITS
    s = summaries[f"{good[:12]}..{bad[:12]}"]
    assert s.by == alerts.SIDE_BY_COMMIT and s.machines() == ("ci",) and s.unmoved == ("ci2",)
    assert s.direction() == "improvement" and s.alerts[0].ratio > 1.2
    assert s.bisect_host == "ci"
    assert s.bisect_command == (f"mosbench bisect --tree TREE --good {good} --bad {bad} micro/t0 "
                                "--cores 1,2,4,8")


def test_an_old_change_is_listed_with_its_runs_as_its_sides(lab, summaries):
    """old's change came sixty days before the rest, on one kernel: its sides are its two runs."""
    ids = lab[1]["old"]
    s = summaries[f"#{ids[3]}..#{ids[4]}"]
    assert s.by == alerts.SIDE_BY_RUN and s.machines() == ("old",) and s.unmoved == ()
    assert s.alerts[0].test == "t2" and s.alerts[0].kind == "every core"
    assert list(summaries)[-1] == s.key  # the oldest last
    assert len(summaries) == 3  # and nothing else moved anywhere


def test_every_alert_is_what_history_reports_for_its_machine(lab, summaries):
    """Per machine, the alerts are `mosbench history --host H --json`'s changes, one for one, with the same
    runs, kind, shape, sizes and commands."""
    path, ids = lab
    found = [a for s in summaries.values() for a in s.alerts]
    for host in ids:
        done = mosbench_here("history", "--host", host, "--json", "--store", str(path))
        assert done.returncode == 0, done.stderr
        changes = json.loads(done.stdout)["changes"]
        mine = sorted((a for a in found if a.hostname == host), key=lambda a: (a.after_run, a.test))
        assert len(mine) == len(changes), host
        for a, c in zip(mine, sorted(changes, key=lambda c: (c["after_run"], c["test"])), strict=True):
            assert (a.workload, a.test, a.variant, a.before_run, a.after_run, a.kind, a.shape) == (
                c["workload"], c["test"], c["variant"], c["before_run"], c["after_run"], c["kind"], c["shape"])
            assert [(cores, ratio) for cores, ratio, _, _ in a.changes] == [
                (f["cores"], f["ratio"]) for f in c["found_at_cores"]]
            assert {cmd for x in a.as_json()["explanations"] for cmd in x["commands"]} == {
                cmd for x in c["explanations"] for cmd in x["commands"]}


def test_a_profiled_change_is_explained_by_the_profiles_nearest_its_sides(tmp_path):
    """test_explain_history's store: a lock planted at run 5, runs 1, 3 and 7 profiled."""
    from tests.test_explain import LOCK
    from tests.test_explain_history import _history

    db, ids = _history(tmp_path, {1, 3, 7})
    (s,) = alerts.AlertIndex(db).summaries()
    assert s.key == f"#{ids[4]}..#{ids[5]}" and s.by == alerts.SIDE_BY_RUN  # one kernel: the runs name the sides
    (a,) = s.alerts
    assert a.profile_commands == () and [x.sides for x in a.explained] == [((ids[3],), (ids[7],))]
    assert a.explanation[0].startswith(f"micro/getppid1 procs at 2 cores: profiles of #{ids[3]} against #{ids[7]}")
    assert a.explanation[1].strip().startswith(f"{LOCK} (kernel lock) +1 µs per op")
    assert "account for 100%" in a.explanation[2]


def test_a_summary_is_json_with_what_the_api_names(summaries):
    s = summaries["6.1.0-21..6.1.0-22"]
    data = json.loads(json.dumps(s.as_json()))
    assert data["key"] == s.key and data["unmoved"] == ["small2s"] and data["direction"] == "regression"
    for a in data["alerts"]:
        assert {"hostname", "workload", "test", "variant", "cores", "ratio", "low", "high", "kind"} <= set(a)
    assert dt.datetime.fromisoformat(data["first_seen"]) == s.first_seen


@pytest.fixture
def counted(monkeypatch) -> list[str]:
    """The hosts history.build was asked for, in order."""
    calls: list[str] = []
    build = hist.build

    def counting(rows, point_rows, selections, host, order, tree):
        calls.append(host)
        return build(rows, point_rows, selections, host, order, tree)

    monkeypatch.setattr(hist, "build", counting)
    return calls


def test_histories_are_kept_until_a_machine_gets_a_new_run(tmp_path, counted):
    db = Store(str(tmp_path / "s.sqlite"))
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    fill(db, 6, [], seed=1, host="a", start=start)
    fill(db, 6, [], seed=2, host="b", start=start + dt.timedelta(hours=1))
    index = alerts.AlertIndex(db)
    index.summaries()
    assert sorted(counted) == ["a", "b"]
    index.summaries()
    assert set(index.machine_histories()) == {"a", "b"}
    assert sorted(counted) == ["a", "b"]  # no run added: nothing computed again
    fill(db, 1, [], seed=3, host="a", start=start + dt.timedelta(days=30))
    index.summaries()
    assert counted[2:] == ["a"] and len(index.machine_histories()["a"].runs) == 7
    run_id = db.create_run({}, environment(0, [], host="b"), "mosbench run micro")  # b's newest, running
    index.summaries()
    db.finish_run(run_id, "complete")  # the same newest run, now complete
    index.summaries()
    index.summaries()
    assert counted[3:] == ["b", "b"]


def test_requests_at_once_compute_each_machine_once(lab, counted):
    index = alerts.AlertIndex(Store(str(lab[0])))
    start = threading.Barrier(4)
    got: list[list[str]] = []

    def ask() -> None:
        start.wait()
        got.append([s.key for s in index.summaries()])

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(counted) == sorted(lab[1]) and len(got) == 4 and all(g == got[0] and len(g) == 3 for g in got)


def test_history_reads_the_runs_without_counting_their_points(lab, monkeypatch):
    """The index hands history the runs as list_runs gives them, less each run's count of points and failed
    points (a count over the points table per run: a third of a lab's first request after a new run)."""
    db = Store(str(lab[0]))
    given: list[list[dict]] = []
    build = hist.build

    def spying(rows, *args):
        given.append(rows)
        return build(rows, *args)

    monkeypatch.setattr(hist, "build", spying)
    alerts.AlertIndex(db).summaries()
    counted = db.list_runs()
    assert all("points" in r and "failed" in r for r in counted)
    assert len(given) == len(lab[1])
    assert all(rows == [{k: v for k, v in r.items() if k not in ("points", "failed")} for r in counted]
               for rows in given)
