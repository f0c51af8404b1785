"""Checks that only a many-core machine can fail, run inside the guest that `mosbench vm` boots, after
its sweeps (mosbench/vmguest.py). Each expectation is computed from the requested shape and QEMU's
numbering of vCPUs (socket by socket, then core, then thread), never from mosbench's own reading, so a
wrong reading fails. Outside a guest they are skipped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mosbench import cpulist
from mosbench.guest.inside import GUEST_STORE, machine_state, sweeps
from mosbench.machine import placement, topology
from mosbench.store.db import Store

SHARE = os.environ.get("MOSBENCH_GUEST_SHARE")
pytestmark = pytest.mark.skipif(not SHARE, reason="runs inside a mosbench vm guest only (make test-manycore)")


@pytest.fixture(scope="module")
def shape() -> tuple[int, int, int, int]:
    sockets, cores, threads = (int(x) for x in os.environ["MOSBENCH_GUEST_SHAPE"].split("x"))
    return sockets, cores, threads, int(os.environ["MOSBENCH_GUEST_NODES"])


@pytest.fixture(scope="module")
def store() -> Store:
    return Store(str(GUEST_STORE))


@pytest.fixture(scope="module")
def runs(store) -> list[dict]:
    found = store.list_runs()
    assert found, "the suite's sweeps stored no run"
    return found


def qemu_cpu(shape, socket: int, core: int, thread: int) -> int:
    _, cores, threads, _ = shape
    return (socket * cores + core) * threads + thread


def expected_order(shape, how: str) -> list[int]:
    sockets, cores, threads, _ = shape
    if how == "pack":
        return [qemu_cpu(shape, s, c, t) for t in range(threads) for s in range(sockets) for c in range(cores)]
    return [qemu_cpu(shape, s, c, t) for t in range(threads) for c in range(cores) for s in range(sockets)]


def test_the_detected_topology_is_the_requested_one(shape):
    sockets, cores, threads, nodes = shape
    topo = topology.read()
    assert (topo.sockets, topo.physical_cores, topo.smt, topo.nodes, len(topo.cpus)) == \
        (sockets, sockets * cores, threads, nodes, sockets * cores * threads)
    assert topo.l3_domains == sockets  # QEMU shares an L3 per socket
    for s in range(sockets):
        for c in range(cores):
            for t in range(threads):
                cpu = topo.by_id(qemu_cpu(shape, s, c, t))
                assert (cpu.thread, cpu.node) == (t, s * nodes // sockets), cpu
    assert len({(c.socket, c.core) for c in topo.cpus}) == sockets * cores


def test_the_default_series_has_every_boundary(shape):
    sockets, cores, threads, _ = shape
    topo = topology.read()
    pack = placement.default_series(topo, "pack")
    spread = placement.default_series(topo, "spread")
    physical, every = sockets * cores, sockets * cores * threads
    # pack: one L3 domain (a socket here) full, then each further socket full; spread: every socket in use
    assert {1, cores, physical, every} | {cores * s for s in range(1, sockets + 1)} <= set(pack), pack
    assert {1, sockets, physical, every} <= set(spread), spread


@pytest.mark.parametrize("how", placement.PLACEMENTS)
def test_placement_orders_the_cpus_as_the_topology_says(shape, how):
    assert placement.order(topology.read(), how) == expected_order(shape, how)


def test_every_point_ran_on_its_expected_cpus_and_only_there(shape, store, runs):
    checked = 0
    for run in runs:
        plan = run["plan"]
        for p in store.points(run["id"]):
            assert p["status"] == "ok", f"run {run['id']} {p['workload']}/{p['test']} at {p['cores']}: {p['reason']}"
            cpus = cpulist.parse(p["cpus"])
            assert cpus == sorted(expected_order(shape, plan["placement"])[: p["cores"]]), (run["id"], p["cores"])
            if p["workload"] != "micro":
                continue  # servers share their CPUs with a client; micro's tasks alone keep every CPU busy
            busy = {int(k): v for k, v in p["metrics"]["cpu_busy_s"].items()}
            inside = sum(busy.get(c, 0.0) for c in cpus)
            outside = {c: v for c, v in busy.items() if c not in cpus}
            idle = [c for c in cpus if busy.get(c, 0.0) <= 0]
            assert not idle, f"{p['test']} at {p['cores']}: CPUs {idle} of the point did no work"
            where = f"{p['test']} at {p['cores']} ({plan['isolation']}, {plan['placement']}): {inside:.2f} s busy " \
                    f"on its CPUs, elsewhere {outside}"
            # Busy time is tick-counted, and under emulation the harness's own single-threaded processes
            # (its guardian starting up) can keep one other vCPU busy for a whole short window; with
            # four cores or more the point's tasks must outweigh everything else twice over.
            if len(cpus) >= 4:
                assert sum(outside.values()) <= inside / 2, where
            else:
                assert min(busy.get(c, 0.0) for c in cpus) > max(outside.values(), default=0.0), where
            checked += 1
    assert checked


def test_hotplug_runs_took_cpus_offline_and_brought_every_one_back(shape, store, runs):
    suite = sweeps(os.environ["MOSBENCH_GUEST_SUITE"], int(os.environ["MOSBENCH_GUEST_CGROUP"]))
    if not any(s.isolation == "hotplug" for s in suite):
        pytest.skip("this suite takes no CPU offline (hotplug does not depend on the cgroup version)")
    every = shape[0] * shape[1] * shape[2]
    assert cpulist.parse(Path("/sys/devices/system/cpu/online").read_text()) == list(range(every))
    hotplugged = [p for r in runs if r["plan"]["isolation"] == "hotplug" for p in store.points(r["id"])]
    assert any(p["cores"] < every for p in hotplugged), "the suite has no hotplug point with CPUs to take offline"
    for p in hotplugged:
        online = {int(k) for k in p["metrics"]["cpu_busy_s"]}
        assert online <= set(cpulist.parse(p["cpus"])) | {0}, \
            f"CPUs outside the point were online during a hotplug window: {sorted(online)}"


def test_nothing_is_left_behind():
    before = json.loads((Path(SHARE or "") / "before.json").read_text())
    now = machine_state()
    assert now["mounts"] == before["mounts"]
    assert now["cgroups"] == before["cgroups"]
    assert now["netns"] == before["netns"]
    assert now["online"] == before["online"]
    ours = {str(os.getpid()), str(os.getppid())}
    left = {pid: comm for pid, comm in now["procs"].items()
            if pid not in before["procs"] and pid not in ours and _user_process(pid)}
    assert not left, f"processes left by the sweeps: {left}"


def _user_process(pid: str) -> bool:
    """Kernel threads (no command line) come and go on their own."""
    try:
        return bool(Path(f"/proc/{pid}/cmdline").read_bytes())
    except OSError:
        return False
