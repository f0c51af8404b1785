"""`mosbench serve` at a lab's size (issue 57): 20 machines × 500 nightly runs × 200 points, against a one-run store.

The lab's store is built in bulk, once, and kept under ~/.cache/mosbench/serve-bench/, named by its shape: every
machine runs the 50 micro tests at 1, 2, 4 and 8 cores, one trial each (benchmarks/history_scale.py's 200 points a
run), on a Debian kernel whose ABI moves up every twentieth of its runs, amd64 or arm64 by machine, with three
changes planted at release boundaries so that the alerts are a lab's: the 4-socket machines lose 20% of t3 at 8
cores (a scalability change the 2-socket machines, on the same releases, do not show), every fifth machine gains
25% on t7 at every core count later on, every third lost 15% on t11 long ago. Rows go in by SQLAlchemy Core's
executemany (SQLite) or COPY (PostgreSQL), a machine at a time. The server works on a copy: it writes triage ids,
and this benchmark adds runs.

Each store is served by `mosbench serve` in a process of its own, as a lab serves it. Then:
- the cold server: how long until it prints its address, its first request (the overview) until answered 200 (it
  does not wait for the alerts: machines not computed yet are said to be computing), and until the overview is
  whole, while the server computes every machine's history (`history` is over a second a machine at this size);
  a page whose work outlasts the server's deadline is answered 503 meanwhile, and asked again, the 503s counted;
- the pages, first each once (the "first" column: until answered 200; a run's report is drawn then), then ROUNDS
  interleaved rounds (each page on the lab's store, then on the one-run store), medians and their ratio;
- the first request after a new run is added to one machine (a different machine each round), and the one after;
- the server's memory: VmHWM of its process (/proc/PID/status) at the end, and its resident size after each phase
  (--reports N draws N runs' reports: the server keeps the newest drawn, compressed on disk); a report is drawn
  by a process of the server's own (and its pool of workers), whose resident size, all together, is sampled.
Goals (the issue): overview and alerts within 1 s warm, a graph within 0.5 s, the first request after a new run
within 5 s, the server's memory under 1 GB.

  python benchmarks/serve_scale.py                          # SQLite, full size
  python benchmarks/serve_scale.py --postgres               # also PostgreSQL (a private cluster, on /dev/shm)
  python benchmarks/serve_scale.py --machines 4 --runs 100 --rounds 3   # quick
  python benchmarks/serve_scale.py --profile / --profile /runs/251/report   # cProfile of first requests, here
MACHINES, RUNS, TESTS, ROUNDS in the environment set the same defaults.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import datetime as dt
import http.client
import json
import os
import pstats
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from mosbench import procfs  # noqa: E402
from mosbench.store.db import Store, points, runs  # noqa: E402
from mosbench.testing.history_stores import CORES, debian_releases  # noqa: E402

GENERATION = 1  # of the recipe below: a cached store of another generation is not this one
CACHE = Path.home() / ".cache" / "mosbench" / "serve-bench"
START = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
NOISE = 0.04  # each trial uniform within ±4% of its run's level
GOALS = {"overview": 1.0, "alerts": 1.0, "graph": 0.5}  # seconds, warm
NEW_RUN_GOAL_S = 5.0
MEMORY_GOAL_MB = 1024.0
SERVER_START_S = 120.0
REQUEST_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Shape:
    machines: int
    runs: int
    tests: int  # × CORES, one trial: the points of a run

    @property
    def points(self) -> int:
        return self.tests * len(CORES)

    @property
    def name(self) -> str:
        return f"{self.machines}m-{self.runs}r-{self.points}p-g{GENERATION}"

    @property
    def release_every(self) -> int:
        return max(2, self.runs // 20)

    def boundary(self, share: float) -> int:
        """The first run of the release nearest `share` of the way through the runs."""
        return max(1, round(self.runs * share / self.release_every)) * self.release_every


@dataclass(frozen=True)
class Change:
    at: int
    factor: float
    test: str
    cores: tuple[int, ...]


def host(m: int) -> str:
    return f"lab{m:02d}"


def machine_changes(shape: Shape, m: int) -> list[Change]:
    found = []
    if m % 2 == 0:  # the 4-socket machines
        found.append(Change(shape.boundary(0.6), 0.8, "t3", (8,)))
    if m % 5 == 0:
        found.append(Change(shape.boundary(0.85), 1.25, "t7", CORES))
    if m % 3 == 0:
        found.append(Change(shape.boundary(0.2), 0.85, "t11", CORES))
    return found


def night(shape: Shape, m: int, i: int, rng: random.Random) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Machine m's run i (0-based, a night apart): its runs row and its points, without ids."""
    started = START + dt.timedelta(days=i, minutes=10 * m)
    arm = m % 4 == 3
    kernel = debian_releases("arm64" if arm else "amd64", every=shape.release_every)(i)
    env = {"hostname": host(m), "kernel": kernel, "thp": "madvise",
           "topology_summary": "1 socket, 80 cores" if arm else "4 sockets, 96 cores" if m % 2 == 0 else
           "2 sockets, 64 cores", "cpu_model": "Ampere Altra Q80-30" if arm else "Intel Xeon Gold 6248"}
    run = {"label": f"nightly {i}", "status": "complete", "started_at": started,
           "finished_at": started + dt.timedelta(minutes=40), "hostname": host(m),
           "command": "mosbench run micro --cores 1,2,4,8 --trials 1", "plan": {}, "environment": env}
    changes = machine_changes(shape, m)
    rows = []
    for t in range(shape.tests):
        name = f"t{t}"
        for cores in CORES:
            level = 1e6 * (1 + 0.1 * (t % 7)) * (1 - 0.05 * (cores.bit_length() - 1))
            for c in changes:
                if i >= c.at and name == c.test and cores in c.cores:
                    level *= c.factor
            per_core = level * (1 + rng.uniform(-NOISE, NOISE))
            rows.append({"workload": "micro", "test": name, "variant": "procs", "cores": cores, "trial": 1,
                         "status": "ok", "started_at": started, "cpus": f"0-{cores - 1}", "unit": "op",
                         "window_s": 1.0, "work": per_core * cores, "throughput": per_core * cores,
                         "user_s": 0.8 * cores, "system_s": 0.2 * cores, "idle_s": 0.0, "steal_s": 0.0,
                         "interference": 0.001, "interfered": False})
    return run, rows


def machine_nights(shape: Shape, m: int) -> Iterator[tuple[int, dict[str, Any], list[dict[str, Any]]]]:
    """Machine m's runs with the ids they take in a store built from nothing (machine after machine)."""
    rng = random.Random(m)
    for i in range(shape.runs):
        run, rows = night(shape, m, i, rng)
        yield m * shape.runs + i + 1, run, rows


# The stores

def build_sqlite(shape: Shape, path: Path) -> None:
    partial = path.with_name(path.name + ".partial")
    for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
        leftover.unlink(missing_ok=True)
    db = Store(str(partial))
    for m in range(shape.machines):
        run_rows, point_rows = [], []
        for run_id, run, rows in machine_nights(shape, m):
            run_rows.append({"id": run_id, **run})
            point_rows += [{"run_id": run_id, **p} for p in rows]
        with db.engine.begin() as conn:
            conn.execute(runs.insert(), run_rows)
            conn.execute(points.insert(), point_rows)
    db.engine.dispose()  # the last connection closed: the WAL checkpointed into the file
    partial.rename(path)


def cached_sqlite(shape: Shape) -> Path:
    path = CACHE / f"lab-{shape.name}.sqlite"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        print(f"building {path} (once) ...", flush=True)
        build_sqlite(shape, path)
        print(f"  built in {time.monotonic() - start:.0f} s, {path.stat().st_size / 2**20:.0f} MB", flush=True)
    return path


def _store_night(db: Store, run: dict, rows: list[dict]) -> int:
    """One night written as a run is (its points in one statement: they arrive together), the store closed."""
    run_id = db.create_run(run["plan"], run["environment"], run["command"], run["label"])
    with db.engine.begin() as conn:
        conn.execute(points.insert(), [{"run_id": run_id, **p} for p in rows])
    db.finish_run(run_id, "complete")
    db.engine.dispose()
    return run_id


def one_run_store(url: str, shape: Shape) -> int:
    """The one-run store: lab00's first night alone; its run's id."""
    db = Store(url)
    _, run, rows = next(machine_nights(Shape(1, 1, shape.tests), 0))
    return _store_night(db, run, rows)


RUN_COLUMNS = ("id", "label", "status", "started_at", "finished_at", "hostname", "command", "plan", "environment")
POINT_COLUMNS = ("run_id", "workload", "test", "variant", "cores", "trial", "status", "started_at", "cpus", "unit",
                 "window_s", "work", "throughput", "user_s", "system_s", "idle_s", "steal_s", "interference",
                 "interfered")


def load_postgres(shape: Shape, url: str) -> None:
    """The lab's rows by COPY, a machine at a time; the runs' id sequence moved past them."""
    db = Store(url)
    raw = db.engine.raw_connection()
    try:
        cur = raw.cursor()
        for m in range(shape.machines):
            nights = list(machine_nights(shape, m))
            with cur.copy(f"COPY runs ({', '.join(RUN_COLUMNS)}) FROM STDIN") as copy:
                for run_id, run, _ in nights:
                    copy.write_row([run_id, *(json.dumps(run[c]) if c in ("plan", "environment") else run[c]
                                              for c in RUN_COLUMNS[1:])])
            with cur.copy(f"COPY points ({', '.join(POINT_COLUMNS)}) FROM STDIN") as copy:
                for run_id, _, rows in nights:
                    for p in rows:
                        copy.write_row([run_id, *(p[c] for c in POINT_COLUMNS[1:])])
        cur.execute("SELECT setval(pg_get_serial_sequence('runs', 'id'), (SELECT max(id) FROM runs))")
        cur.execute("ANALYZE")
        raw.commit()
    finally:
        raw.close()
    db.engine.dispose()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def postgres_stores(shape: Shape) -> Iterator[tuple[str, str, int]]:
    """A private cluster (tests/pgcluster.py) on /dev/shm holding the lab (`lab`) and the one-run store (`one`):
    their URLs and the one run's id. The lab's data directory is built once and kept under CACHE, copied in
    for each use."""
    from mosbench.workloads.postgres.cluster import chown_tree
    from tests.pgcluster import Cluster

    root = Path(tempfile.mkdtemp(prefix="mosbench-serve-bench-pg-", dir="/dev/shm"))
    os.chmod(root, 0o755)
    cluster = Cluster(root / "cluster", _free_port())
    cached = CACHE / f"lab-{shape.name}-postgres"
    try:
        if cached.exists():
            cluster.root.mkdir()
            shutil.copytree(cached, cluster.data)
            chown_tree(cluster.root)
            os.chmod(cluster.data, 0o700)
            cluster.start({"fsync": "off"})
        else:
            start = time.monotonic()
            print(f"building {cached} (once) ...", flush=True)
            cluster.init()
            # The load alone: WAL kept small (checkpoints often), so that the copy kept is the tables' size.
            cluster.start({"fsync": "off", "wal_level": "minimal", "max_wal_senders": "0", "max_wal_size": "64MB",
                           "min_wal_size": "32MB"})
            _create_database(cluster, "lab")
            load_postgres(shape, cluster.url("lab"))
            cluster.stop()
            partial = cached.with_name(cached.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(cluster.data, partial)
            partial.rename(cached)
            cluster.start({"fsync": "off"})
            print(f"  built in {time.monotonic() - start:.0f} s", flush=True)
        _create_database(cluster, "one", drop=True)
        yield cluster.url("lab"), cluster.url("one"), one_run_store(cluster.url("one"), shape)
    finally:
        cluster.remove()
        shutil.rmtree(root, ignore_errors=True)


def _create_database(cluster: Any, name: str, drop: bool = False) -> None:
    admin = sa.create_engine(cluster.url(), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        if drop:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    admin.dispose()


# The server, as a lab runs it

class Served:
    """`mosbench serve --store URL --port 0` in a process of its own."""

    def __init__(self, url: str, log: Path) -> None:
        self.log = log
        self.started = time.monotonic()
        with log.open("w") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "mosbench", "serve", "--store", url, "--port", "0"],
                                         cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        found = None
        while found is None and self.proc.poll() is None and time.monotonic() - self.started < SERVER_START_S:
            lines = log.read_text(errors="replace").splitlines()
            found = re.search(r"http://([0-9.]+):(\d+)/", lines[0]) if lines else None
            if found is None:
                time.sleep(0.02)
        if found is None:
            self.stop()
            raise SystemExit(f"mosbench serve --store {url} printed no address:\n{log.read_text(errors='replace')}")
        self.ready_s = time.monotonic() - self.started
        self.host, self.port = found.group(1), int(found.group(2))
        self.conn = self.connection()

    def connection(self) -> http.client.HTTPConnection:
        """Another client's connection (a request waits for its answer: one client's requests go in turn)."""
        return http.client.HTTPConnection(self.host, self.port, timeout=REQUEST_TIMEOUT_S)

    def get(self, path: str, conn: http.client.HTTPConnection | None = None) -> tuple[int, float, bytes]:
        """(status, seconds, body) of one request on a kept-alive connection, as a browser's."""
        conn = conn or self.conn
        start = time.monotonic()
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        return response.status, time.monotonic() - start, body

    def ok(self, path: str) -> tuple[float, bytes]:
        status, took, body = self.get(path)
        if status != 200:
            raise SystemExit(f"GET {path}: {status} {body[:300]!r}\n{self.log.read_text(errors='replace')[-3000:]}")
        return took, body

    def drawing_mb(self) -> float:
        """The resident size of the server's child processes and theirs (a report's drawing), together, in MB."""
        total = 0.0
        for pid in procfs.descendants(self.proc.pid):
            with contextlib.suppress(OSError, StopIteration):
                status = Path(f"/proc/{pid}/status").read_text().splitlines()
                total += int(next(line for line in status if line.startswith("VmRSS:")).split()[1]) / 1024
        return total

    def memory_mb(self) -> tuple[float, float]:
        """The server process' peak and present resident memory (VmHWM, VmRSS), in MB."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        kb = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in status.splitlines())
              if k in ("VmHWM", "VmRSS")}
        return kb["VmHWM"] / 1024, kb["VmRSS"] / 1024

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def add_night(url: str, shape: Shape, m: int, i: int) -> int:
    """Machine m's next night, i, as the lab's machine would store it."""
    db = Store(url, create=False)
    run, rows = night(shape, m, i, random.Random(1000 + i))
    return _store_night(db, run, rows)


# What is measured

@dataclass(frozen=True)
class Page:
    name: str
    lab: str  # its path on the lab's store
    one: str | None  # on the one-run store (None: that store has no such page)


def pages(lab: Served, one_run_id: int, shape: Shape) -> list[Page]:
    summaries = json.loads(lab.ok("/api/alerts")[1])
    if not summaries:
        raise SystemExit("the lab's store shows no alert summary: its planted changes were not found")
    # The 4-socket machines' regression: the summary that names machines that did not move.
    chosen = max(summaries, key=lambda s: (len(s.get("unmoved", ())), len(s["alerts"])))
    series = "workload=micro&test=t3&variant=procs&cores=8"
    middle = shape.runs // 2 + 1  # lab00's run in the middle of its history
    return [Page("overview", "/", "/"), Page("alerts", "/alerts", "/alerts"),
            Page("alerts json", "/api/alerts", "/api/alerts"),
            Page("summary", f"/alerts/{chosen['id']}", None),
            Page("graph", f"/graphs?machine={host(0)}&machine={host(1)}&{series}", f"/graphs?{series}"),
            Page("run", f"/runs/{middle}", f"/runs/{one_run_id}"),
            Page("run report", f"/runs/{middle}/report", f"/runs/{one_run_id}/report")]


def until_ok(served: Served, path: str, conn: http.client.HTTPConnection | None = None) -> dict[str, Any]:
    """A page asked for until it is answered 200: the 503s before (its deadline passed on work that goes on:
    the alerts computed for the first time, a report drawn), the whole wait, and the answered request's time."""
    start = time.monotonic()
    refused = 0
    while True:
        status, took, body = served.get(path, conn)
        if status == 200:
            return {"refused": refused, "until_200_s": time.monotonic() - start, "last_s": took}
        if status != 503 or time.monotonic() - start > REQUEST_TIMEOUT_S:
            served.stop()
            raise SystemExit(f"GET {path}: {status} {body[:300]!r}\n{served.log.read_text(errors='replace')[-3000:]}")
        refused += 1


def cold_start(url: str, log: Path) -> tuple[Served, dict[str, Any]]:
    """A server started on the store, its first request (the overview) answered, and the overview asked until
    whole (every machine's alerts computed): how long each took."""
    served = Served(url, log)
    first = until_ok(served, "/")
    start = time.monotonic()
    partial = 0
    while json.loads(served.ok("/api/overview")[1])["computing"]:
        partial += 1
        time.sleep(0.2)
    return served, {"ready_s": served.ready_s, **first, "whole_s": first["until_200_s"] + time.monotonic() - start,
                    "partial": partial}


class DrawingMemory:
    """The resident size of the server's drawing processes, sampled on a thread until stopped: its peak."""

    def __init__(self, served: Served) -> None:
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(served,))
        self._thread.start()

    def _sample(self, served: Served) -> None:
        while not self._stop.wait(0.5):
            self.peak_mb = max(self.peak_mb, served.drawing_mb())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_mb


def pages_while_a_report_draws(lab: Served, run_id: int) -> dict[str, Any]:
    """The overview and a graph asked while another client's first request of a run's report is drawing it
    (in a process of the server's own): each one's median and the report's wait."""
    drawn: dict[str, Any] = {}

    def draw() -> None:
        drawn.update(until_ok(lab, f"/runs/{run_id}/report", lab.connection()))

    drawing = threading.Thread(target=draw)
    drawing.start()
    time.sleep(1.0)  # the report under way
    meanwhile: dict[str, list[float]] = {"overview": [], "graph": []}
    graph = f"/graphs?machine={host(0)}&workload=micro&test=t3&variant=procs&cores=8"
    while drawing.is_alive() and len(meanwhile["overview"]) < 5:
        meanwhile["overview"].append(lab.ok("/")[0])
        meanwhile["graph"].append(lab.ok(graph)[0])
    drawing.join()
    return {"report": drawn, **{k: statistics.median(v) for k, v in meanwhile.items() if v}}


def measure(backend: str, lab_url: str, one_url: str, one_run_id: int, shape: Shape, rounds: int, new_rounds: int,
            reports: int, where: Path) -> dict[str, Any]:
    print(f"{backend}: starting the lab's server cold ...", flush=True)
    lab, cold = cold_start(lab_url, where / f"{backend}-lab.log")
    one = Served(one_url, where / f"{backend}-one.log")
    memory: list[tuple[str, float]] = []  # the server's resident MB after each phase
    drawing_memory = DrawingMemory(lab)
    try:
        memory.append(("alerts computed", lab.memory_mb()[1]))
        one.ok("/")
        chosen = pages(lab, one_run_id, shape)
        first = {p.name: until_ok(lab, p.lab) for p in chosen}
        for p in chosen:
            if p.one:
                until_ok(one, p.one)
        warm: dict[str, dict[str, list[float]]] = {p.name: {"lab": [], "one": []} for p in chosen}
        for _ in range(rounds):
            for p in chosen:
                warm[p.name]["lab"].append(lab.ok(p.lab)[0])
                if p.one:
                    warm[p.name]["one"].append(one.ok(p.one)[0])
        memory.append(("every page asked (a report drawn)", lab.memory_mb()[1]))
        during = pages_while_a_report_draws(lab, shape.runs // 2 + 2)
        memory.append(("a second report drawn", lab.memory_mb()[1]))
        for k in range(2, reports):  # more runs' reports, each machine's in turn: what the server keeps of them
            until_ok(lab, f"/runs/{(k % shape.machines) * shape.runs + shape.runs // 2 + 1}/report")
            memory.append((f"report {k + 1} drawn", lab.memory_mb()[1]))
        after_new: list[tuple[dict[str, Any], float]] = []
        for k in range(new_rounds):
            add_night(lab_url, shape, k % shape.machines, shape.runs + k // shape.machines)
            after_new.append((until_ok(lab, "/"), lab.ok("/alerts")[0]))
        if after_new:
            memory.append((f"{len(after_new)} new run{'s' if len(after_new) != 1 else ''}", lab.memory_mb()[1]))
        peak_mb, rss_mb = lab.memory_mb()
        one_peak_mb, _ = one.memory_mb()
    finally:
        drawing_peak_mb = drawing_memory.stop()
        lab.stop()
        one.stop()
    return {"backend": backend, "cold": cold, "first": first, "warm": warm, "after_new": after_new, "during": during,
            "memory": memory, "drawing_peak_mb": drawing_peak_mb,
            "peak_mb": peak_mb, "rss_mb": rss_mb, "one_peak_mb": one_peak_mb, "rounds": rounds}


def answered(first: dict[str, Any]) -> str:
    refused = f"503 ×{first['refused']} then 200" if first["refused"] else "200"
    return f"{refused} after {first['until_200_s']:.1f} s (the request answered took {first['last_s']:.1f} s)"


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(r: dict[str, Any], shape: Shape) -> None:
    cold = r["cold"]
    print(f"\n{r['backend']}: {shape.machines} machines × {shape.runs} runs × {shape.points} points "
          f"({shape.machines * shape.runs * shape.points:,} points) against a one-run store of {shape.points} points")
    print(f"cold server: address printed after {cold['ready_s']:.1f} s; the overview asked at once: "
          f"{answered(cold)}; whole (every machine's alerts computed) after {cold['whole_s']:.1f} s "
          f"({cold['partial']} answers saying some were computing)")
    print(f"{'page':12} {'lab s':>8} {'one-run s':>10} {'ratio':>8} {'first s':>8}  goal (warm)")
    notes = []
    for name, times in r["warm"].items():
        lab_s = statistics.median(times["lab"])
        one_s = statistics.median(times["one"]) if times["one"] else None
        goal = GOALS.get(name)
        first = r["first"][name]
        if first["refused"]:
            notes.append(f"first {name}: {answered(first)}")
        print(f"{name:12} {lab_s:8.3f} {'' if one_s is None else f'{one_s:10.3f}':>10} "
              f"{'n/a' if one_s is None else f'{lab_s / one_s:7.1f}×':>8} {first['until_200_s']:8.2f}  "
              + (f"{goal:g} s {verdict(lab_s <= goal)}" if goal else "")
              + ("  (a one-run store has no alert summary)" if one_s is None else ""))
    print(f"(medians of {r['rounds']} interleaved rounds, each page on the lab's store then on the one-run store; "
          "first: each page's first request once the overview was answered, until answered 200)")
    for note in notes:
        print(note)
    firsts = [a["until_200_s"] for a, _ in r["after_new"]]
    notes = [answered(a) for a, _ in r["after_new"] if a["refused"]]
    if firsts:
        print(f"first request (overview) after a new run on one machine: median {statistics.median(firsts):.2f} s, "
              f"max {max(firsts):.2f} s over {len(firsts)} rounds (goal {NEW_RUN_GOAL_S:g} s: "
              f"{verdict(max(firsts) <= NEW_RUN_GOAL_S)}); the alerts page after it: "
              f"median {statistics.median(b for _, b in r['after_new']):.3f} s"
              + "".join(f"; {note}" for note in notes))
    during = r["during"]
    if "overview" in during:
        print(f"while another client's first request of a run's report drew it ({answered(during['report'])}): "
              f"overview median {during['overview']:.3f} s, graph median {during['graph']:.3f} s")
    print(f"server memory: peak {r['peak_mb']:.0f} MB (VmHWM), {r['rss_mb']:.0f} MB now (goal {MEMORY_GOAL_MB:g} MB: "
          f"{verdict(r['peak_mb'] <= MEMORY_GOAL_MB)}); the one-run store's server {r['one_peak_mb']:.0f} MB; "
          "resident after each phase: " + ", ".join(f"{phase} {mb:.0f} MB" for phase, mb in r["memory"]))
    print(f"a report's drawing processes (the server's children, apart from its memory): peak "
          f"{r['drawing_peak_mb']:.0f} MB resident together (sampled every 0.5 s)")
    for name, goal in GOALS.items():
        if name in r["warm"]:
            s = statistics.median(r["warm"][name]["lab"])
            print(f"SUMMARY {r['backend']} {name} warm_s {s:.3f} goal_s {goal:g} {verdict(s <= goal)}")
    if firsts:
        print(f"SUMMARY {r['backend']} after-new-run max_s {max(firsts):.2f} goal_s {NEW_RUN_GOAL_S:g} "
              f"{verdict(max(firsts) <= NEW_RUN_GOAL_S)}")
    print(f"SUMMARY {r['backend']} peak_mb {r['peak_mb']:.0f} goal_mb {MEMORY_GOAL_MB:g} "
          f"{verdict(r['peak_mb'] <= MEMORY_GOAL_MB)}")


def profile_requests(shape: Shape, paths: list[str], where: Path) -> None:
    """The first request of each path on a copy of the lab's SQLite store under cProfile, in this process (the
    same app as `mosbench serve`'s, its alerts computed first): the functions that took its time."""
    from mosbench.web.app import create_app

    store = where / "lab.sqlite"
    shutil.copyfile(cached_sqlite(shape), store)
    app = create_app(str(store))
    lab = app.extensions["mosbench.lab"]
    # Each page's record built in the request's thread rather than on a builder thread, where cProfile sees it.
    lab.answer = lambda build, *args, **_: build(lab, *args)
    start = time.monotonic()
    lab.warm()
    print(f"alerts computed in {time.monotonic() - start:.1f} s")
    client = app.test_client()
    for path in paths:  # each one's first request: a report is drawn then
        profiler = cProfile.Profile()
        start = time.monotonic()
        profiler.enable()
        response = client.get(path)
        profiler.disable()
        took = time.monotonic() - start
        again = time.monotonic()
        client.get(path)
        print(f"GET {path}: {response.status_code} in {took:.3f} s under cProfile, the next "
              f"{time.monotonic() - again:.3f} s")
        stats = pstats.Stats(profiler).strip_dirs()
        stats.sort_stats("cumulative").print_stats(25)
        stats.sort_stats("tottime").print_stats(12)


def main() -> None:
    ask = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ask.add_argument("--machines", type=int, default=int(os.environ.get("MACHINES", "20")))
    ask.add_argument("--runs", type=int, default=int(os.environ.get("RUNS", "500")), help="runs a machine")
    ask.add_argument("--tests", type=int, default=int(os.environ.get("TESTS", "50")),
                     help="micro tests a run, each at 1, 2, 4, 8 cores: 4 points a test")
    ask.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", "5")))
    ask.add_argument("--new-runs", type=int, default=3, help="rounds of a new run added to one machine")
    ask.add_argument("--reports", type=int, default=2,
                     help="runs' reports drawn, the server's memory read after each (2 at least: the measured ones)")
    ask.add_argument("--postgres", action="store_true", help="PostgreSQL too (a private cluster; needs root)")
    ask.add_argument("--no-sqlite", action="store_true")
    ask.add_argument("--profile", metavar="PATH", action="append",
                     help="only cProfile one warm request of PATH (SQLite; again for more paths)")
    options = ask.parse_args()
    shape = Shape(options.machines, options.runs, options.tests)
    if shape.runs < 20 or shape.machines < 2 or shape.tests < 12:
        raise SystemExit("--runs 20, --machines 2 and --tests 12 at least: the planted changes need releases to sit "
                         "at and their tests (t3, t7, t11)")
    with tempfile.TemporaryDirectory(prefix="mosbench-serve-bench-") as tmp:
        where = Path(tmp)
        if options.profile:
            profile_requests(shape, options.profile, where)
            return
        print(f"{len(os.sched_getaffinity(0))} CPUs here, load average {os.getloadavg()[0]:.1f} at the start",
              flush=True)
        results = []
        if not options.no_sqlite:
            lab = where / "lab.sqlite"
            shutil.copyfile(cached_sqlite(shape), lab)
            one = where / "one.sqlite"
            one_id = one_run_store(str(one), shape)
            results.append(measure("sqlite", str(lab), str(one), one_id, shape, options.rounds, options.new_runs,
                                   options.reports, where))
        if options.postgres:
            with postgres_stores(shape) as (lab_url, one_url, one_id):
                results.append(measure("postgresql", lab_url, one_url, one_id, shape, options.rounds, options.new_runs,
                                       options.reports, where))
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
        for r in results:
            report(r, shape)


if __name__ == "__main__":
    main()
