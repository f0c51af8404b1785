"""Private server processes of a point: started in its group, watched, and their own words on failure.

A server workload starts one or more of these (an instance per core, or one for all), waits until
each accepts connections, and asks them during the window whether they are still alive. A server
that exits fails the point with its exit status and the last line it logged.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

from mosbench.errors import PointFailed
from mosbench.launch.processes import Launcher, how_it_ended
from mosbench.launch.ready import port_open, wait_ready
from mosbench.machine.isolation import Group


class Server:
    def __init__(self, launcher: Launcher, name: str, argv: list[str], group: Group, port: int,
                 cpus: tuple[int, ...] | None = None,
                 last_words: Callable[[], str] | None = None, host: str = "127.0.0.1",
                 env: dict[str, str] | None = None, user: str | None = None):
        self.launcher = launcher
        self.name = name
        self.port = port
        self.host = host
        self._last_words = last_words  # a server that logs to a file of its own says why there
        self.proc: subprocess.Popen = launcher.spawn(name, argv, group, cpus=cpus, env=env, user=user)

    def wait_ready(self, timeout: float = 30.0) -> None:
        wait_ready(port_open(self.port, self.host), what=f"{self.name} accepting on {self.host}:{self.port}",
                   timeout=timeout,
                   proc=self.proc, ended=self.failure)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def check(self) -> None:
        if not self.alive():
            raise PointFailed(self.failure())

    def failure(self) -> str:
        said = (self._last_words() if self._last_words else "") or self.launcher.last_error(self.name)
        return f"{self.name} (port {self.port}) {how_it_ended(self.proc)}" + (f": {said}" if said else "")

    def logs(self, lines: int = 20) -> str:
        return self.launcher.log_tail(self.name, lines)
