"""The journal's undo: what a dead run left, removed, and nothing that is not the run's."""

import os
import subprocess
from pathlib import Path

from mosbench.machine import journal
from tests.conftest import needs_root


@needs_root
def test_undo_removes_a_runs_network_namespace(tmp_path):
    name = f"{journal.NETNS_PREFIX}test-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        assert journal.undo({"netns": [name, "not-ours"]}) == [f"removed network namespace {name}"]
        assert not Path("/run/netns", name).exists()
    finally:
        subprocess.run(["ip", "netns", "delete", name], capture_output=True)
