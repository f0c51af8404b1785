"""The launcher's stop: servers of a point stop together, and nothing it started outlives it."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from mosbench.launch.processes import Launcher
from mosbench.machine.isolation import Group
from mosbench.machine.journal import Journal

# Ignores SIGTERM once it has said so in a file, then waits to be killed.
STUBBORN = ("import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "pathlib.Path(sys.argv[1]).touch(); time.sleep(60)")


def _wait_for(paths: list[Path]) -> None:
    deadline = time.monotonic() + 20
    while not all(p.exists() for p in paths):
        assert time.monotonic() < deadline, "the stubborn programs never got ready"
        time.sleep(0.02)


def test_stop_many_gives_all_one_grace_and_kills_those_that_ignore_sigterm(tmp_path):
    journal = Journal(tmp_path)
    launcher = Launcher(journal, tmp_path / "logs")
    group = Group(tuple(sorted(os.sched_getaffinity(0))))
    marks = [tmp_path / f"ready{i}" for i in range(3)]
    stubborn = [launcher.spawn(f"stubborn{i}", [sys.executable, "-c", STUBBORN, str(m)], group)
                for i, m in enumerate(marks)]
    polite = launcher.spawn("polite", ["sleep", "60"], group)
    _wait_for(marks)
    assert len(journal.data["procs"]) == 4

    began = time.monotonic()
    codes = launcher.stop_many([*stubborn, polite], grace=1.0)
    took = time.monotonic() - began

    assert codes == [-signal.SIGKILL] * 3 + [-signal.SIGTERM]
    # One grace after another would take 3 s; together they take one.
    assert 1.0 <= took < 2.5, took
    assert launcher.procs == [] and journal.data["procs"] == []


def test_stop_of_one_that_already_ended_returns_its_status(tmp_path):
    launcher = Launcher(Journal(tmp_path), tmp_path / "logs")
    proc = launcher.spawn("done", ["sh", "-c", "exit 3"], Group(tuple(sorted(os.sched_getaffinity(0)))))
    proc.wait()
    assert launcher.stop(proc) == 3 and launcher.procs == []
