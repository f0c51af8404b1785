from pathlib import Path

from mosbench.machine.isolation import Hotplug, detect_cgroups
from mosbench.machine.journal import Journal


def _fake_sys(tmp_path: Path, n: int) -> Path:
    sys_cpu = tmp_path / "cpu"
    for cpu in range(1, n):  # CPU 0 has no online file, as on most x86 machines
        (sys_cpu / f"cpu{cpu}").mkdir(parents=True)
        (sys_cpu / f"cpu{cpu}" / "online").write_text("1")
    (sys_cpu / "cpu0").mkdir()
    return sys_cpu


def _online(sys_cpu: Path) -> set[int]:
    return {int(p.parent.name[3:]) for p in sys_cpu.glob("cpu*/online") if p.read_text().strip() == "1"}


def test_hotplug_keeps_journal_in_step_and_restores(tmp_path):
    sys_cpu = _fake_sys(tmp_path, 8)
    journal = Journal(tmp_path)
    hp = Hotplug(journal, sys_cpu)
    hp.keep_only({0, 1})
    assert _online(sys_cpu) == {1}
    assert sorted(journal.data["offlined"]) == [2, 3, 4, 5, 6, 7]
    hp.keep_only({0, 1, 2, 3})  # a bigger point brings CPUs back
    assert _online(sys_cpu) == {1, 2, 3} and sorted(journal.data["offlined"]) == [4, 5, 6, 7]
    hp.restore()
    assert _online(sys_cpu) == set(range(1, 8)) and journal.data["offlined"] == []


def test_detect_cgroup_layouts():
    v1 = ("cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0\n"
          "cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0\n"
          "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0\n")
    layout = detect_cgroups(v1)
    assert layout.version == 1 and layout.cpuset == Path("/sys/fs/cgroup/cpuset")
    assert layout.cpuacct == Path("/sys/fs/cgroup/cpuacct")
    co = "cgroup /sys/fs/cgroup/cpu,cpuacct,cpuset cgroup rw,cpu,cpuacct,cpuset 0 0\n"
    assert detect_cgroups(co).cpuacct == detect_cgroups(co).cpuset
    assert detect_cgroups("proc /proc proc rw 0 0\n") is None
