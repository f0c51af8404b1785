"""What runs inside a many-core guest (vm.py boots it): doctor, the sweeps of a suite, then the checks
that only a real many-core topology can fail (tests/guest/). Everything it keeps goes to the share:
the guest's store, a record of the machine before the sweeps, and the outcome of each step.

    python -m mosbench.guest.inside --share DIR --suite ci|full --shape 4x8x2 --nodes 4 --cgroup 2
    python -m mosbench.guest.inside --share DIR --run-args '["micro/getppid1", "--cores", "1,2"]' --label L …
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import runpy
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mosbench import cpulist
from mosbench.errors import UserError
from mosbench.launch.processes import exit_status, fork_call
from mosbench.workloads import registry

CGROUP_ROOT = Path("/sys/fs/cgroup")
GUEST_STORE = Path("/run/mosbench-guest/guest.sqlite")


@dataclass(frozen=True)
class Sweep:
    """One `mosbench run` inside the guest: a run in the guest's store, later one on the host."""

    selections: tuple[str, ...]
    isolation: str
    placement: str
    cores: str | None = None  # None: the default series, every boundary of the guest's topology
    args: tuple[str, ...] = ()


# Short windows: the guest proves paths, not performance. Under emulation a 64-vCPU guest runs on a
# couple of host CPUs, so each point costs seconds of harness time whatever its window.
WINDOW = ("--trials", "1", "--warmup", "0.3", "--duration", "0.6", "--interval", "0")

# The part CI runs: every isolation and placement path at full size (64 CPUs in a cpuset, 63 offlined
# and back, a server and a client context per core), with the fewest points that take them.
CI_SUITE = (
    Sweep(("micro/getppid1",), "cgroup", "pack", "1,16,32,max", ("--variant", "procs")),
    Sweep(("micro/getppid1",), "hotplug", "spread", "1,4,max", ("--variant", "threads")),
    # Under emulation a reply takes longer than memcached's 100 ms loss time-out, and 64 servers take
    # a while to answer at all: a longer warm-up and time-out, so the window sees replies. Open loop at
    # 10 requests a second per server: a closed loop kept all 64 vCPUs busy on the one host thread that
    # runs them, starving the harness, so the 1.5 s window took 75 s to close; each server still serves.
    Sweep(("memcached",), "cgroup", "spread", "max",
          ("--variant", "per-core", "--warmup", "2", "--duration", "1.5", "-p", "memcached.timeout_ms=3000",
           "-p", "memcached.rate=10/core")),
    # 64 tasks creating files in one shared directory on a file system mounted for the point, and it
    # unmounted after: FxMark's medium sharing at the guest's size. Emulated, a task of 64 makes about
    # 85 files a second: a 3 s window, so each of them makes some.
    Sweep(("fxmark/MWCM",), "cgroup", "pack", "1,max", ("--variant", "tmpfs", "--duration", "3")),
)

# What the cgroup version changes: the cpuset and CPU-time accounting of each point's groups (the work's,
# the servers' and their client's, a mounted file system's point). Under cgroup v1 CI sweeps only that,
# each at the guest's full size: the placement of 1, 16 or 32 CPUs and CPU hotplug take the same paths
# under either version, and the cgroup v2 suite has them.
CI_SUITE_V1 = (
    Sweep(("micro/getppid1",), "cgroup", "pack", "max", ("--variant", "procs")),
    CI_SUITE[2],
    Sweep(("fxmark/MWCM",), "cgroup", "pack", "max", CI_SUITE[3].args),
)

# Every workload at every core count of the default series, both isolations, both placements.
FULL_WORKLOADS = ("micro/getppid1", "micro/open1", "micro/page_fault1", "scale", "commute/open-open",
                  "commute/mmap-munmap", "metis/invindex", "psearchy",
                  "gmake", "memcached", "apache", "exim", "postgres")
FULL_PARAMS = ("-p", "psearchy.subdir=security", "-p", "gmake.targets=security/keys/", "-p", "metis.size_mb=64",
               "-p", "postgres.rows=200000")
FULL_SUITE = tuple(
    Sweep(FULL_WORKLOADS, isolation, placement, None, FULL_PARAMS)
    for isolation in ("cgroup", "hotplug") for placement in ("pack", "spread")
)
# A suite's sweeps under each cgroup version.
SUITES: dict[str, dict[int, tuple[Sweep, ...]]] = {
    "ci": {2: CI_SUITE, 1: CI_SUITE_V1},
    "full": {2: FULL_SUITE, 1: FULL_SUITE},
}


def sweeps(suite: str, cgroup_version: int) -> tuple[Sweep, ...]:
    return SUITES[suite][cgroup_version]


def machine_state() -> dict:
    """What a run must leave as it found it: mounts, cgroups, processes, network namespaces, online CPUs."""
    cgroups = sorted(str(p) for p in CGROUP_ROOT.rglob("*") if p.is_dir() and (p / "cgroup.procs").exists())
    netns = sorted(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else []
    procs = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                procs[d.name] = (d / "comm").read_text().strip()
    return {
        "mounts": sorted(" ".join(line.split()[:3]) for line in Path("/proc/mounts").read_text().splitlines()),
        "cgroups": cgroups,
        "procs": procs,
        "netns": netns,
        "online": Path("/sys/devices/system/cpu/online").read_text().strip(),
    }


def mount_v1_cpuset() -> None:
    """virtme-ng's legacy layout mounts cpu, cpuacct, memory and others, but not cpuset: add it, as
    systemd's legacy mode does."""
    target = CGROUP_ROOT / "cpuset"
    if (CGROUP_ROOT / "cgroup.controllers").exists() or (target.is_dir() and any(target.iterdir())):
        return
    target.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "cgroup", "-o", "cpuset", "cpuset", str(target)], check=True)


def available(selections: tuple[str, ...]) -> list[str]:
    """The selections whose programs this userland has (Exim is absent where another mail server is)."""
    kept = []
    for name in selections:
        try:
            registry.get(name.partition("/")[0]).check_available()
            kept.append(name)
        except UserError as e:
            print(f"mosbench-guest: skipping {name}: {e}", flush=True)
    return kept


# What the suite's commands import, imported once before the first step: under emulation a fresh
# `python -m mosbench` spends 60-85 s importing before it does anything, and every step paid it.
PRELOAD = ("mosbench.cli", "mosbench.run.sweep", "mosbench.run.start", "mosbench.machine.doctor",
           "mosbench.machine.environment", "mosbench.machine.interference")


def mosbench_command(args: list[str]) -> Callable[[], int | None]:
    """`mosbench ARGS` as the command line would run it, to be called in a forked child."""
    def call() -> int | None:
        # As `python -m mosbench ARGS` runs it: the command line is this module's interface to it.
        sys.argv = ["mosbench", *args]
        runpy.run_module("mosbench", run_name="__main__", alter_sys=True)
        return 0
    return call


def step(name: str, args: list[str], outcome: dict, share: Path) -> None:
    """Runs `mosbench ARGS` as one step, then copies the store to the share, so a guest stopped later keeps
    what it measured."""
    print(f"mosbench-guest: {name}: mosbench {' '.join(args)}", flush=True)
    start = time.monotonic()
    code = exit_status(fork_call(mosbench_command(args)))
    outcome["steps"].append({"name": name, "returncode": code, "seconds": round(time.monotonic() - start, 1)})
    if GUEST_STORE.exists():
        # A consistent copy made in memory, then moved onto the share as plain bytes: SQLite itself
        # never writes to 9p (its locks fail there).
        snapshot = GUEST_STORE.with_name("snapshot.sqlite")
        snapshot.unlink(missing_ok=True)
        with contextlib.closing(sqlite3.connect(GUEST_STORE)) as src, \
                contextlib.closing(sqlite3.connect(snapshot)) as dst:
            src.backup(dst)
        shutil.copyfile(snapshot, share / "guest.sqlite.part")
        os.replace(share / "guest.sqlite.part", share / "guest.sqlite")
        snapshot.unlink()
    (share / "outcome.json").write_text(json.dumps(outcome, indent=1))
    print(f"mosbench-guest: {name}: exit {code} after {time.monotonic() - start:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mosbench.guest.inside")
    ap.add_argument("--share", type=Path, required=True)
    ap.add_argument("--suite", choices=sorted(SUITES), default="ci")
    ap.add_argument("--run-args", help="a JSON list: one `mosbench run` with these arguments instead of a suite")
    ap.add_argument("--label", default=None, help="the run's label (with --run-args)")
    ap.add_argument("--shape", required=True)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--cgroup", type=int, choices=(1, 2), required=True)
    args = ap.parse_args(argv)
    share: Path = args.share
    if args.cgroup == 1:
        mount_v1_cpuset()
    # SQLite's WAL maps its index file shared, which 9p cannot do ("disk I/O error"): the store lives in
    # the guest's memory and goes to the share as one file at the end.
    store = GUEST_STORE
    store.parent.mkdir(parents=True, exist_ok=True)
    # The guest's root is the host's, read-only: a home in guest memory gives workloads' caches
    # (~/.cache/mosbench) somewhere to write when the host has none yet.
    home = store.parent / "home"
    home.mkdir(exist_ok=True)
    os.environ["HOME"] = str(home)
    for module in PRELOAD:
        importlib.import_module(module)
    if args.run_args is not None:
        # One sweep of the user's choosing (mosbench vm SELECTIONS, ab, bisect): no suite, no checks.
        outcome: dict = {"suite": None, "steps": [], "runs": []}
        label = ["--label", args.label] if args.label else []
        step("run", ["run", *json.loads(args.run_args), *label, "--store", str(store)], outcome, share)
        return outcome["steps"][-1]["returncode"]
    outcome = {"suite": args.suite, "steps": [], "runs": []}
    (share / "before.json").write_text(json.dumps(machine_state()))
    step("doctor", ["doctor"], outcome, share)
    suite = sweeps(args.suite, args.cgroup)
    for n, sweep in enumerate(suite, start=1):
        cores = ["--cores", sweep.cores] if sweep.cores else []
        selections = available(sweep.selections)
        step(f"sweep {n}/{len(suite)} ({sweep.isolation}, {sweep.placement})",
             ["run", *selections, *cores, "--isolation", sweep.isolation,
              "--placement", sweep.placement, *WINDOW, *sweep.args, "--label", f"guest {args.shape} "
              f"cgroup v{args.cgroup} {sweep.isolation} {sweep.placement}", "--store", str(store)], outcome, share)
    # The checks read the machine as the sweeps left it, so nothing may run in between.
    env = {**os.environ, "MOSBENCH_GUEST_SHARE": str(share), "MOSBENCH_GUEST_SHAPE": args.shape,
           "MOSBENCH_GUEST_NODES": str(args.nodes), "MOSBENCH_GUEST_CGROUP": str(args.cgroup),
           "MOSBENCH_GUEST_SUITE": args.suite}
    print("mosbench-guest: checks", flush=True)
    start = time.monotonic()
    tests = Path(__file__).resolve().parents[2] / "tests" / "guest"

    def checks() -> int:
        import pytest
        os.environ.update(env)
        return int(pytest.main(["-q", "-p", "no:cacheprovider", "-o", "console_output_style=classic", str(tests)]))
    code = exit_status(fork_call(checks))
    outcome["steps"].append({"name": "checks", "returncode": code, "seconds": round(time.monotonic() - start, 1)})
    outcome["online_after"] = cpulist.parse(Path("/sys/devices/system/cpu/online").read_text())
    (share / "outcome.json").write_text(json.dumps(outcome, indent=1))
    return 0 if all(s["returncode"] == 0 for s in outcome["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
