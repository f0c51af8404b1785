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

from mosbench import procfs
from mosbench.machine.isolation import detect_cgroups
from tests.conftest import ROOT, mosbench, mosbench_here, needs_native, needs_root, sigint_default

pytestmark = needs_native


def _leftovers(run_marker: str) -> list[str]:
    """Processes of ours still alive: anything whose command line names the run's scratch directory."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if run_marker in cmd and procfs.state(int(d.name)) not in (None, "Z"):
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
    layouts = {json.loads(m)["address_layout"] for (m,) in sqlite3.connect(db).execute("select metrics from points")}
    assert layouts == {"fixed"}  # will-it-scale's setarch -R
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
                            text=True, preexec_fn=sigint_default)
    _wait_points(db, 2)
    time.sleep(0.5)  # land inside a point, with its driver and cgroups alive
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
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "micro/tcp_pingpong", "--cores", "max",
                             "--trials", "5", "--warmup", "0.2", "--duration", "2", "--store", str(db)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_points(db, 1)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert not _leftovers("mosbench-run1-") and not _our_cgroups()


def _guardians(journal_dir: Path) -> list[int]:
    """PIDs of guardians watching journals in journal_dir (their command line names it)."""
    return [int(line.split(":")[0]) for line in _leftovers(str(journal_dir)) if "mosbench.machine.guardian" in line]


def _start_and_kill_harness(tmp_path: Path, *extra: str) -> tuple[Path, Path, subprocess.Popen, list[Path]]:
    """A run inside a point, to be killed: its store, journal directory, process and journaled dirs."""
    db = tmp_path / "s.sqlite"
    state = tmp_path / "state"
    env = {**os.environ, "MOSBENCH_STATE": str(state)}
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "micro/open1", "--cores", "max",
                             "--trials", "5", "--warmup", "0.2", "--duration", "2", "--store", str(db), *extra],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_points(db, 1)
        time.sleep(1.0)
        (journal_file,) = state.glob("run-*.json")
        data = json.loads(journal_file.read_text())
        dirs = [Path(d) for d in data["dirs"]]
        assert len(dirs) == 2 and all(d.is_dir() for d in dirs)  # tmpfs scratch, and micro's in /tmp
        assert len(_guardians(state)) == 1
    except BaseException:
        proc.kill()
        raise
    return db, state, proc, dirs


@needs_root
def test_killed_harness_is_cleaned_up_by_its_guardian_at_once(tmp_path):
    db, state, proc, dirs = _start_and_kill_harness(tmp_path)
    proc.kill()  # no finally runs: PR_SET_PDEATHSIG and the guardian are left to clean up
    proc.wait()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and (list(state.glob("run-*.json")) or _guardians(state)):
        time.sleep(0.1)
    assert not list(state.glob("run-*.json")) and not _guardians(state), "the guardian did not finish"
    assert not _leftovers("mosbench-run1-"), "driver outlived a SIGKILLed harness"
    assert not _our_cgroups() and not any(d.exists() for d in dirs)
    assert sqlite3.connect(db).execute("select status from runs").fetchone()[0] == "killed"
    r = mosbench("run", "--resume", "latest", "--store", str(db), env={"MOSBENCH_STATE": str(state)})
    assert r.returncode == 0, r.stderr
    assert sqlite3.connect(db).execute("select status from runs").fetchone()[0] == "complete"


@needs_native
def test_a_run_that_ends_cleanly_ends_its_guardian(tmp_path):
    # A process that runs many sweeps (a test session, the guest's suite) once gathered a guardian per
    # run, each waiting for that process to end.
    state = tmp_path / "state"
    r = mosbench_here("run", "micro/getppid1", "--cores", "1", "--trials", "1", "--warmup", "0.05",
                      "--duration", "0.1", "--interval", "0", "--store", str(tmp_path / "s.sqlite"),
                      env={"MOSBENCH_STATE": str(state)})
    assert r.returncode == 0, r.stderr
    assert not list(state.glob("run-*.json")) and not _guardians(state)


@needs_root
def test_killed_harness_and_guardian_are_cleaned_up_by_the_next_command(tmp_path):
    db, state, proc, dirs = _start_and_kill_harness(tmp_path)
    for pid in _guardians(state):
        os.kill(pid, signal.SIGKILL)
    proc.kill()
    proc.wait()
    time.sleep(1.0)
    assert list(state.glob("run-*.json")), "the dead run left no journal"
    assert all(d.exists() for d in dirs)
    r = mosbench("runs", "--store", str(db), env={"MOSBENCH_STATE": str(state)})
    assert r.returncode == 0, r.stderr
    assert "cleaned up after an earlier run" in r.stderr and "marked run 1 killed" in r.stderr
    assert not _our_cgroups() and not list(state.glob("run-*.json")) and not any(d.exists() for d in dirs)
    assert sqlite3.connect(db).execute("select status from runs").fetchone()[0] == "killed"


@needs_root
@pytest.mark.skipif(not Path("/sys/devices/system/cpu/cpu1/online").exists(), reason="CPU 1 cannot be offlined")
def test_hotplug_restores_cpus_after_ctrl_c(tmp_path):
    online = Path("/sys/devices/system/cpu/online")
    before = online.read_text()
    db = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "micro/getppid1", "--cores", "1",
                             "--isolation", "hotplug", "--trials", "5", "--warmup", "0.2", "--duration", "1",
                             "--store", str(db)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=sigint_default)
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


@needs_root
def test_failed_point_is_stored_as_failed(tmp_path):
    """A task that cannot go on (here: write1 on a full filesystem) is a failed point, not a number; the
    run goes on to the next point."""
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(full)], check=True)
    try:
        db = tmp_path / "s.sqlite"
        r = mosbench("run", "micro/write1", "micro/getppid1", "--cores", "1", "--trials", "1", "--warmup", "0",
                     "--duration", "0.5", "-p", f"fsdir={full}", "--store", str(db))
    finally:
        subprocess.run(["umount", str(full)], check=True)
    assert r.returncode == 3, r.stderr
    got = sqlite3.connect(db).execute("select test, variant, status, reason, throughput from points "
                                      "order by test, variant").fetchall()
    assert [(t, v, st) for t, v, st, *_ in got] == [("getppid1", "procs", "ok"), ("getppid1", "threads", "ok"),
                                                    ("write1", "procs", "failed"), ("write1", "threads", "failed")]
    for *_, reason, tp in got[2:]:
        assert "write: No space left on device" in reason and tp is None


def test_a_closed_pipe_does_not_end_the_run(tmp_path):
    """`mosbench run … 2>&1 | head -1`: the reader leaves after one line, the run goes on to the end."""
    db = tmp_path / "s.sqlite"
    r = subprocess.run(f"{sys.executable} -m mosbench run micro/getppid1 --cores 1 --trials 3 --warmup 0 "
                       f"--duration 0.3 --store {db} 2>&1 | head -1", shell=True, cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.startswith("run #1: 6 points")
    assert "Traceback" not in r.stdout + r.stderr and "BrokenPipe" not in r.stderr
    con = sqlite3.connect(db)
    assert con.execute("select status from runs").fetchone()[0] == "complete"
    assert con.execute("select count(*) from points where status = 'ok'").fetchone()[0] == 6


def test_point_lines_are_whole_lines_in_a_log(tmp_path):
    r = mosbench("run", "micro/getppid1", "--cores", "1", "--trials", "1", "--warmup", "0", "--duration", "0.3",
                 "--variant", "procs", "--store", str(tmp_path / "s.sqlite"))
    assert r.returncode == 0, r.stderr
    # ✓, or ⚠ where another program's time on the CPU passed 2% of this short window: the line's shape is the same
    (line,) = [x for x in r.stderr.splitlines() if x.startswith(("✓ ", "⚠ "))]
    assert line[2:].startswith("micro/getppid1 procs 1 cores trial 1 cpus ")
    assert " op/s, " in line and " µs per op, idle " in line and len(line) > 80  # never folded at 80 columns


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
    from mosbench.launch.processes import harness_priority

    with harness_priority() as how:
        assert how.startswith("SCHED_FIFO")
        child = subprocess.run([sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"],
                               capture_output=True, text=True, check=True)
    assert int(child.stdout) == os.SCHED_OTHER
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


@needs_root
def test_load_generator_has_a_group_of_its_own_on_shared_cpus(tmp_path, monkeypatch):
    """At max cores the client must share the measured CPUs; its CPU time still is not the server's."""
    from mosbench.machine import topology
    from mosbench.run.plan import Plan
    from mosbench.run.sweep import Sweep
    from mosbench.store import db as store
    from mosbench.workloads import registry
    from mosbench.workloads.base import Instance, PointContext, Sample, Variant, Workload

    burn = [sys.executable, "-c", "import time\nend = time.time() + 60\nwhile time.time() < end: pass"]

    class Burners(Instance):
        def __init__(self, ctx: PointContext):
            self.ctx, self.t0 = ctx, time.monotonic()
            self.server = ctx.launcher.spawn("server", burn, ctx.group)
            self.client = ctx.launcher.spawn("client", burn, ctx.loadgen_group)

        def sample(self) -> Sample:
            return Sample(1000 * (time.monotonic() - self.t0))

        def check(self) -> None:
            pass

        def stop(self) -> dict:
            for p in (self.server, self.client):
                self.ctx.launcher.stop(p)
            return {}

    class FakeServer(Workload):
        name, description, unit = "fakeserver", "a busy server and its busy client", "request"
        variants = (Variant("one", "the only one"),)

        def loadgen_cores(self, cores, params):
            return 1

        def start(self, ctx):
            return Burners(ctx)

    monkeypatch.setitem(registry.REGISTRY, "fakeserver", FakeServer)
    monkeypatch.setenv("MOSBENCH_STATE", str(tmp_path / "state"))
    topo = topology.read()
    ncpu = len(topo.cpus)
    db = store.Store(str(tmp_path / "s.sqlite"))
    plan = Plan(selections=[("fakeserver", "")], variants={"fakeserver": ["one"]}, cores=[ncpu], trials=1,
                warmup=0.3, duration=1.5, interval=0.5)
    run_id = db.create_run(plan.to_json(), {"hostname": "h"}, "test")
    assert Sweep(db, plan, topo, cache=tmp_path / "cache").run(run_id).failed == 0
    (p,) = db.points(run_id)
    assert p["loadgen_shared"] and p["loadgen_cpus"] == p["cpus"]
    # The two groups together hold the measured CPUs' busy time, each burner about half of it, never
    # the client's charged to the server. (Stated against the busy time, not the window: a VM's
    # steal takes its share of both.)
    server = p["cgroup_user_s"] + p["cgroup_system_s"]
    client = p["loadgen_user_s"] + p["loadgen_system_s"]
    busy = p["user_s"] + p["system_s"]
    assert server + client == pytest.approx(busy, rel=0.15)
    assert 0.3 < server / busy < 0.7 and 0.3 < client / busy < 0.7
    assert not _our_cgroups()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the dropped one, on purpose
def test_a_signal_whose_exception_a_finaliser_drops_still_ends_the_run(tmp_path, monkeypatch):
    """Python prints and drops an exception raised in a __del__; a SIGTERM that lands there must still
    end the run (incomplete, resumable) at the next point, not let it run to its last."""
    from mosbench.machine import topology
    from mosbench.run.plan import Plan
    from mosbench.run.sweep import Sweep
    from mosbench.store import db as store
    from mosbench.workloads import registry
    from mosbench.workloads.base import Instance, Sample, Variant, Workload

    class SignalledInFinaliser:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs (and raises) here, inside the finaliser
                pass

    class Counting(Instance):
        def __init__(self):
            self.t0 = time.monotonic()

        def sample(self) -> Sample:
            return Sample(1000 * (time.monotonic() - self.t0))

        def check(self) -> None:
            pass

        def stop(self) -> dict:
            SignalledInFinaliser()
            return {}

    class Fake(Workload):
        name, description, unit = "fakecount", "counts without a process", "op"
        variants = (Variant("one", "the only one"),)

        def start(self, ctx):
            return Counting()

    monkeypatch.setitem(registry.REGISTRY, "fakecount", Fake)
    monkeypatch.setenv("MOSBENCH_STATE", str(tmp_path / "state"))
    db = store.Store(str(tmp_path / "s.sqlite"))
    plan = Plan(selections=[("fakecount", "")], variants={"fakecount": ["one"]}, cores=[1], trials=3,
                warmup=0.1, duration=0.2, interval=0, isolation="affinity")
    run_id = db.create_run(plan.to_json(), {"hostname": "h"}, "test")
    handler_before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        Sweep(db, plan, topology.read(), cache=tmp_path / "cache").run(run_id)
    assert db.run(run_id)["status"] == "incomplete"
    assert [p["trial"] for p in db.points(run_id)] == [1]
    assert signal.getsignal(signal.SIGTERM) is handler_before
