"""`mosbench history` against Apache Otava (E-divisive means, then its merge step) on the same planted series
(issue 48).

Each case is a number of stores made by testing/history_stores.sweep: 20 nightly runs (the newest last) of a
16-core micro sweep, 6 tests × 2 variants × 5 core counts = 60 series, 3 trials a run uniform within ±4%, each
run on one of two machine modes 2% apart; a step or a drift planted in test t1 where the case says. The clean
cases plant nothing: trials alone, with the two modes, with one run at -30% everywhere too (never the first
or the newest two), and with each series of one test (t2) noisier from night to night than the rest, each on
its own (±4% a night more: mosbench weighs each series' noise with the store's, and a store's series need not
share one). mosbench's find_shifts reads every series of a store at once; Otava is given each series' run
means, as its CLI would be, at its defaults (window 50, p 0.001) and at p 1e-5.

A change is a distinct (test, run) that a tool reports (Otava reports per series, mosbench per test and
variant: both are counted per test and run, so one step placed at runs 10, 11 and 13 in different series is
three changes). Per case and tool: stores where every planted step was found within one run; stores where
each step was reported as exactly one change; stores with a false change (a test with nothing planted, or
more than two runs from the planted step); and, for the clean case, the share of series with one.

Otava is not a dependency: it lives in its own environment (OTAVA_PYTHON, default /tmp/otava-venv/bin/python:
`python3 -m venv /tmp/otava-venv && /tmp/otava-venv/bin/pip install apache-otava==0.8.0`) and runs as a
subprocess; without it its columns are left out. BEFORE=path/to/an/older/analysis/history.py adds that
version's column (it is loaded as a module beside the package's). STORES scales the store counts (default 1:
30 a step case, 100 of each clean kind); FIRST_SEED (default 0) starts the seeds elsewhere, for stores that
no change was looked at on (each case's stores are seeds FIRST_SEED, FIRST_SEED + 1, ...).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import datetime as dt  # noqa: E402

from mosbench.analysis import history  # noqa: E402
from mosbench.testing.history_stores import SWEEP, Drift, Noise, Planted, SweepSeries, sweep  # noqa: E402

RUNS = 20
SCALE = float(os.environ.get("STORES", "1"))
FIRST_SEED = int(os.environ.get("FIRST_SEED", "0"))
OTAVA_PYTHON = os.environ.get("OTAVA_PYTHON", "/tmp/otava-venv/bin/python")
NEAR = 2  # runs from a planted step within which a reported change belongs to it


@dataclass(frozen=True)
class Case:
    name: str
    steps: tuple[Planted, ...] = ()
    drifts: tuple[Drift, ...] = ()
    noise: Noise = field(default_factory=Noise)
    stores: int = 30
    noisier: float = 0.0  # each series of test t2 this much noisier from night to night, on its own

    def make(self, seed: int) -> list[SweepSeries]:
        made = sweep(RUNS, seed, self.steps, self.drifts, self.noise)
        if not self.noisier:
            return made
        rng = random.Random(-1 - seed)
        out = []
        for s in made:
            if s.test == "t2":
                nights = [1 + rng.uniform(-self.noisier, self.noisier) for _ in s.trials]
                s = SweepSeries(s.test, s.variant, s.cores, [tuple(x * f for x in t) for t, f in zip(s.trials, nights,
                                                                                                  strict=True)])
            out.append(s)
        return out


MOST = (max(SWEEP),)
CASES = (
    Case("-5% at the most cores from run 11 of 20", (Planted(10, 0.95, MOST, ("t1",)),)),
    Case("-5% at every core from run 11 of 20", (Planted(10, 0.95, SWEEP, ("t1",)),)),
    Case("-15% at run 8, then +10% at run 15", (Planted(7, 0.85, SWEEP, ("t1",)), Planted(14, 1.10, SWEEP, ("t1",)))),
    Case("-10% at run 11, trials within ±10%", (Planted(10, 0.90, SWEEP, ("t1",)),), noise=Noise(trials=0.10)),
    Case("-10% at the newest run (20)", (Planted(19, 0.90, SWEEP, ("t1",)),)),
    Case("-1% a run over 19 runs, no step", drifts=(Drift(0, 19, 0.81, ("t1",)),)),
    Case("clean: ±4%", noise=Noise(modes=0.0), stores=100),
    Case("clean: ±4%, two modes", stores=100),
    Case("clean: ±4%, two modes, one -30% run", noise=Noise(outlier=1), stores=100),
    Case("clean: ±4%, two modes, one test's series ±4% a night more", stores=100, noisier=0.04),
)


@dataclass
class Score:
    stores: int = 0
    found: int = 0  # stores with every planted step found within one run
    once: int = 0  # stores with every planted step reported as exactly one change
    false_stores: int = 0
    false_series: int = 0
    series: int = 0
    drifts: int = 0  # stores where the planted drift was reported as a drift

    def cell(self, case: Case) -> str:
        if not case.steps and not case.drifts:
            return (f"false in {self.false_stores}/{self.stores} stores "
                    f"({100 * self.false_series / max(1, self.series):.2f}% of series)")
        if case.drifts:
            said = f", as a drift {self.drifts}" if self.drifts else ""
            return f"seen {self.found}/{self.stores}{said}, false {self.false_stores}"
        return f"found {self.found}/{self.stores}, once {self.once}, false {self.false_stores}"


# A tool: all the stores of a case in, for each store its reported (test, run, series) changes out.
Reported = list[tuple[str, int, str]]


def score(case: Case, stores: list[list[SweepSeries]], reported: list[Reported], drift_said: list[bool]) -> Score:
    planted = [(t, p.at) for p in case.steps for t in p.tests]
    stretches = [(t, d.start, d.end) for d in case.drifts for t in d.tests]

    def explained(test: str, run: int) -> bool:
        return (any(test == t and abs(run - at) <= NEAR for t, at in planted)
                or any(test == t and a - 1 <= run <= b + 1 for t, a, b in stretches))

    s = Score()
    for series, found, drift in zip(stores, reported, drift_said, strict=True):
        s.stores += 1
        s.series += len(series)
        changes = {(test, run) for test, run, _ in found}
        false = [(test, run) for test, run in changes if not explained(test, run)]
        s.false_stores += bool(false)
        s.false_series += len({name for test, run, name in found if not explained(test, run)})
        if planted and all(any(t == test and abs(run - at) <= 1 for test, run in changes) for t, at in planted):
            s.found += 1
        if planted and all(sum(t == test and abs(run - at) <= NEAR for test, run in changes) == 1
                           for t, at in planted):
            s.once += 1
        if stretches and any(test == t for test, _ in changes for t, _, _ in stretches):
            s.found += 1
            s.drifts += drift
    return s


def mosbench_tool(module: ModuleType) -> Callable[[list[list[SweepSeries]]], tuple[list[Reported], list[bool]]]:
    def run(stores: list[list[SweepSeries]]) -> tuple[list[Reported], list[bool]]:
        runs = [module.RunInfo(i + 1, None, dt.datetime(2026, 1, 1) + dt.timedelta(days=i), "6.1.0", None, {})
                for i in range(RUNS)]
        out, drifts = [], []
        for store in stores:
            series = [module.PointSeries(module.SeriesKey("micro", s.test, s.variant), s.cores, s.trials)
                      for s in store]
            shifts, _ = module.find_shifts(runs, series)
            out.append([(sh.key.test, sh.after, f"{sh.key.test} {sh.key.variant} {c.cores}")
                        for sh in shifts for c in sh.changes])
            drifts.append(any(getattr(getattr(sh, "shape", None), "value", "") == "drift" for sh in shifts))
        return out, drifts

    return run


OTAVA_DRIVER = """
import json, sys
from otava.analysis import compute_change_points
job = json.load(sys.stdin)
kwargs = {} if job["p"] is None else {"max_pvalue": job["p"]}
found = [compute_change_points(list(values), **kwargs)[0] for values in job["series"]]
print(json.dumps([[int(cp.index) for cp in points] for points in found]))
"""


def otava_tool(p: float | None) -> Callable[[list[list[SweepSeries]]], tuple[list[Reported], list[bool]]]:
    def run(stores: list[list[SweepSeries]]) -> tuple[list[Reported], list[bool]]:
        flat = [(i, s) for i, store in enumerate(stores) for s in store]
        means = [[sum(t) / len(t) for t in s.trials] for _, s in flat]
        done = subprocess.run([OTAVA_PYTHON, "-c", OTAVA_DRIVER], input=json.dumps({"p": p, "series": means}),
                              capture_output=True, text=True, check=True)
        out: list[Reported] = [[] for _ in stores]
        for (i, s), points in zip(flat, json.loads(done.stdout), strict=True):
            out[i].extend((s.test, index, f"{s.test} {s.variant} {s.cores}") for index in points)
        return out, [False] * len(stores)

    return run


def otava_missing() -> str | None:
    try:
        subprocess.run([OTAVA_PYTHON, "-c", "import otava.analysis"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return (f"Otava: not found at {OTAVA_PYTHON} (python3 -m venv /tmp/otava-venv && /tmp/otava-venv/bin/pip "
                "install apache-otava==0.8.0): its columns are left out")
    return None


def load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("history_before", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def main() -> None:
    tools: dict[str, Callable] = {}
    if before := os.environ.get("BEFORE"):
        tools["mosbench before"] = mosbench_tool(load(before))
    tools["mosbench" + (" after" if before else "")] = mosbench_tool(history)
    if missing := otava_missing():
        print(missing)
    else:
        tools["Otava, defaults"] = otava_tool(None)
        tools["Otava, p 1e-5"] = otava_tool(1e-5)
    seconds = dict.fromkeys(tools, 0.0)
    rows = []
    for case in CASES:
        stores = [case.make(seed) for seed in range(FIRST_SEED, FIRST_SEED + max(1, round(case.stores * SCALE)))]
        cells = []
        for name, tool in tools.items():
            start = time.monotonic()
            reported, drifts = tool(stores)
            seconds[name] += time.monotonic() - start
            cells.append(score(case, stores, reported, drifts).cell(case))
        rows.append((case.name, cells))
        print(f"{case.name}: " + "; ".join(f"{n}: {c}" for n, c in zip(tools, cells, strict=True)), flush=True)
    print()
    print("| planted (20 runs, 60 series a store) | " + " | ".join(tools) + " |")
    print("| --- |" + " --- |" * len(tools))
    for name, cells in rows:
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print("found: every planted step reported within one run; once: as exactly one change (distinct test and run "
          f"within {NEAR} runs); false: stores with a change elsewhere.")
    print("seconds per tool: " + ", ".join(f"{n} {s:.1f}" for n, s in seconds.items()))


if __name__ == "__main__":
    main()
