"""Each point measures what else ran on its CPUs: a program the test starts on the measured CPU makes
the point interfered (and measured again when asked); a quiet point is not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mosbench.machine import interference
from mosbench.machine.accounting import CpuTimes
from mosbench.machine.interference import KernelThread
from mosbench.store.db import Store
from tests.conftest import mosbench, needs_native, needs_root


def stat(**per_cpu: CpuTimes) -> dict[int, CpuTimes]:
    return {int(k[3:]): v for k, v in per_cpu.items()}


def test_what_is_left_after_the_points_the_kernels_and_the_harnesss_time_is_others():
    """Every kind of time differs from every other, in each CPU's counters and in total, so a term taken
    for another, left out, or counted twice changes a figure below."""
    before = stat(cpu0=CpuTimes(user=10.0, nice=1.0, system=5.0, idle=100.0, iowait=2.0, irq=0.5, softirq=0.7,
                                steal=0.3),
                  cpu1=CpuTimes(user=20.0, nice=2.0, system=6.0, idle=90.0, iowait=3.0, irq=0.6, softirq=0.8,
                                steal=0.4),
                  cpu2=CpuTimes())
    # Over the window: CPU 0 user 1.3, nice 0.035, system 0.35, idle 0.13, iowait 0.011, irq 0.03,
    # softirq 0.07, steal 0.02; CPU 1 user 0.9, nice 0.055, system 0.45, idle 0.41, iowait 0.02, irq 0.01,
    # softirq 0.05, steal 0.04.
    after = stat(cpu0=CpuTimes(user=11.3, nice=1.035, system=5.35, idle=100.13, iowait=2.011, irq=0.53,
                               softirq=0.77, steal=0.32),
                 cpu1=CpuTimes(user=20.9, nice=2.055, system=6.45, idle=90.41, iowait=3.02, irq=0.61, softirq=0.85,
                               steal=0.44),
                 # not measured: whatever ran there is no business of the point's
                 cpu2=CpuTimes(user=2.0, nice=0.3, system=0.6, irq=0.25, softirq=0.15, steal=0.45))
    found = interference.account(before, after, (0, 1), window_s=2.0, ours_s=2.6, kernel_threads_s=0.13,
                                 harness_s=0.07)
    # Totals over CPUs 0 and 1: user 2.2, nice 0.09, system 0.8, idle 0.54, iowait 0.031, irq 0.04,
    # softirq 0.12, steal 0.06. Busy is user + nice + system + irq + softirq = 3.25 (idle, iowait and
    # steal are not), of which interrupts 0.16; the point's own 2.6, kernel threads 0.13, the harness
    # 0.07; the rest, 0.29, others'.
    assert found.interrupts_s == pytest.approx(0.16)
    assert found.other_s == pytest.approx(0.29)
    assert found.steal_s == pytest.approx(0.06)
    assert found.kernel_threads_s == pytest.approx(0.13) and found.harness_s == pytest.approx(0.07)
    assert found.capacity_s == pytest.approx(4.0)
    assert found.share == pytest.approx((0.29 + 0.06) / 4.0)
    assert found.as_metrics() == {"other_s": 0.29, "steal_s": 0.06, "interrupts_s": 0.16, "kernel_threads_s": 0.13,
                                  "harness_s": 0.07, "capacity_s": 4.0, "share": 0.0875}
    assert interference.describe(found.as_metrics()) == (
        "8.8% of the point's CPU time (others 0.29 s, steal 0.06 s of 4 s)")


def test_memory_the_guest_reported_to_its_host_is_kept_with_the_window_and_said():
    before, after = stat(cpu0=CpuTimes()), stat(cpu0=CpuTimes(user=0.7, system=0.1, steal=0.2))
    found = interference.account(before, after, (0,), 1.0, ours_s=0.8, kernel_threads_s=0.0, harness_s=0.0,
                                 reported_mib=640.25)
    assert found.as_metrics()["reported_mib"] == 640.2 and found.share == pytest.approx(0.2)
    assert interference.describe(found.as_metrics()) == (
        "20.0% of the point's CPU time (others 0 s, steal 0.2 s of 1 s); 640 MiB of free memory reported to the host")
    # A kernel that counts none: nothing is claimed, not a zero.
    plain = interference.account(before, after, (0,), 1.0, ours_s=0.8, kernel_threads_s=0.0, harness_s=0.0)
    assert "reported_mib" not in plain.as_metrics() and "reported" not in interference.describe(plain.as_metrics())


def test_the_reported_count_is_read_where_the_kernel_keeps_it_and_none_elsewhere(tmp_path, monkeypatch):
    counter = tmp_path / "reported_kib"
    monkeypatch.setattr(interference, "REPORTED_KIB", counter)
    assert interference.reported_kib() is None
    counter.write_text("672868692\n")
    assert interference.reported_kib() == 672868692
    counter.write_text("")
    assert interference.reported_kib() is None


def test_a_window_keeps_what_was_reported_between_its_ends(monkeypatch):
    from mosbench.machine.isolation import Group
    from mosbench.run import window

    class Counted(Group):  # a group whose CPU time is known, as a cgroup's is
        def cpu_seconds(self) -> tuple[float, float]:
            return (0.0, 0.0)

    groups = window.WindowGroups(Counted((0,)))
    counts = iter([1_000_000, 1_000_000 + 3 * 1024])
    monkeypatch.setattr(interference, "reported_kib", lambda: next(counts))
    a, b = window._Ends.read(groups), window._Ends.read(groups)
    found = window._interference(a, b, groups, (0,), 1.0)
    assert found is not None and found.reported_mib == 3.0


def test_a_point_that_was_all_its_own_reads_no_interference_never_a_negative_figure():
    before = stat(cpu0=CpuTimes())
    after = stat(cpu0=CpuTimes(user=0.9, system=0.1))
    # the cgroup's exact time runs a little past /proc/stat's ticks
    found = interference.account(before, after, (0,), 1.0, ours_s=1.004, kernel_threads_s=0.0, harness_s=0.0)
    assert found.other_s == 0.0 and found.share == 0.0


def test_kernel_threads_count_where_they_last_ran_and_a_reused_pid_from_zero():
    before = {10: KernelThread(started=5, seconds=1.0, last_cpu=0), 11: KernelThread(5, 2.0, 1),
              12: KernelThread(5, 3.0, 0)}
    after = {10: KernelThread(5, 1.25, 0),  # a kworker of CPU 0: 0.25 s
             11: KernelThread(5, 9.0, 1),  # CPU 1 is not the point's
             12: KernelThread(99, 0.5, 0),  # pid 12 died and a new thread took it: all 0.5 s are new
             13: KernelThread(99, 0.1, 0)}  # born in the window
    assert interference.kernel_thread_seconds(before, after, (0,)) == pytest.approx(0.85)


def test_this_machines_kernel_threads_are_found_and_no_program_among_them():
    found = interference.kernel_threads()
    assert 2 in found  # kthreadd
    assert os.getpid() not in found and 1 not in found


def test_a_kernel_thread_scan_slower_than_its_budget_is_given_up_and_not_made_again(monkeypatch):
    monkeypatch.setattr(interference, "_scans_too_slow", False)
    monkeypatch.setattr(interference, "SLOW_SCAN_S", -1.0)
    assert interference.kernel_threads() == {}  # given up part-way: no partial scan
    monkeypatch.setattr(interference, "SLOW_SCAN_S", 60.0)
    assert interference.kernel_threads() == {}  # and not made again in this process


def cpu_hog(cpu: int) -> subprocess.Popen:
    """A program of the test's, outside every group of the run, busy on one CPU."""
    return subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])


def run_getppid(store: Path, *extra: str) -> subprocess.CompletedProcess:
    return mosbench("run", "micro/getppid1", "--cores", "1", "--variant", "procs", "--trials", "1",
                    "--warmup", "0.3", "--duration", "1", "--store", str(store), *extra)


@needs_root
@needs_native
def test_a_cpu_hog_on_the_measured_cpu_makes_the_point_interfered(tmp_path: Path):
    store = tmp_path / "hog.sqlite"
    hog = cpu_hog(0)  # --cores 1 packs the point on CPU 0
    try:
        r = run_getppid(store, "--retry-interfered", "1")
    finally:
        hog.kill()
        hog.wait()
    assert r.returncode == 0, r.stderr
    assert "measuring it again (1 of 1)" in r.stderr
    assert "INTERFERED: other programs took" in r.stderr and "1 interfered" in r.stdout
    [p] = Store(str(store)).points(1)
    assert p["status"] == "ok" and p["interfered"] is True
    assert p["interference"] > 0.2  # the hog had half the CPU, give or take the scheduler
    assert len(p["metrics"]["interfered_attempts"]) == 1 and p["metrics"]["interfered_attempts"][0] > 0.2
    shown = mosbench("show", "1", "--store", str(store))
    assert shown.returncode == 0 and "interfered" in shown.stdout.lower()


@needs_root
@needs_native
def test_a_quiet_point_is_not_interfered(tmp_path: Path):
    store = tmp_path / "quiet.sqlite"
    r = run_getppid(store)
    assert r.returncode == 0, r.stderr
    [p] = Store(str(store)).points(1)
    assert p["interfered"] is False and p["interference"] < interference.DEFAULT_THRESHOLD, p["metrics"]
    assert "INTERFERED" not in r.stderr


def point(trial: int, per_core: float, interfered: bool) -> dict:
    return {"workload": "micro", "test": "getppid1", "variant": "procs", "cores": 1, "trial": trial,
            "status": "ok", "unit": "op", "cpus": "0", "work": per_core, "throughput": per_core, "window_s": 1.0,
            "user_s": 0.5, "system_s": 0.5, "idle_s": 0.0, "steal_s": 0.0, "cgroup_user_s": 0.5,
            "cgroup_system_s": 0.5, "samples": [], "metrics": {}, "interference": 0.4 if interfered else 0.001,
            "interfered": interfered}


def test_compare_leaves_interfered_trials_out_unless_asked():
    from mosbench.analysis import cells, compare

    base = cells.build_series([point(1, 100.0, False), point(2, 102.0, False)])
    other = cells.build_series([point(1, 50.0, True), point(2, 99.0, False), point(3, 101.0, False)])
    [kept] = compare.changes(base, other)
    assert kept.other == (99.0, 101.0) and "1 interfered trial left out" in kept.note
    [used] = compare.changes(base, other, include_interfered=True)
    assert used.other == (50.0, 99.0, 101.0) and "interfered" not in used.note
    only_interfered = cells.build_series([point(1, 50.0, True)])
    [refused] = compare.changes(base, only_interfered)
    assert refused.ratio is None and "interfered (--include-interfered compares it)" in refused.note


def test_show_and_report_mark_interfered_trials():
    from mosbench.analysis import cells
    from mosbench.report import rows

    series = cells.build_series([point(1, 100.0, False), point(2, 60.0, True)])
    assert rows.interference_banner(series).startswith("1 of 2 measured trials were interfered with")
    [t] = rows.cell_tables(series)
    assert t.column("limit") == ["interfered 1/2, up to 40%"]
    freed = point(2, 60.0, True)
    freed["metrics"] = {"interference": {"share": 0.4, "steal_s": 0.4, "reported_mib": 704.0}}
    [t] = rows.cell_tables(cells.build_series([point(1, 100.0, False), freed]))
    assert t.column("limit") == ["interfered 1/2, up to 40%, 704 MiB reported to the host"]
    assert rows.interference_banner(cells.build_series([point(1, 100.0, False)])) is None
