"""A many-core guest on a small machine: this machine's own userland booted under QEMU with a chosen
topology, so the code paths only a big machine takes (4 sockets in sysfs, 64-CPU cpusets, hotplug of
60 CPUs, 64 servers on 64 ports) run for real. The guest proves paths, never performance.

virtme-ng boots the installed Debian kernel with the host's root shared read-only over 9p (writes go
to overlays in guest memory) and one host directory shared read-write for results. KVM is used where
it boots this many vCPUs; on these machines it does not (nested KVM stops at 2 vCPUs), so QEMU's own
emulation (TCG) runs it: every vCPU a host thread, far more vCPUs than host CPUs.

The QEMU process tree runs in a cgroup of the run's journal, so a killed harness leaves no QEMU behind
(the guardian kills the group); there is no tap device (no network) and no host mount (9p is served by
QEMU itself, guest memory is memfd).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosbench import cpulist
from mosbench.errors import UserError
from mosbench.guest.kernels import Kernel
from mosbench.launch.processes import exit_status, fork_call
from mosbench.machine import guardian
from mosbench.machine.isolation import Isolator, detect_cgroups
from mosbench.machine.journal import GUEST_SHARE_PREFIX, SCRATCH_PREFIX, Journal
from mosbench.store.db import Store

# An Intel model: the guest sees SMT siblings only through Intel's topology leaf, because AMD's needs
# topoext, which TCG does not offer. Nehalem also has no SVM/VMX, so the guest's udev loads no KVM
# module, whose per-CPU start-up took 68 s of a 16-vCPU boot under emulation.
CPU_MODEL = "Nehalem"
MAX_VCPUS = 255  # xAPIC ids; more needs x2APIC and interrupt remapping (docs/MANYCORE.md)


@dataclass(frozen=True)
class Shape:
    sockets: int
    cores: int  # per socket
    threads: int  # per core
    nodes: int
    memory_mb: int

    @property
    def vcpus(self) -> int:
        return self.sockets * self.cores * self.threads

    def describe(self) -> str:
        return (f"{self.vcpus} vCPUs: {self.sockets} socket(s) × {self.cores} cores × {self.threads} thread(s), "
                f"{self.nodes} NUMA node(s), {self.memory_mb} MiB")

    def smp(self) -> str:
        return f"{self.vcpus},sockets={self.sockets},cores={self.cores},threads={self.threads}"

    def spec(self) -> str:
        """As --shape takes it: SOCKETSxCORESxTHREADS."""
        return f"{self.sockets}x{self.cores}x{self.threads}"

    def node_cpus(self) -> list[tuple[int, int]]:
        """First and last vCPU of each node. QEMU numbers vCPUs socket by socket (then core, then
        thread), so equal contiguous ranges put whole sockets in a node."""
        per = self.vcpus // self.nodes
        return [(n * per, (n + 1) * per - 1) for n in range(self.nodes)]

    def to_json(self) -> dict[str, int]:
        return {"sockets": self.sockets, "cores": self.cores, "threads": self.threads, "nodes": self.nodes,
                "memory_mb": self.memory_mb}


_SHAPE = re.compile(r"^(\d+)x(\d+)x(\d+)$")


def parse_shape(spec: str, nodes: int | None = None, memory_mb: int | None = None) -> Shape:
    """"4x8x2" is 4 sockets of 8 cores of 2 threads; a node per socket and 128 MiB a vCPU (at least
    2 GiB) unless told."""
    m = _SHAPE.match(spec.strip())
    if not m:
        raise UserError(f"bad guest topology {spec!r}: expected SOCKETSxCORESxTHREADS, e.g. 4x8x2")
    sockets, cores, threads = (int(g) for g in m.groups())
    if min(sockets, cores, threads) < 1:
        raise UserError(f"bad guest topology {spec!r}: every count must be at least 1")
    vcpus = sockets * cores * threads
    if vcpus > MAX_VCPUS:
        raise UserError(f"guest topology {spec!r} has {vcpus} vCPUs; at most {MAX_VCPUS} are supported")
    nodes = sockets if nodes is None else nodes
    if nodes < 1 or sockets % nodes:
        raise UserError(f"{nodes} NUMA node(s) do not divide {sockets} socket(s) evenly")
    memory_mb = memory_mb if memory_mb is not None else max(2048, 128 * vcpus)
    memory_mb -= memory_mb % nodes  # QEMU wants the nodes' sizes to add up to the total exactly
    if memory_mb < 512 * nodes:
        raise UserError(f"{memory_mb} MiB is too little for a guest ({512 * nodes} MiB at least)")
    return Shape(sockets, cores, threads, nodes, memory_mb)


def find_kernel(boot: Path = Path("/boot"), modules: Path = Path("/lib/modules")) -> Path:
    """The newest installed kernel image whose modules include 9p (the guest's root filesystem).
    Debian's cloud kernel lacks it; the generic one (linux-image-amd64) has it."""
    found = []
    for image in boot.glob("vmlinuz-*"):
        release = image.name.removeprefix("vmlinuz-")
        if any((modules / release / "kernel/fs/9p").glob("9p.ko*")):
            found.append((image.stat().st_mtime, image))
    if not found:
        raise UserError("no installed kernel has the 9p module the guest's root needs "
                        "(apt-get install linux-image-amd64, or run scripts/install-manycore)")
    return max(found)[1]


def find_vng() -> Path:
    vng = Path(sys.executable).parent / "vng"
    if vng.exists():
        return vng
    found = shutil.which("vng")
    if found:
        return Path(found)
    raise UserError("virtme-ng's vng is not installed (it is in requirements.lock: run make deps)")


def missing_tools() -> list[str]:
    """What a guest run needs that this machine lacks, as install hints; empty when it can boot one."""
    missing = []
    if not shutil.which("qemu-system-x86_64"):
        missing.append("qemu-system-x86 (Debian package)")
    if not shutil.which("busybox"):
        missing.append("busybox-static (Debian package)")
    for need in (find_kernel, find_vng):
        try:
            need()
        except UserError as e:
            missing.append(str(e))
    return missing


# Set by the commands that boot guests themselves (one label per boot, the guest's own store).
GUEST_OWNS = ("--store", "--resume", "--label", "--no-wait", "--commit")


def refuse_owned_options(run_args: tuple[str, ...]) -> None:
    """A guest's `mosbench run` options may not set what each guest's run sets for itself."""
    for a in run_args:
        if a.split("=")[0] in GUEST_OWNS:
            raise UserError(f"{a.split('=')[0]} is set by mosbench for each guest's run; leave it out")


def require_tools() -> None:
    """Refuses, saying what to install, where this machine cannot boot a guest."""
    if missing := missing_tools():
        raise UserError("cannot boot a guest: missing " + "; ".join(missing))


def host_sized_shape(spec: str | None) -> Shape:
    """A/B and bisection guests: as many vCPUs as this machine has CPUs unless told (one socket), so
    under KVM every vCPU has a host CPU of its own."""
    return parse_shape(spec or f"1x{min(len(os.sched_getaffinity(0)), MAX_VCPUS)}x1")


def timeout_s(suite: str | None, minutes: float | None) -> float:
    """How long `mosbench vm`'s guest may take before it is stopped: `minutes` where given, else 240 min
    for the full suite and 20 for the ci suite or a selection."""
    return 60 * (minutes or (240 if suite == "full" else 20))


def kvm_boots() -> bool:
    """Whether to ask for KVM. Where /dev/kvm is missing or the CPU has no virtualization flags (a
    nested guest whose hypervisor hides them), QEMU stops on "failed to set MSR 0x10a" with QEMU's
    default CPU model and hangs with others, at any vCPU count: emulate instead."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    with contextlib.suppress(OSError):
        return bool(re.search(r"\b(vmx|svm)\b", Path("/proc/cpuinfo").read_text()))
    return False


def command(shape: Shape, kernel: Path, share: Path, guest_command: str, cgroup_version: int,
            kvm: bool, vng: Path | None = None, pin: list[int] | None = None) -> list[str]:
    argv = [str(vng or find_vng()), "--run", str(kernel), "--cpus", shape.smp(),
            # "=": argparse would read a lone "-cpu …" as an option of vng's own
            "--memory", f"{shape.memory_mb}M", f"--qemu-opts=-cpu {CPU_MODEL}",
            # The share at its host path: the guest's root is read-only, /var/tmp an overlay that takes a mountpoint.
            "--rwdir", str(share), "--name", "mosbench-guest", "--force-9p"]
    if not kvm:
        # One host thread runs the vCPUs in turn. With a thread per vCPU (QEMU's default), 64 threads on
        # 2 host CPUs let a vCPU spinning on a guest lock starve the one holding it: a hotplug point
        # stalled for minutes that way. In turn, every vCPU gets its slice.
        argv += ["--disable-kvm", "--qemu-opts=-accel tcg,thread=single"]
    elif pin:
        argv += ["--pin", ",".join(map(str, pin))]
    per_node = shape.memory_mb // shape.nodes
    if shape.nodes > 1:
        for first, last in shape.node_cpus():
            argv += ["--numa", f"{per_node}M,cpus={first}-{last}"]
    if cgroup_version == 1:
        # virtme-ng's init mounts the v1 layout (as systemd's legacy mode) when the command line says so.
        argv += ["--append", "SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE=1"]
    return [*argv, "--exec", guest_command]


@dataclass
class GuestResult:
    returncode: int
    elapsed_s: float
    share: Path
    timed_out: bool


class Guest:
    """One boot: a scratch share directory, QEMU in a journaled cgroup, output streamed line by line."""

    def __init__(self, shape: Shape, cgroup_version: int, kernel: Path | Kernel | None = None):
        self.shape = shape
        self.cgroup_version = cgroup_version
        self.kernel_info = kernel if isinstance(kernel, Kernel) else None
        self.kernel = kernel.image if isinstance(kernel, Kernel) else kernel or find_kernel()
        self.kvm = kvm_boots()
        host_cpus = sorted(os.sched_getaffinity(0))
        # Under KVM each vCPU thread is pinned to a host CPU of its own (the same for every boot, so two
        # kernels compared see the same placement); emulation runs every vCPU on one thread (below).
        self.pinned = host_cpus[:shape.vcpus] if self.kvm and shape.vcpus <= len(host_cpus) else None

    def shape_spec(self) -> str:
        return self.shape.spec()

    def pinning(self) -> str:
        if self.pinned:
            return "vCPU i on host CPU " + ",".join(map(str, self.pinned)) + "[i]"
        return "one emulation thread on host CPUs " + cpulist.format(tuple(sorted(os.sched_getaffinity(0))))

    def run(self, guest_command: Callable[[Path], str], timeout_s: float, on_line: Callable[[str, float], None],
            keep: Callable[[Path], None]) -> GuestResult:
        """Boots, runs guest_command(share) (the share is at the same path in the guest), calls keep(share)
        before the share is removed; whatever happens, no QEMU, cgroup or scratch is left."""
        journal = Journal()
        watcher = guardian.start(journal.path)
        share = Path(tempfile.mkdtemp(prefix=GUEST_SHARE_PREFIX, dir="/var/tmp"))
        journal.add_dir(share)
        os.chmod(share, 0o755)
        isolator = Isolator("cgroup", journal) if detect_cgroups() else Isolator("affinity", journal)
        group = isolator.group("guest", tuple(sorted(os.sched_getaffinity(0))))
        argv = command(self.shape, self.kernel, share, guest_command(share), self.cgroup_version, self.kvm,
                       pin=self.pinned)
        start = time.monotonic()
        proc = None
        timed_out = False
        try:
            # vng runs its helpers (virtme-run, virtme-ng-init) by name: they sit beside it.
            env = {**os.environ, "PATH": f"{Path(argv[0]).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env=env, preexec_fn=group.join, start_new_session=True,
                                    cwd=Path(__file__).resolve().parents[2])
            journal.add_proc(proc.pid)
            timed_out = self._stream(proc, start, timeout_s, on_line)
            returncode = proc.wait()
            keep(share)
            return GuestResult(returncode, time.monotonic() - start, share, timed_out)
        finally:
            if proc is not None and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if proc is not None:
                journal.remove_proc(proc.pid)
            isolator.release(group)  # kills QEMU if vng left it behind
            isolator.close()
            shutil.rmtree(share, ignore_errors=True)
            journal.remove_dir(share)
            if journal.is_clean():
                journal.close()
                guardian.stop(watcher)

    @staticmethod
    def _stream(proc: subprocess.Popen, start: float, timeout_s: float,
                on_line: Callable[[str, float], None]) -> bool:
        """Passes the guest's output on as it comes; kills the guest past timeout_s. True if it did."""
        assert proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buf = b""
        while True:
            left = timeout_s - (time.monotonic() - start)
            if left <= 0:
                os.killpg(proc.pid, signal.SIGKILL)
                return True
            if not sel.select(timeout=min(left, 5.0)):
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                on_line(line.decode(errors="replace").rstrip("\r"), time.monotonic() - start)
        if buf:
            on_line(buf.decode(errors="replace"), time.monotonic() - start)
        return False


def environment_facts(shape: Shape, guest: Guest, cgroup_version: int, host_cpus: int) -> dict:
    """What a run made in a guest carries in its environment: the report reads `overcommitted` and says
    that its throughput is not a performance figure (every emulated run is marked so too)."""
    facts = {
        "shape": shape.to_json(), "vcpus": shape.vcpus, "cpu_model": CPU_MODEL,
        "accelerator": "kvm" if guest.kvm else "tcg", "cgroup_version": cgroup_version,
        "kernel_image": str(guest.kernel), "host_cpus": host_cpus,
        "overcommitted": shape.vcpus > host_cpus or not guest.kvm, "vcpu_pinning": guest.pinning(),
    }
    if guest.kernel_info is not None:
        facts.update(guest.kernel_info.facts())
    return facts


@dataclass
class SuiteRun:
    result: GuestResult
    steps: list[dict[str, Any]]  # the guest's outcome.json: each step's name, returncode and seconds
    imported: list[int]  # the guest's runs, as this store's ids

    def passed(self, suite: str | None) -> bool:
        """Every step succeeded and a suite reached its last step, the checks (a guest that ended early
        has none after the one it was in)."""
        return not any(s["returncode"] for s in self.steps) and not (
            suite and (not self.steps or self.steps[-1]["name"] != "checks"))


def run_vm(db: Store, guest: Guest, shape_spec: str, run_args: list[str] | None, suite: str | None,
           timeout_s: float, on_line: Callable[[str, float], None]) -> SuiteRun:
    """`mosbench vm`: one run of `run_args`, labelled with the guest's kernel, or else the suite."""
    if run_args is not None:
        kernel = guest.kernel_info.release if guest.kernel_info else guest.kernel.name
        return run_selection(db, guest, run_args, f"vm {kernel}", timeout_s, on_line)
    assert suite is not None
    return run_suite(db, guest, shape_spec, suite, timeout_s, on_line)


def side_by_side(guests: list[Guest]) -> bool:
    """Whether these guests can boot at once without slowing each other: emulated, each runs its vCPUs on
    one host thread (thread=single), so as many as this machine has CPUs fit; under KVM every vCPU wants
    a host CPU of its own, so they take turns."""
    return len(guests) > 1 and not any(g.kvm for g in guests) and len(guests) <= len(os.sched_getaffinity(0))


def run_vms(db: Store, guests: list[Guest], shape_spec: str, run_args: list[str] | None, suite: str | None,
            timeout_s: float, on_line: Callable[[str, float], None]) -> list[SuiteRun]:
    """run_vm in each guest (the same suite under each cgroup version): side by side where they fit
    (side_by_side), each booted by a child process of its own, else one after the other. Each guest's
    lines are marked with its cgroup version; its runs land in db as if it had been booted alone."""
    if len(guests) == 1:
        return [run_vm(db, guests[0], shape_spec, run_args, suite, timeout_s, on_line)]
    if not side_by_side(guests):
        return [run_vm(db, g, shape_spec, run_args, suite, timeout_s, _marked(on_line, g)) for g in guests]
    journal = Journal()
    watcher = guardian.start(journal.path)
    results = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}vms-", dir="/var/tmp"))
    journal.add_dir(results)
    children: list[int] = []
    try:
        for n, g in enumerate(guests):
            pid = fork_call(_booting(g, results / str(n), shape_spec, run_args, suite, timeout_s, on_line))
            children.append(pid)
            journal.add_proc(pid)  # should we be killed, the guardian ends them and theirs their guests
        for pid in list(children):
            exit_status(pid)
            children.remove(pid)
            journal.remove_proc(pid)
        done: list[SuiteRun] = []
        failures: list[str] = []
        for n, g in enumerate(guests):
            # Every guest's runs are kept, those of one that failed part-way too.
            imported: list[int] = []
            if (results / f"{n}.sqlite").exists():
                own = Store(str(results / f"{n}.sqlite"))
                imported = [db.import_run(own, r["id"]) for r in sorted(own.list_runs(), key=lambda r: r["id"])]
                own.engine.dispose()
            outcome = results / f"{n}.json"
            if not outcome.exists():
                error = results / f"{n}.error"
                failures.append(f"the cgroup v{g.cgroup_version} guest failed: "
                                f"{error.read_text() if error.exists() else 'its process died'}")
                continue
            got = json.loads(outcome.read_text())
            done.append(SuiteRun(GuestResult(got["returncode"], got["seconds"], results, got["timed_out"]),
                                 got["steps"], imported))
        if failures:
            raise UserError("; ".join(failures))
        return done
    except KeyboardInterrupt:
        raise  # a terminal's Ctrl-C reached each child too, and each stops its own guest
    except BaseException:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)  # an interrupt lets each child stop its guest
        raise
    finally:
        for pid in children:
            with contextlib.suppress(ChildProcessError):
                exit_status(pid)
            journal.remove_proc(pid)
        shutil.rmtree(results, ignore_errors=True)
        journal.remove_dir(results)
        if journal.is_clean():
            journal.close()
            guardian.stop(watcher)


def _booting(guest: Guest, results: Path, shape_spec: str, run_args: list[str] | None, suite: str | None,
             timeout_s: float, on_line: Callable[[str, float], None]) -> Callable[[], int]:
    """run_vm of one guest, to be called in a child of run_vms: its runs in results.sqlite, its outcome in
    results.json, or why it failed in results.error (the parent says it)."""
    def call() -> int:
        try:
            own = Store(str(results.with_suffix(".sqlite")))
            did = run_vm(own, guest, shape_spec, run_args, suite, timeout_s, _marked(on_line, guest))
            results.with_suffix(".json").write_text(json.dumps({
                "returncode": did.result.returncode, "seconds": did.result.elapsed_s,
                "timed_out": did.result.timed_out, "steps": did.steps}))
            return 0
        except BaseException as e:
            with contextlib.suppress(Exception):
                results.with_suffix(".error").write_text(f"{type(e).__name__}: {e}")
            return 1
    return call


def _marked(on_line: Callable[[str, float], None], guest: Guest) -> Callable[[str, float], None]:
    return lambda line, elapsed: on_line(f"v{guest.cgroup_version} {line}", elapsed)


def run_suite(db: Store, guest: Guest, shape_spec: str, suite: str, timeout_s: float,
              on_line: Callable[[str, float], None]) -> SuiteRun:
    """Boots the guest, runs the suite inside it (mosbench.guest.inside) and copies the guest's runs into
    db, marked with where they ran."""
    return _run_inside(db, guest, ["--suite", suite, "--shape", shape_spec], timeout_s, on_line)


def run_selection(db: Store, guest: Guest, run_args: list[str], label: str, timeout_s: float,
                  on_line: Callable[[str, float], None], **facts: Any) -> SuiteRun:
    """Boots the guest and makes one `mosbench run RUN_ARGS` there (selections and sweep options), kept
    in db with where it ran and `facts` (an A/B round, a bisection step)."""
    return _run_inside(db, guest, ["--run-args", json.dumps(run_args), "--label", label,
                                   "--shape", guest.shape_spec()], timeout_s, on_line, facts)


def _run_inside(db: Store, guest: Guest, inside_args: list[str], timeout_s: float,
                on_line: Callable[[str, float], None], extra: dict[str, Any] | None = None) -> SuiteRun:
    imported: list[int] = []
    steps: list[dict[str, Any]] = []

    def keep(share: Path) -> None:
        outcome = share / "outcome.json"
        steps.extend(json.loads(outcome.read_text()).get("steps", []) if outcome.exists() else [])
        guest_store = share / "guest.sqlite"
        if not guest_store.exists():
            return
        source = Store(str(guest_store))
        facts = environment_facts(guest.shape, guest, guest.cgroup_version, len(os.sched_getaffinity(0)))
        for r in source.list_runs():
            imported.append(db.import_run(source, r["id"], virtual_machine=facts, **(extra or {})))
        source.engine.dispose()

    def guest_command(share: Path) -> str:
        return shlex.join([sys.executable, "-m", "mosbench.guest.inside", "--share", str(share), *inside_args,
                           "--nodes", str(guest.shape.nodes), "--cgroup", str(guest.cgroup_version)])

    result = guest.run(guest_command, timeout_s, on_line, keep)
    return SuiteRun(result, steps, imported)
