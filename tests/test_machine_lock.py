"""One measurement at a time: a second run waits for the first, or refuses with --no-wait, and a killed
holder never leaves the machine taken."""

from __future__ import annotations

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
        assert lock.holder is not None and lock.holder.pid == os.getpid()
    finally:
        lock.release()


def test_the_lock_is_not_inherited_by_programs_a_run_starts():
    lock = MachineLock()
    lock.acquire("test", wait=False)
    try:
        # a server started by the run must not keep the machine taken after the run ends
        assert lock.fd is not None and not os.get_inheritable(lock.fd)
    finally:
        lock.release()
    again = MachineLock()
    again.acquire("released", wait=False)
    again.release()


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
