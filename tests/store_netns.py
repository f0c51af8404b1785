"""A PostgreSQL store whose network goes away mid-command, for tests/test_store_postgres.py: run as root in a
network namespace of its own (`unshare -n python -m tests.store_netns SOCKET DATABASE`), so that taking its
loopback down drops every packet of its connections and of nothing else on the machine.

A proxy on the namespace's 127.0.0.1 carries each connection to the cluster's Unix socket (which a network
namespace does not part); a store opened through it commits two points; then, with a query in flight on one
connection and a write about to go on another, the loopback goes down. Prints, as JSON, the run and what each
of the two said, with the seconds it took to say it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import sqlalchemy as sa

from mosbench.store import db as store

# Small enough that the test takes seconds: probes after 1 s of silence, the connection given up after 3 s.
BOUNDED = "keepalives_idle=1&keepalives_interval=1&keepalives_count=2&tcp_user_timeout=3000"


def _pump(a: socket.socket, b: socket.socket) -> None:
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass


def _proxy(upstream_path: str) -> int:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        while True:
            client, _ = listener.accept()
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(upstream_path)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return listener.getsockname()[1]


def _point(trial: int) -> dict:
    return {"workload": "micro", "test": "getppid1", "variant": "procs", "cores": 1, "trial": trial, "status": "ok",
            "started_at": store.now(), "cpus": "0", "unit": "op", "window_s": 1.0, "work": 10.0, "throughput": 10.0}


def _timed(what) -> tuple[str, float]:
    started = time.monotonic()
    try:
        what()
        return "answered", time.monotonic() - started
    except store.StoreError as e:
        return str(e), time.monotonic() - started


def main(upstream_path: str, database: str) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    port = _proxy(upstream_path)
    db = store.Store(f"postgresql+psycopg://postgres@127.0.0.1:{port}/{database}?{BOUNDED}")
    run = db.create_run({}, {"hostname": "h"}, "mosbench run micro/getppid1")
    db.add_point(run, **_point(1))
    querying = db.engine.connect()  # its own connection: the write below takes the pool's other one
    db.add_point(run, **_point(2))
    said: dict[str, object] = {"run": run}

    def query() -> None:
        with db._reaching(), querying:
            querying.execute(sa.text("SELECT pg_sleep(20)"))

    waiting = threading.Thread(target=lambda: said.update(query=_timed(query)))
    waiting.start()
    time.sleep(0.5)  # the query sent and waiting for its answer
    subprocess.run(["ip", "link", "set", "lo", "down"], check=True)
    said["write"] = _timed(lambda: db.add_point(run, **_point(3)))
    waiting.join()
    print(json.dumps(said))


if __name__ == "__main__":
    main(*sys.argv[1:])
