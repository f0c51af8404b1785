"""Starting and ending a point's processes: into their group, journaled, and stopped by PID only."""

from __future__ import annotations

import contextlib
import ctypes
import os
import pwd
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

from mosbench.machine.isolation import Group
from mosbench.machine.journal import Journal

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


class Launcher:
    def __init__(self, journal: Journal, logdir: Path):
        self.journal = journal
        self.logdir = logdir
        self.procs: list[subprocess.Popen] = []

    def spawn(self, name: str, argv: list[str], group: Group, env: dict[str, str] | None = None,
              cwd: Path | None = None, cpus: tuple[int, ...] | None = None,
              enter: Callable[[], None] | None = None, user: str | None = None,
              piped: bool = False) -> subprocess.Popen:
        """Starts argv inside group with stdout/stderr to <logdir>/<name>.{out,err}; with cpus, pinned
        to those (within the group's); with enter, after that step in the child (a namespace to join);
        with user, as that user (and its group alone: a server that refuses root, PostgreSQL's); piped,
        with its standard input and output pipes of ours (a session it is driven through)."""
        self.logdir.mkdir(parents=True, exist_ok=True)
        account = pwd.getpwnam(user) if user else None

        def in_child() -> None:
            # Joins its group before exec, so every descendant is born confined and accounted, and
            # dies with the harness even if the harness is SIGKILLed.
            group.join()
            if cpus:
                os.sched_setaffinity(0, cpus)
            if enter:
                enter()
            if account:
                # After joining the group: only root may move a task into a cgroup.
                os.setgroups([])
                os.setgid(account.pw_gid)
                os.setuid(account.pw_uid)
            # Last: a change of user clears the parent-death signal.
            _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

        with open(self.logdir / f"{name}.out", "wb") as out, open(self.logdir / f"{name}.err", "wb") as err:
            proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE if piped else out, stderr=err,
                stdin=subprocess.PIPE if piped else subprocess.DEVNULL, env=env, cwd=cwd,
                preexec_fn=in_child, start_new_session=True,  # a terminal's Ctrl-C goes to us alone
            )
        self.journal.add_proc(proc.pid)
        self.procs.append(proc)
        return proc

    def run(self, name: str, argv: list[str], group: Group, timeout: float | None = None,
            env: dict[str, str] | None = None, user: str | None = None) -> int:
        """Runs argv to its end inside group (setup work: an unpack, a load); returns its exit status,
        negative for a signal (also when it overran timeout and was stopped). Its output is in the logs."""
        proc = self.spawn(name, argv, group, env=env, user=user)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:
            self.stop(proc)
        return proc.returncode

    def stop(self, proc: subprocess.Popen, grace: float = 5.0) -> int:
        """SIGTERM, then SIGKILL after grace seconds; returns the exit status."""
        return self.stop_many([proc], grace)[0]

    def stop_many(self, procs: list[subprocess.Popen], grace: float = 5.0) -> list[int]:
        """SIGTERM to each, then SIGKILL to those still running grace seconds after: one grace for all, so
        a point's server per core stop together rather than one after another (64 under emulation took
        minutes). Their exit statuses, in order."""
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait()
            self.journal.remove_proc(proc.pid)
            with contextlib.suppress(ValueError):
                self.procs.remove(proc)
        return [proc.returncode for proc in procs]

    def stop_all(self) -> None:
        self.stop_many(list(reversed(self.procs)))

    def stderr_lines(self, name: str) -> list[str]:
        """What a program wrote to stderr, line by line (none if it wrote nothing or never ran)."""
        try:
            return (self.logdir / f"{name}.err").read_text(errors="replace").strip().splitlines()
        except OSError:
            return []

    def last_error(self, name: str) -> str:
        """The last line a program wrote to stderr, its own word on why it failed."""
        lines = self.stderr_lines(name)
        return lines[-1] if lines else ""

    def first_error(self, name: str) -> str:
        """The first message a program wrote to stderr: the cause, for programs that then list its
        echoes. A line ending in a colon goes on in the next ("Syntax error on line 34 of X:" / "Invalid
        command 'Foo'")."""
        lines = self.stderr_lines(name)
        if not lines:
            return ""
        if lines[0].rstrip().endswith(":") and len(lines) > 1:
            return f"{lines[0].rstrip()} {lines[1].strip()}"
        return lines[0]

    def log_tail(self, name: str, lines: int = 20) -> str:
        chunks = []
        for suffix in ("err", "out"):
            with contextlib.suppress(OSError):
                text = (self.logdir / f"{name}.{suffix}").read_text(errors="replace")
                if text.strip():
                    chunks.append("\n".join(text.splitlines()[-lines:]))
        return "\n".join(chunks)


def how_it_ended(proc: subprocess.Popen) -> str:
    """"exited with status N" or "killed by signal N", for a process that has ended."""
    rc = proc.returncode
    return f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exited with status {rc}"


@contextlib.contextmanager
def harness_priority() -> Iterator[str]:
    """Runs the harness at the lowest real-time priority while it measures, and says how it ran.

    The harness sleeps between samples while the workload keeps every measured CPU busy. Under the
    fair scheduler a task that slept can wait many seconds for a CPU behind pinned tasks that wake
    each other (seen here: 1 s sleeps returning after 27 s during micro/context_switch1), which
    stretched a 2 s window to 40 s. SCHED_FIFO wakes it on time; SCHED_RESET_ON_FORK gives every
    process it starts the normal policy back, so the workload itself is never real-time.
    """
    try:
        old = (os.sched_getscheduler(0), os.sched_getparam(0))
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(1))
    except OSError:
        yield "normal: no permission for SCHED_FIFO, so samples may be late when every CPU is busy"
        return
    try:
        yield "SCHED_FIFO priority 1, reset on fork (the workload runs SCHED_OTHER)"
    finally:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, old[0], old[1])


def fork_call(call: Callable[[], int | None]) -> int:
    """Forks a child that runs call() and exits with what it returns (SystemExit's code; 1 and the
    traceback for any other exception); its pid. The child starts with everything this process has
    imported (under emulation a fresh interpreter spends a minute importing) and reads /dev/null."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child leaves by os._exit, which coverage never sees
        code = 1
        try:
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
            code = call() or 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    return pid


def exit_status(pid: int) -> int:
    """Waits for a child of ours; its exit status as subprocess reports one (a signal negative)."""
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)
