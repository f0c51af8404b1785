"""The many-core guest: a 64-vCPU, 4-socket, 4-node machine booted under QEMU, the CI suite swept inside
it on a cgroup v2 and on a cgroup v1 kernel command line, its checks (tests/guest/) passed, its runs kept
here, nothing left behind on this machine. Skipped, with what is missing, where no guest can boot
(scripts/install-manycore installs it; CI does)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mosbench.guest import host as vm
from mosbench.guest.inside import sweeps
from mosbench.store.db import Store
from tests.conftest import mosbench, needs_native, needs_root

MISSING = vm.missing_tools()
pytestmark = [
    pytest.mark.system, needs_native, needs_root,
    pytest.mark.skipif(bool(MISSING), reason="no many-core guest here: missing " + "; ".join(MISSING)),
]


def _qemu_processes() -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid=,comm="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "qemu-system" in line and "<defunct>" not in line]


@pytest.mark.parametrize("cgroup", ["2", "1"])
def test_the_ci_suite_passes_in_a_64_vcpu_guest(tmp_path, cgroup):
    db = tmp_path / "host.sqlite"
    before = _qemu_processes()
    r = mosbench("vm", "--suite", "ci", "--cgroup", cgroup, "--timeout", "18", "--store", str(db), timeout=1200)
    if "did not finish within" in r.stderr:
        # Once in several boots here, the emulator stalled with its main thread busy and the guest made no
        # progress for over ten minutes (a QEMU TCG matter, never seen past boot twice in a row): one
        # more boot, said in the log. A second stall, or any failed check, fails the test.
        print(f"guest stalled, booting again: {r.stdout[-2000:]}")
        db = tmp_path / "host-again.sqlite"
        r = mosbench("vm", "--suite", "ci", "--cgroup", cgroup, "--timeout", "18", "--store", str(db), timeout=1200)
    print(r.stdout[-6000:], r.stderr[-3000:])
    assert r.returncode == 0, r.stderr or r.stdout[-3000:]
    assert "ok     checks" in r.stdout
    runs = Store(str(db)).list_runs()
    assert len(runs) == len(sweeps("ci", int(cgroup))), runs
    for run in runs:
        facts = run["environment"]["virtual_machine"]
        assert facts["vcpus"] == 64 and facts["cgroup_version"] == int(cgroup) and facts["overcommitted"]
        assert run["environment"]["topology_summary"].startswith("64 CPUs: 4 socket(s)")
        assert run["points"] > 0 and run["failed"] == 0
    assert _qemu_processes() == before
    assert not list(Path("/var/tmp").glob("mosbench-runvm-*"))

