"""Why a point changed between two runs: two recorded profiles set against each other, trial by trial."""

import json
import re

import pytest

from mosbench.analysis import compare, explain
from mosbench.analysis.cells import PointKey, build_series
from mosbench.analysis.profiles import Profile
from mosbench.report import whatchanged
from mosbench.run.plan import Plan
from mosbench.store import db as store
from tests.conftest import mosbench_here as mosbench
from tests.test_store import _point

KEY = PointKey("micro", "getppid1", "procs", 2)
LOCK = "native_queued_spin_lock_slowpath_[k]"
# Own work both sides share, jittered trial by trial; a noisy function whose small move is inside its spread.
SHARED = (1000, 1010, 990)
NOISY_A, NOISY_B = (100, 300, 200), (150, 350, 250)


def _stacks(trial: int, planted: bool) -> dict[str, int]:
    stacks = {"m;main;getppid;sys_getppid_[k]": SHARED[trial],
              "m;main;noisy": (NOISY_B if planted else NOISY_A)[trial],
              "swapper;do_idle_[k];default_idle_[k]": 500}
    if planted:  # 003's chain: a spin lock taken from dput (0.6 µs an op) and from dget (0.4)
        stacks["m;main;close;dput_[k];_raw_spin_lock_[k];" + LOCK] = 590 + 10 * trial
        stacks["m;main;open;dget_[k];_raw_spin_lock_[k];" + LOCK] = 400
    return stacks


def _rows(planted: bool, profiled: bool = True, trials: int = 3) -> list[dict]:
    """A point's trials: 1e6 ops a second over 2 cores, 1 ms samples, so 1000 samples are 1 µs an op;
    planted, the system time grows by the lock's 1 µs an op."""
    out = []
    for t in range(trials):
        stacks = _stacks(t, planted)
        prof = {"stacks": stacks, "period_ns": 1_000_000, "window_s": 1.0, "samples": sum(stacks.values())}
        out.append(_point(cores=2, cpus="0-1", trial=t + 1, work=1e6, throughput=(0.5e6 if planted else 1e6),
                          user_s=1.2 + 0.01 * t, system_s=(2.0 if planted else 1.0) + 0.01 * t, idle_s=0.5,
                          profile=prof if profiled else None))
    return out


def test_a_planted_lock_is_found_sized_and_its_callers_named():
    e = explain.explain(KEY, _rows(False), _rows(True), ("before", "after"))
    assert e is not None and e.trials == (3, 3) and e.replicated
    top = e.own[0]
    assert top.function == LOCK and top.kind == "kernel lock"
    assert top.own.a == 0 and top.own.change == pytest.approx(1.0) and top.own.low < 1.0 < top.own.high
    # The nearest callers outside the lock (not _raw_spin_lock): dput's share, then dget's.
    assert [(c.name, round(c.change, 2)) for c in top.callers] == [("dput_[k]", 0.6), ("dget_[k]", 0.4)]
    assert all(c.named for c in top.callers)
    # Inclusive time names the path down to the lock; nothing in own time but the lock moved.
    assert {f.function for f in e.inclusive} >= {"dput_[k]", "dget_[k]", "_raw_spin_lock_[k]", "close", "open"}
    assert [f.function for f in e.own] == [LOCK]
    # The measured change (system +1 µs an op) is what the lock accounts for; the rest is stated apart.
    assert e.cpu.change == pytest.approx(1.0) and e.cpu.named
    assert e.attributed == pytest.approx(1.0) and e.share == pytest.approx(1.0)
    assert [t.name for t in e.times] == ["user", "system", "idle"] and e.times[1].change == pytest.approx(1.0)


def test_a_move_inside_the_trials_spread_is_not_named():
    e = explain.explain(KEY, _rows(False), _rows(True), ("before", "after"))
    noisy = explain.delta("noisy", [n / 1000 for n in NOISY_A], [n / 1000 for n in NOISY_B])
    assert noisy.change == pytest.approx(0.05) and noisy.low < 0 < noisy.high and not noisy.named
    assert "noisy" not in {f.function for f in e.functions}
    # The same profiles on both sides: nothing moved, nothing is named, no share is claimed.
    same = explain.explain(KEY, _rows(False), _rows(False))
    assert same.functions == () and same.share is None


def test_one_trial_a_side_names_nothing_and_says_so():
    e = explain.explain(KEY, _rows(False, trials=1), _rows(True, trials=1))
    assert not e.replicated and e.functions == () and e.cpu.low is None
    assert "no spread to judge a change by" in whatchanged.lines(e)[0]


def _user_rows(updates: int) -> list[dict]:
    """A user-space point (scale/tree, 2 cores) as perf records a program built without frame pointers:
    most chains cut to the innermost frame, or through an address perf could not resolve; `updates` per
    1000 lookups cost malloc 1 µs each (0.001 µs a lookup per update), the lookup's own work unchanged."""
    out = []
    for t in range(3):
        stacks = {"tree;bonsai_find": SHARED[t], "tree;run;fault;bonsai_find": 100,
                  "tree;[unknown];_int_malloc": updates * (1 + t) // 2 + updates}
        prof = {"stacks": stacks, "period_ns": 1_000_000, "window_s": 1.0, "samples": sum(stacks.values())}
        out.append(_point(workload="scale", test="tree", variant="spinlock", cores=2, cpus="0-1", trial=t + 1,
                          work=1e6, throughput=1e6 / (1 + updates / 1000), user_s=1.1 + updates / 1000 + 0.01 * t,
                          system_s=0.01, idle_s=0.0, profile=prof))
    return out


def test_a_user_space_change_is_named_in_user_frames_and_a_cut_chain_is_said():
    key = PointKey("scale", "tree", "spinlock", 2)
    e = explain.explain(key, _user_rows(10), _user_rows(100), ("1%", "10%"))
    [malloc] = e.own
    assert malloc.function == "_int_malloc" and malloc.kind == "user" and malloc.own.change > 0
    # An address perf could not resolve is no function, and no caller: none is recorded.
    assert "[unknown]" not in {f.function for f in e.functions}
    assert [c.name for c in malloc.callers] == [explain.NO_CALLER]
    # Cut: bonsai_find alone (3000 samples over the trials) and malloc's (15 + 20 + 25); whole: run's 300.
    assert explain.cut_short([Profile.of_points(_user_rows(10))]) == pytest.approx(3060 / 3360)
    assert any(line.startswith("user call chains cut short in 91% of 1%'s and 92% of 10%'s user samples")
               for line in e.absent)
    # A program whose chains reach its thread's start says nothing of them.
    whole = [{**r, "profile": {**r["profile"], "stacks": {"tree;start_thread;run;bonsai_find": 1000}}}
             for r in _user_rows(10)]
    assert explain.cut_short([Profile.of_points(whole)]) == 0.0
    assert not any("call chains" in line for line in explain.explain(key, whole, whole).absent)


def _store(tmp_path) -> tuple[store.Store, list[int]]:
    """Three runs of one point: A and B profiled (B with the lock), C not profiled."""
    db = store.Store(str(tmp_path / "r.sqlite"))
    plan = Plan([("micro", "getppid1")], {"micro": ["procs"]}, [2], trials=2, duration=3.0).to_json()
    ids = []
    for label, rows in (("A", _rows(False)), ("B", _rows(True)), ("C", _rows(True, profiled=False))):
        run_id = db.create_run(plan, {"hostname": "h", "kernel": "6.1"}, "mosbench run micro/getppid1", label=label)
        for r in rows:
            db.add_point(run_id, **r)
        db.finish_run(run_id, "complete")
        ids.append(run_id)
    return db, ids


def test_unprofiled_sides_get_the_command_that_would_profile_them(tmp_path):
    db, ids = _store(tmp_path)
    runs = [db.run(i) for i in ids]
    pts = [db.points(i, with_profiles=True) for i in ids]
    found = compare.compare_runs(runs, [build_series(p) for p in pts], ["A", "B", "C"])
    explained = explain.comparison(found, runs, pts)
    assert [type(x.found) for x in explained] == [explain.Explanation, explain.Unprofiled]
    c = explained[1].found
    # The run's own settings, each given, so the command measures as that run did.
    command = ("mosbench run micro/getppid1 --profile micro/getppid1 --cores 2 --variant procs --trials 3 "
               "--duration 3 --warmup 2 --interval 1 --placement pack --isolation cgroup")
    assert c.missing == ("C",) and c.commands == (command,) and explain.profile_commands([c]) == [command]
    ab = {**runs[2], "command": "mosbench ab --kernel 6.1 --kernel 6.8 micro/getppid1 --cores 2",
          "environment": {"ab": {"side": "B"}}}
    assert explain.profile_command(ab, [KEY]) == ("mosbench ab --kernel 6.1 --kernel 6.8 micro/getppid1 --cores 2 "
                                                  "--profile micro/getppid1")
    # Several points of a run: one command for them all.
    more = explain.Unprofiled(PointKey("micro", "getppid1", "threads", 1), ("A", "C"), ("C",), (), (runs[2],))
    assert explain.profile_commands([c, more]) == [command.replace("--cores 2 --variant procs",
                                                                   "--cores 1,2 --variant procs,threads")]
    # The same store through `mosbench compare`: the explanation under the table, the command for C.
    r = mosbench("compare", str(ids[0]), str(ids[1]), str(ids[2]), "--store", str(tmp_path / "r.sqlite"),
                 env={"COLUMNS": "220"})
    assert r.returncode == 0, r.stderr
    assert "Why: micro/getppid1 procs at 2 cores: slower" in r.stdout and LOCK in r.stdout
    assert "← dput_[k]" in r.stdout and "account for 100% of the measured change" in r.stdout
    assert "1 significant change not explained: a side was not profiled (micro/getppid1 procs at 2 cores (C))" \
        in r.stdout and f"  {command}\n" in r.stdout
    # In 80 columns the command is folded as a shell folds it: joined again, it is the same command.
    narrow = mosbench("compare", str(ids[0]), str(ids[2]), "--store", str(tmp_path / "r.sqlite")).stdout
    folded = narrow[narrow.index("  mosbench run"):].rstrip("\n")
    assert max(map(len, folded.splitlines())) <= 80 and " \\\n" in folded
    assert " ".join(folded.replace(" \\\n", " ").split()) == command


def test_compare_json_carries_every_named_delta(tmp_path):
    _, ids = _store(tmp_path)
    r = mosbench("compare", str(ids[0]), str(ids[1]), str(ids[2]), "--json", "--store", str(tmp_path / "r.sqlite"))
    assert r.returncode == 0, r.stderr
    b, c = (run["changes"][0]["explanation"] for run in json.loads(r.stdout)["runs"])
    assert b["a"] == "A" and b["b"] == "B" and b["trials"] == [3, 3] and b["share"] == pytest.approx(1.0)
    assert b["not_attributed"] == pytest.approx(0.0, abs=1e-9)
    lock = next(f for f in b["functions"] if f["function"] == LOCK)
    assert lock["own"]["named"] and lock["own"]["change"] == pytest.approx(1.0) and lock["kind"] == "kernel lock"
    assert lock["callers"][0]["name"] == "dput_[k]" and set(lock["own"]) == {"name", "a", "b", "change", "low",
                                                                              "high", "named"}
    assert {f["function"] for f in b["functions"]} >= {LOCK, "dput_[k]", "dget_[k]"}  # all, not the few printed
    assert c["unprofiled"] == ["C"] and c["commands"][0].startswith("mosbench run micro/getppid1 --profile")


def test_the_report_says_what_changed_with_a_flame_graph_of_b_against_a(tmp_path):
    from mosbench.report import html

    db, ids = _store(tmp_path)
    page = html.write(db, [str(i) for i in ids], tmp_path / "report.html").read_text()
    section = page[page.index('<h2 id="what-changed">'):page.index('<h2 id="micro_getppid1">')]
    assert '<a href="#what-changed">What changed</a>' in page  # linked from the comparison
    assert "micro/getppid1 procs at 2 cores: slower, B/A 0.500" in section and "← dput_[k]" in section
    assert "CPU µs per op in B (2.25 in all), coloured by the change from A (1.2)" in section
    fills = {m[1]: m[2] for m in re.finditer(r"<title>([^:<]+): [^<]*</title><rect [^>]*fill=\"([^\"]+)\"", section)}
    assert fills["main"] == "rgb(235,65,65)"  # grew the most (every new sample is under it): full red
    red, green, blue = map(int, re.findall(r"\d+", fills[LOCK]))
    assert red == 235 and green == blue < 235  # grew: red, paler in proportion
    assert "<pre>mosbench run micro/getppid1 --profile micro/getppid1 --cores 2" in section
    assert list((tmp_path / "report_files").glob("*_B_vs_A_flame.svg"))


def test_ab_explains_the_points_that_differ_and_asks_for_profiled_boots(tmp_path):
    from mosbench.analysis import runs_compared
    from mosbench.analysis.cells import counted_by_point
    from mosbench.analysis.decide import State, decide_all

    db, ids = _store(tmp_path)
    command = "mosbench ab --kernel 6.1 --kernel 6.8 micro/getppid1 --cores 2"
    with db.engine.begin() as conn:  # A and B as `ab` merges its boots' runs
        for run_id in ids:
            conn.execute(store.runs.update().where(store.runs.c.id == run_id).values(
                command=command, environment={"hostname": "h", "ab": {"side": "B", "rounds": 2}}))
    runs = [db.run(i) for i in ids]
    found = compare.compare_runs(runs, [build_series(db.points(i)) for i in ids], ["A", "B", "C"])
    decisions = decide_all(*(counted_by_point(db.points(i)) for i in (ids[0], ids[2])), 0.02)
    assert [d.state for d in decisions] == [State.DIFFER]
    unprofiled = runs_compared.ab_explained(db, [runs[0], runs[2]],
                                            compare.Comparison(["A", "C"], [], [found.changes[1]]), decisions).differing
    assert explain.profile_commands([unprofiled[0].found]) == [command + " --profile micro/getppid1"]
    profiled = runs_compared.ab_explained(db, [runs[0], runs[1]],
                                          compare.Comparison(["A", "B"], [], [found.changes[0]]), decisions).differing
    assert profiled[0].found.own[0].function == LOCK


def test_ab_says_what_moved_in_the_profiles_of_a_point_left_undecided(tmp_path):
    """An emulated guest's boots spread its throughput by half, so `ab` can run out of boots undecided
    while the profiles hold a lock grown from nothing: it says so, and only where both sides were profiled."""
    import dataclasses

    from mosbench.analysis import runs_compared
    from mosbench.analysis.cells import counted_by_point
    from mosbench.analysis.decide import State, decide_all

    db, ids = _store(tmp_path)
    runs = [db.run(i) for i in ids]
    found = compare.compare_runs(runs, [build_series(db.points(i)) for i in ids], ["A", "B", "C"])
    decided = decide_all(*(counted_by_point(db.points(i)) for i in (ids[0], ids[1])), 0.02)
    unsure = [dataclasses.replace(d, state=State.UNSURE) for d in decided]
    profiled = compare.Comparison(["A", "B"], [], [found.changes[0]])
    assert runs_compared.ab_explained(db, [runs[0], runs[1]], profiled, unsure).differing == []
    moved = runs_compared.ab_explained(db, [runs[0], runs[1]], profiled, unsure).undecided
    assert [x.found.own[0].function for x in moved] == [LOCK]
    assert runs_compared.ab_explained(db, [runs[0], runs[1]], profiled, decided).undecided == []
    unprofiled = compare.Comparison(["A", "C"], [], [found.changes[1]])
    assert runs_compared.ab_explained(db, [runs[0], runs[2]], unprofiled, unsure).undecided == []


def test_equal_changes_read_in_name_order_so_a_report_reads_the_same_twice():
    """A caller and its only callee move by the same µs; their order was the profiles' dict order."""
    ds = [explain.Delta("b_[k]", 1.0, 0.5, -0.6, -0.4, True), explain.Delta("c_[k]", 0.0, 2.0, 1.5, 2.5, True),
          explain.Delta("a_[k]", 1.0, 0.5, -0.6, -0.4, True)]
    assert [d.name for d in sorted(ds, key=explain._largest_first)] == ["c_[k]", "a_[k]", "b_[k]"]
