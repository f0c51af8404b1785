"""--profile: perf's samples folded into stacks, per unit of work, what grew, and the flame graph."""

import re
import sqlite3
from collections import Counter

import pytest

from mosbench.analysis import profiles
from mosbench.analysis.cells import SeriesKey
from mosbench.report import flamegraph, html
from mosbench.run import profiler as profile
from mosbench.store import db as store
from tests.conftest import mosbench, mosbench_here, needs_native, needs_root
from tests.test_run_system import _our_cgroups

# perf script -F comm,pid,period,ip,sym,dso, as perf 6.1 prints it (trimmed from a real recording).
SCRIPT = """\
mosbench-micro 22204    1003009\x20
\tffffffff8139a0e0 __task_pid_nr_ns ([kernel.kallsyms])
\tffffffff8225a6c1 do_syscall_64 ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t           e4a17 getppid (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t            1d2b [unknown] (/work/native/build/mosbench-micro)

mosbench-micro 22204    1003009\x20
\t           e4a17 getppid (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t            1d2b [unknown] (/work/native/build/mosbench-micro)

kworker/0:1-mm_ 61    1003009\x20
\tffffffffc0a01234 nf_conntrack_in ([nf_conntrack])
\tffffffff81394e5a kthread ([kernel.kallsyms])

swapper     0    1003009\x20
\tffffffff8226de41 default_idle ([kernel.kallsyms])
\tffffffff81394e5a do_idle ([kernel.kallsyms])

mosbench-micro 22204    1003009\x20
\tffffffff8139a0e0 __task_pid_nr_ns ([kernel.kallsyms])
\tffffffff8225a6c1 do_syscall_64 ([kernel.kallsyms])
\tffffffff81000130 entry_SYSCALL_64_after_hwframe ([kernel.kallsyms])
\t           e4a17 getppid (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t            1d2b [unknown] (/work/native/build/mosbench-micro)
"""


def test_perf_script_folds_outermost_first_with_kernel_frames_marked():
    stacks, period = profile.fold(SCRIPT)
    assert period == 1003009
    assert stacks == Counter({
        "mosbench-micro;[mosbench-micro];getppid;entry_SYSCALL_64_after_hwframe_[k];do_syscall_64_[k];"
        "__task_pid_nr_ns_[k]": 2,
        "mosbench-micro;[mosbench-micro];getppid": 1,
        "kworker/0:1-mm_;kthread_[k];nf_conntrack_in_[k]": 1,  # a module's frame is the kernel's too
        "swapper;do_idle_[k];default_idle_[k]": 1,
    })


def test_a_command_with_spaces_and_a_semicolon_in_a_symbol_stay_one_frame():
    stacks, _ = profile.fold("Web Content 7 1000\n\t  10 a;b (/x)\n\n")
    assert stacks == Counter({"Web Content;a:b": 1})


def test_rare_stacks_fold_into_other_under_their_command():
    stacks = Counter({f"cmd;f{i}": 10 - i for i in range(10)})
    kept = profile.trim(stacks, keep=3)
    assert kept == {"cmd;f0": 10, "cmd;f1": 9, "cmd;f2": 8, "cmd;[other stacks]": sum(range(1, 8))}
    assert sum(kept.values()) == sum(stacks.values())


def _point(cores, stacks, work, trial=1, **kw):
    return {"workload": "micro", "test": "getppid1", "variant": "procs", "cores": cores, "trial": trial,
            "status": "ok", "work": work,
            "profile": {"stacks": stacks, "period_ns": 1_000_000, "window_s": 1.0, "samples": sum(stacks.values()),
                        **kw}}


def test_time_per_unit_of_work_and_what_grew():
    # One core: 1000 samples of 1 ms on 1M ops = 1 µs/op, all in getppid.
    one = profiles.Profile.of_points([_point(1, {"m;getppid;sys_getppid_[k]": 1000, "swapper;idle_[k]": 50}, 1e6)])
    # Two cores, two trials added up: 2 ms... per op grew into a lock.
    two = profiles.Profile.of_points([
        _point(2, {"m;getppid;sys_getppid_[k]": 1000, "m;getppid;spin_lock_[k]": 1000}, 1e6),
        _point(2, {"m;getppid;sys_getppid_[k]": 1000, "m;getppid;spin_lock_[k]": 1000}, 1e6, trial=2)])
    assert one.self_time() == {"sys_getppid_[k]": pytest.approx(1.0)}  # idle is not work's time
    assert two.self_time() == {"sys_getppid_[k]": pytest.approx(1.0), "spin_lock_[k]": pytest.approx(1.0)}
    grew = profiles.growth(one, two)
    assert grew[0].function == "spin_lock_[k]" and grew[0].change_us == pytest.approx(1.0)
    assert grew[1].function == "sys_getppid_[k]" and grew[1].change_us == pytest.approx(0.0)
    assert two.leaf_comms() == {"sys_getppid_[k]": "m", "spin_lock_[k]": "m"}


def test_profiles_are_grouped_by_series_and_points_without_one_are_left_out():
    pts = [_point(1, {"m;a": 10}, 100.0), _point(2, {"m;a": 10}, 100.0), _point(2, {"m;b": 10}, 100.0, trial=2),
           dict(_point(4, {"m;a": 1}, 1.0), status="failed"), dict(_point(8, {}, 1.0), profile=None)]
    found = profiles.by_series(pts)
    assert list(found) == [SeriesKey("micro", "getppid1", "procs")]
    by_cores = found[SeriesKey("micro", "getppid1", "procs")]
    assert sorted(by_cores) == [1, 2] and by_cores[2].work == 200.0 and by_cores[2].stacks == Counter({"m;a": 10,
                                                                                                       "m;b": 10})


def test_hardware_counters_per_unit_and_their_absence():
    with_pmu = profiles.Profile.of_points([_point(1, {"m;a": 1}, 100.0,
                                                  pmu={"cycles": 4000.0, "instructions": 2000.0})])
    assert with_pmu.hardware_per_unit() == {"cycles_per_unit": 40.0, "instructions_per_unit": 20.0, "ipc": 0.5}
    without = profiles.Profile.of_points([_point(1, {"m;a": 1}, 100.0, pmu_absent="no hardware counters")])
    assert without.hardware_per_unit() == {} and without.pmu_absent == "no hardware counters"
    assert profile.parse_pmu("1234,,cycles,100.00,,\n<not supported>,,instructions,0,100.00,,\n") == {"cycles": 1234.0}


def test_the_flame_graph_is_as_wide_as_the_time_and_red_where_it_grew():
    one = profiles.Profile.of_points([_point(1, {"m;getppid;sys_getppid_[k]": 1000}, 1e6)])
    two = profiles.Profile.of_points([_point(2, {"m;getppid;sys_getppid_[k]": 1000, "m;getppid;spin_lock_[k]": 3000},
                                            1e6)])
    svg = flamegraph.svg(one, two, 1, 2, "op")
    rects = {m[1]: (float(m[2]), m[3]) for m in re.finditer(
        r"<title>([^:<]+): .*?</title><rect [^>]*width=\"([0-9.]+)\"[^>]*fill=\"([^\"]+)\"", svg)}
    assert rects["spin_lock_[k]"][0] == pytest.approx(0.75 * flamegraph.WIDTH - 0.5, abs=1)
    assert rects["sys_getppid_[k]"][0] == pytest.approx(0.25 * flamegraph.WIDTH - 0.5, abs=1)
    assert rects["spin_lock_[k]"][1] == "rgb(235,65,65)"  # grew the most: full red
    assert rects["sys_getppid_[k]"][1] == "rgb(225,225,225)"  # unchanged
    assert "CPU µs per op at 2 cores (4 in all), coloured by the change from 1 (1)" in svg


@needs_root
@needs_native
@pytest.mark.skipif(profile.unavailable() is not None, reason=f"perf cannot sample here: {profile.unavailable()}")
def test_a_profiled_run_stores_the_windows_stacks_and_the_report_shows_them(tmp_path):
    db_path = tmp_path / "s.sqlite"
    r = mosbench("run", "micro/getppid1", "micro/dup1", "--variant", "threads", "--cores", "1,2", "--trials", "1",
                 "--warmup", "0.5", "--duration", "1", "--profile", "micro/getppid1", "--store", str(db_path))
    assert r.returncode == 0, r.stderr
    db = store.Store(str(db_path))
    pts = db.points(1, with_profiles=True)
    assert [p["profile"] is not None for p in pts] == [False, False, True, True]  # dup1, then getppid1
    for p in pts[2:]:
        prof = p["profile"]
        assert prof["event"] == "cpu-clock" and prof["samples"] > 0
        # The window alone: about a second of each measured CPU, not the warm-up as well.
        assert prof["samples"] <= 1.6 * profile.FREQUENCY * p["cores"] * p["window_s"]
        ours = sum(n for s, n in prof["stacks"].items() if s.startswith("mosbench-micro;"))
        assert ours > 0.5 * prof["samples"]
        assert any("getppid" in s and s.endswith("_[k]") for s in prof["stacks"] if s.startswith("mosbench-micro"))
        # Locks are traced over the warm-up, and its work is what they are counted against.
        assert prof["locks_work"] > 0 and isinstance(prof["locks"], list)
        assert "perf_swevent_event_[k]" not in {s.split(";")[-1] for s in prof["stacks"]}  # no tracing in the window
    assert db.run(1)["environment"]["profiling"]["event"] == "cpu-clock"
    text = html.write(db, ["1"], tmp_path / "r.html").read_text()
    assert "Where the time went" in text and "differential flame graph" in text
    assert (tmp_path / "r_files" / "micro_getppid1_threads_flame.svg").exists()
    assert not _our_cgroups()
    assert sqlite3.connect(db_path).execute("select count(*) from points where profile is null").fetchone()[0] == 2


@needs_native
def test_profiling_a_selection_the_run_does_not_make_is_refused(tmp_path):
    r = mosbench_here("run", "micro/getppid1", "--profile", "micro/dup1", "--store", str(tmp_path / "s.sqlite"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "mosbench: --profile micro/dup1: not among this run's selections (micro, micro/getppid1)"]


def test_the_sampling_frequency_keeps_a_big_machine_within_its_budget():
    assert profile.frequency_for(2, 2.0) == profile.FREQUENCY
    assert profile.frequency_for(256, 5.0) == 390
    assert profile.frequency_for(4096, 3600.0) == profile.MIN_FREQUENCY


# /proc/lock_stat as Documentation/locking/lockstat.rst lays it out (version 0.4; times in µs).
LOCK_STAT = """\
lock_stat version 0.4
-----------------------------------------------------------------------------------------------------
                              class name    con-bounces    contentions   waittime-min   waittime-max \
waittime-total   waittime-avg    acq-bounces   acquisitions   holdtime-min   holdtime-max holdtime-total   holdtime-avg
-----------------------------------------------------------------------------------------------------

                         &mm->mmap_lock-W:            46             84           0.26         939.10 \
      16371.53         194.90          47291        2922365           0.16     2220301.69 17464026916.32        5975.99
                         &mm->mmap_lock-R:            39            100           0.15        1182.96 \
      19279.12         192.79          67186        2734522           0.11     2220261.74 17464026916.32        6389.39
                         ---------------
                           &mm->mmap_lock  1  [<ffffffff811502a7>] khugepaged_scan_mm_slot+0x57/0x280
                           &mm->mmap_lock  96  [<ffffffff815351c4>] __do_page_fault+0x1d4/0x510
                         ---------------
.............................................................................................................

                              unix_table_lock:           110            112           0.21          49.24 \
        163.91           1.46          21094          66312           0.12         624.42       31589.81           0.48
                              ---------------
                              unix_table_lock             45          [<ffffffff8150ad8e>] unix_create1+0x16e/0x1b0
                   &files->file_lock:             0              0           0.00           0.00 \
          0.00           0.00             10            400           0.10           1.00          20.00           0.05
                              ---------------
                              unix_table_lock             45          [<ffffffff8150ad8e>] unix_create1+0x16e/0x1b0
"""


def test_lock_stat_stands_in_for_the_tracepoints_where_the_kernel_keeps_it():
    locks = profile.parse_lock_stat(LOCK_STAT)
    assert [(lock["caller"], lock["contended"], lock["wait_total_us"]) for lock in locks] == [
        ("&mm->mmap_lock-R", 100, 19279.12), ("&mm->mmap_lock-W", 84, 16371.53), ("unix_table_lock", 112, 163.91)]
    assert locks[1]["stack"] == ["khugepaged_scan_mm_slot+0x57/0x280", "__do_page_fault+0x1d4/0x510"]
    assert locks[2]["stack"] == ["unix_create1+0x16e/0x1b0"]  # the uncontended class after it takes none
    prof = profiles.Profile.of_points([_point(2, {"m;a": 1}, 100.0, locks=locks, locks_work=1000.0)])
    assert prof.lock_waits()[0][0] == "&mm->mmap_lock-R" and prof.lock_waits()[0][2] == pytest.approx(19.27912)
