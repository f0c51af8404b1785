"""A fresh file system per point: made on a loop device over a sparse file on tmpfs (no disk in the way,
as FxMark's "mem" medium) or on a block device the user gives up, mounted, and gone again afterwards.

Every mount is written into the run's journal before anything is made (the mount point, and the image
file or the device), so whatever ends the run, the journal's undo (`undo`, called by journal.undo after
the run's processes are gone) unmounts it, detaches every loop device over the image and removes the
image: a Ctrl-C lets the point's own `release` do it, a SIGKILL leaves it to the guardian, a dead
guardian to the next mosbench command. A user's device is only ever unmounted, never touched again.

The mounting and unmounting run with SIGINT, SIGTERM and SIGHUP held, so a Ctrl-C lands before or after
them, never between a mount and its journal entry's removal; the programs they start (losetup, mkfs, mount)
run in sessions of their own, out of a terminal's reach, and finish.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from mosbench.errors import PointFailed, UserError
from mosbench.machine.memory import meminfo_kb

SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
# mkfs of a large device (a discard of every block) may take minutes; a loop device's takes a second.
MKFS_TIMEOUT = 900.0
UMOUNT_PATIENCE = 5.0  # seconds a busy file system is waited for before it is detached lazily


@dataclass(frozen=True)
class FileSystem:
    """A file system mosbench knows how to make: its mkfs, the package holding it, and what (if
    anything) it mounts with beyond the kernel's defaults."""

    name: str
    description: str
    package: str  # the Debian package holding mkfs; "" where none is needed
    mkfs: tuple[str, ...]  # the command before the device; () for a memory file system
    options: str = ""  # mount options beyond the kernel's defaults (why: in the description)
    inode_ratio: int = 0  # bytes per inode its mkfs gives by default; 0 where inodes are made as needed

    @property
    def memory(self) -> bool:
        return not self.mkfs

    def missing(self) -> str | None:
        """What this machine lacks to make it ("mkfs.xfs (xfsprogs)"), None if nothing."""
        if self.mkfs and shutil.which(self.mkfs[0]) is None:
            return f"{self.mkfs[0]} ({self.package})"
        return None

    def mkfs_argv(self, device: str, size: int, inodes: int) -> list[str]:
        """The mkfs command for device of size bytes with room for at least inodes files."""
        argv = list(self.mkfs)
        if self.inode_ratio and inodes > size // self.inode_ratio:
            argv += ["-N", str(inodes)]
        return [*argv, device]


KNOWN: dict[str, FileSystem] = {fs.name: fs for fs in (
    FileSystem("tmpfs", "memory, no block device, as FxMark's tmpfs", "", ()),
    # noinit_itable: the inode tables are left as mkfs left them, rather than zeroed by a kernel thread
    # during the first points' windows (and into tmpfs memory, 512 MiB for 32 GiB).
    FileSystem("ext4", "mkfs.ext4's defaults (a journal), mounted noinit_itable", "e2fsprogs",
               ("mkfs.ext4", "-F", "-q"), "noinit_itable", inode_ratio=16384),
    FileSystem("xfs", "mkfs.xfs's defaults", "xfsprogs", ("mkfs.xfs", "-f", "-q")),
    FileSystem("btrfs", "mkfs.btrfs's defaults", "btrfs-progs", ("mkfs.btrfs", "-f", "-q")),
)}


class Journaled(Protocol):
    """The run's journal as this module uses it (machine/journal.py's Journal)."""

    def add_mount(self, entry: dict[str, str]) -> None: ...

    def remove_mount(self, entry: dict[str, str]) -> None: ...


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait until the block is done, then go to the handlers they would have
    found. Held in Python, not by the thread's signal mask: the kernel would hand a masked signal to another
    thread (a progress bar's), and Python would run its handler in this one all the same."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    old = {s: signal.signal(s, lambda n, _frame: caught.append(n)) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        for n in dict.fromkeys(caught):
            if callable(old[n]):
                old[n](n, None)
            elif old[n] == signal.SIG_DFL:
                signal.raise_signal(n)


@dataclass
class Mounted:
    """A point's file system, mounted at path until release()."""

    fs: FileSystem
    path: Path
    source: str  # the loop device, the user's device, or "tmpfs"
    size: int  # bytes
    entry: dict[str, str]
    journal: Journaled
    mkfs: list[str] = field(default_factory=list)
    options: str = ""  # as the kernel reports them: the mount's and the superblock's
    released: bool = False

    def facts(self) -> dict[str, str]:
        """What the point's results depend on, for its metrics."""
        medium = "memory" if self.fs.memory else self.entry.get("device", "loop device over a file on tmpfs")
        return {"fs": self.fs.name, "fs_medium": medium, "fs_size_gib": f"{self.size / 2**30:g}",
                "mkfs": " ".join(self.mkfs[:-1]) if self.mkfs else "", "mount_options": self.options}

    def release(self) -> list[str]:
        """Unmounts, detaches the loop device and removes the image; idempotent. What was done."""
        if self.released:
            return []
        with signals_held():
            done = undo([self.entry])
            self.journal.remove_mount(self.entry)
            self.released = True
        return done


def mount_fresh(fs: FileSystem, where: Path, journal: Journaled, *, size: int, inodes: int = 0,
                image: Path | None = None, device: Path | None = None) -> Mounted:
    """A new fs mounted at where (made here): on device if given, else on a loop device over image, a
    sparse file of size bytes made here (tmpfs: a tmpfs of that size, neither used). PointFailed with the
    failing program's own words."""
    if not fs.memory and (image is None) == (device is None):
        raise ValueError("a file system needs an image or a device, not both")
    entry = {"mount": str(where)}
    if not fs.memory:
        entry.update({"device": str(device)} if device else {"image": str(image)})
    mounted = Mounted(fs, where, "tmpfs", size, entry, journal)
    try:
        with signals_held():
            journal.add_mount(entry)
            _make(mounted, image, device, inodes)
    except BaseException:  # also a signal that waited for the mount: it lands as the mask is lifted
        mounted.release()
        raise
    return mounted


def _make(mounted: Mounted, image: Path | None, device: Path | None, inodes: int) -> None:
    """The file system of mounted, made and mounted at its path (see mount_fresh)."""
    fs, where = mounted.fs, mounted.path
    where.mkdir()
    if fs.memory:
        # The kernel's default is an inode per two pages of memory: more where the point needs them.
        extra = f",nr_inodes={inodes}" if inodes > _memory_pages() // 2 else ""
        _run(["mount", "-t", "tmpfs", "-o", f"size={mounted.size}{extra}", "tmpfs", str(where)])
    else:
        if device is None:
            assert image is not None
            with open(image, "xb") as f:
                f.truncate(mounted.size)
            mounted.source = _run(["losetup", "--find", "--show", str(image)]).strip()
        else:
            if in_use := device_in_use(device):
                raise PointFailed(f"{device} is {in_use}")
            mounted.source = str(device)
            mounted.size = block_device_size(device)
        mounted.mkfs = fs.mkfs_argv(mounted.source, mounted.size, inodes)
        _run(mounted.mkfs, MKFS_TIMEOUT)
        _run(["mount", "-t", fs.name, *(["-o", fs.options] if fs.options else []), mounted.source, str(where)])
    mounted.options = mount_options(where)


def _memory_pages() -> int:
    return (meminfo_kb("MemTotal") or 0) * 1024 // os.sysconf("SC_PAGE_SIZE")


def _run(argv: list[str], timeout: float = 60.0) -> str:
    """Runs an administration program to its end; its output, or PointFailed with its first word (the
    cause: mkfs.xfs goes on with its usage)."""
    try:
        # A session of its own: a terminal's Ctrl-C is the harness's to hold, never mkfs's to die of.
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                              start_new_session=True)
    except subprocess.TimeoutExpired:
        raise PointFailed(f"{argv[0]} did not finish in {timeout:.0f} s") from None
    except FileNotFoundError:
        raise PointFailed(f"{argv[0]} is not installed") from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise PointFailed(f"{' '.join(argv)}: {said[0] if said else f'exit status {done.returncode}'}")
    return done.stdout


@dataclass(frozen=True)
class MountInfo:
    mount_id: str
    device: str  # major:minor
    point: str
    options: str  # the mount's
    fstype: str
    source: str
    super_options: str  # the superblock's


def _unescape(text: str) -> str:
    """mountinfo's octal escapes (\\040 for a space)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def mounts(mountinfo: str | None = None) -> list[MountInfo]:
    """This mount namespace's mounts, from /proc/self/mountinfo."""
    text = mountinfo if mountinfo is not None else Path("/proc/self/mountinfo").read_text()
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 6 or len(tail) < 3:
            continue
        out.append(MountInfo(fields[0], fields[2], _unescape(fields[4]), fields[5], tail[0], _unescape(tail[1]),
                             tail[2]))
    return out


def mount_options(where: Path) -> str:
    """The options the kernel reports for the mount at where: the mount's, then its superblock's (each once)."""
    for m in reversed(mounts()):
        if m.point == str(where):
            return ",".join(dict.fromkeys(o for o in f"{m.options},{m.super_options}".split(",") if o))
    return ""


def is_mounted(where: Path) -> bool:
    return any(m.point == str(where) for m in mounts())


def loops_over(image: Path) -> list[str]:
    """The loop devices whose backing file is image (also once it is deleted)."""
    found = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        with contextlib.suppress(OSError):
            name = backing.read_text().strip().removesuffix(" (deleted)")
            if name == str(image):
                found.append(f"/dev/{backing.parent.parent.name}")
    return found


def _unmount(where: Path) -> str | None:
    """Unmounts where, waiting a moment while it is busy (processes that were just killed), then
    detaching it lazily; what was done, or None if it was not mounted."""
    if not is_mounted(where):
        return None
    deadline = time.monotonic() + UMOUNT_PATIENCE
    while True:
        done = subprocess.run(["umount", str(where)], capture_output=True, text=True, check=False,
                              start_new_session=True)
        if done.returncode == 0 or not is_mounted(where):
            return f"unmounted {where}"
        if time.monotonic() > deadline:
            subprocess.run(["umount", "--lazy", str(where)], capture_output=True, check=False, start_new_session=True)
            return f"detached busy {where} (lazily: it goes when its last user does)"
        time.sleep(0.1)


def undo(entries: list[dict[str, str]], scratch_prefix: str | None = None) -> list[str]:
    """Undoes mounts as the journal lists them: each unmounted, every loop device over its image
    detached (once busy, the kernel detaches it when its last user goes), the image and the mount point
    removed. A device's entry is only unmounted. With scratch_prefix, the directories above the mount
    point are removed too while empty, up to the run's scratch (whose name starts so): a run that removed
    its scratch while a file system was still mounted there leaves nothing behind. What was done."""
    done: list[str] = []
    for entry in entries:
        where = Path(entry["mount"])
        if (said := _unmount(where)) is not None:
            done.append(said)
        if "image" in entry:
            image = Path(entry["image"])
            for loop in loops_over(image):
                detached = subprocess.run(["losetup", "--detach", loop], capture_output=True, check=False,
                                          start_new_session=True)
                if detached.returncode == 0:
                    done.append(f"detached {loop}")
            with contextlib.suppress(FileNotFoundError):
                image.unlink()
                done.append(f"removed {image}")
        with contextlib.suppress(OSError):
            where.rmdir()
            for d in where.parents if scratch_prefix else ():
                if not any(p.name.startswith(scratch_prefix) for p in (d, *d.parents)):
                    break
                d.rmdir()
    return done


def block_device_size(device: Path) -> int:
    with open(device, "rb") as f:
        return f.seek(0, os.SEEK_END)


def _sysfs_of(device: Path) -> Path:
    st = os.stat(device)
    return Path(f"/sys/dev/block/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}").resolve()


def device_in_use(device: Path) -> str | None:
    """How device (or a partition of it) is in use: mounted, swap, or held by another device (LVM, RAID,
    dm-crypt); None if it is free."""
    sysfs = _sysfs_of(device)
    parts = [sysfs, *(p for p in sysfs.iterdir() if (p / "partition").exists())]
    numbers = {(p / "dev").read_text().strip(): p.name for p in parts}
    for m in mounts():
        if m.device in numbers:
            return f"mounted at {m.point}" + (f" (partition {numbers[m.device]})" if numbers[m.device] != sysfs.name
                                              else "")
    names = {f"/dev/{n}" for n in numbers.values()}
    with contextlib.suppress(OSError):
        for line in Path("/proc/swaps").read_text().splitlines()[1:]:
            if line.split() and line.split()[0] in names:
                return f"in use as swap ({line.split()[0]})"
    for p in parts:
        holders = sorted(h.name for h in (p / "holders").iterdir()) if (p / "holders").is_dir() else []
        if holders:
            return f"held by {', '.join(holders)} ({p.name})"
    return None


def check_device(device: str) -> None:
    """A user's device may take a file system per point: a block device, not in use. UserError (one line)
    otherwise; the user's agreement to lose what it holds (-p wipe=yes) is the workload's to ask."""
    path = Path(device)
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise UserError(f"-p device={device}: {e.strerror}") from None
    if not stat.S_ISBLK(mode):
        raise UserError(f"-p device={device}: not a block device")
    if in_use := device_in_use(path):
        raise UserError(f"-p device={device} is {in_use}: every point makes a new file system on it, so it "
                        "must be free")
