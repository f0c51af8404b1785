"""The journal's undo: what a dead run left, removed, and nothing that is not the run's."""

import json
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


def test_a_setting_keeps_its_first_value_until_crossed_off(tmp_path):
    j = journal.Journal(tmp_path)
    path = Path("/proc/irq/40/smp_affinity_list")
    assert j.add_setting(path, "0-7") and not j.add_setting(path, "3")  # the second change is not the machine's
    assert j.setting(path) == "0-7" and not j.is_clean()
    on_disk = json.loads(j.path.read_text())["settings"]
    assert on_disk == [[str(path), "0-7"]]  # written down before anything changes
    j.remove_setting(path)
    assert j.setting(path) is None and j.is_clean()
    j.close()


def test_undo_puts_back_steering_settings_only(tmp_path):
    def setting(rel: str, now: str) -> Path:
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(now + "\n")
        return p

    irq = setting("proc/irq/40/smp_affinity_list", "3")
    rps = setting("sys/class/net/eth0/queues/rx-2/rps_cpus", "00000008")
    xps = setting("sys/class/net/eth0/queues/tx-0/xps_cpus", "00000001")
    mask = setting("proc/irq/40/smp_affinity", "8")  # the same IRQ's hex mask: not a file undo writes
    mtu = setting("sys/class/net/eth0/mtu", "9000")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-outside" / "proc/irq/40/smp_affinity_list"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_text("3\n")
    data = {"settings": [[str(irq), "0-7"], [str(rps), "00000000"], [str(xps), "0"], [str(mask), "ff"],
                         [str(mtu), "1500"], [str(elsewhere), "0-7"], ["proc/irq/41/smp_affinity_list", "1"],
                         [str(tmp_path / "proc/irq/41/smp_affinity_list"), "1"]]}
    done = journal.undo(data, root=tmp_path)
    assert [irq.read_text(), rps.read_text(), xps.read_text()] == ["0-7", "00000000", "0"]
    assert [mask.read_text(), mtu.read_text(), elsewhere.read_text()] == ["8\n", "9000\n", "3\n"]
    assert not (tmp_path / "proc/irq/41").exists()  # gone with its IRQ: nothing is made
    assert done == [f"put 0-7 back into {irq}", f"put 00000000 back into {rps}", f"put 0 back into {xps}"]
    assert not journal.is_setting(irq)  # under / only, unless told the root


def test_undo_reads_a_journal_written_before_settings_existed():
    assert journal.undo({"cgroups": [], "dirs": [], "netns": []}) == []
