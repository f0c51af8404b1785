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


def test_the_ci_suite_passes_in_64_vcpu_guests_of_both_cgroup_versions(tmp_path):
    # Both guests boot at once, one host CPU each (emulated, a guest's vCPUs run on one host thread).
    db = tmp_path / "host.sqlite"
    before = _qemu_processes()
    r = mosbench("vm", "--suite", "ci", "--cgroup", "both", "--timeout", "18", "--store", str(db), timeout=1200)
    runs = Store(str(db)).list_runs()
    passed = r.stdout.count("ok     checks")
    if "did not finish within" in r.stderr:
        # Once in several boots here, the emulator stalled with its main thread busy and the guest made no
        # progress for over ten minutes (a QEMU TCG matter, never seen past boot twice in a row): one
        # more boot of the guest that stalled, said in the log. A second stall, or any failed check, fails.
        stalled = 1 if "cgroup v1 guest did not" in r.stderr else 2
        print(f"cgroup v{stalled} guest stalled, booting it again:", r.stdout[-6000:], r.stderr[-3000:])
        runs = [run for run in runs if run["environment"]["virtual_machine"]["cgroup_version"] != stalled]
        again = tmp_path / "host-again.sqlite"
        r = mosbench("vm", "--suite", "ci", "--cgroup", str(stalled), "--timeout", "18", "--store", str(again),
                     timeout=1200)
        runs += Store(str(again)).list_runs()
        passed += r.stdout.count("ok     checks")
    print(r.stdout[-8000:], r.stderr[-3000:])
    assert r.returncode == 0, r.stderr or r.stdout[-3000:]
    assert passed == 2
    assert sorted(run["environment"]["virtual_machine"]["cgroup_version"] for run in runs) == sorted(
        v for v in (2, 1) for _ in sweeps("ci", v)), runs
    for run in runs:
        facts = run["environment"]["virtual_machine"]
        assert facts["vcpus"] == 64 and facts["overcommitted"]
        assert run["environment"]["topology_summary"].startswith("64 CPUs: 4 socket(s)")
        assert run["points"] > 0 and run["failed"] == 0
    assert _qemu_processes() == before
    assert not list(Path("/var/tmp").glob("mosbench-runvm-*"))

