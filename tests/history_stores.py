"""Stores of many runs with changes planted where the test says, for `mosbench history`'s tests."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from mosbench.store.db import Store, points, runs

CORES = (1, 2, 4, 8)


@dataclass
class Planted:
    """A level change: from run `at` on (0-based), at these core counts, by `factor`, in these tests."""

    at: int
    factor: float
    cores: tuple[int, ...] = CORES
    tests: tuple[str, ...] = ("t0",)
    environment: dict = field(default_factory=dict)  # facts that change with it, from run `at` on


def environment(i: int, changes: list[Planted], host: str = "big", kernel: str = "6.1.0") -> dict:
    env = {"hostname": host, "topology_summary": "1 socket, 8 cores", "kernel": kernel, "thp": "madvise",
           "cpu_model": "Test CPU"}
    for change in changes:
        if i >= change.at:
            env.update(change.environment)
    return env


def fill(db: Store, n_runs: int, changes: list[Planted], seed: int, tests: int = 4, trials: int = 3,
         noise: float = 0.10, host: str = "big", kernel: Callable[[int], str] = lambda i: "6.1.0",
         start: dt.datetime = dt.datetime(2026, 1, 1, tzinfo=dt.UTC), prefix: str = "t") -> list[int]:
    """n_runs runs of `tests` micro tests at CORES, each trial uniform within ±noise of its level; the
    run ids, oldest first. Rows go in with one statement per run: a 500-run store takes seconds."""
    rng = random.Random(seed)
    ids = []
    with db.engine.begin() as conn:
        for i in range(n_runs):
            started = start + dt.timedelta(days=i)
            run_id = conn.execute(runs.insert().values(
                label=f"night {i}", status="complete", started_at=started, finished_at=started,
                hostname=host, command="mosbench run micro", plan={},
                environment=environment(i, changes, host, kernel(i)))).inserted_primary_key[0]
            rows = []
            for t in range(tests):
                name = f"{prefix}{t}"
                for cores in CORES:
                    level = 1e6 * (1 - 0.05 * (cores.bit_length() - 1))
                    for change in changes:
                        if i >= change.at and cores in change.cores and name in change.tests:
                            level *= change.factor
                    for trial in range(1, trials + 1):
                        per_core = level * (1 + rng.uniform(-noise, noise))
                        rows.append({"run_id": run_id, "workload": "micro", "test": name, "variant": "procs",
                                     "cores": cores, "trial": trial, "status": "ok", "started_at": started,
                                     "cpus": "0", "unit": "op", "window_s": 1.0, "work": per_core * cores,
                                     "throughput": per_core * cores, "interfered": False, "user_s": 0.8 * cores,
                                     "system_s": 0.2 * cores, "idle_s": 0.0, "steal_s": 0.0})
            conn.execute(points.insert(), rows)
            ids.append(int(run_id))
    return ids
