"""mosbench-micro against will-it-scale: the bimodality rule and verdicts (analysis/pairs.py), the
comparison (run/willitscale.py) and the command (benchmarks/vs_will_it_scale.py), run against a stand-in
will-it-scale (shell scripts printing chosen per-second totals), with the real mosbench-micro where it is
built."""

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mosbench import procfs
from mosbench.analysis import pairs
from mosbench.analysis.pairs import Verdict
from mosbench.report import pairs as table
from mosbench.run import willitscale
from tests.conftest import ROOT, needs_native

# A descriptor this process inherited (a test runner's) would warn at every comparison; one test checks it.
pytestmark = pytest.mark.filterwarnings("ignore:descriptors .* are open:RuntimeWarning")

# will-it-scale's <test>_<mode> in miniature: every 0.05 s a `min:1 max:2 total:N` line. The k-th start of
# a test takes line k (cycling) of <test>.rates and prints its words in turn (cycling), so a test sets
# each invocation's rates. Like the real one it makes /tmp/willitscale.XXXXXX and starts a task process;
# it logs its arguments, its pid, its task's pid, its directory and where hwloc would look for plugins.
STAND_IN = r"""#!/bin/sh
dir=$(dirname "$0"); name=$(basename "$0"); test=${name%_*}
k=$(cat "$dir/$test.count" 2>/dev/null || echo 0)
echo $((k + 1)) > "$dir/$test.count"
echo "theirs $name $*" >> "$dir/log"
echo $$ > "$dir/$test.pid"
echo "${HWLOC_PLUGINS_PATH-unset}" > "$dir/$test.hwloc_plugins"
mktemp -d /tmp/willitscale.XXXXXX > "$dir/$test.tmpdir"
sleep 30 > /dev/null &
echo $! > "$dir/$test.task"
rates=$(sed -n "$((k % $(wc -l < "$dir/$test.rates") + 1))p" "$dir/$test.rates")
echo "testcase:stand-in"
echo "warmup"
while :; do for n in $rates; do sleep 0.05; echo "min:1 max:2 total:$n"; done; done
"""


def stand_in(tmp_path: Path, rates: dict[str, list[str]]) -> Path:
    """A will-it-scale directory with `<test>_processes` and `<test>_threads` for each test in `rates`."""
    wis = tmp_path / "wis"
    wis.mkdir()
    for test, lines in rates.items():
        (wis / f"{test}.rates").write_text("\n".join(lines) + "\n")
        for mode in ("processes", "threads"):
            path = wis / f"{test}_{mode}"
            path.write_text(STAND_IN)
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return wis


def alive(pid: int) -> bool:
    """Running and not a zombie, after up to a second for the kill to land."""
    for _ in range(20):
        if procfs.state(pid) in (None, "Z", "X"):
            return False
        time.sleep(0.05)
    return True


# ---- the bimodality rule -------------------------------------------------------------------------------

def test_two_clusters_of_rounds_are_bimodal():
    m = pairs.bimodality([1.2e6, 2.5e6, 1.2e6, 2.52e6])
    assert m.bimodal and m.settled and m.values == "rounds"
    assert (m.low, m.high, m.rounds_high, m.rounds) == (1.2e6, 2.51e6, 2, 4)
    assert m.describe() == "bimodal: 1.2M / 2.51M (2 of 4 rounds high)"


def test_two_clusters_of_seconds_are_bimodal():
    rng = np.random.default_rng(1)
    levels = [1.2e6, 2.5e6, 1.2e6, 2.5e6, 2.5e6]
    samples = [list(level * (1 + 0.02 * rng.standard_normal(3))) for level in levels]
    m = pairs.bimodality([float(np.mean(s)) for s in samples], samples)
    assert m.bimodal and m.values == "seconds"
    assert m.low == pytest.approx(1.2e6, rel=0.05) and m.high == pytest.approx(2.5e6, rel=0.05)
    assert (m.rounds_high, m.rounds_split) == (3, 0)


def test_noisy_unimodal_data_is_not_bimodal():
    # 5% between rounds and 5% between seconds, the noise of a quiet host and more: 2000 draws, none bimodal.
    for seed in range(2000):
        rng = np.random.default_rng(seed)
        samples = [list(level * (1 + 0.05 * rng.standard_normal(2)))
                   for level in 1e6 * (1 + 0.05 * rng.standard_normal(5))]
        m = pairs.bimodality([float(np.mean(s)) for s in samples], samples)
        assert not m.bimodal, (seed, samples)
        # The round means alone, as a tool without per-second counts gives them.
        assert not pairs.bimodality([float(np.mean(s)) for s in samples]).bimodal, (seed, samples)


def test_a_disturbed_round_is_not_a_mode():
    # One round's second lost 60% (a burst of steal): its mean sits 30% low, which the round means alone
    # would call a second mode; its seconds are one outlier, not a round's worth of a steady rate.
    samples = [[1.0e6, 1.01e6], [0.4e6, 1.0e6], [0.99e6, 1.0e6]]
    rates = [float(np.mean(s)) for s in samples]
    assert pairs.bimodality(rates).bimodal
    assert not pairs.bimodality(rates, samples).bimodal


def test_a_run_switching_modes_inside_rounds_is_bimodal():
    samples = [[1.2e6, 2.5e6], [1.21e6, 2.49e6], [2.5e6, 1.19e6]]
    m = pairs.bimodality([float(np.mean(s)) for s in samples], samples)
    assert m.bimodal and (m.rounds_high, m.rounds_split) == (0, 3)
    assert m.describe() == "bimodal: 1.2M / 2.5M (0 of 3 rounds high, 3 switching)"


@pytest.mark.parametrize("values", [[0.3e6, 0.5e6, 0.7e6, 0.9e6, 1.0e6, 1.5e6, 1.5e6],
                                    [0.5e6, 0.5e6, 1.0e6, 1.1e6, 1.3e6, 1.5e6, 1.7e6]])
def test_a_gap_next_to_a_scattered_side_is_not_bimodal(values):
    # The gap (0.5M) is over a quarter of the median but under 3 times the IQR of the scattered side.
    assert not pairs.bimodality(values).bimodal


def test_close_or_single_values_are_not_bimodal():
    assert not pairs.bimodality([1.0e6, 1.2e6, 1.22e6]).bimodal  # a 20% gap: under a quarter of the median
    assert not pairs.bimodality([1.0e6]).bimodal
    assert not pairs.bimodality([1.0e6, 1.0e6], [[1.0e6], [1.0e6]]).bimodal


# ---- verdicts -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("ratio,low,high,bimodal,expected", [
    (1.02, 0.97, 1.04, False, Verdict.WITHIN),  # the whole interval within ±5%
    (1.04, 0.90, 1.20, False, Verdict.UNCLEAR),  # the medians within ±5%, but not the interval
    (1.00, 0.94, 1.03, False, Verdict.UNCLEAR),
    (0.80, 0.75, 0.85, False, Verdict.APART),
    (1.10, 1.06, 1.15, False, Verdict.APART),
    (1.10, 0.98, 1.20, False, Verdict.UNCLEAR),  # outside ±5% but the interval crosses a bound
    (1.00, 0.99, 1.01, True, Verdict.BIMODAL),  # never "within" on a bimodal tool's median
    (0.50, 0.45, 0.55, True, Verdict.BIMODAL),
])
def test_verdict(ratio, low, high, bimodal, expected):
    assert pairs.verdict(ratio, low, high, bimodal) == expected


def test_a_bimodal_tool_makes_the_pair_bimodal_even_with_equal_medians():
    a = [pairs.Round(r, [r, r]) for r in (2.5e6, 1.2e6, 2.5e6, 1.21e6, 2.5e6)]
    b = [pairs.Round(r, [r, r]) for r in (2.5e6, 2.49e6, 2.51e6, 2.5e6, 2.5e6)]
    p = pairs.Pair.measured("dup1", "threads", 2, a, b, ["ours", "theirs"] * 2 + ["ours"], 1.0)
    assert p.ratio == 1.0 and p.verdict is Verdict.BIMODAL
    assert p.ours_modes.settled and not p.theirs_modes.bimodal
    line = table.format_pair(p)
    # The low mode is 1.205M, written as every mosbench number is (mosbench.units: 3 figures, ties to even).
    assert line.endswith("<-- ours bimodal: 1.2M / 2.5M (3 of 5 rounds high)")


def test_one_round_apart_is_shown_but_not_called_a_mode():
    """With three rounds, one at another rate may be a disturbed round: not called a mode, the interval it
    widens says the pair is unclear, and the line says what was seen."""
    a = [pairs.Round(r, [r, r]) for r in (2.5e6, 1.2e6, 2.5e6)]
    b = [pairs.Round(r, [r, r]) for r in (2.5e6, 2.49e6, 2.51e6)]
    p = pairs.Pair.measured("dup1", "threads", 2, a, b, ["ours", "theirs", "ours"], 1.0)
    assert p.ours_modes.bimodal and not p.ours_modes.settled and p.verdict is Verdict.UNCLEAR
    line = table.format_pair(p)
    assert line.endswith("<-- not within ±5%: unclear; ours one round at 1.2M, the others at 2.5M (a mode or a "
                         "disturbed round: more rounds tell)")
    assert "theirs" not in line


@pytest.mark.parametrize("spec,ncpu,counts", [("1,max", 16, [1, 16]), ("half", 16, [8]), ("half,max", 3, [1, 3]),
                                              ("half", 1, [1]), ("2, 4", 4, [2, 4])])
def test_task_counts(spec, ncpu, counts):
    assert willitscale.task_counts(spec, ncpu) == counts


@pytest.mark.parametrize("spec", ["0", "17", "x", "1,", "-1"])
def test_bad_tasks(spec):
    with pytest.raises(ValueError, match=r"max, half or 1\.\.16"):
        willitscale.task_counts(spec, 16)


# ---- against the stand-in -----------------------------------------------------------------------------

def test_theirs_reads_the_window_and_leaves_nothing_behind(tmp_path):
    wis = stand_in(tmp_path, {"fake1": ["100 200 300 400"]})
    r = willitscale.theirs(wis, "fake1", "threads", 3, 1, 2)
    assert r == pairs.Round(250.0, [200.0, 300.0])  # the warm-up second skipped, the next two averaged
    assert (wis / "log").read_text() == "theirs fake1_threads -t 3\n"
    # hwloc loads no plugin: a distribution's moved process-mode mmap1 and brk1 by 1.6x.
    assert (wis / "fake1.hwloc_plugins").read_text() == "/dev/null\n"
    # The process group is killed (the test and its task) and the directory it made is gone.
    assert not alive(int((wis / "fake1.pid").read_text()))
    assert not alive(int((wis / "fake1.task").read_text()))
    assert not Path((wis / "fake1.tmpdir").read_text().strip()).exists()


def test_theirs_too_few_lines_is_an_error(tmp_path):
    wis = stand_in(tmp_path, {"fake1": ["100"]})
    (wis / "fake1_processes").write_text("#!/bin/sh\necho 'min:1 max:2 total:5'\necho 'gave up' >&2\nexit 3\n")
    with pytest.raises(willitscale.ToolFailed, match="fake1_processes gave 1 of 3 samples, exit 3") as e:
        willitscale.theirs(wis, "fake1", "procs", 1, 1, 2)
    assert e.value.lines == ["gave up"]


def test_rounds_interleave_and_results_are_data(tmp_path):
    wis = stand_in(tmp_path, {"fake1": ["1000 1010", "990 1000"], "fake2": ["500"]})
    log = wis / "log"

    def fake_ours(test, mode, tasks, warmup, duration):
        with log.open("a") as f:
            f.write(f"ours {test} {mode} {tasks}\n")
        return pairs.Round(1000.0 if test == "fake1" else 600.0, [1000.0] * duration)

    seen = []
    c = willitscale.compare(wis, ["fake1", "fake2"], ["procs"], [1, 2], rounds=3, warmup=0, duration=2,
                   on_pair=seen.append, measure_ours=fake_ours)
    assert [(p.test, p.mode, p.tasks) for p in c] == [("fake1", "procs", 1), ("fake1", "procs", 2),
                                                      ("fake2", "procs", 1), ("fake2", "procs", 2)]
    assert seen == c.pairs and len(c) == 4 and c[0] is c.pairs[0] and not c.not_run
    # Ours first in even rounds, theirs first in odd ones; both at the pair's task count.
    lines = log.read_text().splitlines()
    assert lines[:6] == ["ours fake1 procs 1", "theirs fake1_processes -t 1", "theirs fake1_processes -t 1",
                         "ours fake1 procs 1", "ours fake1 procs 1", "theirs fake1_processes -t 1"]
    assert lines[6] == "ours fake1 procs 2" and lines[7] == "theirs fake1_processes -t 2"
    p = c[0]
    assert p.first == ["ours", "theirs", "ours"]
    assert p.theirs == [1005.0, 995.0, 1005.0] and p.theirs_samples == [[1000, 1010], [990, 1000], [1000, 1010]]
    assert p.theirs_median == 1005.0 and p.ratio == pytest.approx(1000 / 1005)
    assert p.verdict is Verdict.WITHIN and not p.ours_modes.bimodal and not p.theirs_modes.bimodal
    assert c[2].ratio == pytest.approx(1.2) and c[2].verdict is Verdict.APART and c[2].low == c[2].high
    json.dumps([x.to_json() for x in c])  # plain data all through
    assert [pairs.Pair.from_json(json.loads(json.dumps(x.to_json()))) for x in c] == c.pairs


def pause(seconds: float) -> willitscale.Measure:
    def measure(test, mode, tasks, warmup, duration):
        time.sleep(seconds)
        return pairs.Round(100.0, [100.0] * duration)
    return measure


def test_deadline_stops_before_a_pair_that_would_pass_it():
    # Rounds of ~0.3 s, the first guessed at 0.5 s: three fit a 1.1 s deadline (fewer on a loaded machine), a
    # fourth would pass it and is not started.
    start = time.monotonic()
    c = willitscale.compare(Path("/nonexistent"), [f"t{i}" for i in range(8)], ["procs"], [1], rounds=1, warmup=0,
                   duration=1, deadline=start + 1.1, measure_ours=pause(0.2), measure_theirs=pause(0.1),
                   round_estimate=0.5)
    # Within the deadline, less a round that ran longer than all before it (a loaded machine's jitter).
    assert time.monotonic() <= start + 1.1 + 0.15
    assert 1 <= len(c) <= 3
    assert c.not_run == [(f"t{i}", "procs", 1) for i in range(len(c), 8)]
    assert table.format_totals(c).endswith(f"; {8 - len(c)} pairs not run before the deadline")


def test_deadline_guesses_a_first_round_from_the_settings():
    # Before any round is measured it takes 2 × (warmup + duration + 0.5) s = 5 s: a pair of one round
    # does not fit 4.9 s, and nothing is measured.
    start = time.monotonic()
    c = willitscale.compare(Path("/nonexistent"), ["t0"], ["procs"], [1], rounds=1, warmup=1, duration=1,
                   deadline=start + 4.9, measure_ours=pause(0), measure_theirs=pause(0))
    assert not c.pairs and c.not_run == [("t0", "procs", 1)]
    assert table.format_totals(c).startswith("no pair measured; 1 pairs not run before the deadline")


def test_an_interrupt_returns_the_whole_pairs_measured():
    calls = []

    def ours(test, mode, tasks, warmup, duration):
        calls.append(test)
        if len(calls) == 4:  # the second pair's second round
            raise KeyboardInterrupt
        return pairs.Round(100.0, [100.0])

    c = willitscale.compare(Path("/nonexistent"), ["t0", "t1", "t2"], ["procs"], [1], rounds=2, warmup=0, duration=1,
                   measure_ours=ours, measure_theirs=pause(0))
    assert c.interrupted and [p.test for p in c] == ["t0"]
    assert c.not_run == [("t1", "procs", 1), ("t2", "procs", 1)]
    assert table.format_totals(c).endswith("; 2 pairs not run before the interrupt")


@pytest.mark.filterwarnings("default")
def test_a_descriptor_past_64_is_warned_of_and_listed():
    fd = os.dup2(1, 200)
    try:
        with pytest.warns(RuntimeWarning, match="close_inherited_fds"):
            c = willitscale.compare(Path("/nonexistent"), ["t0"], ["procs"], [1], rounds=1, warmup=0, duration=1,
                           measure_ours=pause(0), measure_theirs=pause(0))
    finally:
        os.close(fd)
    assert 200 in c.high_fds and len(c) == 1
    assert 200 not in willitscale.high_fds()


def test_a_pair_cut_short_by_the_deadline_is_dropped():
    log = []

    def ours(test, mode, tasks, warmup, duration):
        log.append(test)
        time.sleep(2.5 if test == "slow" else 0.02)
        return pairs.Round(100.0, [100.0])

    seen = []
    start = time.monotonic()
    c = willitscale.compare(Path("/nonexistent"), ["fast", "slow", "after"], ["threads"], [1], rounds=3, warmup=0,
                   duration=1, deadline=start + 4.0, on_pair=seen.append, measure_ours=ours,
                   measure_theirs=pause(0.02), round_estimate=0.1)
    assert [p.test for p in c] == ["fast"] and seen == c.pairs
    assert c.not_run == [("slow", "threads", 1), ("after", "threads", 1)]
    assert log == ["fast"] * 3 + ["slow"]  # one slow round, then no other that would pass the deadline
    assert time.monotonic() - start < 4.0


def test_a_tool_that_fails_fails_its_pair_and_the_next_pair_is_measured():
    def theirs(test, mode, tasks, warmup, duration):
        if test == "dup1" and mode == "procs":
            raise willitscale.ToolFailed("will-it-scale dup1_processes gave 0 of 1 samples, exit 1", ["no tasks"])
        return pairs.Round(100.0, [100.0])

    seen, failed = [], []
    found = willitscale.compare(Path("/nonexistent"), ["dup1", "getppid1"], ["procs", "threads"], [1], rounds=1,
                                duration=1, warmup=0, on_pair=seen.append, on_failed=failed.append,
                                measure_ours=lambda *_: pairs.Round(100.0, [100.0]), measure_theirs=theirs)
    assert [(p.test, p.mode) for p in found] == [("dup1", "threads"), ("getppid1", "procs"), ("getppid1", "threads")]
    assert seen == list(found) and found.failed == failed and not found.not_run
    assert [(f.test, f.mode, f.tasks, f.lines) for f in failed] == [("dup1", "procs", 1, ["no tasks"])]
    assert table.format_failed(failed[0]).splitlines() == [
        "dup1               procs       1  FAILED: will-it-scale dup1_processes gave 0 of 1 samples, exit 1",
        "    no tasks"]
    totals = table.format_totals(found)
    assert totals.startswith("3 of 3 within ±5%") and "; 1 pairs FAILED" in totals


def test_command_same_flags_bimodal_tools_and_writes_json(tmp_path):
    # --same: the stand-in in both columns. fake1 alternates 1.2M and 2.5M from start to start, so each
    # column gets two rounds of each; steady1 gives 1.0M ± 1%.
    wis = stand_in(tmp_path, {"fake1": ["1190000 1210000", "2490000 2510000"],
                              "steady1": ["1000000 1010000", "995000 1000000", "1005000 990000"]})
    out = tmp_path / "pairs.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vs_will_it_scale.py"), "--wis", str(wis),
                        "--tests", "fake1,steady1", "--tasks", "half,max", "--rounds", "4", "--warmup", "0",
                        "--duration", "2", "--same", "--json", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    print(r.stdout)
    lines = r.stdout.splitlines()
    assert lines[0].split()[:5] == ["test", "mode", "tasks", "theirs'", "ops/s"]
    assert "(4 interleaved rounds, medians)" in lines[0]
    rows = lines[1:-1]
    assert len(rows) == 2 * len(willitscale.task_counts("half,max", len(os.sched_getaffinity(0))))
    for row in rows:
        assert "[eta " in row
        if row.startswith("fake1"):
            assert row.endswith("<-- theirs' bimodal: 1.2M / 2.5M (2 of 4 rounds high); "
                                "theirs bimodal: 1.2M / 2.5M (2 of 4 rounds high)", 0, row.index("   [eta"))
        else:
            assert "<--" not in row
    assert lines[-1].startswith(f"{len(rows) // 2} of {len(rows)} within ±5%, 0 unclear, 0 apart, "
                                f"{len(rows) // 2} bimodal")
    data = json.loads(out.read_text())
    assert data["complete"] and data["settings"]["same"] and not data["not_run"]
    found = data["pairs"]
    assert [p["test"] for p in found] == ["fake1"] * (len(rows) // 2) + ["steady1"] * (len(rows) // 2)
    fake = found[0]
    assert fake["verdict"] == "bimodal" and fake["ours_modes"]["bimodal"] and fake["theirs_modes"]["bimodal"]
    assert len(fake["ours"]) == len(fake["theirs"]) == 4 and all(len(s) == 2 for s in fake["ours_samples"])
    assert sorted(fake["ours"] + fake["theirs"]) == [1.2e6] * 4 + [2.5e6] * 4
    assert found[-1]["verdict"] == "within" and not found[-1]["ours_modes"]["bimodal"]


@needs_native
def test_command_runs_the_real_micro_against_the_stand_in(tmp_path):
    wis = stand_in(tmp_path, {"getppid1": ["1000000"]})
    out = tmp_path / "pairs.json"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vs_will_it_scale.py"), "--wis", str(wis),
                        "--tests", "getppid1", "--modes", "threads", "--tasks", "1", "--rounds", "2", "--warmup",
                        "0", "--duration", "1", "--json", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].split()[:5] == ["test", "mode", "tasks", "ours", "ops/s"]
    assert r.stdout.splitlines()[1].startswith("getppid1           threads     1 ")
    (p,) = json.loads(out.read_text())["pairs"]
    assert p["first"] == ["ours", "theirs"] and p["theirs"] == [1e6, 1e6]
    # mosbench-micro's SUMMARY and its one per-second count in the window agree; getppid runs millions a second.
    for rate, samples in zip(p["ours"], p["ours_samples"], strict=True):
        assert len(samples) == 1 and samples[0] == pytest.approx(rate, abs=1) and rate > 1e5
    assert p["ratio"] == pytest.approx(p["ours_median"] / 1e6)
