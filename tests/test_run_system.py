"""End to end on this machine: real runs, Ctrl-C, resume, hotplug and a killed harness."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mosbench.isolation import detect_cgroups
from tests.conftest import ROOT, mosbench, needs_native, needs_root

pytestmark = needs_native


def _leftovers(run_marker: str) -> list[str]:
    """Processes of ours still alive: anything whose command line names the run's scratch directory."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if run_marker in cmd and state != "Z":
                found.append(f"{d.name}: {cmd}")
    return found


def _our_cgroups() -> list[Path]:
    layout = detect_cgroups()
    if layout is None:
        return []
    dirs = [layout.cpuset] + ([layout.cpuacct] if layout.cpuacct else [])
    return [p for d in dirs for p in d.glob("mosbench-*")]


def _wait_points(db: Path, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            try:
                if sqlite3.connect(db).execute("select count(*) from points").fetchone()[0] >= n:
                    return
            except sqlite3.OperationalError:
                pass
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} points after {timeout} s")


def test_run_show_report_export(tmp_path):
    db = tmp_path / "s.sqlite"
    r = mosbench("run", "micro/getppid1", "micro/open3", "--cores", "1..max", "--trials", "2", "--warmup", "0.5",
                 "--duration", "1", "--store", str(db))
    assert r.returncode == 0, r.stderr
    rows = sqlite3.connect(db).execute(
        "select status, throughput, user_s, system_s, cgroup_user_s, samples, cpus from points").fetchall()
    ncores = len(os.sched_getaffinity(0))
    assert len(rows) == 2 * 2 * 2 * len({1, ncores})
    assert all(s == "ok" and tp > 0 and u + sy > 0 for s, tp, u, sy, *_ in rows)
    assert all(len(json.loads(samples)) >= 1 for *_, samples, _ in rows)
    env = json.loads(sqlite3.connect(db).execute("select environment from runs").fetchone()[0])
    assert env["kernel"] and env["topology"]["cpus"] and "thp" in env and env["mosbench_version"]

    show = mosbench("show", "latest", "--store", str(db))
    assert show.returncode == 0 and "getppid1" in show.stdout
    out = tmp_path / "rep" / "r.html"
    rep = mosbench("report", "latest", "-o", str(out), "--store", str(db))
    assert rep.returncode == 0, rep.stderr
    html = out.read_text()
    assert "<svg" in html and "micro/open3" in html and "Summary" in html
    assert (out.parent / "r_files" / "summary.png").stat().st_size > 1000
    csv = mosbench("export", "latest", "--format", "csv", "--store", str(db))
    assert csv.returncode == 0 and csv.stdout.count("\n") == len(rows) + 1
    js = json.loads(mosbench("export", "latest", "--format", "json", "--store", str(db)).stdout)
    assert len(js["points"]) == len(rows) and js["run"]["status"] == "complete"
    assert not _our_cgroups()


def test_ctrl_c_keeps_points_cleans_up_and_resumes(tmp_path):
    db = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "micro/getppid1", "micro/page_fault1",
                             "--cores", "1,max", "--trials", "3", "--warmup", "0.3", "--duration", "1",
                             "--store", str(db)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    _wait_points(db, 2)
    time.sleep(0.5)  # land inside a point, with its runner and cgroups alive
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    con = sqlite3.connect(db)
    status = con.execute("select status from runs").fetchone()[0]
    kept = con.execute("select count(*) from points where status = 'ok'").fetchone()[0]
    assert status == "incomplete" and kept >= 2
    assert not _leftovers("mosbench-run1-"), "processes of the interrupted run are still alive"
    assert not _our_cgroups(), "cgroups of the interrupted run remain"

    r = mosbench("run", "--resume", "latest", "--store", str(db))
    assert r.returncode == 0, r.stderr
    assert con.execute("select status from runs").fetchone()[0] == "complete"
    total = 2 * 2 * 3 * len({1, len(os.sched_getaffinity(0))})
    assert con.execute("select count(*) from points").fetchone()[0] == total


def test_sigterm_mid_point(tmp_path):
    db = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "micro/tcp1", "--cores", "max",
                             "--trials", "5", "--warmup", "0.2", "--duration", "2", "--store", str(db)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_points(db, 1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert not _leftovers("mosbench-run1-") and not _our_cgroups()


@needs_root
def test_killed_harness_is_cleaned_up_by_the_next_run(tmp_path):
    db = tmp_path / "s.sqlite"
    state = tmp_path / "state"
    env = {**os.environ, "MOSBENCH_STATE": str(state)}
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "micro/getppid1", "--cores", "max",
                             "--trials", "5", "--warmup", "0.2", "--duration", "2", "--store", str(db)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_points(db, 1)
    time.sleep(1.0)
    proc.kill()  # no finally runs: only the journal and PR_SET_PDEATHSIG are left to clean up
    proc.wait()
    time.sleep(1.5)
    assert not _leftovers("mosbench-run1-"), "runner outlived a SIGKILLed harness"
    journals = list(state.glob("run-*.json"))
    assert journals, "the dead run left no journal"
    scratch = [Path(d) for d in json.loads(journals[0].read_text())["dirs"]]
    assert len(scratch) == 1 and scratch[0].is_dir()  # tmpfs memory, until the journal is undone
    r = mosbench("run", "micro/getppid1", "--cores", "1", "--trials", "1", "--warmup", "0", "--duration", "0.5",
                 "--store", str(db), env={"MOSBENCH_STATE": str(state)})
    assert r.returncode == 0, r.stderr
    assert "cleaned up after an earlier run" in r.stderr
    assert not _our_cgroups() and not list(state.glob("run-*.json")) and not scratch[0].exists()


@needs_root
@pytest.mark.skipif(not Path("/sys/devices/system/cpu/cpu1/online").exists(), reason="CPU 1 cannot be offlined")
def test_hotplug_restores_cpus_after_ctrl_c(tmp_path):
    online = Path("/sys/devices/system/cpu/online")
    before = online.read_text()
    db = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "micro/getppid1", "--cores", "1",
                             "--isolation", "hotplug", "--trials", "5", "--warmup", "0.2", "--duration", "1",
                             "--store", str(db)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        _wait_points(db, 1)
        assert online.read_text() != before, "hotplug took no CPU offline"
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        assert proc.returncode == 130
        assert online.read_text() == before
    finally:
        proc.kill()
        for f in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/online"):
            if f.read_text().strip() == "0":
                f.write_text("1")


def test_failed_point_is_stored_as_failed(tmp_path):
    """A task that cannot start (here: a file directory it cannot write) is a failed point, not a number."""
    db = tmp_path / "s.sqlite"
    r = mosbench("run", "micro/page_fault2", "--cores", "1", "--trials", "1", "--warmup", "0", "--duration", "0.5",
                 "-p", "fsdir=/proc", "--store", str(db))
    assert r.returncode == 3, r.stderr
    status, reason, tp = sqlite3.connect(db).execute("select status, reason, throughput from points").fetchone()
    assert status == "failed" and reason and tp is None


@needs_root  # SCHED_FIFO for the harness needs root; without it windows may stretch, as the run records
def test_windows_keep_their_length_when_every_cpu_is_busy(tmp_path):
    """Pinned ping-pong tasks on every CPU once starved the harness: 2 s windows ran up to 40 s."""
    db = tmp_path / "s.sqlite"
    r = mosbench("run", "micro/context_switch1", "--cores", "max", "--trials", "3", "--warmup", "0.5",
                 "--duration", "1", "--store", str(db))
    assert r.returncode == 0, r.stderr
    windows = [w for (w,) in sqlite3.connect(db).execute("select window_s from points")]
    assert len(windows) == 6 and max(windows) < 1.5, windows
    env = json.loads(sqlite3.connect(db).execute("select environment from runs").fetchone()[0])
    assert env["harness_scheduling"]


@needs_root
def test_the_workload_never_inherits_the_harness_priority():
    from mosbench.processes import harness_priority

    with harness_priority() as how:
        assert how.startswith("SCHED_FIFO")
        child = subprocess.run([sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"],
                               capture_output=True, text=True, check=True)
    assert int(child.stdout) == os.SCHED_OTHER
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
