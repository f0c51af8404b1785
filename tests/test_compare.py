"""mosbench compare: environment differences first, then changes flagged only where they are significant."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from mosbench.analysis import compare, significance
from mosbench.analysis.cells import build_series
from mosbench.store import db as store
from tests.conftest import mosbench_here
from tests.test_store import _point

ENV = {"hostname": "big", "kernel": "6.1.0", "cpu_model": "EPYC", "uid": 0, "topology": {"cpus": [0, 1]},
       "sysctls": {"vm.swappiness": "60"}, "thp": "always [madvise] never"}


def _series(per_core_by_cores: dict[int, list[float]], variant="procs", workload="micro", test="getppid1"):
    pts = [_point(workload=workload, test=test, variant=variant, cores=n, trial=i + 1, throughput=v * n, work=v * n)
           for n, values in per_core_by_cores.items() for i, v in enumerate(values)]
    return build_series(pts)


def test_welch_agrees_with_scipy_and_its_interval_is_welchs():
    a, b = [100.0, 104.0, 98.0, 101.0], [110.0, 108.0, 115.0, 109.0]
    d = significance.welch(a, b)
    ratio, low, high, p = d.ratio, d.low, d.high, d.p
    assert ratio == pytest.approx(np.mean(b) / np.mean(a))
    assert p == pytest.approx(stats.ttest_ind(b, a, equal_var=False).pvalue)
    # scipy's own interval for the difference of means (Welch), divided by the baseline's mean.
    ci = stats.ttest_ind(b, a, equal_var=False).confidence_interval(0.95)
    assert low == pytest.approx(1 + ci.low / np.mean(a)) and high == pytest.approx(1 + ci.high / np.mean(a))
    assert low < ratio < high


def test_a_clear_shift_is_flagged_and_noise_is_not():
    shifted = compare.changes(_series({1: [100, 101, 99, 100]}), _series({1: [110, 111, 109, 110]}))
    assert [c.verdict for c in shifted] == ["faster"] and shifted[0].significant
    slower = compare.changes(_series({1: [100, 101, 99]}), _series({1: [80, 82, 81]}))
    assert slower[0].verdict == "slower"
    noisy = compare.changes(_series({1: [100, 112, 90]}), _series({1: [104, 95, 101]}))
    assert noisy[0].verdict == "no significant change" and not noisy[0].significant


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_same_distribution_is_rarely_flagged(seed):
    """Two runs of the same machine: at alpha 0.05 about one in twenty flags, never most."""
    rng = np.random.default_rng(seed)
    flagged = 0
    for _ in range(40):
        a, b = rng.normal(100, 10, 3), rng.normal(100, 10, 3)
        flagged += significance.welch(list(a), list(b)).significant
    assert flagged <= 10


def test_one_trial_is_untested_and_missing_points_are_named():
    found = compare.changes(_series({1: [100], 2: [90, 91]}), _series({1: [120], 4: [50, 51]}))
    by_cores = {c.point.cores: c for c in found}
    assert by_cores[1].p is None and by_cores[1].verdict.startswith("untested: 1 trial")
    assert by_cores[1].ratio == pytest.approx(1.2) and not by_cores[1].significant
    assert by_cores[2].verdict == "not measured in the other run"
    assert by_cores[4].verdict == "not measured in the baseline"
    assert by_cores[1].matched and not by_cores[2].matched and not by_cores[4].matched
    assert compare.unmatched(found, compare.Side.BASELINE).points == 1
    assert compare.unmatched(found, compare.Side.OTHER).text() == "1 point (micro/getppid1)"


def test_the_same_is_a_whole_interval_within_the_precision_not_a_ratio_near_one():
    """A ratio of 1.01 from two noisy trials a side is not "the same within 5%": its interval reaches past
    it. Significant and the same are the one record's two rules, read by compare, ab and bisect alike."""
    noisy = significance.welch([100.0, 80.0], [111.0, 71.0])
    assert abs(noisy.ratio - 1) < 0.05 and not noisy.same(0.05) and not noisy.significant
    steady = significance.welch([100.0, 100.5, 99.5, 100.2], [101.0, 100.8, 101.2, 100.9])
    assert steady.same(0.05) and not steady.same(0.001) and steady.significant
    assert not significance.welch([100.0], [100.0]).same(0.5)  # one trial a side: no interval, nothing known


def test_a_point_failed_in_one_run_is_said_so():
    failed = _point(status="failed", reason="boom", throughput=None, work=None)
    found = compare.changes(_series({1: [100, 101]}), build_series([failed]))
    assert [c.verdict for c in found] == ["failed in the other run"]
    assert found[0].matched and found[0].missing == compare.Missing(compare.Side.OTHER, compare.Absence.FAILED)


def test_identical_trials_are_no_change():
    found = compare.changes(_series({1: [100, 100]}), _series({1: [100, 100]}))
    assert found[0].p == 1.0 and found[0].verdict == "no significant change"


def test_environment_differences_put_the_kernel_first_and_leave_out_what_always_differs():
    other = dict(ENV, kernel="6.8.0", uid=1000, topology={"cpus": [0]}, sysctls={"vm.swappiness": "10"},
                 postgres={"version": "15.8"})
    found = compare.environment_differences([ENV, other])
    assert found == [("kernel", ["6.1.0", "6.8.0"]), ("postgres.version", ["–", "15.8"]),
                     ("sysctls.vm.swappiness", ["60", "10"])]
    assert compare.environment_differences([ENV, dict(ENV)]) == []


def test_two_boots_of_one_guest_kernel_do_not_differ_by_the_folder_each_boot_mounts():
    line = ("virtme_hostname=mosbench-guest virtme_initmount0=var/tmp/mosbench-runvm-{0} virtme_rw_overlay0=/etc "
            "virtme.exec=`{0}L3dvcmsvbWFpbi8udmVudi9iaW4vcHl0aG9u==`")
    a, b = dict(ENV, kernel_cmdline=line.format("zt2b3v_3")), dict(ENV, kernel_cmdline=line.format("p_vw69m_"))
    assert compare.environment_differences([a, b]) == []
    c = dict(b, kernel_cmdline=line.format("p_vw69m_") + " mitigations=off")
    assert [k for k, _ in compare.environment_differences([a, c])] == ["kernel_cmdline"]


def test_labels_stay_apart():
    runs = [{"id": 3, "label": "quick"}, {"id": 4, "label": "quick"}, {"id": 5, "label": None}]
    assert compare.run_labels(runs) == ["quick #3", "quick #4", "#5"]


def _store_with_two_runs(tmp_path):
    db = store.Store(str(tmp_path / "s.sqlite"))
    a = db.create_run({}, ENV, "mosbench run micro", "6.1")
    b = db.create_run({}, dict(ENV, kernel="6.8.0"), "mosbench run micro", "6.8")
    for run, values in ((a, [100, 101, 99]), (b, [130, 131, 129])):
        for i, v in enumerate(values):
            db.add_point(run, **_point(trial=i + 1, throughput=v, work=v))
            db.add_point(run, **_point(test="open1", trial=i + 1, throughput=50 + i, work=50 + i))
    return db


def test_the_command_shows_the_environment_before_the_numbers(tmp_path):
    _store_with_two_runs(tmp_path)
    r = mosbench_here("compare", "1", "2", "--store", str(tmp_path / "s.sqlite"))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.index("What differs") < out.index("6.8 against 6.1")
    assert "kernel" in out and "6.8.0" in out
    getppid = next(line for line in out.splitlines() if "micro/getppid1" in line)
    assert "1.300" in getppid and "faster" in getppid
    opened = next(line for line in out.splitlines() if "micro/open1" in line)
    assert "no significant change" in opened
    assert "1 significant change (Welch's t-test, p < 0.05) among 2 points measured in both runs." in out


@pytest.mark.parametrize("args,message", [
    (["1"], "compare needs two runs or more"),
    (["1", "1"], "compare was given the same run twice"),
    (["1", "9"], "no run 9"),
])
def test_the_command_refuses_with_one_line(tmp_path, args, message):
    _store_with_two_runs(tmp_path)
    r = mosbench_here("compare", *args, "--store", str(tmp_path / "s.sqlite"))
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and message in r.stderr


def test_the_report_of_two_runs_opens_with_the_comparison(tmp_path):
    from mosbench.report import html

    db = _store_with_two_runs(tmp_path)
    text = html.write(db, ["1", "2"], tmp_path / "cmp.html").read_text()
    assert text.index('id="comparison"') < text.index('id="summary"')
    section = text[text.index('id="comparison"'):text.index('id="summary"')]
    assert "<td class=\"l\">kernel</td>" in section and "6.8.0" in section
    assert '<td class=" good">1.300 [1.277–1.323]</td>' in section and '<td class="l good">faster</td>' in section
    single = html.write(db, ["1"], tmp_path / "one.html").read_text()
    assert 'id="comparison"' not in single


def test_the_gate_fails_on_a_significant_regression_past_its_threshold_and_says_which(tmp_path):
    _store_with_two_runs(tmp_path)
    store_path = str(tmp_path / "s.sqlite")
    # Run 1 against run 2 is 1.3 times faster: no regression, whatever the threshold.
    r = mosbench_here("compare", "1", "2", "--fail-on-regression", "5", "--store", store_path)
    assert r.returncode == 0, r.stderr
    assert "no point is significantly slower than the baseline by more than 5%" in r.stdout
    # The other way round, getppid1 is 0.77 of the baseline: past 10%, not past 30%; open1 never.
    r = mosbench_here("compare", "2", "1", "--fail-on-regression", "10", "--store", store_path)
    assert r.returncode == 1, r.stderr
    regressions = [line for line in r.stdout.splitlines() if line.startswith("REGRESSION")]
    assert len(regressions) == 1 and "micro/getppid1" in regressions[0] and "0.769×" in regressions[0]
    assert "1 point significantly slower than the baseline by more than 10%" in r.stdout
    assert mosbench_here("compare", "2", "1", "--fail-on-regression", "30", "--store", store_path).returncode == 0
    r = mosbench_here("compare", "2", "1", "--fail-on-regression", "150", "--store", store_path)
    assert r.returncode == 2 and "percentage from 0 up to 100" in r.stderr


def test_the_comparison_as_json_carries_every_point_and_the_regressions(tmp_path):
    import json

    _store_with_two_runs(tmp_path)
    store_path = str(tmp_path / "s.sqlite")
    r = mosbench_here("compare", "2", "1", "--json", "--fail-on-regression", "10", "--store", store_path)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["environment_differences"][0]["key"] == "kernel"
    (run,) = doc["runs"]
    by_test = {c["test"]: c for c in run["changes"]}
    assert by_test["getppid1"]["ratio"] == pytest.approx(100 / 130) and by_test["getppid1"]["significant"]
    assert by_test["getppid1"]["verdict"] == "slower" and by_test["open1"]["verdict"] == "no significant change"
    assert [(x["test"], x["run"]) for x in doc["regressions"]] == [("getppid1", run["label"])]
    plain = json.loads(mosbench_here("compare", "1", "2", "--json", "--store", store_path).stdout)
    assert "regressions" not in plain and plain["baseline"] == doc["runs"][0]["label"]


def test_runs_with_no_point_in_common_are_not_compared():
    """Three unrelated runs: one table of what each holds, no rows of "not measured"."""
    from mosbench.analysis.cells import build_series
    from mosbench.report import rows

    def run(workload, test, cores):
        return build_series([_point(workload=workload, test=test, variant="v", cores=n, trial=t, throughput=100.0 * n)
                             for n in cores for t in (1, 2)])

    series = [run("micro", "getppid1", (1, 2)), run("scale", "lock", (1, 2)), run("metis", "", (1,))]
    envs = [{"kernel": "6.1"}] * 3
    found = compare.compare_runs([{"environment": e} for e in envs], series, ["a", "b", "c"])
    assert not found.shares_any()
    (t,) = rows.comparison_tables(found)
    assert "share no point" in t.title and t.column("run") == ["a", "b", "c"]
    assert t.column("holds") == ["2 points (micro/getppid1)", "2 points (scale/lock)", "1 point (metis)"]


def test_runs_sharing_some_points_are_compared_on_those_with_one_line_for_the_rest():
    from mosbench.analysis.cells import build_series
    from mosbench.report import rows

    base = build_series([_point(test="getppid1", variant="v", cores=n, trial=t) for n in (1, 2) for t in (1, 2)])
    other = build_series([_point(test="getppid1", variant="v", cores=n, trial=t) for n in (2, 4) for t in (1, 2)])
    found = compare.compare_runs([{"environment": {}}] * 2, [base, other], ["a", "b"])
    _, changes = rows.comparison_tables(found)
    assert changes.column("cores") == ["2"]
    assert changes.note == ("Measured in one run only, not compared: a: 1 point (micro/getppid1); "
                            "b: 1 point (micro/getppid1)")


def test_the_trials_that_count_are_the_cell_s_for_every_reader():
    """compare, ab's and bisect's decisions and --trials auto count the same trials (Cell.counted): ok ones
    not interfered with; a point with none is no point to decide on."""
    from mosbench.analysis.cells import PointKey, counted_by_point

    pts = [_point(cores=2, trial=1, status="failed", reason="boom", throughput=None, work=None),
           _point(cores=1, trial=1, throughput=100, work=100, interfered=True),
           _point(cores=2, trial=2, throughput=180, work=180),
           _point(cores=1, trial=2, throughput=90, work=90),
           _point(cores=4, trial=1, throughput=400, work=400, interfered=True)]
    (s,) = build_series(pts)
    assert s.cells[1].counted() == [90.0] and s.cells[1].counted(include_interfered=True) == [100.0, 90.0]
    assert s.cells[2].counted() == [90.0] and s.cells[4].counted() == []

    def key(n):
        return PointKey("micro", "getppid1", "procs", n)

    assert list(counted_by_point(pts).items()) == [(key(2), [90.0]), (key(1), [90.0])]  # in the order measured
    found = {c.point: c for c in compare.changes([s], [s])}
    assert found[key(1)].base == (90.0,) and "2 interfered trials left out" in found[key(1)].note  # one a side
    assert found[key(4)].verdict == "interfered (--include-interfered compares it) in the baseline"
