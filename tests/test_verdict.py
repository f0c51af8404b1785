"""The verdict per curve, checked against cases whose bottleneck is known from the kernel's source.

tests/fixtures/verdict-cases.json holds real points with their profiles, recorded on a 2-vCPU VM by
tests/fixtures/record_verdict_cases.py (1 and 2 cores, three trials, --profile). The analysis reads
only what the store holds: no perf, no machine.
"""

import json
import re
from pathlib import Path

import pytest

from mosbench.analysis import cells as analysis
from mosbench.analysis import profiles, verdict
from mosbench.workloads import registry
from tests.fixtures import __file__ as fixtures_init
from tests.test_store import _point

CASES = json.loads((Path(fixtures_init).parent / "verdict-cases.json").read_text())


def _verdicts(points):
    return {(v.name, v.variant): v for v in verdict.judge_all(analysis.build_series(points),
                                                                profiles.by_series(points))}


@pytest.fixture(scope="module")
def judged():
    return _verdicts(CASES)


def test_threads_sharing_a_descriptor_table_contend_on_its_lock(judged):
    v = judged[("micro/dup1", "threads")]
    assert v.category == "kernel" and "descriptor table (files_struct.file_lock)" in v.cause
    assert v.confidence == "high"
    assert any(e.startswith("perf lock: spinlock") for e in v.evidence)


def test_processes_with_tables_of_their_own_scale(judged):
    assert judged[("micro/dup1", "procs")].category == "scales"


def test_processes_locking_one_file_meet_on_its_lock_list(judged):
    v = judged[("micro/lock2", "procs")]
    assert v.category == "kernel" and "the file's lock list" in v.cause


def test_a_contended_pthread_mutex_is_the_applications_lock_though_its_waits_are_in_the_kernel(judged):
    v = judged[("micro/pthread_mutex1", "threads")]
    assert v.category == "application" and "the application's lock" in v.cause
    assert any("futex calls of a contended user-space lock" in e for e in v.evidence)


def test_one_atomic_counter_is_a_shared_cache_line_in_the_function_that_bumps_it(judged):
    v = judged[("scale/counter", "stock")]
    assert v.category == "application" and "shared cache line" in v.cause
    assert v.confidence == "high" and v.loss > 0.5


def test_threads_faulting_mappings_of_their_own_scale_at_two_cores(judged):
    """page_fault2's threads share one mm, but a fault takes its own VMA's lock (lock_vma_under_rcu, in
    every recorded stack), not the mm's mmap_lock; the LRU lock perf lock saw at 2 cores waited about
    0.015 µs per fault against 3.4 µs of CPU. Nothing they share costs them at two cores."""
    v = judged[("micro/page_fault2", "threads")]
    assert v.category == "scales" and abs(v.loss) < 0.1


def test_nothing_in_the_verdict_knows_a_test():
    """Causes come from the evidence and the kernel's functions, never from which test ran."""
    source = Path(verdict.__file__).read_text()
    # Test names with a digit or an underscore (dup1, tcp_pingpong) cannot be ordinary words; the others
    # (scale's "lock", "dentry") can, so those are looked for as workload/test.
    tests = [(w.name, t.name) for w in registry.all_workloads() for t in w.tests() if t.name]
    names = {t for _, t in tests if re.search(r"[0-9_]", t)} | {f"{w}/{t}" for w, t in tests}
    named = sorted(n for n in names if re.search(rf"(?<![\w/]){re.escape(n)}(?![\w/])", source))
    assert len(names) > 70 and not named


def test_without_profiles_the_class_stands_and_the_verdict_asks_for_them():
    bare = [{k: v for k, v in p.items() if k != "profile"} for p in CASES]
    v = _verdicts(bare)[("micro/dup1", "threads")]
    assert v.category == "kernel" and "run with --profile" in v.cause and v.confidence != "high"


def test_where_the_machine_had_no_perf_the_advice_says_so():
    """--profile cannot run where perf is missing: the advice names what is missing instead."""
    series = analysis.build_series([{k: v for k, v in p.items() if k != "profile"} for p in CASES])
    advice = verdict.profile_advice({"tools": {"gcc": "gcc 13", "perf": None}})
    assert "perf was not installed" in advice and "linux-perf" in advice
    assert verdict.profile_advice({"tools": {"perf": "perf version 6.1"}}) == verdict.RUN_WITH_PROFILE
    assert verdict.profile_advice({}) == verdict.RUN_WITH_PROFILE  # a store older than the tools' record
    v = next(v for v in verdict.judge_all(series, {}, advice) if (v.name, v.variant) == ("micro/dup1", "threads"))
    assert advice in v.cause and "--profile" not in v.cause


def _cells(per_core, **parts_by_cores):
    """Points at 1 and 2 cores (two trials each) with the given seconds per part."""
    pts = []
    for cores, tp in per_core.items():
        for trial, jitter in ((1, 1.0), (2, 0.99)):
            work = tp * cores * jitter
            base = dict(user_s=0.5 * cores, system_s=0.5 * cores, idle_s=0.0, steal_s=0.0, cgroup_user_s=None,
                        cgroup_system_s=None)
            base.update(parts_by_cores.get(str(cores), {}))
            pts.append(_point(cores=cores, trial=trial, work=work, throughput=work, **base))
    return pts


def test_stolen_time_is_the_hosts():
    pts = _cells({1: 100.0, 2: 50.0}, **{"2": dict(user_s=0.5, system_s=0.5, steal_s=1.0)})
    v = verdict.judge_all(analysis.build_series(pts), {})[0]
    assert v.category == "hardware" and "hypervisor" in v.cause and v.loss == pytest.approx(0.5, abs=0.01)


def test_idle_cpus_behind_a_saturated_client_are_lack_of_work():
    pts = _cells({1: 100.0, 2: 50.0}, **{"2": dict(user_s=0.5, system_s=0.5, idle_s=1.0)})
    for p in pts:
        if p["cores"] == 2:
            p["metrics"] = {"client_bound": True}
    v = verdict.judge_all(analysis.build_series(pts), {})[0]
    assert v.category == "lack of work" and "client was the limit" in v.cause


def test_tasks_asleep_on_a_traced_kernel_mutex_name_the_lock_the_trace_found():
    """Idle grows and perf lock saw a sleeping lock wait most of it: the trace's caller names the object
    (here lseek's inode lock), not the profile's busiest stack."""
    pts = _cells({1: 100.0, 2: 50.0}, **{"2": dict(user_s=0.5, system_s=0.5, idle_s=1.0)})
    for p in pts:
        # The profile's heaviest lock stack is another lock's (the descriptor table's spinlock).
        busy = {"t;__x64_sys_dup_[k];alloc_fd_[k];_raw_spin_lock_[k]": 80,
                "t;__x64_sys_lseek_[k];ksys_lseek_[k];ext4_llseek_[k];down_write_[k]": 20}
        lock = {"caller": "ext4_llseek_[k]", "type": "rwsem:W", "contended": p["work"] * 0.5,
                "wait_total_us": p["work"] * (0.0 if p["cores"] == 1 else 4000.0),
                "stack": ["down_write_[k]", "ext4_llseek_[k]", "ksys_lseek_[k]"]}
        p["profile"] = {"stacks": busy, "period_ns": 1e6, "locks": [lock], "locks_work": p["work"]}
    v = verdict.judge_all(analysis.build_series(pts), profiles.by_series(pts))[0]
    assert v.category == "kernel" and v.cause.startswith("tasks sleep on a contended kernel lock")
    assert "inode lock (i_rwsem)" in v.cause
    assert any(e.startswith("perf lock: rwsem:W from ext4_llseek") for e in v.evidence)


def test_another_programs_user_time_is_interference():
    pts = _cells({1: 100.0, 2: 50.0}, **{"1": dict(cgroup_user_s=0.5, cgroup_system_s=0.5),
                                         "2": dict(user_s=2.0, system_s=1.0, cgroup_user_s=0.5,
                                                   cgroup_system_s=1.0)})
    v = verdict.judge_all(analysis.build_series(pts), {})[0]
    assert v.category == "interference" and "other programs" in v.cause


def test_a_flat_curve_scales_and_one_core_count_is_refused():
    assert verdict.judge_all(analysis.build_series(_cells({1: 100.0, 2: 99.0})), {})[0].category == "scales"
    one = [p for p in _cells({1: 100.0, 2: 99.0}) if p["cores"] == 1]
    v = verdict.judge_all(analysis.build_series(one), {})[0]
    assert v.category == "unknown" and "two core counts" in v.cause


def test_kernel_objects_prefer_the_specific_to_the_generic():
    frames = ["_raw_spin_unlock_irqrestore_[k]", "__wake_up_[k]", "__locks_wake_up_blocks_[k]", "posix_lock_inode_[k]"]
    assert verdict.kernel_object(frames)[1].startswith("the file's lock list")
    assert verdict.kernel_object(["__wake_up_[k]", "do_syscall_64_[k]"])[1] == "a wait queue's lock"
    assert verdict.kernel_object(["alloc_fd+0x2c"]) == ("alloc_fd", verdict.kernel_object(["alloc_fd_[k]"])[1])
    assert verdict.kernel_object(["nothing_known_[k]"]) is None


def test_file_system_locks_are_named_as_fxmark_names_them():
    rename = ["osq_lock_[k]", "__mutex_lock.constprop.0_[k]", "lock_rename_[k]", "do_renameat2_[k]"]
    assert verdict.kernel_object(rename) == ("lock_rename", "the file system's rename lock (s_vfs_rename_mutex)")
    write = ["rwsem_down_write_slowpath_[k]", "down_write_[k]", "ext4_buffered_write_iter_[k]", "vfs_write_[k]"]
    assert verdict.kernel_object(write)[1].startswith("the file's inode lock")
    fsync = ["_raw_spin_lock_[k]", "start_this_handle_[k]", "jbd2__journal_start_[k]", "ext4_sync_file_[k]"]
    assert verdict.kernel_object(fsync)[1].startswith("ext4's journal")


def test_a_baseline_that_idles_is_marked_not_judged():
    """A 1-core point idling 40% was not given enough work: the verdict, the summary table and its figure
    say so instead of reading the per-core ratio against it as a result."""
    from mosbench.report import plots, rows

    def point(cores, trial, throughput, idle):
        return _point(workload="postgres", test="read-only", variant="shared", cores=cores, trial=trial,
                      throughput=throughput, work=throughput, user_s=0.5 * (1 - idle), system_s=0.5 * (1 - idle),
                      idle_s=idle)
    pts = [point(1, t, 1000.0, 0.45) for t in (1, 2)] + [point(2, t, 5000.0, 0.02) for t in (1, 2)]
    (s,) = analysis.build_series(pts)
    assert s.unsaturated_baseline() == pytest.approx(0.45)
    (v,) = verdict.judge_all([s], {})
    assert v.category == "unknown" and v.cause.startswith("baseline not saturated: the 1-core point idles 45%")
    table = rows.summary_table([s])
    assert table.column("ratio") == ["baseline not saturated (idles 45%)"]
    fig = plots.summary_figure([s])
    assert fig is None  # its only bar is not drawn

    saturated = [point(1, t, 1000.0, 0.05) for t in (1, 2)] + [point(2, t, 1800.0, 0.02) for t in (1, 2)]
    (ok,) = analysis.build_series(saturated)
    assert ok.unsaturated_baseline() is None and rows.summary_table([ok]).column("ratio") == ["0.90"]
