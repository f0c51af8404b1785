"""Why a history's change and a bisection's first bad commit happened: the profiled runs nearest each side
of a change (or the commit and its parent) set against each other, or the command that would profile them."""

import json
import random

import pytest

from mosbench.analysis import explain, explain_history
from mosbench.analysis import history as hist
from mosbench.analysis.cells import counted_by_point
from mosbench.analysis.decide import decide_all
from mosbench.guest import ab
from mosbench.guest import bisect as bisecting
from mosbench.guest.kernels import Kernel
from mosbench.report import whatchanged
from mosbench.run.plan import Plan
from mosbench.store import db as store
from tests.conftest import empty_commits
from tests.conftest import mosbench_here as mosbench
from tests.test_explain import KEY, LOCK, _rows

RUNS, AT = 10, 5  # runs 0-4 at the old level, 5-9 at the new one: the lock planted, half the throughput
PLAN = Plan([("micro", "getppid1")], {"micro": ["procs"]}, [2], trials=2, duration=3.0).to_json()
COMMAND = ("mosbench run micro/getppid1 --profile micro/getppid1 --cores 2 --variant procs --trials 3 "
           "--duration 3 --warmup 2 --interval 1 --placement pack --isolation cgroup")


def _run(db: store.Store, planted: bool, profiled: bool, kernel: str, rng: random.Random, **env) -> int:
    """One run of KEY (test_explain's three trials: the lock's 1 µs an op where planted), each trial's
    throughput within ±1% of its level."""
    run_id = db.create_run(PLAN, {"hostname": "h", "kernel": kernel, **env}, "mosbench run micro/getppid1")
    for r in _rows(planted, profiled):
        db.add_point(run_id, **{**r, "throughput": r["throughput"] * (1 + rng.uniform(-0.01, 0.01))})
    db.finish_run(run_id, "complete")
    return run_id


def _history(tmp_path, profiled: set[int], kernels: tuple[str, str] = ("6.1", "6.1")) -> tuple[store.Store, list[int]]:
    db = store.Store(str(tmp_path / "h.sqlite"))
    rng = random.Random(1)
    ids = [_run(db, i >= AT, i in profiled, kernels[i >= AT], rng) for i in range(RUNS)]
    return db, ids


def _built(db: store.Store) -> hist.History:
    return hist.build(db.list_runs(), db.history_points, [], None, hist.Order.TIME, None)


def test_the_profiled_runs_nearest_a_change_name_the_function_that_grew(tmp_path):
    # Profiled: two runs of the old level (the nearer, 3, has the three trials wanted) and one of the new,
    # two runs past the boundary.
    db, ids = _history(tmp_path, {1, 3, 7})
    h = _built(db)
    assert [(s.key.test, h.runs[s.after].id) for s in h.shifts] == [("getppid1", ids[AT])]
    [x] = explain_history.explained(db, h)
    assert x.point == KEY and x.sides == ((ids[3],), (ids[7],))
    e = x.found
    assert isinstance(e, explain.Explanation) and e.labels == (f"#{ids[3]}", f"#{ids[7]}")
    top = e.own[0]
    assert top.function == LOCK and top.own.change == pytest.approx(1.0) and top.callers[0].name == "dput_[k]"
    assert e.share == pytest.approx(1.0)
    assert whatchanged.heading(x).startswith(f"micro/getppid1 procs at 2 cores: slower from #{ids[AT - 1]} to "
                                             f"#{ids[AT]}, 0.50")


def test_a_side_is_pooled_outward_until_it_has_the_replicates():
    trials = {11: 1, 12: 0, 13: 1, 14: 2}
    assert explain_history.nearest([12, 11, 13, 14], trials) == [11, 13, 14]
    assert explain_history.nearest([12, 11], trials) == [11]  # all there are
    assert explain_history.nearest([11, 14, 13], trials) == [11, 14]  # three: no further
    assert explain_history.nearest([12], trials) == []


def test_history_prints_the_explanation_and_json_carries_it(tmp_path):
    _, ids = _history(tmp_path, {3, 4, 5})
    r = mosbench("history", "--store", str(tmp_path / "h.sqlite"), env={"COLUMNS": "160"})
    assert r.returncode == 0, r.stderr
    assert f"Why: micro/getppid1 procs at 2 cores: slower from #{ids[4]} to #{ids[5]}" in r.stdout
    assert f"A = #{ids[4]} → B = #{ids[5]}" in r.stdout and LOCK in r.stdout and "← dput_[k]" in r.stdout
    assert "account for 100% of the measured change" in r.stdout
    r = mosbench("history", "--json", "--store", str(tmp_path / "h.sqlite"))
    assert r.returncode == 0, r.stderr
    [change] = json.loads(r.stdout)["changes"]
    [found] = change["explanations"]
    assert found["cores"] == 2 and found["a_runs"] == [ids[4]] and found["b_runs"] == [ids[5]]
    lock = next(f for f in found["functions"] if f["function"] == LOCK)
    assert lock["own"]["named"] and lock["own"]["change"] == pytest.approx(1.0)


def test_a_change_without_profiles_prints_the_command_that_would_get_them(tmp_path):
    db, ids = _history(tmp_path, set())
    [x] = explain_history.explained(db, _built(db))
    assert isinstance(x.found, explain.Unprofiled) and x.sides == ((), ())
    assert x.found.missing == (f"#{ids[4]}", f"#{ids[5]}") and explain.profile_commands([x.found]) == [COMMAND]
    r = mosbench("history", "--store", str(tmp_path / "h.sqlite"))
    assert r.returncode == 0, r.stderr
    assert "1 significant change not explained: a side was not profiled" in r.stdout
    folded = r.stdout[r.stdout.index("  mosbench run"):].rstrip("\n")
    assert " ".join(folded.replace(" \\\n", " ").split()) == COMMAND
    r = mosbench("history", "--json", "--store", str(tmp_path / "h.sqlite"))
    [found] = json.loads(r.stdout)["changes"][0]["explanations"]
    assert found["unprofiled"] == [f"#{ids[4]}", f"#{ids[5]}"] and found["commands"] == [COMMAND]


def test_a_change_between_two_kernels_asks_ab_to_profile_both(tmp_path):
    db, ids = _history(tmp_path, {2}, kernels=("6.1.0-18-amd64", "6.8.0-1-amd64"))
    [x] = explain_history.explained(db, _built(db))
    assert isinstance(x.found, explain.Unprofiled) and x.found.missing == (f"#{ids[5]}",)
    assert explain.profile_commands([x.found]) == [COMMAND.replace(
        "mosbench run", "mosbench ab --kernel 6.1.0-18-amd64 --kernel 6.8.0-1-amd64")]
    # A guest's run is named by the image it booted: its release need not be installed here.
    guest = hist.RunInfo(1, None, None, "6.9.0-rc1+", None, {"virtual_machine": {"kernel_image": "/k/bzImage"}})
    assert explain_history.kernel_spec(guest) == "/k/bzImage"


def _bisected(tmp_path, profiled: bool) -> tuple[store.Store, bisecting.Builder, bisecting.Outcome, list[str]]:
    """A bisection over good → c1 → c2 → bad in a small git tree: c2 is the first bad commit, its parent c1
    good; each commit booted twice (a run each), as bisect.run keeps them."""
    commits = empty_commits(tmp_path / "work" / "src", ["good", "c1", "c2", "bad"])
    db = store.Store(str(tmp_path / "b.sqlite"))
    rng = random.Random(2)
    runs = {c: [_run(db, i >= 2, profiled, "6.9", rng, bisect={"commit": c}) for _ in range(2)]
            for i, c in enumerate(commits)}
    samples = [{KEY: [v for r in runs[c] for v in counted_by_point(db.points(r))[KEY]]}
               for c in (commits[0], commits[3])]
    ends = ab.Outcome([ab.Side("good", Kernel("g", tmp_path, "6.9", "tree", None, commits[0]), runs[commits[0]]),
                       ab.Side("bad", Kernel("b", tmp_path, "6.9", "tree", None, commits[3]), runs[commits[3]])],
                      [], decide_all(*samples, 0.02), 4, [])
    steps = [bisecting.Step(commits[i], name, verdict, "", runs[commits[i]], [], [])
             for i, name, verdict in ((1, "c1", bisecting.Verdict.GOOD), (2, "c2", bisecting.Verdict.BAD))]
    outcome = bisecting.Outcome(ends, [KEY], steps, commits[2], "")
    return db, bisecting.Builder(tmp_path, tmp_path / "work"), outcome, commits


def test_bisect_explains_the_first_bad_commit_against_its_parent(tmp_path):
    db, builder, outcome, commits = _bisected(tmp_path, profiled=True)
    [x] = bisecting.explained(db, outcome, builder)
    assert x.change.point == KEY and x.change.ratio == pytest.approx(0.5, rel=0.02) and x.change.significant
    e = x.found
    assert isinstance(e, explain.Explanation) and e.labels == (commits[1][:12], commits[2][:12])
    assert e.trials == (6, 6) and e.own[0].function == LOCK and e.own[0].callers[0].name == "dput_[k]"
    assert "(+1 of +1 µs); +0 µs (0%) not attributed" in whatchanged.lines(e)[0]  # not +0.000000000000000444
    assert whatchanged.heading(x).startswith(f"micro/getppid1 procs at 2 cores: slower, {commits[2][:12]}/"
                                             f"{commits[1][:12]} 0.5")


def test_bisect_without_profiles_prints_ab_between_the_two_kernels(tmp_path):
    db, builder, outcome, commits = _bisected(tmp_path, profiled=False)
    [x] = bisecting.explained(db, outcome, builder)
    images = [str(builder.image_dir(c) / "bzImage") for c in commits[1:3]]
    assert explain.profile_commands([x.found]) == [COMMAND.replace(
        "mosbench run", f"mosbench ab --kernel {images[0]} --kernel {images[1]}")]
    # No first bad commit, or a parent never booted: nothing to set it against.
    assert bisecting.explained(db, bisecting.Outcome(outcome.ends, [KEY], outcome.steps, None, ""), builder) == []
    assert bisecting.explained(db, bisecting.Outcome(outcome.ends, [KEY], outcome.steps[1:], commits[2], ""),
                               builder) == []
