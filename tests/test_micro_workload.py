"""micro's own pieces: the filesystem its files are on, and a driver that runs as will-it-scale's does."""

import subprocess
import time
from pathlib import Path

import pytest

from mosbench import native, procfs
from mosbench.workloads.micro import ADDR_NO_RANDOMIZE, address_layout, filesystem_type
from tests.conftest import needs_native

MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
23 22 0:21 / /dev/shm rw,nosuid,nodev shared:2 - tmpfs tmpfs rw
24 22 0:22 / /tmp/with\\040space rw shared:3 - xfs /dev/vdb rw
25 22 0:23 / /tmpfs-not-tmp rw shared:4 - tmpfs tmpfs rw
"""


def test_filesystem_type_is_the_longest_mount_holding_the_path():
    assert filesystem_type(Path("/tmp"), MOUNTINFO) == "ext4"
    assert filesystem_type(Path("/dev/shm"), MOUNTINFO) == "tmpfs"
    assert filesystem_type(Path("/dev/shm/a/b"), MOUNTINFO) == "tmpfs"
    assert filesystem_type(Path("/tmp/with space/x"), MOUNTINFO) == "xfs"
    assert filesystem_type(Path("/tmpfs-not-tmp"), MOUNTINFO) == "tmpfs"
    assert filesystem_type(Path("/tmpfs"), MOUNTINFO) == "ext4"  # a prefix of a mount point is not inside it
    assert filesystem_type(Path("/"), "") == "unknown"


@needs_native
@pytest.mark.parametrize("aslr", [False, True], ids=["will-it-scale's fixed layout", "--aslr"])
def test_the_driver_runs_without_address_randomisation_unless_asked(tmp_path, aslr):
    """As will-it-scale's runtest (setarch -R): brk, mmap and fault costs otherwise move between starts;
    with --aslr (fxmark: FxMark's program runs randomised) the host and its tasks keep it."""
    proc = subprocess.Popen([str(native.binary("mosbench-micro")), "--test", "getppid1", "--cpus", "0,1",
                             "--warmup", "0", "--duration", "3", "--workdir", str(tmp_path),
                             *(["--aslr"] if aslr else [])], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        everyone = [proc.pid, *procfs.descendants(proc.pid)]
        assert len(everyone) >= 4  # the supervisor, its host and a task per CPU
        for pid in everyone:
            persona = int(Path(f"/proc/{pid}/personality").read_text(), 16)
            assert bool(persona & ADDR_NO_RANDOMIZE) != aslr, pid
        system_randomises = Path("/proc/sys/kernel/randomize_va_space").read_text().strip() != "0"
        assert address_layout(proc.pid) == ("randomised" if aslr and system_randomises else "fixed")
        assert Path(f"/proc/{proc.pid}/comm").read_text().strip() == "mosbench-micro"  # re-executed by name
    finally:
        proc.terminate()  # the driver cleans up its scratch directory on SIGTERM
        proc.wait(10)
    assert list(tmp_path.iterdir()) == []


def test_a_mount_point_with_any_octal_escape_is_found():
    # One mountinfo parser for the file systems a point mounts and for micro's fsdir: every octal escape
    # is undone, not the space alone.
    tab = "23 22 0:24 / /tmp/tab\\011dir rw shared:5 - btrfs /dev/vdc rw\n"
    assert filesystem_type(Path("/tmp/tab\tdir/f"), MOUNTINFO + tab) == "btrfs"


def test_meminfo_fields_are_read_in_kilobytes():
    from mosbench.machine.memory import meminfo_kb

    text = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20480000 kB\nHugePages_Total:       0\n"
    assert meminfo_kb("MemTotal", text) == 24576000 and meminfo_kb("MemAvailable", text) == 20480000
    assert meminfo_kb("HugePages_Total", text) == 0 and meminfo_kb("Mem", text) is None
    assert meminfo_kb("MemTotal") > 0  # this machine's
