"""One measurement at a time: a machine-wide lock every run (and `mosbench vm`) holds while it measures.

Two runs on one machine measure each other: each stores half the machine's throughput and calls it
its own. The lock is `flock` on a file in /run/lock, which the kernel releases when its holder's last
descriptor closes, so a killed holder (SIGKILL included) never leaves it taken; the descriptor is
close-on-exec, so no server a run starts can keep it past the run. The file also says who holds it
(run id, store, pid, since when), for the line a waiting run prints.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from mosbench.errors import UserError
from mosbench.machine.journal import state_dir

# /run/lock is the system's place for lock files (world-writable, sticky), so root's runs and a user's
# affinity-only runs meet on the same file; a system without it (a bare guest's tmpfs /run) uses the
# journal's state directory, which every run can write.
LOCK_FILE = Path("/run/lock/mosbench.lock")


@dataclass(frozen=True)
class Holder:
    pid: int
    since: str  # ISO 8601, UTC
    command: str
    run_id: int | None = None
    store: str | None = None

    def describe(self) -> str:
        run = f"run #{self.run_id} in {self.store}" if self.run_id is not None else (self.command or "a run")
        return f"{run} (pid {self.pid}, since {self.since[:19].replace('T', ' ')} UTC)"


def lock_path() -> Path:
    if LOCK_FILE.parent.is_dir() and os.access(LOCK_FILE.parent, os.W_OK | os.X_OK):
        return LOCK_FILE
    try:
        return state_dir() / "machine.lock"
    except OSError as e:
        raise UserError(f"no directory for the machine lock: {LOCK_FILE.parent} is not writable and {e}") from None


def _open(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    with contextlib.suppress(OSError):  # another user's file: flock works on it all the same
        os.fchmod(fd, 0o666)  # whoever made it, every user's run must be able to write its name in it
    return fd


def read_holder(fd: int) -> Holder | None:
    """Who holds the lock, as its holder wrote it (None while it has not written yet)."""
    try:
        data = json.loads(os.pread(fd, 1 << 16, 0) or b"null")
        return Holder(**data) if isinstance(data, dict) else None
    except (OSError, ValueError, TypeError):
        return None


class MachineLock:
    """Held from `acquire` to `release` (or the holder's death)."""

    def __init__(self, path: Path | None = None):
        self.path = path or lock_path()
        self.fd: int | None = None
        self.holder: Holder | None = None

    def acquire(self, command: str, wait: bool = True,
                waiting: Callable[[Holder | None], None] | None = None) -> None:
        """Takes the lock; with wait=False, a taken lock is a UserError naming its holder. `waiting` is
        told once, before the wait, who holds it."""
        fd = _open(self.path)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = read_holder(fd)
                who = holder.describe() if holder else "another mosbench"
                if not wait:
                    raise UserError(f"this machine is measuring {who}; --no-wait refuses to wait for it") from None
                if waiting is not None:
                    waiting(holder)
                fcntl.flock(fd, fcntl.LOCK_EX)  # Ctrl-C ends the wait: the signal's exception interrupts it
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.holder = Holder(os.getpid(), dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), command)
        self._write()

    def note(self, run_id: int, store: str) -> None:
        """The run this holder measures, once it exists, for the line a waiting run prints."""
        if self.holder is not None:
            self.holder = Holder(self.holder.pid, self.holder.since, self.holder.command, run_id, store)
            self._write()

    def _write(self) -> None:
        assert self.fd is not None and self.holder is not None
        data = json.dumps(asdict(self.holder)).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)

    def release(self) -> None:
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)
        os.close(self.fd)  # closing the last descriptor releases the flock
        self.fd = None
        self.holder = None


@contextlib.contextmanager
def held(command: str, wait: bool = True,
         waiting: Callable[[Holder | None], None] | None = None) -> Iterator[MachineLock]:
    lock = MachineLock()
    lock.acquire(command, wait, waiting)
    try:
        yield lock
    finally:
        lock.release()
