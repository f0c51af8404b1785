"""What every server workload must do when a process of its point dies mid-window: fail the point with
that process's death as the reason and leave nothing behind. Written once, run for each ServerWorkload."""

import copy
from pathlib import Path

import pytest

from mosbench.errors import UserError
from mosbench.machine import journal
from mosbench.workloads import registry
from mosbench.workloads.server.base import ServerInstance, ServerWorkload
from tests.conftest import needs_native, needs_root
from tests.servers import run_points

SERVER_WORKLOADS = sorted(w.name for w in registry.all_workloads() if isinstance(w, ServerWorkload))
# Parameters that keep a point short; any other server workload runs with its defaults.
SMALL = {"exim": {"clients": 4}, "postgres": {"rows": 20_000, "syscalls": False}}


def test_every_server_workload_is_found():
    assert {"apache", "exim", "memcached", "postgres"} <= set(SERVER_WORKLOADS)


def _available(name: str) -> None:
    try:
        registry.get(name).check_available()
    except UserError as e:
        pytest.skip(str(e))


def _undone(listed: dict) -> list[str]:
    """What a journal listed that is still there: processes, lines in system files, segments, namespaces, dirs."""
    left = [f"process {pid}" for pid, start in listed["procs"] if journal.is_same_process(pid, start)]
    for file, line, _ in listed["lines"]:
        if Path(file).exists() and line in Path(file).read_text().splitlines():
            left.append(f"{line} in {file}")
    segments = [row.split()[1] for row in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]]
    left += [f"segment {shmid}" for shmid, _ in listed["shm"] if str(shmid) in segments]
    left += [f"namespace {name}" for name in listed["netns"] if Path("/run/netns", name).exists()]
    left += [f"directory {d}" for d in listed["dirs"] if Path(d).exists()]
    return left


@needs_native
@needs_root
@pytest.mark.parametrize("victim", ["server", "client"])
@pytest.mark.parametrize("name", SERVER_WORKLOADS)
def test_a_process_that_dies_mid_window_fails_the_point_and_leaves_nothing(tmp_path, monkeypatch, name, victim):
    _available(name)
    w = registry.get(name)
    died: dict = {}
    opened = ServerInstance.window_opened

    def open_and_kill(self):
        opened(self)
        server = self.servers[0]
        if victim == "server":  # its own line, "postgres (port 20001) killed by signal 9: ..."
            proc, died["named"] = server.proc, f"{server.name} (port {server.port}) killed by signal 9"
        else:
            proc, died["named"] = self.client.proc, self.client.name
        died["listed"] = copy.deepcopy(self.ctx.launcher.journal.data)
        proc.kill()
        proc.wait()

    monkeypatch.setattr(ServerInstance, "window_opened", open_and_kill)
    # run_points also finds no process of the run and no cgroup left.
    (p,) = run_points(tmp_path, monkeypatch, name, w.tests()[0].name, (w.variants[0].name,), **SMALL.get(name, {}))
    assert died, "the window never opened"
    assert p["status"] == "failed"
    assert died["named"] in p["reason"] and "killed by signal 9" in p["reason"], p["reason"]
    assert not _undone(died["listed"])
