"""`mosbench serve` while many machines write to its store (issue 57): ten writer processes store runs as ten
hosts through the store's own interface (Store.create_run, add_point, finish_run: what `mosbench run` calls,
no measuring) while client threads read the pages and their JSON and triage with a bearer token. Afterwards
every run is there, whole, the server counts each machine's runs, and no request failed. On PostgreSQL; on
SQLite (one writer at a time: writers wait on its busy timeout, readers never do); and a PostgreSQL that stops
answering (this module's own cluster, stopped with SIGSTOP by PID) costs a page a 503 within the deadline of
`mosbench serve --store-timeout`, not the server its threads, which answer again once it is back.

`pytest -s` prints the counts (runs written, pages served, failures) each test saw.
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import json
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mosbench import procfs
from mosbench.store import db as store
from mosbench.store.triage import STATES
from mosbench.testing.history_stores import CORES, environment, fill_lab
from mosbench.workloads.postgres import cluster as pgcluster
from tests.conftest import ROOT, needs_root
from tests.pgcluster import Cluster, private

WRITERS = 10
RUNS_PER_WRITER = 4
TESTS, TRIALS = 2, 2
POINTS_PER_RUN = TESTS * len(CORES) * TRIALS
# Between two points a writer waits this long, as a sweep does between windows (shortened): the writing then
# spans seconds of the readers' requests rather than a burst before their first.
POINT_GAP_S = 0.04
READERS = 3
TOKEN_NAME, TOKEN = "lab-bot", "concurrency-test-secret-0123456789"
REQUEST_TIMEOUT_S = 60.0  # a request that takes longer has hung: a failure
SERVER_START_S = 60.0
# The deadline of the server stopped under a page (`mosbench serve --store-timeout`), and how much later than
# it the 503 may come (a busy 2-CPU machine's scheduling, the reply's own drawing).
DEADLINE_S = 2.0
DEADLINE_SLACK_S = 6.0


def writer_host(n: int) -> str:
    return f"writer{n:02d}"


# The writers (each a process of its own, as each machine's `mosbench run` is)

def _points(run: int, started: object) -> Iterator[dict]:
    for t in range(TESTS):
        for cores in CORES:
            for trial in range(1, TRIALS + 1):
                per_core = 1e6 * (1 - 0.05 * (cores.bit_length() - 1)) * (1 + 0.01 * ((run + trial) % 3))
                yield {"workload": "micro", "test": f"t{t}", "variant": "procs", "cores": cores, "trial": trial,
                       "status": "ok", "started_at": started, "cpus": ",".join(map(str, range(cores))),
                       "unit": "op", "window_s": 1.0, "work": per_core * cores, "throughput": per_core * cores,
                       "user_s": 0.8 * cores, "system_s": 0.2 * cores, "idle_s": 0.0, "steal_s": 0.0,
                       "interference": 0.001, "interfered": False, "metrics": {"run": run}, "samples": []}


def write_runs(url: str, host: str, go: multiprocessing.synchronize.Event) -> None:
    """One machine's nightly runs, stored as the sweep stores them: the run, each point as it is measured,
    the run finished."""
    db = store.Store(url)
    go.wait(SERVER_START_S)
    for run in range(RUNS_PER_WRITER):
        run_id = db.create_run({"selections": ["micro/t0", "micro/t1"]},
                               environment(run, [], host=host, kernel="6.12.0-1-amd64"),
                               f"mosbench run micro --label {host}", label=f"{host} night {run}")
        for point in _points(run, store.now()):
            db.add_point(run_id, **point)
            time.sleep(POINT_GAP_S)
        db.finish_run(run_id, "complete")
    db.engine.dispose()


# The server, as a user starts it

@dataclass
class Server:
    proc: subprocess.Popen
    host: str
    port: int
    log: Path

    def said(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def mosbench_serve(url: str, tokens: Path, where: Path, *options: str) -> Iterator[Server]:
    """`mosbench serve --store URL --port 0 --tokens FILE [options]`, its address read from its first line;
    stopped as systemd stops it (SIGTERM; then killed, by its PID, if it does not end)."""
    log = where / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mosbench", "serve", "--store", url, "--port", "0",
                                 "--tokens", str(tokens), *options], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                text=True)
    try:
        deadline = time.monotonic() + SERVER_START_S
        found = None
        while found is None and time.monotonic() < deadline and proc.poll() is None:
            lines = log.read_text(errors="replace").splitlines()
            found = re.search(r"http://([0-9.]+):(\d+)/", lines[0]) if lines else None
            if found is None:
                time.sleep(0.05)
        assert found is not None, f"mosbench serve printed no address: {log.read_text(errors='replace')}"
        yield Server(proc, found.group(1), int(found.group(2)), log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


# The clients

@dataclass
class Tally:
    """What the clients asked and got: requests answered 2xx by page kind, and every failure said."""

    served: collections.Counter = field(default_factory=collections.Counter)
    failures: list[str] = field(default_factory=list)
    during_writing: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def total(self) -> int:
        return sum(self.served.values())


class Client:
    """One keep-alive connection, as a browser tab or a bot keeps one."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.conn = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT_S)

    def request(self, method: str, path: str, body: dict | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        sent = {**(headers or {}), **({"Content-Type": "application/json"} if data else {})}
        try:
            self.conn.request(method, path, body=data, headers=sent)
            response = self.conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()  # a new connection for the next request
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=REQUEST_TIMEOUT_S)
            raise

    def json(self, path: str) -> object:
        status, body = self.request("GET", path)
        assert status == 200, f"GET {path}: {status} {body[:300]!r}"
        return json.loads(body)


def _count(tally: Tally, kind: str, method: str, path: str, status: int | None, body: bytes, writing: bool,
           took: float) -> None:
    with tally.lock:
        if status is not None and 200 <= status < 300:
            tally.served[kind] += 1
            tally.during_writing += writing
        else:
            tally.failures.append(f"{method} {path}: {status} after {took:.1f} s {body[:200]!r}")


def _ask(client: Client, tally: Tally, kind: str, method: str, path: str, writing: bool,
         body: dict | None = None, headers: dict[str, str] | None = None) -> tuple[int | None, bytes]:
    start = time.monotonic()
    try:
        status, got = client.request(method, path, body, headers)
    except (OSError, http.client.HTTPException) as e:
        status, got = None, repr(e).encode()
    _count(tally, kind, method, path, status, got, writing, time.monotonic() - start)
    return status, got


def read_pages(server: Server, tally: Tally, writing: threading.Event, stop: threading.Event, seed: int) -> None:
    """The pages a lab's people and scripts look at, over and over: the overview, the alerts, the machines'
    and alerts' JSON, a graph, a summary, a run (one of the writers' newest, written as it is read)."""
    client = Client(server.host, server.port)
    rng = random.Random(seed)
    while not stop.is_set():
        busy = writing.is_set()
        status, got = _ask(client, tally, "machines json", "GET", "/api/machines", busy)
        machines = json.loads(got) if status == 200 else []
        status, got = _ask(client, tally, "alerts json", "GET", "/api/alerts", busy)
        summaries = json.loads(got) if status == 200 else []
        pages = [("overview", "/"), ("alerts", "/alerts"), ("graph", "/graphs?machine=big4s&machine=arm"),
                 ("graph json", "/api/graphs?workload=micro&test=t1&variant=procs&cores=8")]
        if summaries:
            chosen = rng.choice(summaries)["id"]
            pages += [("summary", f"/alerts/{chosen}"), ("summary json", f"/api/alerts/{chosen}")]
        if machines:
            newest = rng.choice(machines)["last_run_id"]
            pages += [("run", f"/runs/{newest}"), ("run json", f"/api/runs/{newest}")]
        for kind, path in pages:
            _ask(client, tally, kind, "GET", path, writing.is_set())


def triage(server: Server, tally: Tally, writing: threading.Event, stop: threading.Event,
           last: dict[int, str]) -> None:
    """A bot triaging every summary in turn with a bearer token; `last`: what it last set of each, as the
    server answered it."""
    client = Client(server.host, server.port)
    ids = [s["id"] for s in client.json("/api/alerts")]
    assert ids, "the lab's store holds no alert summary to triage"
    turn = 0
    while not stop.is_set():
        summary_id = ids[turn % len(ids)]
        state = STATES[1 + turn % (len(STATES) - 1)]
        status, got = _ask(client, tally, "triage", "PATCH", f"/api/alerts/{summary_id}", writing.is_set(),
                           {"state": state, "note": f"pass {turn}"}, {"Authorization": f"Bearer {TOKEN}"})
        if status == 200:
            answered = json.loads(got)
            assert answered["id"] == summary_id and answered["state"] == state, answered
            last[summary_id] = state
        turn += 1


def guarded(tally: Tally, work, *args) -> threading.Thread:
    """A client's thread whose failure (an exception: an answer it could not read) is the test's."""
    def run() -> None:
        try:
            work(*args)
        except Exception as e:
            with tally.lock:
                tally.failures.append(f"{work.__name__}: {e!r}")
    return threading.Thread(target=run, name=work.__name__)


def lab_under_writers(url: str, where: Path, backend: str) -> None:
    """A lab's store (tests' fill_lab: six machines, three alert summaries) served while WRITERS processes
    store runs of their own hosts; the whole checked afterwards."""
    db = store.Store(url)
    fill_lab(db)
    db.engine.dispose()  # nothing of this process' connections goes into the writers it forks
    tokens = where / "tokens"
    tokens.write_text(f"{TOKEN_NAME}:{TOKEN}\n")
    tally = Tally()
    writing, stop = threading.Event(), threading.Event()
    context = multiprocessing.get_context("fork")  # no thread runs in this process yet: forking is safe
    go = context.Event()
    writers = [context.Process(target=write_runs, args=(url, writer_host(n), go), name=writer_host(n))
               for n in range(WRITERS)]
    with mosbench_serve(url, tokens, where) as server:
        for w in writers:
            w.start()
        try:
            triaged: dict[int, str] = {}
            clients = [guarded(tally, read_pages, server, tally, writing, stop, seed) for seed in range(READERS)]
            clients.append(guarded(tally, triage, server, tally, writing, stop, triaged))
            writing.set()
            started = time.monotonic()
            for c in clients:
                c.start()
            go.set()
            for w in writers:
                w.join(120)
            wrote_s = time.monotonic() - started
            writing.clear()
            time.sleep(0.5)  # a last round of every page over the finished store
            stop.set()
            for c in clients:
                c.join(REQUEST_TIMEOUT_S * 2)
        finally:
            for w in writers:
                if w.is_alive():
                    w.kill()
                    w.join(5)
        assert [w.exitcode for w in writers] == [0] * WRITERS, server.said()

        # Every run there, whole: in the store, and as the server counts them.
        ran = [r for r in store.Store(url, create=False).list_runs() if r["hostname"].startswith("writer")]
        by_host = collections.Counter(r["hostname"] for r in ran)
        assert by_host == {writer_host(n): RUNS_PER_WRITER for n in range(WRITERS)}
        assert {(r["status"], r["points"], r["failed"]) for r in ran} == {("complete", POINTS_PER_RUN, 0)}
        seen = {m["hostname"]: m["runs"] for m in Client(server.host, server.port).json("/api/machines")}
        assert {h: seen.get(h) for h in by_host} == dict(by_host)
        # What the bot said last of each summary is what the store keeps.
        after = {s["id"]: s["state"] for s in Client(server.host, server.port).json("/api/alerts")}
        assert {i: after.get(i) for i in triaged} == triaged
        server_log = server.said()
    print(f"\n{backend}: {len(ran)} runs × {POINTS_PER_RUN} points written by {WRITERS} writer processes in "
          f"{wrote_s:.1f} s; {tally.total()} requests served ({tally.during_writing} while writing: "
          f"{', '.join(f'{k} {n}' for k, n in sorted(tally.served.items()))}); {len(tally.failures)} failed")
    assert not tally.failures, "\n".join(tally.failures[:20]) + "\n" + server_log[-3000:]
    assert tally.during_writing >= WRITERS, "the readers and the writers did not overlap"
    assert {"overview", "alerts", "graph", "summary", "run", "triage"} <= set(tally.served)
    assert "Traceback" not in server_log, server_log[-3000:]


def test_sqlite_readers_never_fail_while_writers_wait(tmp_path):
    lab_under_writers(str(tmp_path / "lab.sqlite"), tmp_path, "sqlite")


# PostgreSQL: a private cluster of this module's own (tests/pgcluster.py)

needs_postgres = pytest.mark.skipif(not (pgcluster.BIN / "initdb").exists(), reason="PostgreSQL 15 not installed")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # Ten writers, the server's pool and the readers' pages at once: more connections than the default 100.
    with private({"max_connections": "200"}) as c:
        yield c


@needs_root
@needs_postgres
def test_postgresql_many_writers_while_it_serves(cluster, tmp_path):
    lab_under_writers(cluster.fresh_database("t_writers"), tmp_path, "postgresql")


def _cluster_pids(cluster: Cluster) -> list[int]:
    """The postmaster of this test's cluster (its postmaster.pid's first line) and every process it started."""
    postmaster = int((cluster.data / "postmaster.pid").read_text().splitlines()[0])
    return [postmaster, *procfs.children_of(postmaster)]


@contextlib.contextmanager
def stopped(cluster: Cluster) -> Iterator[list[int]]:
    """The cluster's processes stopped (SIGSTOP, each by its PID: the postmaster first, so that it starts no
    other meanwhile), and continued (SIGCONT) whatever happens."""
    pids = _cluster_pids(cluster)
    frozen = []
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
            frozen.append(pid)
        yield frozen
    finally:
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


@needs_root
@needs_postgres
def test_a_postgresql_that_stops_answering_costs_a_page_a_503_not_the_server(cluster, tmp_path):
    """`mosbench serve --store-timeout 2` over this module's cluster stopped with SIGSTOP: the pages, their
    JSON and a triage each answer 503 within the deadline, at once; a page that needs no store is answered
    meanwhile; once the cluster continues, the same server answers every page again."""
    url = cluster.fresh_database("t_stopped")
    fill_lab(store.Store(url))
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN_NAME}:{TOKEN}\n")
    asked = [("GET", "/"), ("GET", "/api/machines"), ("GET", "/alerts"), ("GET", "/api/alerts"),
             ("GET", "/graphs?machine=big4s"), ("GET", "/runs/1"),
             ("PATCH", "/api/alerts/1")]
    answers: dict[tuple[str, str], tuple[int | None, float, bytes]] = {}

    with mosbench_serve(url, tokens, tmp_path, "--store-timeout", str(DEADLINE_S)) as server:
        def ask(method: str, path: str) -> None:
            start = time.monotonic()
            try:
                status, body = Client(server.host, server.port).request(
                    method, path, {"state": "investigating"} if method == "PATCH" else None,
                    {"Authorization": f"Bearer {TOKEN}"} if method == "PATCH" else None)
            except (OSError, http.client.HTTPException) as e:
                status, body = None, repr(e).encode()
            answers[method, path] = (status, time.monotonic() - start, body)

        # The alerts computed and kept while the store answers (asked again while the server's first
        # computation outlasts its deadline).
        deadline = time.monotonic() + SERVER_START_S
        while (status := Client(server.host, server.port).request("GET", "/api/alerts")[0]) == 503 and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        assert status == 200, server.said()
        with stopped(cluster) as frozen:
            assert len(frozen) >= 2  # the postmaster and its backends
            askers = [threading.Thread(target=ask, args=a) for a in asked]
            for t in askers:
                t.start()
            start = time.monotonic()
            status, _ = Client(server.host, server.port).request("GET", "/static/lab.css")
            static_s = time.monotonic() - start
            for t in askers:
                t.join(REQUEST_TIMEOUT_S)
        print(f"\npostgresql stopped (SIGSTOP, {len(frozen)} processes): "
              + ", ".join(f"{m} {p} {s} in {took:.1f} s" for (m, p), (s, took, _) in answers.items())
              + f"; /static/lab.css {status} in {static_s:.2f} s meanwhile")
        assert status == 200 and static_s < DEADLINE_S
        for (method, path), (got, took, body) in answers.items():
            assert got == 503, f"{method} {path}: {got} {body[:300]!r}"
            assert took < DEADLINE_S + DEADLINE_SLACK_S, f"{method} {path} took {took:.1f} s"
            assert b"Traceback" not in body and b"store" in body
            if path.startswith("/api/"):
                assert "error" in json.loads(body)

        # Back: the same server answers again (its connections to the stopped backends live on).
        deadline = time.monotonic() + 30
        while True:
            status, body = Client(server.host, server.port).request("GET", "/api/machines")
            if status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status == 200, body[:300]
        for method, path in asked:
            ask(method, path)
            assert answers[method, path][0] == 200, (method, path, answers[method, path])
        assert server.proc.poll() is None
        server_log = server.said()
    assert "Traceback" not in server_log, server_log[-3000:]
    assert store.Store(url, create=False).list_runs()  # the store itself is whole
