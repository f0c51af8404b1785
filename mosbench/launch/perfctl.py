"""A perf process switched on and off over exactly the interval the harness chooses.

perf is started with its events disabled (`-D -1`) and a control FIFO (`--control fifo:ctl,ack`);
each `enable`/`disable` written to it is acknowledged once perf has switched, so what it counts or
samples covers the interval and nothing around it. Both FIFO ends are opened non-blocking: a perf that
dies before opening its end cannot hang the harness.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from pathlib import Path

from mosbench.launch.processes import Launcher
from mosbench.machine.isolation import Group

ACK_TIMEOUT = 10.0


class PerfControl:
    def __init__(self, launcher: Launcher, group: Group, argv: list[str], workdir: Path, name: str):
        self.launcher = launcher
        self.proc_name = name
        self._ended = False
        self._closed = False
        ctl, ack = workdir / f"{name}.ctl", workdir / f"{name}.ack"
        for fifo in (ctl, ack):
            os.mkfifo(fifo)
        self.proc = launcher.spawn(name, [*argv, "-D", "-1", "--control", f"fifo:{ctl},{ack}"], group)
        self._ack = os.open(ack, os.O_RDONLY | os.O_NONBLOCK)
        try:
            self._ctl = self._open_ctl(ctl)
        except OSError:
            os.close(self._ack)
            launcher.stop(self.proc)
            raise

    def _open_ctl(self, ctl: Path) -> int:
        deadline = time.monotonic() + ACK_TIMEOUT
        while time.monotonic() < deadline and self.proc.poll() is None:
            with contextlib.suppress(OSError):  # ENXIO until perf has opened its end
                return os.open(ctl, os.O_WRONLY | os.O_NONBLOCK)
            time.sleep(0.01)
        raise OSError(f"{self.argv0} did not open its control FIFO: {self.launcher.last_error(self.proc_name)}")

    @property
    def argv0(self) -> str:
        return " ".join(self.proc.args[:2]) if isinstance(self.proc.args, list) else "perf"

    def _command(self, word: str) -> None:
        os.write(self._ctl, f"{word}\n".encode())
        deadline = time.monotonic() + ACK_TIMEOUT
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._ack], [], [], left)
            # Until perf opens its end for writing, the FIFO reads as empty: wait on.
            if ready and b"ack" in os.read(self._ack, 64):
                return
            time.sleep(0.005)
        raise OSError(f"{self.argv0} did not acknowledge {word!r}")

    def enable(self) -> None:
        self._command("enable")

    def disable(self) -> None:
        self._command("disable")

    def end(self) -> None:
        """Tells perf to write what it has and exit (SIGINT), without waiting. Even disabled, its
        events stay armed (a syscall tracepoint slows every call it watches): a measured window
        starts only once perf is told to go."""
        if not self._ended and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        self._ended = True

    def close(self) -> None:
        """Ends perf and waits for it to write its output; closes the FIFOs. Once: a second call
        would close descriptor numbers that may since belong to another file."""
        if self._closed:
            return
        self._closed = True
        self.end()
        if self.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
        self.launcher.stop(self.proc)
        for fd in (self._ctl, self._ack):
            with contextlib.suppress(OSError):
                os.close(fd)
