"""Stores of many runs with changes planted where the test says, for `mosbench history`'s tests.

`fill` writes a store (SQLite) through the same tables `mosbench run` writes; `sweep` makes a store's series in
memory (a 16-core micro sweep: tests × two variants × 1-16 cores, 3 trials a run), with the noise a machine
shows between nights, for measuring detection over hundreds of stores in seconds."""

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
    variants: tuple[str, ...] = ("procs", "threads")  # where `sweep` makes both


@dataclass(frozen=True)
class Drift:
    """A trend: the level moves evenly from run `start` (0-based, the last at the old level) to run `end`,
    where it has moved by `factor` in all; in these tests at every core count and variant."""

    start: int
    end: int
    factor: float
    tests: tuple[str, ...] = ("t0",)

    def at(self, i: int) -> float:
        share = min(1.0, max(0.0, (i - self.start) / (self.end - self.start)))
        return 1 + (self.factor - 1) * share


@dataclass(frozen=True)
class Noise:
    """What varies between and within nights: each trial uniform within ±`trials` of its run's level; each run
    on one of two machine modes (the second `modes` slower, chosen at random per run, for every series alike:
    a boot's placement or a firmware state); `outlier` runs (never the first or the newest two) `outlier_factor`
    of their level everywhere (a disturbed night)."""

    trials: float = 0.04
    modes: float = 0.02
    outlier: int = 0
    outlier_factor: float = 0.7


SWEEP = (1, 2, 4, 8, 16)
VARIANTS = ("procs", "threads")


@dataclass(frozen=True)
class SweepSeries:
    test: str
    variant: str
    cores: int
    trials: list[tuple[float, ...]]  # per run, oldest first


def sweep(n_runs: int, seed: int, steps: tuple[Planted, ...] = (), drifts: tuple[Drift, ...] = (),
          noise: Noise = Noise(), tests: int = 6, trials: int = 3) -> list[SweepSeries]:
    """A store's series in memory: `tests` micro tests × VARIANTS × SWEEP cores (60 series by default) over
    n_runs runs, `trials` trials a run, with `steps` and `drifts` planted and `noise` as the machine makes it."""
    rng = random.Random(seed)
    slow = [rng.random() < 0.5 for _ in range(n_runs)]
    disturbed = set(rng.sample(range(1, n_runs - 2), noise.outlier)) if noise.outlier else set()
    out = []
    for t in range(tests):
        name = f"t{t}"
        for variant in VARIANTS:
            for cores in SWEEP:
                base = 1e6 * (1 + 0.1 * t) * (1 - 0.04 * (cores.bit_length() - 1))
                runs_trials = []
                for i in range(n_runs):
                    level = base * (1 - noise.modes if slow[i] else 1.0)
                    if i in disturbed:
                        level *= noise.outlier_factor
                    for step in steps:
                        if i >= step.at and cores in step.cores and name in step.tests and variant in step.variants:
                            level *= step.factor
                    for drift in drifts:
                        if name in drift.tests:
                            level *= drift.at(i)
                    runs_trials.append(tuple(level * (1 + rng.uniform(-noise.trials, noise.trials))
                                             for _ in range(trials)))
                out.append(SweepSeries(name, variant, cores, runs_trials))
    return out


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


LAB_COMMITS = ("1" * 40, "2" * 40)  # ci's and ci2's kernel commits: before their run 8, and from it on
LAB_START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def debian_releases(flavour: str, first: int = 20, every: int = 6) -> Callable[[int], str]:
    """A machine's kernel by run: Debian's 6.1.0-ABI-FLAVOUR, the ABI one up every `every` runs."""
    return lambda i: f"6.1.0-{first + i // every}-{flavour}"


def fill_lab(db: Store) -> dict[str, list[int]]:
    """A lab of six machines with the changes the lab's alerts must find, each machine's run ids oldest first:
    - big4s (Debian amd64) and arm (Debian arm64), releases 6.1.0-20, -21, -22 (6 runs each): micro/t1 falls
      when 6.1.0-22 comes (run 12), on big4s at 4 and 8 cores only (×0.7, a scalability change), on arm at
      every core count (×0.75); small2s ran the same releases and nothing moved;
    - ci: LAB_COMMITS[0] until run 8, LAB_COMMITS[1] from it on, one release: micro/t0 ×1.3 at every core
      count; ci2 ran both commits and nothing moved;
    - old: 24 runs sixty days before the rest, one release: micro/t2 ×0.8 from run 4 on (an old change,
      sides named by their runs).
    Runs of different machines interleave in time as a lab's nightly runs do."""
    hour = dt.timedelta(hours=1)
    commits = [Planted(0, 1.0, environment={"kernel_commit": LAB_COMMITS[0]}),
               Planted(8, 1.0, environment={"kernel_commit": LAB_COMMITS[1]})]
    return {
        "big4s": fill(db, 18, [Planted(12, 0.7, cores=(4, 8), tests=("t1",))], seed=1, host="big4s",
                      kernel=debian_releases("amd64"), start=LAB_START),
        "arm": fill(db, 18, [Planted(12, 0.75, tests=("t1",))], seed=2, host="arm", kernel=debian_releases("arm64"),
                    start=LAB_START + hour),
        "small2s": fill(db, 18, [], seed=3, host="small2s", kernel=debian_releases("amd64"),
                        start=LAB_START + 2 * hour),
        "ci": fill(db, 14, [*commits, Planted(8, 1.3, tests=("t0",))], seed=4, host="ci",
                   kernel=lambda i: "6.19.0-rc1", start=LAB_START + 3 * hour),
        "ci2": fill(db, 14, commits, seed=5, host="ci2", kernel=lambda i: "6.19.0-rc1", start=LAB_START + 4 * hour),
        "old": fill(db, 24, [Planted(4, 0.8, tests=("t2",))], seed=6, host="old", kernel=lambda i: "6.6.0",
                    start=LAB_START - dt.timedelta(days=60)),
    }
