"""fxmark end to end on this machine: every operation briefly at one core on tmpfs and ext4, a file system
made and gone per point whatever ends the run (a normal end, Ctrl-C, a SIGKILL and its guardian, a dead
guardian and the next command), the user's device refused until it is free and given up, a file system
without its mkfs refused before anything is made."""

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mosbench import procfs
from mosbench.errors import PointFailed, UserError
from mosbench.machine import filesystem, journal
from mosbench.workloads.fxmark import (
    BY_NAME,
    MIN_WORKED,
    OPERATIONS,
    Fxmark,
    blocked_in,
    over_time_worked,
    stalled_s,
)
from tests.conftest import ROOT, mosbench, needs_native, needs_root, refused, sigint_default

built = pytest.mark.skipif(not os.access(ROOT / "native/build/mosbench-fxmark", os.X_OK),
                           reason="mosbench-fxmark not built (make -C native)")


def system(test):
    """A test that runs fxmark or makes file systems: it needs root and the driver."""
    return needs_native(needs_root(built(test)))


# Small file systems and no warm-up: the pools FxMark's way (DWTL's file filling 2 GiB, ext4's 131,072
# inodes for MWUL) last past a tenth of the 0.3 s window at any rate this machine reaches, and are made
# in about a second; tmpfs's inodes (one per two pages of memory) would take MWUL seconds, so a bound.
QUICK = ["--cores", "1", "--warmup", "0", "--duration", "0.3", "--interval", "0",
         "-p", "files=300000", "-p", "size_gib=2"]


# The layout FxMark's program gets here: randomised unless the machine randomises nothing.
RANDOMISED = "fixed" if Path("/proc/sys/kernel/randomize_va_space").read_text().strip() == "0" else "randomised"


def leftovers(scratch: str) -> list[str]:
    """What a run whose scratch is this left on the machine: mounts, loop devices, files."""
    found = [f"mount {m.point}" for m in filesystem.mounts() if m.point.startswith(scratch)]
    loops = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
                           capture_output=True, text=True, check=True).stdout
    found += [f"loop {line}" for line in loops.splitlines() if scratch in line]
    if Path(scratch).exists():
        found += [f"file {p}" for p in Path(scratch).rglob("*")] or [f"directory {scratch}"]
    return found


def scratch_of(stderr: str) -> str:
    match = re.search(r"scratch: (\S+)", stderr)
    assert match, stderr
    return match.group(1)


@pytest.fixture(scope="module")
def every_operation(tmp_path_factory):
    """One run of every operation on tmpfs and ext4 at one core: (its store, its stderr)."""
    db = tmp_path_factory.mktemp("fxmark") / "s.sqlite"
    r = mosbench("run", "fxmark", "--variant", "tmpfs,ext4", "--trials", "1", *QUICK, "--store", str(db))
    assert r.returncode == 0, r.stderr
    return db, r.stderr


@system
def test_every_operation_runs_on_tmpfs_and_ext4_and_leaves_nothing(every_operation):
    db, stderr = every_operation
    rows = sqlite3.connect(db).execute("select test, variant, status, reason, work, metrics from points").fetchall()
    assert sorted((t, v) for t, v, *_ in rows) == sorted((op.name, fs) for op in OPERATIONS
                                                          for fs in ("tmpfs", "ext4"))
    for test, fs, status, reason, work, metrics in rows:
        assert status == "ok" and work > 0, (test, fs, reason)
        m = json.loads(metrics)
        assert m["fs"] == fs and m["mount_options"].startswith("rw")
        assert m["address_layout"] == RANDOMISED  # as FxMark's program runs (docs/FXMARK.md)
        assert (m["mkfs"] == "") == (fs == "tmpfs")
        if fs == "ext4":
            assert "noinit_itable" in m["mount_options"] and m["fs_medium"] == "loop device over a file on tmpfs"
    assert leftovers(scratch_of(stderr)) == []
    env = json.loads(sqlite3.connect(db).execute("select environment from runs").fetchone()[0])
    assert "mke2fs" in env["fxmark"]["mkfs"]["ext4"] and set(env["fxmark"]["mount_options"]) == {"tmpfs", "ext4"}


@system
def test_an_operation_that_may_stop_keeps_the_share_of_the_window_it_was_stopped(every_operation):
    """Rated over the time worked: never below the count sampled (but for the few calls between the
    harness's samples and the workload's own reads at the window's ends)."""
    db, _ = every_operation
    for test, metrics, work in sqlite3.connect(db).execute("select test, metrics, work from points"):
        m = json.loads(metrics)
        if BY_NAME[test].stops:
            assert 0 <= m["stopped_share"] < 1 - MIN_WORKED and m["sampled_work"] <= work * 1.01, (test, m)
        else:
            assert "stopped_share" not in m and "sampled_work" not in m, test
    # The share is the table's `stopped` column, not repeated among the workload's own metrics.
    shown = mosbench("show", "latest", "--wide", "--store", str(db)).stdout
    assert "stopped" in shown and "stopped_share=" not in shown, shown


def test_a_task_that_stopped_is_rated_over_the_time_it_worked():
    """FxMark's works over each worker's seconds: a task that stopped halfway through the window (its pool
    gone, its file system full) made its count at twice the rate the window would say."""
    half = over_time_worked(1000, 2000, [0, 0], [50, 100], [1500, 0])
    assert half.work == 200 and half.stopped_share == 0.25 and half.too_little is None
    after = over_time_worked(1000, 2000, [0, 0], [50, 100], [2500, 0])  # stopped once the window was over
    assert after.work == 150 and after.stopped_share == 0
    early = over_time_worked(1000, 2000, [10, 0], [10, 100], [900, 0])  # out before the window opened
    assert early.work is None and "stopped 0% into the window" in early.too_little


def test_a_stall_is_the_longest_a_working_task_s_count_stood_still():
    s = 1_000_000_000
    assert stalled_s([9 * s, 7 * s], [0, 0], 10 * s) == 3.0
    assert stalled_s([9 * s, 7 * s], [0, 8 * s], 10 * s) == 1.0  # a task that stopped is not stalled
    assert stalled_s([], [], 10 * s) == 0.0
    assert blocked_in([os.getpid()]) == ""  # running, not in an uninterruptible sleep


def _leaf_tasks(pid: int) -> list[int]:
    """The driver's tasks below pid: the mosbench-fxmark processes with no child."""
    below = procfs.descendants(pid)
    parents = set(below.values())
    return [p for p in below if p not in parents and _comm(p) == "mosbench-fxmark"]


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


@system
def test_a_task_held_across_the_window_s_end_is_said_to_have_stalled(tmp_path):
    """A task in one call past the window's end (here held by SIGSTOP; in DWAL on a small ext4, ext4's
    writeback): the point keeps the window's rate and says how long the count stood still."""
    db = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "fxmark/MRPL", "--variant", "tmpfs",
                             "--cores", "1", "--trials", "1", "--warmup", "0", "--duration", "3",
                             "--interval", "0.25", "--store", str(db)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    held = []
    try:
        deadline = time.monotonic() + 60
        while not held and time.monotonic() < deadline and proc.poll() is None:
            working = [t for t in _leaf_tasks(proc.pid) if procfs.cpu_seconds(t) >= 0.3]  # past the gate, counting
            if working:
                os.kill(working[0], signal.SIGSTOP)
                held = working[:1]
            time.sleep(0.05)
        assert held, "no task was seen at work"
        _, stderr = proc.communicate(timeout=120)
    finally:
        for t in held:
            with contextlib.suppress(ProcessLookupError):
                os.kill(t, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr
    status, metrics = sqlite3.connect(db).execute("select status, metrics from points").fetchone()
    m = json.loads(metrics)
    assert status == "ok" and 1.5 <= m["stalled_s"] <= 3.1 and m["stalled_in"] == "", m  # stopped, not in D
    show = mosbench("show", "latest", "--wide", "--store", str(db))
    # The limit column counts the note; how long and where stay in the workload's own metrics beside it.
    assert "stalled at the end" in show.stdout and "stalled_s=" in show.stdout, show.stdout


@system
def test_direct_io_reaches_the_data_operations_on_ext4_only(tmp_path):
    db = tmp_path / "s.sqlite"
    r = mosbench("run", "fxmark/DWOL", "fxmark/MWCL", "--variant", "tmpfs,ext4", "--trials", "1", *QUICK,
                 "-p", "directio=yes", "--store", str(db))
    assert r.returncode == 0, r.stderr
    io = {(t, v): json.loads(m).get("io") for t, v, m in sqlite3.connect(db).execute(
        "select test, variant, metrics from points")}
    # tmpfs stays buffered as in FxMark; a metadata operation has no data to read or write
    assert io == {("DWOL", "ext4"): "direct", ("DWOL", "tmpfs"): "buffered", ("MWCL", "ext4"): None,
                  ("MWCL", "tmpfs"): None}


def _start(tmp_path: Path, env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """A run of ext4 points inside its first point's window: the process and its scratch directory."""
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "fxmark/MWRL", "--variant", "ext4",
                             "--trials", "5", *QUICK[:-1], "size_gib=1", "--duration", "3",
                             "--store", str(tmp_path / "s.sqlite")],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, preexec_fn=sigint_default)
    try:
        scratch = ""
        while "scratch:" not in scratch:
            line = proc.stderr.readline()
            assert line, "the run ended before it said where its scratch is"
            scratch = line
        scratch = scratch_of(scratch)
        deadline = time.monotonic() + 120  # the machine lock may be another run's for a while
        while not any(m.point.startswith(scratch) and m.fstype == "ext4" for m in filesystem.mounts()):
            assert time.monotonic() < deadline and proc.poll() is None, "no file system was mounted"
            time.sleep(0.05)
        time.sleep(0.5)  # inside the point: the driver at work on the mounted file system
    except BaseException:
        proc.kill()
        raise
    return proc, scratch


@system
def test_ctrl_c_mid_point_leaves_no_mount_loop_device_or_file(tmp_path):
    proc, scratch = _start(tmp_path)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert leftovers(scratch) == []


@system
def test_a_killed_harness_s_file_system_is_released_by_its_guardian(tmp_path):
    state = tmp_path / "state"
    proc, scratch = _start(tmp_path, {"MOSBENCH_STATE": str(state)})
    (journal_file,) = state.glob("run-*.json")
    assert json.loads(journal_file.read_text())["mounts"], "the mount was not journaled"
    proc.kill()  # no finally runs: the guardian must unmount, detach and remove
    proc.communicate()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (list(state.glob("run-*.json")) or leftovers(scratch)):
        time.sleep(0.1)
    assert not list(state.glob("run-*.json")), "the guardian did not finish"
    assert leftovers(scratch) == []


class _Ledger:
    """A journal as filesystem.mount_fresh writes it, kept in memory."""

    def __init__(self):
        self.entries: list[dict[str, str]] = []

    def add_mount(self, entry):
        self.entries.append(entry)

    def remove_mount(self, entry):
        if entry in self.entries:
            self.entries.remove(entry)


@system
def test_a_dead_run_s_mount_is_released_by_the_next_command(tmp_path):
    """Harness and guardian both gone: the journal they left is recovered by whoever looks next."""
    scratch = Path(f"/dev/shm/{journal.SCRATCH_PREFIX}-fxtest-{os.getpid()}")
    scratch.mkdir()
    try:
        ledger = _Ledger()
        filesystem.mount_fresh(filesystem.KNOWN["ext4"], scratch / "fs", ledger, size=1 << 30,
                               image=scratch / "fs.img")
        dead = subprocess.Popen(["true"])
        dead.wait()
        (tmp_path / "run-1.json").write_text(json.dumps({"owner": dead.pid, "owner_start": None,
                                                         "mounts": ledger.entries}))
        done = journal.recover_stale(tmp_path)
        assert any(a.startswith("unmounted") for a in done) and any(a.startswith("detached") for a in done)
        # The scratch was no longer journaled (its run had removed all it could): emptied, it goes too.
        assert leftovers(str(scratch)) == []
    finally:
        filesystem.undo([{"mount": str(scratch / "fs"), "image": str(scratch / "fs.img")}])
        if scratch.exists():
            scratch.rmdir()


@pytest.mark.skipif(filesystem.KNOWN["xfs"].missing() is not None, reason="no mkfs.xfs")
@system
def test_a_file_system_that_cannot_be_made_fails_its_point_and_leaves_nothing(tmp_path):
    ledger = _Ledger()  # 16 MiB: below XFS's smallest, and mkfs.xfs's cause is its first line of many
    with pytest.raises(PointFailed, match=r"mkfs\.xfs .*: Filesystem must be larger than"):
        filesystem.mount_fresh(filesystem.KNOWN["xfs"], tmp_path / "fs", ledger, size=16 << 20,
                               image=tmp_path / "fs.img")
    assert ledger.entries == [] and leftovers(str(tmp_path)) == [f"directory {tmp_path}"]


@system
def test_undo_touches_no_mount_outside_a_run_s_scratch(tmp_path):
    where = tmp_path / "theirs"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)], check=True)
    try:
        journal.undo({"mounts": [{"mount": str(where)}]})
        assert filesystem.is_mounted(where)
    finally:
        subprocess.run(["umount", str(where)], check=True)


@pytest.fixture
def loop_device(tmp_path):
    """A free loop device of this test's own, over a 1 GiB sparse file."""
    image = tmp_path / "disk.img"
    with open(image, "wb") as f:
        f.truncate(1 << 30)
    loop = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True,
                          check=True).stdout.strip()
    yield loop
    subprocess.run(["losetup", "--detach", loop], check=False)


@system
def test_a_device_is_refused_until_it_is_free_and_given_up(tmp_path, loop_device):
    run = ["run", "fxmark/DRBL", "--variant", "ext4", *QUICK]
    assert refused(tmp_path, *run, "-p", "device=/dev/null", "-p", "wipe=yes").endswith("not a block device")
    assert "add -p wipe=yes to agree" in refused(tmp_path, *run, "-p", f"device={loop_device}")
    subprocess.run(["mkfs.ext4", "-F", "-q", loop_device], check=True)
    where = tmp_path / "mounted"
    where.mkdir()
    subprocess.run(["mount", loop_device, str(where)], check=True)
    try:
        line = refused(tmp_path, *run, "-p", f"device={loop_device}", "-p", "wipe=yes")
        assert f"is mounted at {where}" in line
    finally:
        subprocess.run(["umount", str(where)], check=True)
    db = tmp_path / "s.sqlite"
    r = mosbench(*run, "--trials", "1", "-p", f"device={loop_device}", "-p", "wipe=yes", "--store", str(db))
    assert r.returncode == 0, r.stderr
    (metrics,) = sqlite3.connect(db).execute("select metrics from points where status = 'ok'").fetchone()
    assert json.loads(metrics)["fs_medium"] == loop_device
    assert filesystem.device_in_use(Path(loop_device)) is None  # unmounted, and the loop device still ours
    assert leftovers(scratch_of(r.stderr)) == []


def _params(**given) -> dict:
    return {p.name: p.default for p in Fxmark.params} | given


def test_a_device_that_is_not_there_is_said_so_before_wipe_is_asked_for():
    with pytest.raises(UserError, match=r"^-p device=/dev/nonexistent: No such file or directory$"):
        Fxmark().check_params(_params(device="/dev/nonexistent"))


@system
def test_a_device_that_holds_nothing_or_too_little_is_refused_before_the_run(tmp_path):
    free = subprocess.run(["losetup", "--find"], capture_output=True, text=True, check=True).stdout.strip()
    if Path(free).exists():  # a loop device with no file attached reads as size 0
        assert refused(tmp_path, "run", "fxmark/DRBL", "--variant", "ext4", *QUICK, "-p", f"device={free}",
                       "-p", "wipe=yes").endswith(f"-p device={free} holds nothing (size 0: a loop device with "
                                                  "no file attached?)")
    image = tmp_path / "small.img"
    with open(image, "wb") as f:
        f.truncate(64 << 20)
    small = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True, text=True,
                           check=True).stdout.strip()
    try:
        with pytest.raises(UserError, match="holds 64 MiB: fxmark's file systems take at least 1 GiB"):
            Fxmark().check_params(_params(device=small))  # the size before the agreement to wipe it
    finally:
        subprocess.run(["losetup", "--detach", small], check=False)


@system
def test_a_file_system_without_its_mkfs_is_refused_before_anything_is_made(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("losetup", "mount", "umount", "mkfs.ext4"):
        (bin_dir / tool).symlink_to(subprocess.run(["which", tool], capture_output=True, text=True,
                                                   check=True).stdout.strip())
    db = tmp_path / "refused.sqlite"
    r = mosbench("run", "fxmark/DRBL", "--variant", "tmpfs,xfs", *QUICK, "--store", str(db),
                 env={"PATH": str(bin_dir)})
    assert r.returncode == 2, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if x.strip()]
    assert "xfs points need mkfs.xfs (xfsprogs), which this machine lacks" in line
    assert "--variant tmpfs,ext4" in line
    assert not db.exists() or sqlite3.connect(db).execute("select count(*) from runs").fetchone()[0] == 0


def test_a_ctrl_c_while_signals_are_held_lands_after_the_block():
    # Python's own handler, whatever this suite inherited: started in the background (`nohup make test &`)
    # it has SIGINT ignored, and the Ctrl-C below would go unheard.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    done = []
    try:
        with pytest.raises(KeyboardInterrupt), filesystem.signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # Python would have run the handler by now
            done.append("the block went on")
        assert done == ["the block went on"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)


@needs_native
@built
def test_every_file_system_is_a_variant_and_every_operation_a_test():
    w = Fxmark()
    assert [v.name for v in w.variants] == ["tmpfs", "ext4", "xfs", "btrfs"]
    assert [t.name for t in w.tests()] == [op.name for op in OPERATIONS]
    assert {op.name[-1] for op in OPERATIONS} == {"L", "M", "H"}
