"""One measurement at a time: a second run waits for the first, or refuses with --no-wait, and a killed
holder never leaves the machine taken."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mosbench.errors import UserError
from mosbench.machine.lock import MachineLock
from tests.conftest import ROOT, mosbench, needs_native, needs_root

HOLD = """
import sys, time
from mosbench.machine.lock import MachineLock
lock = MachineLock()
lock.acquire("mosbench run micro/test --by-the-test")
lock.note(7, "sqlite:///elsewhere.sqlite")
print("held", flush=True)
time.sleep(600)
"""


SEEN = """
import dataclasses, json, os, sys
from pathlib import Path
from mosbench.errors import UserError
from mosbench.machine.lock import MachineLock, lock_path, read_holder
path = Path(sys.argv[1]) if sys.argv[1] else lock_path()
fd = os.open(path, os.O_RDONLY)
holder = read_holder(fd)
lock = MachineLock(path)
try:
    lock.acquire("seen from elsewhere", wait=False)
    lock.release()
    taken = None
except UserError as e:
    taken = str(e)
print(json.dumps({"holder": holder and dataclasses.asdict(holder), "refused": taken}))
"""


def seen_from_another_process(path: Path | None = None) -> dict:
    """The lock as another mosbench sees it: the holder its file names (read with the module's reader)
    and whether a --no-wait acquire there is refused (its line), else None (it took and freed it)."""
    r = subprocess.run([sys.executable, "-c", SEEN, str(path or "")], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def holder():
    """Another process holding the machine, as a run in progress would."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_taken_machine_is_refused_naming_its_holder(holder):
    with pytest.raises(UserError) as e:
        MachineLock().acquire("second", wait=False)
    said = str(e.value)
    assert "run #7" in said and "elsewhere.sqlite" in said and f"pid {holder.pid}" in said and "since" in said


def test_a_killed_holder_leaves_the_machine_free(holder):
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    lock = MachineLock()
    lock.acquire("after the kill", wait=False)  # the kernel released its flock with its last descriptor
    try:
        # Another run sees this process as the holder, not the killed one's record (run #7, its pid).
        seen = seen_from_another_process()
        assert seen["holder"] is not None, seen
        assert (seen["holder"]["pid"], seen["holder"]["command"], seen["holder"]["run_id"]) == (
            os.getpid(), "after the kill", None), seen
        assert seen["refused"] is not None and f"pid {os.getpid()}" in seen["refused"], seen
        assert f"pid {holder.pid}" not in seen["refused"] and "run #7" not in seen["refused"], seen
    finally:
        lock.release()


def _same_file(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def test_the_lock_is_not_inherited_by_programs_a_run_starts(tmp_path: Path):
    """A server the run starts (here `sleep`, started the way a shell or fork/exec starts it: every
    inheritable descriptor kept) holds no descriptor of the lock, and keeps nothing taken once the run
    lets go though it still runs."""
    path = tmp_path / "machine.lock"
    lock = MachineLock(path)
    lock.acquire("test", wait=False)
    server = subprocess.Popen(["sleep", "600"], close_fds=False)
    try:
        try:
            assert lock.fd is not None
            # The lock's descriptor is there to be inherited: this process has it open on the lock file.
            assert _same_file(Path(f"/proc/self/fd/{lock.fd}")) == _same_file(path)
            held_by_server = []
            for fd in os.listdir(f"/proc/{server.pid}/fd"):
                try:
                    if _same_file(Path(f"/proc/{server.pid}/fd/{fd}")) == _same_file(path):
                        held_by_server.append(int(fd))
                except OSError:
                    continue
            assert held_by_server == [], f"the server {server.pid} holds the lock file as fd {held_by_server}"
            seen = seen_from_another_process(path)
            assert seen["holder"] is not None and seen["holder"]["pid"] == os.getpid(), seen
            assert seen["refused"] is not None and f"pid {os.getpid()}" in seen["refused"], seen
        finally:
            lock.release()
        # The run has let go and its server still runs: another run takes the machine at once.
        assert server.poll() is None
        seen = seen_from_another_process(path)
        assert seen["refused"] is None, seen
    finally:
        server.kill()
        server.wait()


def test_no_wait_refuses_in_one_line_and_makes_nothing(holder, tmp_path: Path):
    store = tmp_path / "new.sqlite"
    r = mosbench("run", "micro/getppid1", "--cores", "1", "--trials", "1", "--no-wait", "--store", str(store))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "run #7" in lines[0] and f"pid {holder.pid}" in lines[0], r.stderr
    assert not store.exists()  # not even the store


@needs_root
@needs_native
def test_a_second_run_waits_saying_who_measures_then_runs(holder, tmp_path: Path):
    store = tmp_path / "second.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "micro/getppid1", "--cores", "1",
                             "--variant", "procs", "--trials", "1", "--warmup", "0", "--duration", "0.3",
                             "--store", str(store)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert "waiting for this machine" in first and "run #7" in first and "--no-wait" in first, first
        time.sleep(0.5)
        assert proc.poll() is None and not store.exists()  # still waiting: nothing made
        holder.kill()
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "run #1 complete: 1 points measured" in out
