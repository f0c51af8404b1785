"""Waiting for an instance to come up: one helper for every workload, whatever it waits on.

An instance waits for a condition (a file appears, a port accepts, a line is printed) while watching
its process: if the process ends first, the point fails with the process's own last word, not with a
time-out; if the time runs out, it fails naming what did not happen.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from mosbench.errors import PointFailed

Condition = Callable[[], bool]


def wait_for(predicate: Condition, timeout: float, interval: float = 0.01) -> bool:
    """True as soon as predicate() holds, False once timeout seconds passed without it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def wait_ready(condition: Condition, *, what: str, timeout: float, proc: subprocess.Popen,
               ended: Callable[[], str], interval: float = 0.01) -> None:
    """Returns once condition() holds; PointFailed(ended()) if proc exits first, or on time-out."""
    if wait_for(lambda: condition() or proc.poll() is not None, timeout, interval) and condition():
        return
    if proc.poll() is not None:
        raise PointFailed(ended())
    raise PointFailed(f"{what} not within {timeout:.0f} s")


def file_ready(path: Path) -> Condition:
    """The file exists and is not empty (programs here publish files whole, by rename)."""
    def check() -> bool:
        try:
            return path.stat().st_size > 0
        except OSError:
            return False
    return check


def line_printed(path: Path, text: str) -> Condition:
    """A line starting with text has been written to path (a program's log)."""
    def check() -> bool:
        try:
            return any(line.startswith(text) for line in path.read_text(errors="replace").splitlines())
        except OSError:
            return False
    return check


def port_open(port: int, host: str = "127.0.0.1") -> Condition:
    """A TCP connection to host:port is accepted."""
    def check() -> bool:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            return False
    return check
