"""The WSGI server under the pages: waitress, bound where told (port 0: a free one, as tests and benchmarks
want), in a thread of its own, stopped from the loop's own thread so that no connection is torn down
under it."""

from __future__ import annotations

import ipaddress
import threading
from dataclasses import dataclass

from waitress.server import create_server

from mosbench.errors import UserError

# Requests served at once: the pages wait on the store, not the CPU, and a lab's store may be a network away.
THREADS = 8


def is_loopback(address: str) -> bool:
    """Whether an address (an IP, or `localhost`) reaches this machine only."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_address(address: str) -> None:
    """--bind takes an IP address (or localhost): a name that resolves to several addresses would bind one of
    them, and which is the resolver's choice."""
    if address == "localhost":
        return
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise UserError(f"--bind {address!r} is not an IP address (127.0.0.1, ::1, 0.0.0.0, an interface's)"
                        ) from None


@dataclass
class Served:
    """A server running in a thread: where it listens, and how to stop it."""

    host: str
    port: int
    _server: object
    _thread: threading.Thread

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def stop(self) -> None:
        """Closes the listening socket and every connection in the server's own loop, which then ends; waits
        for the thread and the request threads."""
        server = self._server
        if not self._thread.is_alive():
            return

        def close_all() -> None:
            for dispatcher in list(server._map.values()):  # type: ignore[attr-defined]
                dispatcher.close()

        server.trigger.pull_trigger(close_all)  # type: ignore[attr-defined]
        self._thread.join(10)
        server.task_dispatcher.shutdown(timeout=5)  # type: ignore[attr-defined]


def start(app, host: str = "127.0.0.1", port: int = 0, threads: int = THREADS) -> Served:
    """The app served on host:port (0: a free port) from a new thread; the bound address is known on return."""
    try:
        server = create_server(app, host=host, port=port, threads=threads, ident="mosbench",
                               clear_untrusted_proxy_headers=True, expose_tracebacks=False)
    except OSError as e:  # the port taken, an address this machine does not have
        raise UserError(f"cannot listen on {host} port {port}: {e.strerror or e}") from None
    thread = threading.Thread(target=server.run, name="mosbench-serve", daemon=True)
    thread.start()
    return Served(str(server.effective_host), int(server.effective_port), server, thread)
