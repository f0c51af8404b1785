"""mosbench/procfs.py against processes of this test's own: a tree of them, one whose command name holds a
space and parentheses, and one that has ended."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mosbench import procfs


def test_a_tree_of_processes_is_read_below_its_root_and_a_name_with_parentheses_does_not_shift_the_fields(
        tmp_path):
    odd = tmp_path / "a) (b"
    shutil.copy(shutil.which("sleep"), odd)
    # A shell whose child is the oddly named sleep: the root, its child and its grandchild.
    # "; true": the shell waits for its child rather than becoming it
    root = subprocess.Popen([sys.executable, "-c",
                             f"import subprocess; subprocess.run(['sh', '-c', '\"$0\" 30; true', {str(odd)!r}])"])
    try:
        for _ in range(100):
            below = procfs.descendants(root.pid)
            if len(below) == 2:
                break
            time.sleep(0.05)
        (shell, _), (sleeper, parent) = sorted(below.items(), key=lambda kv: kv[1] != root.pid)
        assert below[shell] == root.pid and parent == shell
        assert procfs.children_of(root.pid) == [shell] and procfs.children_of(shell) == [sleeper]
        assert Path(f"/proc/{sleeper}/comm").read_text().strip() == "a) (b"
        assert procfs.stat_fields(sleeper)[1] == str(shell)  # the parent, read past the name's ')'
        assert procfs.state(sleeper) == "S" and procfs.cpu_seconds(sleeper) >= 0
    finally:
        for pid in procfs.descendants(root.pid):  # before the root: an orphan is no longer below it
            os.kill(pid, signal.SIGKILL)
        root.kill()
        root.wait()


def test_a_process_that_has_ended_is_not_there():
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert procfs.stat_fields(gone.pid) is None and procfs.state(gone.pid) is None
    with pytest.raises(ProcessLookupError):
        procfs.cpu_seconds(gone.pid)
    assert procfs.state(os.getpid()) == "R"
