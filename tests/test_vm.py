"""The many-core guest's host side without booting one: its shape, QEMU's command line, the kernel it
picks, the import of its runs and the report's word on them. (tests/test_manycore.py boots one.)"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from mosbench.errors import UserError
from mosbench.guest import host as vm
from mosbench.guest import inside as vmguest
from mosbench.launch.processes import exit_status, fork_call
from mosbench.machine import accounting, journal, placement
from mosbench.machine.isolation import ISOLATIONS
from mosbench.report import html
from mosbench.run import plan
from mosbench.store.db import Store
from mosbench.workloads import registry
from tests.conftest import needs_root


def test_the_default_shape_is_the_issue_s_64_vcpu_machine():
    s = vm.parse_shape("4x8x2")
    assert (s.vcpus, s.nodes, s.memory_mb) == (64, 4, 8192)
    assert s.smp() == "64,sockets=4,cores=8,threads=2"
    assert s.node_cpus() == [(0, 15), (16, 31), (32, 47), (48, 63)]


def test_a_node_holds_whole_sockets_and_memory_splits_evenly():
    s = vm.parse_shape("2x120x1", nodes=1)
    assert s.node_cpus() == [(0, 239)] and s.memory_mb == 240 * 128
    s = vm.parse_shape("4x6x2", nodes=2, memory_mb=3001)
    assert s.node_cpus() == [(0, 23), (24, 47)] and s.memory_mb == 3000


@pytest.mark.parametrize("spec,nodes,memory,said", [
    ("64", None, None, "SOCKETSxCORESxTHREADS"),
    ("4x0x2", None, None, "at least 1"),
    ("4x8x2", 3, None, "do not divide"),
    ("2x128x2", None, None, "at most 255"),
    ("4x8x2", None, 1024, "too little"),
])
def test_bad_shapes_are_refused_with_one_line(spec, nodes, memory, said):
    with pytest.raises(UserError, match=said):
        vm.parse_shape(spec, nodes, memory)


def test_the_command_line_asks_for_the_topology_numa_and_cgroup_layout(tmp_path):
    s = vm.parse_shape("4x8x2")
    argv = vm.command(s, tmp_path / "vmlinuz", tmp_path, "true", cgroup_version=1, kvm=False,
                      vng=tmp_path / "vng")
    joined = " ".join(argv)
    assert "--cpus 64,sockets=4,cores=8,threads=2" in joined and "--memory 8192M" in joined
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--numa"] == [
        "2048M,cpus=0-15", "2048M,cpus=16-31", "2048M,cpus=32-47", "2048M,cpus=48-63"]
    assert "--disable-kvm" in argv and f"--qemu-opts=-cpu {vm.CPU_MODEL}" in argv
    assert "--qemu-opts=-accel tcg,thread=single" in argv
    assert "SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE=1" in argv
    assert argv[-2:] == ["--exec", "true"]
    v2 = vm.command(vm.parse_shape("1x2x1"), tmp_path / "k", tmp_path, "true", 2, kvm=True, vng=tmp_path / "vng")
    for emulation_or_v1 in ("--disable-kvm", "--qemu-opts=-accel tcg,thread=single", "--numa",
                            "SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE=1"):
        assert emulation_or_v1 not in v2


def test_the_kernel_picked_is_one_with_9p(tmp_path):
    boot, modules = tmp_path / "boot", tmp_path / "modules"
    boot.mkdir()
    (boot / "vmlinuz-6.1.0-cloud-amd64").write_text("")
    with pytest.raises(UserError, match="9p"):
        vm.find_kernel(boot, modules)
    (boot / "vmlinuz-6.1.0-56-amd64").write_text("")
    (modules / "6.1.0-56-amd64/kernel/fs/9p").mkdir(parents=True)
    (modules / "6.1.0-56-amd64/kernel/fs/9p/9p.ko.xz").write_text("")
    assert vm.find_kernel(boot, modules).name == "vmlinuz-6.1.0-56-amd64"


def test_a_guest_s_runs_are_copied_whole_with_where_they_ran(tmp_path):
    guest = Store(str(tmp_path / "guest.sqlite"))
    run_id = guest.create_run({"placement": "spread"}, {"hostname": "virtme-ng"}, "mosbench run x", "g")
    guest.add_point(run_id, workload="micro", test="getppid1", variant="procs", cores=64, trial=1, status="ok",
                    started_at=guest.run(run_id)["started_at"], cpus="0-63", work=5.0,
                    metrics={"cpu_busy_s": {"3": 0.5}}, logs="log text", profile={"stacks": {}})
    guest.finish_run(run_id, "complete")
    host = Store(str(tmp_path / "host.sqlite"))
    host.create_run({}, {}, "an earlier run")
    new = host.import_run(guest, run_id, virtual_machine={"vcpus": 64})
    assert new == 2
    r = host.run(new)
    assert (r["label"], r["status"], r["environment"]["hostname"]) == ("g", "complete", "virtme-ng")
    assert r["environment"]["virtual_machine"] == {"vcpus": 64}
    (p,) = host.points(new, with_logs=True, with_profiles=True)
    assert (p["cpus"], p["metrics"], p["logs"], p["profile"]) == ("0-63", {"cpu_busy_s": {"3": 0.5}}, "log text",
                                                                  {"stacks": {}})


def test_a_report_of_a_guest_run_says_its_throughput_is_no_performance_figure(tmp_path):
    db = Store(str(tmp_path / "s.sqlite"))
    env = {"hostname": "guest", "topology": {"cpus": []}, "topology_summary": "64 CPUs",
           "virtual_machine": {"vcpus": 64, "host_cpus": 2, "accelerator": "tcg", "overcommitted": True}}
    guest_run = db.create_run({"placement": "pack", "isolation": "cgroup", "params": {}}, env, "mosbench vm")
    plain_run = db.create_run({"placement": "pack", "isolation": "cgroup", "params": {}},
                              {"hostname": "h", "topology": {"cpus": []}}, "mosbench run")
    out = tmp_path / "r.html"
    html.write(db, [str(guest_run)], out)
    assert "64 vCPUs on 2\nhost CPUs (TCG): its throughput is not a performance figure" in out.read_text()
    html.write(db, [str(plain_run)], out)
    assert "not a performance figure" not in out.read_text()


def test_busy_by_cpu_counts_every_cpu_online_at_both_ends():
    before = accounting.parse_proc_stat("cpu0 100 0 50 1000 0 0 0 0\ncpu1 10 0 0 900 0 0 0 0\n"
                                        "cpu2 5 0 0 5 0 0 0 0\n", hz=100)
    after = accounting.parse_proc_stat("cpu0 150 0 60 1040 0 0 0 0\ncpu1 10 0 0 1000 0 0 0 0\n"
                                       "cpu3 1 0 0 1 0 0 0 0\n", hz=100)
    assert accounting.busy_by_cpu(before, after) == {"0": 0.6}


@needs_root
def test_a_guest_past_its_time_is_killed_with_everything_it_started(tmp_path, monkeypatch):
    """A stand-in for vng that starts a child (as vng starts QEMU) and never ends: the timeout kills
    both, what the share holds is still offered to keep, then the share, the cgroup and the journal go."""
    fake = tmp_path / "vng"
    pids = tmp_path / "pids"
    fake.write_text(f"#!/bin/sh\necho booting\nsleep 300 &\necho $$ $! > {pids}\nwait\n")
    fake.chmod(0o755)
    monkeypatch.setattr(vm, "find_vng", lambda: fake)
    guest = vm.Guest(vm.parse_shape("1x2x1"), 2, kernel=tmp_path / "vmlinuz")
    lines: list[str] = []
    kept: list[Path] = []
    result = guest.run(lambda share: f"ls {share}", 3.0, lambda line, _t: lines.append(line), kept.append)
    assert result.timed_out and lines == ["booting"] and kept == [result.share]
    for pid in pids.read_text().split():
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    assert not result.share.exists()
    assert not [d for d in Path("/sys/fs/cgroup").rglob(f"mosbench-{os.getpid()}") if d.is_dir()]
    assert not list(journal.state_dir().glob(f"run-{os.getpid()}.json"))


@pytest.mark.parametrize("suite", sorted(vmguest.SUITES))
@pytest.mark.parametrize("cgroup", [1, 2])
def test_every_sweep_of_a_guest_suite_is_a_plan_mosbench_accepts(suite, cgroup):
    for sweep in vmguest.sweeps(suite, cgroup):
        selections = [(w, t) for name in sweep.selections
                      for w, _, t in [name.partition("/")]
                      for t in ([t] if t else [x.name for x in registry.get(w).tests()])]
        args, params, variants = list(sweep.args), [], None
        while args:
            flag, value = args.pop(0), args.pop(0)
            if flag == "-p":
                params.append(value)
            elif flag == "--variant":
                variants = [value]
        plan.resolve_params(selections, params)
        plan.resolve_variants(selections, variants)
        assert sweep.isolation in ISOLATIONS and sweep.placement in placement.PLACEMENTS


def test_a_guest_step_runs_forked_with_the_command_lines_exit_status(tmp_path):
    # The suite's steps run forked from the process that imported mosbench once (an emulated start costs
    # a minute): each must still end with the status `mosbench ARGS` would have, and see no stdin.
    # (What they print goes wherever this process's streams went first: under pytest, not to the fds.)
    store = tmp_path / "s.sqlite"
    assert exit_status(fork_call(vmguest.mosbench_command(["list", "micro"]))) == 0
    assert exit_status(fork_call(vmguest.mosbench_command(["show", "1", "--store", str(store)]))) == 2
    assert not store.exists()
    export = vmguest.mosbench_command(["export", "--store", str(store), "--format", "json"])
    assert exit_status(fork_call(export)) == 2
    assert exit_status(fork_call(lambda: len(os.read(0, 1)))) == 0

    def raises() -> int:
        raise RuntimeError("a step's own bug")
    assert exit_status(fork_call(raises)) == 1
    assert exit_status(fork_call(lambda: os.kill(os.getpid(), signal.SIGKILL))) == -signal.SIGKILL


def test_guests_of_both_cgroup_versions_run_side_by_side_and_land_in_one_store(tmp_path, monkeypatch, capfd):
    # Emulated, a guest runs on one host thread: two guests (cgroup v2 and v1) boot at once, each from a
    # child process (its own journal, cgroups and guardian); their runs land in the caller's store.
    barrier = tmp_path / "barrier"
    barrier.mkdir()

    def fake_run_vm(db, guest, shape_spec, run_args, suite, timeout_s, on_line):
        (barrier / str(guest.cgroup_version)).touch()
        deadline = time.monotonic() + 20
        while len(list(barrier.iterdir())) < 2:  # the other guest started too: they run at once
            assert time.monotonic() < deadline, "the guests ran one after the other"
            time.sleep(0.01)
        run_id = db.create_run({"placement": "pack", "isolation": "cgroup", "params": {}},
                               {"cgroup": guest.cgroup_version}, "mosbench run")
        if guest.cgroup_version == 1 and suite == "broken":
            raise RuntimeError("QEMU would not start")
        on_line("booted", 1.0)
        return vm.SuiteRun(vm.GuestResult(0, 2.0, tmp_path, False),
                           [{"name": "checks", "returncode": 0, "seconds": 1.0}], [run_id])

    monkeypatch.setattr(vm, "run_vm", fake_run_vm)
    guests = [vm.Guest(vm.parse_shape("1x2x1"), v, kernel=tmp_path / "vmlinuz") for v in (2, 1)]
    for g in guests:
        g.kvm = False
    assert vm.side_by_side(guests)
    db = Store(str(tmp_path / "s.sqlite"))
    db.create_run({"placement": "pack", "isolation": "cgroup", "params": {}}, {}, "an earlier run")
    done = vm.run_vms(db, guests, "1x2x1", None, "ci", 60, lambda line, t: print(line, flush=True))
    assert [d.imported for d in done] == [[2], [3]] and all(d.passed("ci") for d in done)
    assert [db.run(i)["environment"]["cgroup"] for i in (2, 3)] == [2, 1]
    assert {"v2 booted", "v1 booted"} <= set(capfd.readouterr().out.splitlines())
    for f in barrier.iterdir():
        f.unlink()
    with pytest.raises(UserError, match="the cgroup v1 guest failed: RuntimeError: QEMU would not start"):
        vm.run_vms(db, guests, "1x2x1", None, "broken", 60, lambda line, t: None)
    assert len(db.list_runs()) == 5  # what the failed guest had measured is kept, as is the other's
    assert not list(Path("/var/tmp").glob("mosbench-runvms-*"))
    assert not list(journal.state_dir().glob(f"run-{os.getpid()}.json"))
