"""A file per run listing what the run changed on the machine, so a crash cannot leave it behind.

Every cgroup made, CPU offlined, process started, scratch directory and network namespace made, every
line added to a system file (Exim's list of trusted configurations), every steering setting changed (an
IRQ's CPUs, a queue's RPS or XPS mask, with its old value) and every file system mounted (its mount point and
its loop device's image, or the user's device: machine/filesystem.py) is written down before it takes effect and
crossed off when undone. A run that dies without cleaning up (SIGKILL, an OOM kill of
the harness) leaves its journal: its guardian (guardian.py), a small process that outlives the harness,
undoes it at once and marks the run killed in the store; should the guardian be gone too, the next
mosbench command finds journals whose owner is gone and does the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from mosbench import procfs

SCRATCH_PREFIX = "mosbench-run"
# The host folder a guest mounts, made anew for every boot; its name reaches the guest's kernel command line.
GUEST_SHARE_PREFIX = f"{SCRATCH_PREFIX}vm-"
NETNS_PREFIX = "mosbench-"
# The only settings undo writes, relative to the root, whatever a journal lists: a NIC queue's steering.
SETTINGS = (
    re.compile(r"proc/irq/\d+/smp_affinity_list"),
    re.compile(r"sys/class/net/[^/]+/queues/rx-\d+/rps_cpus"),
    re.compile(r"sys/class/net/[^/]+/queues/tx-\d+/xps_cpus"),
)
_SETTING_VALUE = re.compile(r"[0-9a-fA-F,-]{1,4096}")  # a CPU list or a hex mask, nothing else


def state_dir() -> Path:
    env = os.environ.get("MOSBENCH_STATE")
    candidates = [Path(env)] if env else [Path("/run/mosbench"), Path(tempfile.gettempdir()) / "mosbench-state"]
    for d in candidates:
        try:
            d.mkdir(parents=True, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            continue
    raise OSError("no writable state directory for the run journal (set MOSBENCH_STATE)")


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of pid in ticks: with the pid, it names one process even after pid reuse."""
    fields = procfs.stat_fields(pid)
    return None if fields is None else int(fields[19])


def is_same_process(pid: int, start: int | None) -> bool:
    now = process_start_time(pid)
    return now is not None and (start is None or now == start)


class Journal:
    def __init__(self, directory: Path | None = None):
        self.path = (directory or state_dir()) / f"run-{os.getpid()}.json"
        self.data: dict = {
            "owner": os.getpid(),
            "owner_start": process_start_time(os.getpid()),
            "cgroups": [],
            "offlined": [],
            "procs": [],
            "dirs": [],
            "netns": [],
            "lines": [],
            "shm": [],
            "settings": [],
            "mounts": [],
        }
        self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data))
        tmp.replace(self.path)

    def _add(self, key: str, item) -> None:
        if item not in self.data[key]:
            self.data[key].append(item)
            self._save()

    def _remove(self, key: str, item) -> None:
        if item in self.data[key]:
            self.data[key].remove(item)
            self._save()

    def add_cgroup(self, path: Path) -> None:
        self._add("cgroups", str(path))

    def remove_cgroup(self, path: Path) -> None:
        self._remove("cgroups", str(path))

    def add_offlined(self, cpu: int) -> None:
        self._add("offlined", cpu)

    def remove_offlined(self, cpu: int) -> None:
        self._remove("offlined", cpu)

    def add_proc(self, pid: int) -> None:
        self._add("procs", [pid, process_start_time(pid)])

    def remove_proc(self, pid: int) -> None:
        self.data["procs"] = [p for p in self.data["procs"] if p[0] != pid]
        self._save()

    def set_run(self, store_url: str | None, run_id: int | None) -> None:
        """The run this journal belongs to, so a recovery can mark it killed; None once it is finished."""
        self.data["run"] = None if run_id is None else {"store": store_url, "id": run_id}
        self._save()

    def add_dir(self, path: Path) -> None:
        self._add("dirs", str(path))

    def remove_dir(self, path: Path) -> None:
        self._remove("dirs", str(path))

    def add_netns(self, name: str) -> None:
        self._add("netns", name)

    def remove_netns(self, name: str) -> None:
        self._remove("netns", name)

    def add_line(self, file: Path, line: str, mode: int = 0o644) -> None:
        """Appends line to file, journaled first so a crash cannot leave it there. A file it makes
        (with mode) goes again with the last line it holds."""
        made = not file.exists() or any(e[0] == str(file) and e[2] for e in self.data["lines"])
        self._add("lines", [str(file), line, made])
        with open(file, "a") as f:
            f.write(line + "\n")
        if made:
            os.chmod(file, mode)

    def remove_line(self, file: Path, line: str) -> None:
        entry = next((e for e in self.data["lines"] if e[:2] == [str(file), line]), None)
        if entry is not None:
            remove_line(file, line, remove_empty=entry[2])
            self._remove("lines", entry)

    def add_shm(self, shmid: int, creator: int) -> None:
        """A System V shared memory segment a server of the run made (PostgreSQL's interlock): it
        outlives a server that is killed, so it is removed with the run's other leftovers."""
        self._add("shm", [shmid, creator])

    def remove_shm(self, shmid: int, creator: int) -> None:
        """The server has ended: its segment goes if it is still there."""
        remove_sysv_shm(shmid, creator)
        self._remove("shm", [shmid, creator])

    def add_setting(self, path: Path, old: str) -> bool:
        """Writes down a setting's value before it is changed, for undo to put back. A path already listed
        keeps its first value (the machine's own); True if it was not listed yet."""
        if self.setting(path) is not None:
            return False
        self._add("settings", [str(path), old])
        return True

    def setting(self, path: Path) -> str | None:
        """The value written down for path, if it is listed."""
        return next((old for p, old in self.data["settings"] if p == str(path)), None)

    def remove_setting(self, path: Path) -> None:
        """The setting has its old value again."""
        self.data["settings"] = [e for e in self.data["settings"] if e[0] != str(path)]
        self._save()

    def add_mount(self, entry: dict[str, str]) -> None:
        """A file system about to be mounted (filesystem.mount_fresh): its mount point, and its image or device."""
        self._add("mounts", entry)

    def remove_mount(self, entry: dict[str, str]) -> None:
        self._remove("mounts", entry)

    def is_clean(self) -> bool:
        """Nothing listed is left to undo."""
        return not any(v for v in self.data.values() if isinstance(v, list))

    def close(self) -> None:
        """Ends the journal; only call once everything it lists has been undone."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def undo(data: dict, root: Path = Path("/")) -> list[str]:
    """Undoes what a journal lists: kill its processes, remove its cgroups and scratch directories, bring
    its CPUs back, put back the settings it changed (those under root, a fake tree in tests)."""
    done: list[str] = []
    for pid, start in data.get("procs", []):
        if is_same_process(pid, start):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                done.append(f"killed process {pid}")
    # Deepest first: a parent cgroup cannot be removed while it has children.
    for cg in sorted(data.get("cgroups", []), key=lambda p: p.count("/"), reverse=True):
        path = Path(cg)
        if path.is_dir():
            kill_cgroup_procs(path)
            if remove_cgroup_dir(path):
                done.append(f"removed cgroup {cg}")
    # After the processes that used them, before the scratch that holds them: only a run's own mounts.
    from mosbench.machine import filesystem

    done.extend(filesystem.undo([e for e in data.get("mounts", []) if all(
        any(part.startswith(SCRATCH_PREFIX) for part in Path(e[k]).parts) for k in ("mount", "image") if k in e)],
        SCRATCH_PREFIX))
    for d in data.get("dirs", []):
        # Only a run's own scratch (tmpfs memory until removed), whatever the journal file says.
        if Path(d).name.startswith(SCRATCH_PREFIX) and Path(d).is_dir():
            shutil.rmtree(d, ignore_errors=True)
            done.append(f"removed scratch directory {d}")
    for name in data.get("netns", []):
        # Only a run's own namespace; deleting it removes its veth pair, both ends.
        if name.startswith(NETNS_PREFIX) and Path("/run/netns", name).exists():
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)
            done.append(f"removed network namespace {name}")
    for file, line, made in data.get("lines", []):
        # Only lines naming a run's own scratch: whatever the journal says, nothing else is touched.
        if SCRATCH_PREFIX in line and remove_line(Path(file), line, remove_empty=made):
            done.append(f"removed {line} from {file}")
    for shmid, creator in data.get("shm", []):
        if remove_sysv_shm(shmid, creator):
            done.append(f"removed shared memory segment {shmid}")
    for cpu in data.get("offlined", []):
        online = Path(f"/sys/devices/system/cpu/cpu{cpu}/online")
        with contextlib.suppress(OSError):
            if online.read_text().strip() == "0":
                online.write_text("1")
                done.append(f"brought CPU {cpu} back online")
    # After the CPUs: an IRQ's old CPUs cannot be given back while they are offline.
    for path, old in data.get("settings", []):
        if is_setting(Path(path), root) and _SETTING_VALUE.fullmatch(old) and restore_setting(Path(path), old):
            done.append(f"put {old} back into {path}")
    return done


def is_setting(path: Path, root: Path = Path("/")) -> bool:
    """A path undo may write: a NIC queue's steering under root, and nothing else."""
    if not path.is_absolute() or ".." in path.parts:
        return False
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        return False
    return any(p.fullmatch(relative) for p in SETTINGS)


def restore_setting(path: Path, old: str) -> bool:
    """Writes old back; False where the setting is gone (its IRQ or device) or the kernel refuses it. Never
    makes a file."""
    if not path.is_file():
        return False
    try:
        path.write_text(old)
    except OSError:
        return False
    return True


def remove_sysv_shm(shmid: int, creator: int, wait: float = 5.0) -> bool:
    """Removes segment shmid if the process creator made it, once nothing is attached (a killed
    server's children leave within moments); True if it was removed."""
    deadline = time.monotonic() + wait
    while True:
        try:
            table = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
        except OSError:
            return False
        # key shmid perms size cpid lpid nattch ...
        row = next((f for f in (line.split() for line in table) if int(f[1]) == shmid and int(f[4]) == creator), None)
        if row is None:
            return False
        if int(row[6]) == 0:
            return subprocess.run(["ipcrm", "-m", str(shmid)], capture_output=True, check=False).returncode == 0
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def remove_line(file: Path, line: str, remove_empty: bool = False) -> bool:
    """Removes every copy of line from file, keeping the rest and the file's mode (or, with remove_empty,
    the file itself once nothing is left in it); True if the line was there."""
    try:
        lines = file.read_text().splitlines()
    except FileNotFoundError:
        return False
    kept = [x for x in lines if x != line]
    if len(kept) == len(lines):
        return False
    if remove_empty and not kept:
        file.unlink()
        return True
    tmp = file.with_name(f".{file.name}.mosbench")
    tmp.write_text("".join(x + "\n" for x in kept))
    os.chmod(tmp, file.stat().st_mode & 0o7777)
    tmp.replace(file)
    return True


def kill_cgroup_procs(path: Path) -> None:
    """SIGKILLs every process in a cgroup (our own: only ever called on groups a run created)."""
    kill_file = path / "cgroup.kill"
    if kill_file.exists():
        with contextlib.suppress(OSError):
            kill_file.write_text("1")
    for _ in range(50):
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def remove_cgroup_dir(path: Path, timeout: float = 5.0) -> bool:
    """rmdir, retried while just-killed processes finish exiting."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)


def recover_stale(directory: Path | None = None) -> list[str]:
    """Finds journals of runs that died without cleaning up and undoes them."""
    try:
        d = directory or state_dir()
    except OSError:
        return []
    actions: list[str] = []
    for f in sorted(d.glob("run-*.json")):
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if is_same_process(data["owner"], data.get("owner_start")):
            continue  # that run is still going
        actions.extend(recover(data))
        with contextlib.suppress(FileNotFoundError):
            f.unlink()
    return actions


def recover(data: dict) -> list[str]:
    """Undoes a dead run's journal and marks its run killed in its store."""
    actions = undo(data)
    run = data.get("run")
    if run:
        from mosbench.store.db import Store  # only here: the journal itself must not need the store

        try:
            if Store(run["store"]).mark_killed(run["id"]):
                actions.append(f"marked run {run['id']} killed (its harness died)")
        except Exception as e:  # recovery of the machine must not stop at the store
            actions.append(f"could not mark run {run['id']} killed: {e}")
    return actions
