"""The commutativity matrix from recorded points: sides judged apart against their alone rates, the matrix of
commutative situations only, what grew in the profile, verdicts compared between runs, and the report."""

import pytest

from mosbench.analysis import cells, commute
from mosbench.errors import UserError
from mosbench.report import html, sections
from mosbench.run.plan import Plan
from mosbench.store import db as store
from mosbench.workloads.commute import CALLS, Commute, parse_list


def _point(test: str, variant: str, cores: int, per_core: float, trial: int = 1, commutes: bool = True,
           sides: tuple[float, float] | None = None, profile: dict | None = None, interfered: bool = False) -> dict:
    metrics: dict = {"commutes": commutes}
    if sides:
        metrics |= {"side_a_per_core": sides[0], "side_b_per_core": sides[1],
                    "side_a_work": sides[0] * cores / 2, "side_b_work": sides[1] * cores / 2}
    return {"workload": "commute", "test": test, "variant": variant, "cores": cores, "trial": trial, "status": "ok",
            "unit": "op", "cpus": "0" if cores == 1 else "0-1", "work": per_core * cores,
            "throughput": per_core * cores, "window_s": 1.0, "user_s": 0.1, "system_s": 0.9 * cores, "idle_s": 0.0,
            "steal_s": 0.0, "samples": [], "metrics": metrics, "profile": profile,
            "interference": 0.5 if interfered else 0.0, "interfered": interfered}


def _situation(test: str, alone: tuple[float, float], beside: tuple[float, float], commutes: bool = True,
               cores: int = 2) -> list[dict]:
    return [_point(test, "a", 1, alone[0], commutes=commutes), _point(test, "b", 1, alone[1], commutes=commutes),
            _point(test, "pair", cores, (beside[0] + beside[1]) / 2, commutes=commutes, sides=beside)]


def _run() -> list[dict]:
    return [*_situation("open-open/diffname-procs", (1000, 1000), (990, 1001)),
            *_situation("open-unlink/diffname-samedir", (1000, 400), (950, 300)),  # B kept 75%
            *_situation("open-unlink/samename", (1000, 400), (500, 200), commutes=False),
            *_situation("mmap-munmap/disjoint", (200, 300), (100, 290)),  # A kept 50%
            *_situation("mmap-munmap/disjoint-far", (200, 300), (199, 299))]


def test_each_side_is_judged_against_its_own_alone_rate():
    found = {r.test: r for r in commute.results(cells.build_series(_run()))}
    r = found["open-unlink/diffname-samedir"]
    assert (r.call_a, r.call_b, r.cores) == ("open", "unlink", 2)
    assert r.ratio_a == pytest.approx(0.95) and r.ratio_b == pytest.approx(0.75) and r.worst == pytest.approx(0.75)
    assert r.scales is False and r.loss == pytest.approx(0.25)
    assert found["open-open/diffname-procs"].scales is True
    # A contrast that loses is expected; it never enters the matrix or the list to fix.
    assert found["open-unlink/samename"].commutes is False


def test_pairs_are_a_section_of_their_own_not_curves():
    """The workload says so (Workload.curves): the report's sections never name it."""
    series = cells.build_series(_run())
    micro = cells.build_series([{**p, "workload": "micro", "test": "open1", "variant": "threads"}
                                for p in _run()[:1]])
    assert Commute.curves is False
    assert sections.curves(series + micro) == micro
    view = sections.View(series, {}, (sections.RunSeries("#1", series, {}, "6.1.0-test"),), "")
    assert [s.kind for s in sections.build(view)] == ["summary", "commute"]


def test_the_matrix_counts_commutative_situations_and_the_list_is_worst_first():
    found = commute.results(cells.build_series(_run()))
    m = commute.matrix(found)
    assert set(m) == {("open", "open"), ("open", "unlink"), ("mmap", "munmap")}
    assert (m[("open", "unlink")].scaling, m[("open", "unlink")].total) == (0, 1)
    assert (m[("mmap", "munmap")].scaling, m[("mmap", "munmap")].total) == (1, 2)
    assert [r.test for r in commute.not_scaling(found)] == ["mmap-munmap/disjoint", "open-unlink/diffname-samedir"]


def test_without_an_alone_rate_there_is_no_verdict():
    pts = [p for p in _situation("read-read/diffdesc", (1, 1), (1, 1)) if p["variant"] != "b"]
    [r] = commute.results(cells.build_series(pts))
    assert r.alone_b is None and r.scales is None and commute.matrix([r]) == {}


def test_interfered_trials_are_left_out_while_quiet_ones_exist():
    pts = [*_situation("read-read/diffdesc", (1000, 1000), (990, 990)),
           _point("read-read/diffdesc", "pair", 2, 300, trial=2, sides=(300, 300), interfered=True)]
    [r] = commute.results(cells.build_series(pts))
    assert r.trials == 1 and r.scales is True and not r.interfered


def test_what_grew_is_set_against_each_side_at_its_alone_cost():
    # Alone, open costs 1 µs in do_open and unlink 2 µs in do_unlink. Side by side (as many of each), each
    # side's own functions cost the same, and a lock on the directory appears: only the lock grew.
    def prof(stacks):
        return {"stacks": stacks, "period_ns": 1000, "window_s": 1.0}
    pts = [_point("open-unlink/x", "a", 1, 1000, profile=prof({"t;do_open_[k]": 1000})),
           _point("open-unlink/x", "b", 1, 500, profile=prof({"t;do_unlink_[k]": 1000})),
           _point("open-unlink/x", "pair", 2, 500, sides=(500, 500),
                  profile=prof({"t;do_open_[k]": 500, "t;do_unlink_[k]": 1000, "t;down_write_[k]": 500}))]
    from mosbench.analysis import profiles

    series = cells.build_series(pts)
    [r] = commute.results(series)
    grew = commute.pair_growth(r, profiles.by_series(pts), commute.pair_work(series, r))
    assert [g.function for g in grew] == ["down_write_[k]"]
    assert grew[0].low_us == pytest.approx(0.0) and grew[0].high_us == pytest.approx(0.5)


def test_two_runs_name_the_situations_whose_verdict_changed():
    before = commute.results(cells.build_series(_run()))
    fixed = [p if p["test"] != "mmap-munmap/disjoint" or p["variant"] != "pair"
             else _point("mmap-munmap/disjoint", "pair", 2, 250, sides=(195, 295)) for p in _run()]
    [change] = commute.changed(before, commute.results(cells.build_series(fixed)))
    assert change.test == "mmap-munmap/disjoint" and change.after.scales and not change.before.scales


def test_the_list_is_read_exactly_and_a_foreign_line_refused():
    good = ("open-unlink/diffname-samedir\tcommutes\tthreads\tone directory; A opens its name\t"
            "different names\nopen-open/sameproc\tconflicts\tthreads\tone process\tlowest descriptor\n")
    a, b = parse_list(good)
    assert (a.call_a, a.call_b, a.commutes, a.mode) == ("open", "unlink", True, "threads")
    assert b.commutes is False
    for bad in ("x\tcommutes\tthreads\ts\n", "open-open/x\tmaybe\tthreads\ts\tw\n",
                "open-fork/x\tcommutes\tthreads\ts\tw\n"):
        with pytest.raises(UserError):
            parse_list(bad)
    assert len(CALLS) == 18


def test_alone_points_at_one_core_and_pairs_from_two():
    plan = Plan([("commute", "open-open/diffname-procs")], {"commute": ["a", "b", "pair"]}, [1, 2, 4], trials=2)
    keys = {(k.variant, k.cores) for k in plan.points()}
    assert keys == {("a", 1), ("b", 1), ("pair", 2), ("pair", 4)}
    assert Commute().measures("x/y", "pair", 1) is False


def test_the_report_draws_the_matrix_and_lists_what_to_fix(tmp_path):
    db = store.Store(str(tmp_path / "s.sqlite"))
    runs = []
    for _ in range(2):
        run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "6.1.0-test"}, "mosbench run commute")
        for p in _run():
            fields = {k: v for k, v in p.items() if k not in ("interference", "interfered")}
            db.add_point(run, started_at=store.now(), **fields)
        db.finish_run(run, "complete")
        runs.append(run)
    text = html.write(db, [str(runs[0])], tmp_path / "rep.html").read_text()
    assert (tmp_path / "rep_files" / "commute_matrix.png").stat().st_size > 1000
    assert "Commutativity" in text and "Linux 3.8" in text and "13,664" in text
    assert text.index("mmap-munmap/disjoint<") < text.index("open-unlink/diffname-samedir<")
    assert "commute/open-open" not in text.split('id="commute"')[0]  # no curve section of its own
    both = html.write(db, [str(r) for r in runs], tmp_path / "two.html").read_text()
    assert both.count("Commutativity") >= 1
