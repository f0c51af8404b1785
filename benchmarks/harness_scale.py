"""The harness's own cost as runs grow: `show`, `report` and `compare` over a 256-CPU machine's runs.

A user with 256 CPUs makes runs of thousands of points. This builds such runs in a temporary SQLite
store through the store's own API (Store.create_run, Store.add_point), as the sweep stores them:
several workloads' tests and variants (micro, scale, memcached, apache, exim, metis) × core counts
1..256 × 3 trials, each point with its per-second samples (per-task rates at every core), its
metrics (the busy seconds of all 256 CPUs), a log tail, and for a fifth of the points a profile
(a few thousand folded stacks with kernel frames, lock contention, hardware counts). The run's
environment is what `environment.capture` records, with the recorded 4-socket machine
(tests/fixtures/topology-4x64-smt2.json) with SMT off: 256 CPUs. A second run of the same plan on
another kernel, a few tests faster or slower, is the one `compare` sets against it.

Then each command runs as its own process (`python -m mosbench …`), ROUNDS times at each size, and
its wall time and peak resident memory (the child's ru_maxrss from wait4) are taken. The machine is
shared, so the table gives each size's median over the rounds. Growth exponents are
log(t2/t1)/log(n2/n1) between neighbouring sizes: 1 is linear, 2 quadratic.

Targets (issue 25): report under 60 s and 2 GB, show and compare under 10 s, at 5,000 points on 2 cores.
SIZES=500,1000 ROUNDS=1 KEEP=dir to try it quickly or keep the stores.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mosbench import cpulist  # noqa: E402
from mosbench.machine import environment, placement, topology  # noqa: E402
from mosbench.run import plan as planning  # noqa: E402
from mosbench.run import profiler  # noqa: E402
from mosbench.store import db as store  # noqa: E402
from mosbench.workloads import registry  # noqa: E402

SIZES = [int(n) for n in os.environ.get("SIZES", "500,1000,2000,5000").split(",")]
ROUNDS = int(os.environ.get("ROUNDS", "3"))
COMMANDS = ("show", "report", "compare")
TARGETS = {"show": (10.0, None), "report": (60.0, 2048.0), "compare": (10.0, None)}  # seconds, MB at 5,000

CPUS = 256
CORES = [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256]
TRIALS = 3
WARMUP, DURATION, INTERVAL = 2.0, 5.0, 1.0
PROFILED_SHARE = 0.2
STACKS_PER_PROFILE = (2000, 3600)
FAILED_SHARE = 0.01
RUN_KERNELS = ("6.1.0-28-amd64", "6.8.0-41-generic")


def machine() -> topology.Topology:
    """The recorded 4x64 machine with its SMT siblings offline: 4 sockets, 32 L3 domains, 256 CPUs."""
    files = json.loads((ROOT / "tests/fixtures/topology-4x64-smt2.json").read_text())
    files["sys/devices/system/cpu/online"] = f"0-{CPUS - 1}\n"
    with tempfile.TemporaryDirectory() as d:
        topo = topology.read(topology.materialize(files, Path(d)))
    assert len(topo.cpus) == CPUS
    return topo


# Folded stacks as profiler.fold writes them: "comm;outermost;…;innermost", kernel frames marked.
K = profiler.KERNEL
ENTRY = ["entry_SYSCALL_64_after_hwframe", "do_syscall_64"]
SYSCALL_PATHS: dict[str, list[list[str]]] = {
    "open": [[*ENTRY, "__x64_sys_openat", "do_sys_openat2", "do_filp_open", "path_openat", "link_path_walk",
                      "walk_component", "lookup_fast", "__d_lookup_rcu"],
             [*ENTRY, "__x64_sys_openat", "do_sys_openat2", "do_filp_open", "path_openat", "open_last_lookups",
                      "lookup_open", "d_alloc_parallel", "_raw_spin_lock", "queued_spin_lock_slowpath"],
             [*ENTRY, "__x64_sys_openat", "do_sys_openat2", "do_filp_open", "path_openat", "do_open", "vfs_open",
                      "do_dentry_open", "ext4_file_open", "dquot_file_open"],
             [*ENTRY, "__x64_sys_openat", "do_sys_openat2", "do_filp_open", "path_openat", "alloc_empty_file",
                      "init_file", "security_file_alloc", "kmem_cache_alloc", "__slab_alloc"],
             [*ENTRY, "__x64_sys_openat", "do_sys_openat2", "do_filp_open", "path_openat", "terminate_walk", "dput",
                      "lockref_put_return"],
             [*ENTRY, "__x64_sys_close", "close_fd", "_raw_spin_lock", "queued_spin_lock_slowpath"],
             [*ENTRY, "syscall_exit_to_user_mode", "exit_to_user_mode_prepare", "task_work_run", "____fput",
                      "__fput", "dput", "lockref_put_return"]],
    "fd": [[*ENTRY, "__x64_sys_dup", "alloc_fd", "_raw_spin_lock", "queued_spin_lock_slowpath"],
           [*ENTRY, "__x64_sys_dup", "fd_install", "_raw_spin_lock", "queued_spin_lock_slowpath"],
           [*ENTRY, "__x64_sys_close", "close_fd", "pick_file", "_raw_spin_lock", "queued_spin_lock_slowpath"],
           [*ENTRY, "__x64_sys_close", "close_fd", "filp_close", "fput", "task_work_add"],
           [*ENTRY, "__x64_sys_dup", "__fget_light", "__fget_files", "__rcu_read_lock"]],
    "mm": [[*ENTRY, "__x64_sys_mmap", "ksys_mmap_pgoff", "vm_mmap_pgoff", "down_write_killable",
                    "rwsem_down_write_slowpath", "rwsem_optimistic_spin", "osq_lock"],
           [*ENTRY, "__x64_sys_mmap", "ksys_mmap_pgoff", "vm_mmap_pgoff", "do_mmap", "mmap_region", "vma_merge",
                    "vma_expand", "mas_store_prealloc", "mas_wr_store_entry"],
           [*ENTRY, "__x64_sys_munmap", "__vm_munmap", "do_vmi_munmap", "do_vmi_align_munmap", "unmap_region",
                    "tlb_finish_mmu", "flush_tlb_mm_range", "native_flush_tlb_multi",
                    "smp_call_function_many_cond"],
           [*ENTRY, "__x64_sys_munmap", "__vm_munmap", "do_vmi_munmap", "do_vmi_align_munmap", "unmap_region",
                    "unmap_vmas", "unmap_page_range", "zap_pmd_range", "zap_pte_range", "page_remove_rmap"],
           ["asm_exc_page_fault", "exc_page_fault", "do_user_addr_fault", "lock_vma_under_rcu", "down_read_trylock"],
           ["asm_exc_page_fault", "exc_page_fault", "do_user_addr_fault", "handle_mm_fault", "__handle_mm_fault",
            "do_anonymous_page", "vma_alloc_folio", "alloc_pages_mpol", "__alloc_pages", "get_page_from_freelist",
            "rmqueue", "_raw_spin_lock_irqsave", "queued_spin_lock_slowpath"],
           ["asm_exc_page_fault", "exc_page_fault", "do_user_addr_fault", "handle_mm_fault", "__handle_mm_fault",
            "do_fault", "do_read_fault", "filemap_map_pages", "next_uptodate_folio", "set_pte_range",
            "folio_add_file_rmap_range"],
           ["asm_exc_page_fault", "exc_page_fault", "do_user_addr_fault", "handle_mm_fault", "__handle_mm_fault",
            "do_anonymous_page", "clear_page_erms"],
           [*ENTRY, "__x64_sys_brk", "__do_sys_brk", "do_brk_flags", "vma_merge", "mas_store_prealloc"]],
    "file": [[*ENTRY, "__x64_sys_lseek", "ksys_lseek", "ext4_llseek", "generic_file_llseek_size", "down_write",
                      "rwsem_down_write_slowpath", "schedule", "__schedule"],
             [*ENTRY, "__x64_sys_pread64", "vfs_read", "ext4_file_read_iter", "generic_file_read_iter",
                      "filemap_read", "filemap_get_pages", "filemap_get_read_batch", "xas_load"],
             [*ENTRY, "__x64_sys_pread64", "vfs_read", "ext4_file_read_iter", "generic_file_read_iter",
                      "filemap_read", "copy_page_to_iter", "_copy_to_iter", "rep_movs_alternative"],
             [*ENTRY, "__x64_sys_write", "ksys_write", "vfs_write", "ext4_buffered_write_iter", "down_write",
                      "rwsem_down_write_slowpath", "rwsem_optimistic_spin", "osq_lock"],
             [*ENTRY, "__x64_sys_write", "ksys_write", "vfs_write", "ext4_buffered_write_iter",
                      "generic_perform_write", "ext4_da_write_begin", "__filemap_get_folio", "filemap_get_entry"],
             [*ENTRY, "__x64_sys_fcntl", "do_fcntl", "fcntl_setlk", "do_lock_file_wait", "posix_lock_inode",
                      "_raw_spin_lock", "queued_spin_lock_slowpath"],
             [*ENTRY, "__x64_sys_fallocate", "vfs_fallocate", "shmem_fallocate", "shmem_get_folio_gfp",
                      "shmem_alloc_and_add_folio", "shmem_inode_acct_blocks", "percpu_counter_add_batch"],
             [*ENTRY, "__x64_sys_unlink", "do_unlinkat", "down_write", "rwsem_down_write_slowpath", "schedule"]],
    "ipc": [[*ENTRY, "__x64_sys_futex", "do_futex", "futex_wake", "futex_hash", "_raw_spin_lock",
                     "queued_spin_lock_slowpath"],
            [*ENTRY, "__x64_sys_futex", "do_futex", "futex_wait", "futex_wait_queue", "schedule", "__schedule",
                     "pick_next_task_fair", "newidle_balance", "load_balance"],
            [*ENTRY, "__x64_sys_write", "ksys_write", "vfs_write", "pipe_write", "__mutex_lock.constprop.0",
                     "mutex_spin_on_owner"],
            [*ENTRY, "__x64_sys_write", "ksys_write", "vfs_write", "pipe_write", "__wake_up_common_lock",
                     "__wake_up_common", "autoremove_wake_function", "try_to_wake_up", "ttwu_queue"],
            [*ENTRY, "__x64_sys_read", "ksys_read", "vfs_read", "pipe_read", "schedule", "__schedule",
                     "dequeue_task_fair", "update_curr"],
            [*ENTRY, "__x64_sys_sched_yield", "do_sched_yield", "schedule", "__schedule", "pick_next_task_fair",
                     "update_curr"],
            [*ENTRY, "__x64_sys_kill", "kill_pid_info", "group_send_sig_info", "do_send_sig_info",
                     "send_signal_locked", "__send_signal_locked", "__sigqueue_alloc", "inc_rlimit_get_ucounts"],
            [*ENTRY, "__x64_sys_getppid", "__task_pid_nr_ns"],
            [*ENTRY, "__x64_sys_poll", "do_sys_poll", "do_poll.constprop.0", "pipe_poll", "_raw_spin_lock_irqsave"]],
    "net": [[*ENTRY, "__x64_sys_sendto", "__sys_sendto", "sock_sendmsg", "udp_sendmsg", "udp_send_skb",
                     "ip_send_skb", "ip_finish_output2", "__dev_queue_xmit", "loopback_xmit", "__netif_rx"],
            [*ENTRY, "__x64_sys_recvfrom", "__sys_recvfrom", "sock_recvmsg", "udp_recvmsg",
                     "__skb_recv_udp", "__skb_try_recv_from_queue", "_raw_spin_lock_bh"],
            [*ENTRY, "__x64_sys_sendto", "__sys_sendto", "sock_sendmsg", "tcp_sendmsg", "tcp_sendmsg_locked",
                     "tcp_push", "__tcp_transmit_skb", "ip_queue_xmit", "__ip_queue_xmit", "ip_finish_output2",
                     "__local_bh_enable_ip", "do_softirq", "__do_softirq", "net_rx_action", "__napi_poll",
                     "process_backlog", "__netif_receive_skb_one_core", "ip_local_deliver_finish", "tcp_v4_rcv",
                     "_raw_spin_lock", "queued_spin_lock_slowpath"],
            [*ENTRY, "__x64_sys_accept4", "__sys_accept4", "do_accept", "inet_accept", "inet_csk_accept",
                     "lock_sock_nested", "_raw_spin_lock_bh"],
            [*ENTRY, "__x64_sys_epoll_wait", "do_epoll_wait", "ep_poll", "schedule_hrtimeout_range", "schedule",
                     "__schedule"],
            [*ENTRY, "__x64_sys_clone3", "__do_sys_clone3", "kernel_clone", "copy_process", "dup_mm",
                     "dup_mmap", "anon_vma_fork", "anon_vma_clone", "down_write"],
            [*ENTRY, "__x64_sys_execve", "do_execveat_common", "bprm_execve", "load_elf_binary", "begin_new_exec",
                     "exec_mmap", "mmput", "exit_mmap", "unmap_vmas"]],
}
FAMILY = {"open": "open", "unlink": "open", "dup": "fd", "close": "fd", "mmap": "mm", "page_fault": "mm",
          "brk": "mm", "malloc": "mm", "tlb_flush": "mm", "lseek": "file", "read": "file", "pread": "file",
          "write": "file", "pwrite": "file", "lock": "file", "fallocate": "file", "futex": "ipc", "pipe": "ipc",
          "sched": "ipc", "signal": "ipc", "getppid": "ipc", "poll": "ipc", "eventfd": "ipc", "context": "ipc",
          "pthread": "ipc", "posix": "ipc", "unix": "net", "tcp": "net"}
INTERRUPTS = [
    ["asm_sysvec_apic_timer_interrupt", "sysvec_apic_timer_interrupt", "__sysvec_apic_timer_interrupt",
     "hrtimer_interrupt", "__hrtimer_run_queues", "tick_sched_timer", "tick_sched_handle",
     "update_process_times", "scheduler_tick", "task_tick_fair", "update_curr"],
    ["asm_sysvec_apic_timer_interrupt", "sysvec_apic_timer_interrupt", "__sysvec_apic_timer_interrupt",
     "hrtimer_interrupt", "__hrtimer_run_queues", "tick_sched_timer", "tick_sched_handle",
     "update_process_times", "scheduler_tick", "perf_event_task_tick"],
    ["asm_sysvec_apic_timer_interrupt", "sysvec_apic_timer_interrupt", "irq_exit_rcu", "__irq_exit_rcu",
     "__do_softirq", "rcu_core", "rcu_do_batch", "kmem_cache_free", "__slab_free"],
    ["asm_sysvec_call_function", "sysvec_call_function", "__sysvec_call_function",
     "__flush_smp_call_function_queue", "flush_tlb_func", "native_flush_tlb_one_user"],
    ["asm_sysvec_reschedule_ipi", "sysvec_reschedule_ipi", "irqentry_exit_to_user_mode", "schedule", "__schedule",
     "finish_task_switch.isra.0"],
    ["asm_common_interrupt", "common_interrupt", "__common_interrupt", "handle_edge_irq", "handle_irq_event",
     "__handle_irq_event_percpu", "vring_interrupt", "vp_vring_interrupt"],
]
IDLE = ["secondary_startup_64_no_verify", "start_secondary", "cpu_startup_entry", "do_idle",
        "cpuidle_idle_call", "cpuidle_enter", "cpuidle_enter_state", "intel_idle", "mwait_idle_with_hints"]
DAEMONS = {"kworker/u512:3": ["ret_from_fork_asm", "ret_from_fork", "kthread", "worker_thread", "process_one_work",
                              "flush_to_ldisc", "receive_buf", "n_tty_receive_buf_common"],
           "ksoftirqd/17": ["ret_from_fork_asm", "ret_from_fork", "kthread", "smpboot_thread_fn", "run_ksoftirqd",
                            "__do_softirq", "rcu_core", "rcu_do_batch", "kmem_cache_free"],
           "rcu_preempt": ["ret_from_fork_asm", "ret_from_fork", "kthread", "rcu_gp_kthread", "rcu_gp_fqs_loop",
                           "force_qs_rnp", "rcu_implicit_dynticks_qs"],
           "migration/42": ["ret_from_fork_asm", "ret_from_fork", "kthread", "smpboot_thread_fn",
                            "cpu_stopper_thread", "migration_cpu_stop", "move_queued_task"],
           "perf-exec": ["ret_from_fork_asm", "ret_from_fork", "syscall_exit_to_user_mode", "exit_to_user_mode_prepare",
                         "perf_event_exec", "perf_event_enable_on_exec"]}


def _kernel(frames: list[str]) -> list[str]:
    return [f + K for f in frames]


def stack_pool(workload: str, test: str, variant: str, rng: random.Random) -> list[str]:
    """The distinct stacks a test's profiles draw from: each system-call path cut at every depth (a
    sample lands anywhere along it), some with an interrupt taken there, under the test's own user
    frames; the idle task's and the kernel threads' beside them."""
    family = next((f for prefix, f in FAMILY.items() if test.startswith(prefix)), None)
    family = family or ("net" if workload in ("memcached", "apache", "exim") else "mm")
    comm = {"micro": "mosbench-micro", "scale": "mosbench-scale", "memcached": "memcached",
            "apache": "apache2", "exim": "exim4", "metis": "mosbench-metis"}[workload]
    user = ["[unknown]", "start_thread" if variant in ("threads", "threaded", "single") else "__libc_start_call_main",
            "task_main", f"testcase_{test or workload}"]
    pool: list[str] = []
    paths = SYSCALL_PATHS[family] + rng.sample(SYSCALL_PATHS["ipc"], 2)
    for path in paths:
        # The C library's wrapper of a system call (__libc_openat), or the user function that faulted.
        caller = f"__libc_{path[2].removeprefix('__x64_sys_')}" if path[:2] == ENTRY else "memset"
        for cut in range(2, len(path) + 1):
            base = [comm, *user[:rng.randint(2, len(user))], caller, *_kernel(path[:cut])]
            pool.append(";".join(base))
            for irq in INTERRUPTS:
                for depth in range(2, len(irq) + 1):
                    pool.append(";".join(base + _kernel(irq[:depth])))
    for user_fn in ("memcpy", "memset", "malloc", "_int_free", "pthread_mutex_lock", "__lll_lock_wait",
                    f"{test or workload}_work", "hash_lookup", "counter_inc"):
        for depth in range(1, len(user) + 1):
            pool.append(";".join([comm, *user[:depth], user_fn]))
    for irq in INTERRUPTS:
        for depth in range(2, len(irq) + 1):
            pool.append(";".join(["swapper", *_kernel(IDLE[:5] + irq[:depth])]))
    pool += [";".join(["swapper", *_kernel(IDLE[:d])]) for d in range(3, len(IDLE) + 1)]
    for name, frames in DAEMONS.items():
        pool += [";".join([name, *_kernel(frames[:d])]) for d in range(3, len(frames) + 1)]
    return list(dict.fromkeys(pool))


@dataclass
class Curve:
    """How a series behaves: its one-core rate, how it loses per-core throughput, where the time goes."""

    per_core: float
    sigma: float
    kappa: float
    user_share: float
    idle_at_max: float


def curve(rng: random.Random) -> Curve:
    kind = rng.random()
    sigma, kappa = (0.0005, 0.0) if kind < 0.3 else (rng.uniform(0.002, 0.05), 0.0) if kind < 0.7 else \
        (rng.uniform(0.001, 0.01), rng.uniform(1e-5, 2e-4))
    return Curve(math.exp(rng.uniform(math.log(2e5), math.log(2e7))), sigma, kappa, rng.uniform(0.02, 0.6),
                 rng.uniform(0.0, 0.4) if rng.random() < 0.3 else 0.01)


@dataclass(frozen=True)
class Series:
    workload: str
    test: str
    variant: str


def plan_for() -> tuple[planning.Plan, list[planning.TrialKey]]:
    """A user's plan: every micro test, every scale structure and the application workloads,
    interleaved in proportion so any prefix of it has the same mix; a fifth of the points profiled."""
    groups = [[("micro", t.name) for t in registry.get("micro").tests()],
              [("scale", t.name) for t in registry.get("scale").tests()],
              [("memcached", ""), ("apache", "close"), ("exim", ""), ("metis", "invindex"), ("apache", "keepalive")]]
    placed = sorted(((i + 0.5) / len(g), gi, s) for gi, g in enumerate(groups) for i, s in enumerate(g))
    selections = [s for *_, s in placed]
    names = list(dict.fromkeys(w for w, _ in selections))
    the_plan = planning.Plan(
        selections=selections, variants={w: [v.name for v in registry.get(w).variants] for w in names},
        cores=CORES, trials=TRIALS, warmup=WARMUP, duration=DURATION, interval=INTERVAL,
        params={w: {p.name: p.default for p in registry.get(w).params} for w in names})
    keys = the_plan.points()
    # Whole selections profiled, as --profile names them, so that a fifth of any prefix is profiled.
    profiled, seen, count = [], 0, 0
    for w, t in selections:
        n = sum(1 for k in keys if (k.workload, k.test) == (w, t))
        seen += n
        if count + n <= PROFILED_SHARE * seen:
            profiled.append(f"{w}/{t}" if t else w)
            count += n
    the_plan.profile = profiled
    return the_plan, keys


class Generator:
    """Point values as the sweep stores them, the same for a key whatever the run's size."""

    def __init__(self, topo: topology.Topology, the_plan: planning.Plan, seed: int, slower: float):
        self.topo, self.plan, self.seed, self.slower = topo, the_plan, seed, slower
        self.curves: dict[Series, Curve] = {}
        self.pools: dict[Series, list[str]] = {}

    def _rng(self, *parts: Any) -> random.Random:
        return random.Random(f"{self.seed}:" + ":".join(map(str, parts)))

    def _curve(self, s: Series) -> Curve:
        if s not in self.curves:
            self.curves[s] = curve(random.Random(f"curve:{s}"))  # the same machine's behaviour in both runs
        return self.curves[s]

    def values(self, key: planning.TrialKey) -> dict[str, Any]:
        w = registry.get(key.workload)
        s = Series(key.workload, key.test, key.variant)
        rng = self._rng(key)
        params = self.plan.params.get(key.workload, {})
        a = placement.assign(self.topo, self.plan.placement, key.cores, w.loadgen_cores(key.cores, params))
        values: dict[str, Any] = {
            "workload": key.workload, "test": key.test, "variant": key.variant, "cores": key.cores,
            "trial": key.trial, "started_at": store.now(), "cpus": cpulist.format(a.cpus),
            "loadgen_cpus": cpulist.format(a.loadgen_cpus) if a.loadgen_cpus else None,
            "loadgen_shared": a.loadgen_shared if a.loadgen_cpus else None, "unit": w.unit_for(key.test),
        }
        if rng.random() < FAILED_SHARE:
            values.update(status="failed", reason=f"{key.workload} exited with status 1: cannot allocate memory "
                                                  f"on CPU {a.cpus[-1]}",
                          logs="\n".join(f"[{i:4d}] task {i % key.cores}: {'x' * 60}" for i in range(200)))
            return values
        c = self._curve(s)
        n = key.cores
        factor = self.slower if zlib.crc32(str(s).encode()) % 7 == 0 or s.test.startswith(("open", "lock")) else 1.0
        per_core = c.per_core / (1 + c.sigma * (n - 1) + c.kappa * n * (n - 1)) * rng.gauss(1.0, 0.015) * factor
        job = w.kind == "job"
        window = rng.uniform(20, 60) * 256 / (n + 16) if job else DURATION + rng.uniform(0.0005, 0.004)
        work = 1.0 if job else per_core * n * window
        idle = c.idle_at_max * (n - 1) / (CPUS - 1) + rng.uniform(0, 0.01)
        busy = 1 - idle
        total = n * window
        user_s, system_s = total * busy * c.user_share, total * busy * (1 - c.user_share)
        values.update(status="ok", window_s=window, work=work, throughput=work / window, user_s=user_s,
                      system_s=system_s, idle_s=total * idle, steal_s=0.0, cgroup_user_s=user_s * 0.995,
                      cgroup_system_s=system_s * 0.97)
        if a.loadgen_cpus:
            client = len(a.loadgen_cpus) * window * rng.uniform(0.3, 0.95)
            values.update(loadgen_user_s=client * 0.2, loadgen_system_s=client * 0.8)
        values["samples"] = self._samples(rng, key, per_core, busy, window, job, w.name in ("micro", "scale"))
        values["metrics"] = self._metrics(rng, key, a, values, per_core, busy, window)
        if "interference" in store.points.c:  # the interference check's figures, where this store has them
            other = total * rng.uniform(0.0, 0.004)
            share = other / total
            values.update(interference=share, interfered=False)
            values["metrics"]["interference"] = {
                "other_s": round(other, 4), "steal_s": 0.0, "interrupts_s": round(total * 0.002, 4),
                "kernel_threads_s": round(total * 0.001, 4), "harness_s": 0.02, "capacity_s": round(total, 4),
                "share": round(share, 5)}
        values["logs"] = "\n".join(f"{key.workload}: task {i} on CPU {cpu} ready" for i, cpu in enumerate(a.cpus[:40]))
        if self.plan.profiled(key):
            values["profile"] = self._profile(rng, s, key, work, window, busy)
        return values

    @staticmethod
    def _samples(rng: random.Random, key: planning.TrialKey, per_core: float, busy: float, window: float,
                 job: bool, per_task: bool) -> list[dict[str, Any]]:
        """measure()'s samples: one a second, warm-up ones at negative times, per-task rates where counted."""
        out = []
        times = [(-WARMUP + i, "warmup") for i in range(int(WARMUP))] if not job else []
        times += [(float(i + 1), "window") for i in range(int(window))]
        for t, phase in times:
            rate = per_core * key.cores * rng.gauss(1.0, 0.01)
            out.append({"t": round(t + rng.uniform(0, 0.002), 3), "phase": phase, "rate": 0.0 if job else rate,
                        "busy": round(min(1.0, busy * rng.gauss(1.0, 0.01)), 4),
                        "per_task": [round(per_core * rng.gauss(1.0, 0.02), 1) for _ in range(key.cores)]
                        if per_task else None})
        return out

    def _metrics(self, rng: random.Random, key: planning.TrialKey, a: placement.Assignment, values: dict[str, Any],
                 per_core: float, busy: float, window: float) -> dict[str, Any]:
        mine = set(a.cpus) | set(a.loadgen_cpus)
        metrics: dict[str, Any] = {"cpu_busy_s": {str(cpu.id): round(window * busy * rng.uniform(0.97, 1.0), 3)
                                                  if cpu.id in mine else round(rng.uniform(0.001, 0.05), 3)
                                                  for cpu in self.topo.cpus}}
        if key.workload in ("micro", "scale"):
            metrics.update(per_task_min=per_core * 0.95, per_task_max=per_core * 1.05,
                           driver_pid=rng.randint(1000, 99999))
        elif key.workload != "metis":
            sent = values["work"] * 1.01
            metrics.update(instances=key.cores if "per-core" in key.variant else 1, net="loopback",
                           ports=f"20000-{20000 + key.cores - 1}", client_sent=sent, client_done=values["work"],
                           client_lost=int(sent - values["work"]), client_errors=0, client_late=0,
                           latency_p50_us=round(rng.uniform(20, 90), 1),
                           latency_p90_us=round(rng.uniform(90, 200), 1),
                           latency_p99_us=round(rng.uniform(200, 900), 1),
                           latency_p999_us=round(rng.uniform(900, 4000), 1),
                           latency_max_us=round(rng.uniform(4000, 20000), 1), client_contexts=8 * key.cores)
            bound = rng.random() < 0.2
            metrics.update(client_bound=bound, client_evidence=f"client CPUs {rng.randint(60, 99)}% busy, server "
                                                               f"CPUs {rng.randint(0, 30)}% idle")
        else:
            metrics.update(map_s=window * 0.7, reduce_s=window * 0.2, merge_s=window * 0.1, input_bytes=64 << 20)
        return metrics

    def _profile(self, rng: random.Random, s: Series, key: planning.TrialKey, work: float, window: float,
                 busy: float) -> dict[str, Any]:
        """Recorder.finish's profile: folded stacks with their samples (most first, a few thousand), the
        period, the window, hardware counts and the warm-up's lock contention."""
        if s not in self.pools:
            self.pools[s] = stack_pool(s.workload, s.test, s.variant, random.Random(f"pool:{s}"))
        pool = self.pools[s]
        frequency = profiler.frequency_for(key.cores, window)
        total = int(frequency * window * key.cores)
        chosen = rng.sample(pool, min(len(pool), rng.randint(*STACKS_PER_PROFILE)))
        # Locks weigh more the more cores share them: the curve's loss shows in the profile.
        weights = [(1.0 / (i + 1) ** 1.05) * (1 + key.cores / 16 if "slowpath" in st or "osq_lock" in st else 1)
                   * (1 - busy if st.startswith("swapper") else 1) for i, st in enumerate(chosen)]
        scale = total / sum(weights)
        stacks = {st: max(1, int(wt * scale)) for st, wt in zip(chosen, weights, strict=True)}
        locks = [{"caller": f"{fn}+0x{rng.randint(16, 400):x}", "type": kind, "contended": rng.randint(10, 10**6),
                  "wait_total_us": rng.uniform(10, 5e6), "wait_max_us": rng.uniform(1, 5e4),
                  "stack": [f"{f}+0x{rng.randint(16, 400):x}" for f in frames]}
                 for fn, kind, frames in (
                     ("alloc_fd", "spinlock", ["_raw_spin_lock", "alloc_fd", "do_sys_openat2", "__x64_sys_openat",
                                               "do_syscall_64", "entry_SYSCALL_64_after_hwframe"]),
                     ("lock_mm_and_find_vma", "rwsem:R", ["down_read", "lock_mm_and_find_vma", "do_user_addr_fault",
                                                          "exc_page_fault", "asm_exc_page_fault"]),
                     ("d_alloc_parallel", "spinlock", ["_raw_spin_lock", "d_alloc_parallel", "lookup_open",
                                                       "open_last_lookups", "path_openat", "do_filp_open"]),
                     ("futex_wake", "spinlock", ["_raw_spin_lock", "futex_wake", "do_futex", "__x64_sys_futex"]),
                     ("rmqueue", "spinlock", ["_raw_spin_lock_irqsave", "rmqueue", "get_page_from_freelist",
                                              "__alloc_pages", "alloc_pages_mpol"]),
                     ("try_to_wake_up", "spinlock", ["_raw_spin_lock", "try_to_wake_up", "__wake_up_common"]),
                 )[:rng.randint(2, 6)]]
        return {"event": profiler.EVENT, "frequency": frequency, "period_ns": int(1e9 / frequency), "window_s": window,
                "samples": sum(stacks.values()), "stacks": dict(sorted(stacks.items(), key=lambda kv: -kv[1])),
                "pmu": {"cycles": 2.6e9 * window * key.cores, "instructions": 1.9e9 * window * key.cores,
                        "cache-misses": 4e6 * window * key.cores * (1 + key.cores / 64)},
                "locks": locks, "locks_work": work * WARMUP / window}


def build(path: Path, n: int, topo: topology.Topology, env: dict[str, Any]) -> tuple[int, int, int]:
    """A store with two runs of the plan's first n points (another kernel in the second); (first, second,
    profiled points)."""
    the_plan, keys = plan_for()
    db = store.Store(str(path))
    ids, profiled = [], 0
    for i, (kernel, slower) in enumerate(zip(RUN_KERNELS, (1.0, 0.93), strict=True)):
        run_env = {**env, "kernel": kernel, "kernel_version": f"#1 SMP PREEMPT_DYNAMIC {kernel}"}
        run_id = db.create_run(the_plan.to_json(), run_env, "mosbench run micro scale memcached apache exim "
                               f"metis/invindex --cores {','.join(map(str, CORES))} --profile …", label=kernel)
        gen = Generator(topo, the_plan, seed=i, slower=slower)
        for key in keys[:n]:
            values = gen.values(key)
            profiled += i == 0 and "profile" in values
            db.add_point(run_id, **values)
        db.finish_run(run_id, "complete")
        ids.append(run_id)
    db.engine.dispose()
    return ids[0], ids[1], profiled


def measure(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak resident MB) of one command in a process of its own."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.monotonic() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{err}")
    return seconds, usage.ru_maxrss / 1024


def exponent(a: float, b: float, n1: int, n2: int) -> str:
    return f"{math.log(b / a) / math.log(n2 / n1):.2f}" if a > 0 and b > 0 and n1 != n2 else "–"


def main() -> None:
    py = str(ROOT / ".venv/bin/python")
    topo = machine()
    env = environment.capture(topo)
    print(f"{env['topology_summary']}; sizes {SIZES}; median of {ROUNDS} rounds per size; "
          f"{len(os.sched_getaffinity(0))} CPUs here", flush=True)
    results: dict[int, dict[str, tuple[float, float]]] = {}
    keep = os.environ.get("KEEP")
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(keep) if keep else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        for n in SIZES:
            path = where / f"runs-{n}.sqlite"
            path.unlink(missing_ok=True)
            t0 = time.monotonic()
            first, second, profiled = build(path, n, topo, env)
            print(f"{n} points: built in {time.monotonic() - t0:.0f} s, {profiled} profiled "
                  f"({profiled / n:.0%}), store {path.stat().st_size / 2**20:.0f} MB", flush=True)
            argvs = {"show": [py, "-m", "mosbench", "show", str(first), "--store", str(path)],
                     "report": [py, "-m", "mosbench", "report", str(first), "-o", str(where / f"report-{n}.html"),
                                "--store", str(path)],
                     "compare": [py, "-m", "mosbench", "compare", str(first), str(second), "--store", str(path)]}
            taken: dict[str, list[tuple[float, float]]] = {c: [] for c in COMMANDS}
            for _ in range(ROUNDS):
                for c in COMMANDS:
                    taken[c].append(measure(argvs[c]))
            results[n] = {c: (statistics.median(t for t, _ in v), max(m for _, m in v)) for c, v in taken.items()}
            print("  " + ", ".join(f"{c} {s:.1f} s {m:.0f} MB" for c, (s, m) in results[n].items()), flush=True)
            if not keep:
                path.unlink()
    print()
    print("points " + "".join(f"| {c:>7s} s  peak MB  growth " for c in COMMANDS))
    for i, n in enumerate(SIZES):
        row = f"{n:6d} "
        for c in COMMANDS:
            s, m = results[n][c]
            grow = exponent(results[SIZES[i - 1]][c][0], s, SIZES[i - 1], n) if i else "–"
            row += f"| {s:9.2f} {m:8.0f} {grow:>7s} "
        print(row)
    top = SIZES[-1]
    overall = {c: exponent(results[SIZES[0]][c][0], results[top][c][0], SIZES[0], top) for c in COMMANDS}
    print(f"growth {SIZES[0]}→{top}: " + ", ".join(f"{c} {e}" for c, e in overall.items())
          + " (log(t2/t1)/log(n2/n1); 1 = linear)")
    for c in COMMANDS:
        limit_s, limit_mb = TARGETS[c]
        s, m = results[top][c]
        ok = s <= limit_s and (limit_mb is None or m <= limit_mb)
        print(f"SUMMARY {c} points {top} seconds {s:.2f} peak_mb {m:.0f} growth {overall[c]} "
              f"target {limit_s:.0f}s{f'/{limit_mb / 1024:.0f}GB' if limit_mb else ''} {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
