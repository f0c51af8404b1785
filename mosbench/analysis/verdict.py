"""A verdict per curve: where per-core throughput went between the fewest cores and the most, and why
(the paper's Figure 12: kernel, application, or hardware and lack of work).

The loss is counted in CPU time per unit of work. At any core count each core gives one second a
second, so a unit costs 1e6 / (per-core throughput) µs of CPU time in all, and the growth of that
cost from the fewest cores to the most splits into the growth of its parts: the workload's user and
system time, the time the CPUs idled, the time the hypervisor stole and, where a load generator shares
the CPUs, the client's time. The largest part names the class:

- system → kernel; user → application, unless no function of it stands out (then hardware: memory
  bandwidth or caches, every function a little slower);
- idle → lack of work (the client was the limit, or the workload cannot keep its cores busy: a
  serial phase, a sleeping lock, too few clients); a sleeping lock the trace or profile shows makes it
  the kernel's or the application's;
- steal → hardware (the host took the CPUs); client → lack of work (the load generator took them);
  others → interference (user time on the measured CPUs that no group of the point was charged:
  another program ran there, and the curve says nothing about the workload).

The profile (profile.py) then says which function's own time per unit grew, the lock trace which
kernel lock and from where, and `KERNEL_OBJECTS` (what kernel functions guard, from the kernel's
source: nothing here knows a test) what that lock protects. How sure: high where the main part is
most of the loss, the profile's growth is of the same kind and the trials at the two core counts do
not overlap; medium where two of those hold; low otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mosbench.analysis.cells import BASELINE_IDLE_MAX, Cell, Series
from mosbench.analysis.profiles import KERNEL, BySeries, Profile, growth

SCALES = 0.9  # per-core throughput at the most cores over the fewest, from which a curve scales
DOMINANT = 0.6  # share of the loss that makes one part the main one beyond doubt
STANDS_OUT = 0.5  # share of a part's growth in one function that makes it that function's

KERNEL_LOCK = re.compile(r"(queued_spin_lock_slowpath|^_raw_(spin|read|write)_lock|^do_raw_spin_lock|osq_lock|"
                         r"rwsem_down_(read|write)_slowpath|rwsem_optimistic_spin|rwsem_spin_on_owner|"
                         r"mutex_spin_on_owner|__mutex_lock|^down_(read|write)|^mutex_lock|^lockref_)")
USER_LOCK = re.compile(r"(__lll_lock_wait|__lll_lock_wake|pthread_mutex_(un)?lock|pthread_rwlock|^sem_(wait|post)|"
                       r"__new_sem_wait|futex_wait|futex_wake)")
# What a kernel function's lock guards, from the kernel's source (6.x): the first frame of a stack,
# walking out from the lock, that is named here names the object.
KERNEL_OBJECTS: tuple[tuple[str, str], ...] = (
    (r"^(alloc_fd|__alloc_fd|fd_install|file_close_fd|close_fd|__close_fd|pick_file|__range_close|"
     r"do_dup2|ksys_dup3|expand_files|__fget_files|__fget_light)$",
     "the process's descriptor table (files_struct.file_lock), shared by its threads"),
    (r"^(lock_mm_and_find_vma|lock_vma_under_rcu|do_user_addr_fault|__vm_munmap|vm_mmap_pgoff|mmap_region|"
     r"do_mmap|do_vmi_munmap|__do_sys_brk|do_brk_flags|__x64_sys_munmap|__x64_sys_brk|do_madvise)$",
     "the process's address space (mm->mmap_lock), shared by its threads"),
    (r"^(flush_tlb_mm_range|native_flush_tlb_multi|smp_call_function_many_cond|on_each_cpu_cond_mask)$",
     "TLB shootdowns: interrupts to every CPU that runs the address space"),
    (r"^(posix_lock_inode|flock_lock_inode|locks_remove_posix|fcntl_setlk|do_lock_file_wait|"
     r"__locks_wake_up_blocks|locks_unlink_lock_ctx|locks_insert_lock_ctx|locks_delete_block)$",
     "the file's lock list (file_lock_context.flc_lock)"),
    (r"^(generic_file_llseek_size|ext4_llseek|ext4_llseek_.*|shmem_file_llseek|generic_file_llseek|"
     r"fixed_size_llseek|ksys_lseek)$",
     "the file's inode lock (i_rwsem) taken by lseek: the paper's PostgreSQL collapse"),
    (r"^(open_last_lookups|do_unlinkat|filename_create|lookup_open|do_rmdir|vfs_unlink|do_renameat2)$",
     "the directory's inode lock (i_rwsem)"),
    (r"^(dput|lockref_get_not_dead|lockref_put_return|d_alloc_parallel|__d_lookup|d_alloc|__dentry_kill|"
     r"lookup_fast|legitimize_path|unlazy_walk|try_to_unlazy)$",
     "a dentry's lock and reference count (d_lockref)"),
    (r"^(futex_q_lock|futex_wake|futex_wait_setup|futex_wait|futex_hash|__futex_wait|futex_wake_op)$",
     "a futex hash bucket's lock"),
    (r"^(pipe_write|pipe_read|pipe_lock|__pipe_lock)$", "the pipe's mutex"),
    (r"^(unix_stream_sendmsg|unix_stream_read_generic|unix_dgram_sendmsg|unix_state_lock|unix_wait_for_peer)$",
     "the Unix socket's state lock"),
    (r"^(try_to_wake_up|__schedule|_raw_spin_rq_lock|raw_spin_rq_lock_nested|ttwu_queue|sched_ttwu_pending|"
     r"scheduler_tick|load_balance)$", "a run queue lock (wakeups and scheduling)"),
    (r"^(add_wait_queue|remove_wait_queue|__wake_up_common_lock|__wake_up|prepare_to_wait_event|"
     r"finish_wait)$", "a wait queue's lock"),
    (r"^(ep_poll|ep_poll_callback|do_epoll_wait|ep_send_events|ep_insert|ep_remove|do_epoll_ctl)$",
     "an epoll instance's lock"),
    (r"^(__sigqueue_alloc|do_send_sig_info|send_signal_locked|get_signal|__lock_task_sighand|"
     r"dequeue_signal|do_sigaction|sigprocmask|__set_current_blocked)$",
     "the signal handlers' lock (sighand->siglock), shared by threads"),
    (r"^(shmem_fallocate|shmem_get_folio_gfp|shmem_alloc_and_add_folio|shmem_inode_acct_blocks|"
     r"percpu_counter_add_batch|__percpu_counter_sum)$", "the tmpfs inode and its block accounting"),
    (r"^(rmqueue|rmqueue_bulk|free_pcppages_bulk|__free_pages_ok|free_one_page|get_page_from_freelist)$",
     "the page allocator's zone lock"),
    (r"^(lru_add_drain|folio_batch_move_lru|release_pages|folio_lruvec_lock_irqsave|__folio_put|"
     r"lru_add_fn|folio_add_lru)$", "the LRU lists' lock (lruvec)"),
    (r"^(inode_sb_list_add|inode_sb_list_del|new_inode|evict|iput|__destroy_inode)$",
     "the superblock's inode list lock"),
    # File systems (FxMark names them: the inode lock for shared-file writes, the rename lock, the journal)
    (r"^(ext4_buffered_write_iter|ext4_file_write_iter|xfs_file_buffered_write|xfs_ilock|btrfs_inode_lock|"
     r"btrfs_buffered_write|shmem_file_write_iter|generic_file_write_iter|inode_lock)$",
     "the file's inode lock (i_rwsem), taken by every write to it"),
    (r"^(lock_rename|lock_two_directories|lock_rename_child)$", "the file system's rename lock (s_vfs_rename_mutex)"),
    (r"^(jbd2_.*|start_this_handle|__jbd2_log_wait_for_space|add_transaction_credits|ext4_journal_check_start)$",
     "ext4's journal (jbd2's j_state_lock and transaction credits)"),
    (r"^(xlog_.*|xfs_log_reserve|xfs_trans_reserve|xfs_log_ticket_.*|xlog_grant_.*)$",
     "XFS's log (grant heads and the CIL lock)"),
    (r"^(btrfs_tree_lock|btrfs_tree_read_lock|btrfs_lock_root_node|btrfs_read_lock_root_node|btrfs_search_slot)$",
     "a btrfs tree's extent buffer locks"),
    (r"^(ext4_mb_.*|ext4_new_meta_blocks|ext4_free_blocks)$", "ext4's block allocator (a group's lock)"),
    (r"^(iterate_dir|dcache_readdir|ext4_readdir|xfs_readdir|btrfs_real_readdir)$",
     "the directory's inode lock (i_rwsem), read"),
    (r"^(tcp_v4_rcv|tcp_sendmsg|tcp_recvmsg|lock_sock_nested|release_sock|inet_csk_accept|inet_csk_get_port|"
     r"__inet_hash_connect|inet_hash)$", "a TCP socket's lock or the connection hash"),
    (r"^(udp_sendmsg|udp_recvmsg|__udp_enqueue_schedule_skb|skb_recv_udp|udp_queue_rcv_skb)$",
     "the UDP socket's receive queue lock"),
)
_OBJECTS = [(re.compile(pattern), what) for pattern, what in KERNEL_OBJECTS]
# Objects every path passes through (waking a task, a wait queue): named only where no more specific
# object lies further out on the stack.
GENERIC = ("a run queue lock (wakeups and scheduling)", "a wait queue's lock")


@dataclass(frozen=True)
class Verdict:
    name: str  # workload/test
    variant: str
    low_cores: int
    high_cores: int
    category: str  # scales, kernel, application, hardware, lack of work; or "unknown" with the reason
    cause: str  # one line a kernel developer can act on
    confidence: str  # high, medium, low
    evidence: tuple[str, ...]
    loss: float | None  # share of per-core throughput lost from the fewest cores to the most


def _bare(frame: str) -> str:
    """A frame without its kernel mark or offset: "alloc_fd_[k]" and "alloc_fd+0x1c" are alloc_fd."""
    return frame.removesuffix(KERNEL).split("+0x")[0]


def kernel_object(frames: list[str]) -> tuple[str, str] | None:
    """(function, what its lock guards) for the first frame, innermost first, that KERNEL_OBJECTS names;
    a generic object (a wait queue, a run queue) only where nothing more specific is further out."""
    found = [(_bare(f), what) for f in frames for pattern, what in _OBJECTS if pattern.search(_bare(f))]
    specific = [x for x in found if x[1] not in GENERIC]
    return (specific or found or [None])[0]


def kind_of(function: str) -> str:
    if function.endswith(KERNEL):
        return "kernel lock" if KERNEL_LOCK.search(_bare(function)) else "kernel"
    return "user lock" if USER_LOCK.search(function) else "user"


def parts(c: Cell) -> dict[str, float]:
    """A cell's best trial's CPU µs per unit of work, by where it went (they add up to `total`)."""
    best = c.best_trial
    total = 1e6 / best.per_core
    others = best.outside_user_us_per_unit or 0.0
    out = {"total": total, "user": best.user_us_per_unit, "system": best.system_us_per_unit,
           "idle": best.idle_us_per_unit, "steal": best.steal_share * total, "others": 0.0}
    if c.loadgen_shared and best.client_user_us_per_unit is not None:
        out["client"] = best.client_user_us_per_unit + (best.client_system_us_per_unit or 0.0)
    elif others:  # /proc/stat's user time holds another program's: it is not the workload's
        out["user"] = max(0.0, out["user"] - others)
        out["others"] = others
    return out


def _fmt(us: float) -> str:
    """CPU time in the unit that suits it: a job's seconds, a request's µs."""
    size = abs(us)
    return f"{us / 1e6:.3g} s" if size >= 1e6 else f"{us / 1e3:.3g} ms" if size >= 1e3 else f"{us:.3g} µs"


def _callers(prof: Profile, lock_function: str) -> list[str]:
    """The kernel frames outward from a lock function, on its heaviest stack."""
    best, weight = None, 0
    for stack, n in prof.stacks.items():
        frames = stack.split(";")
        if frames[-1] == lock_function and n > weight:
            best, weight = frames, n
    if best is None:
        return []
    outward = list(reversed(best[1:]))
    return [f for f in outward if f.endswith(KERNEL) and not KERNEL_LOCK.search(_bare(f))]


def _lock_site(low: Profile | None, high: Profile, lock_function: str) -> tuple[str, list[str]]:
    """Where a grown kernel lock was taken: the lock trace's most waited-on caller (its growth from the
    fewest cores), else the profile's heaviest stack into the lock. (site, evidence)"""
    return _traced_lock_site(low, high) or _profiled_lock_site(high, lock_function)


def _traced_lock_site(low: Profile | None, high: Profile) -> tuple[str, list[str]] | None:
    """The lock trace's most waited-on caller, with its wait per unit against the fewest cores'."""
    waits = high.lock_waits()
    if not waits:
        return None
    caller, record, wait, count = waits[0]
    before = {c: w for c, _, w, _ in low.lock_waits()} if low is not None else {}
    frames = [caller, *[f for f in record["stack"] if not KERNEL_LOCK.search(_bare(f))]]
    found = kernel_object(frames)
    said = [f"perf lock: {record['type']} from {_bare(caller)} waited {_fmt(wait)} per unit "
            f"({count * 1e3:.3g} contentions per 1000 units)"
            + (f", {_fmt(before.get(caller, 0.0))} at the fewest cores" if low is not None else "")]
    if found:
        return f"{found[1]} ({found[0]})", said
    return f"a {record['type']} taken in {_bare(caller)}", said


def _profiled_lock_site(high: Profile, lock_function: str) -> tuple[str, list[str]]:
    """The profile's heaviest stack into the lock function, and the kernel object it names."""
    outward = _callers(high, lock_function)
    found = kernel_object(outward)
    path = " ← ".join(_bare(f) for f in outward[:4])
    said = [f"profile: {_bare(lock_function)} reached through {path}"] if path else []
    if found:
        return f"{found[1]} ({found[0]})", said
    return (f"a lock taken in {_bare(outward[0])}" if outward else "a kernel lock"), said


RUN_WITH_PROFILE = "run with --profile"


def profile_advice(environment: dict[str, Any]) -> str:
    """What a reader should do for a profile, given the measured machine: --profile, or first perf where that
    machine had none (advice to run --profile there would only meet its refusal)."""
    tools = environment.get("tools") or {}
    if "perf" in tools and tools["perf"] is None:
        return "perf was not installed on the measured machine (Debian: linux-perf; Ubuntu: linux-tools-generic)"
    return RUN_WITH_PROFILE


def judge(s: Series, profiles: dict[int, Profile] | None = None, client_bound: bool | None = None,
          no_profile: str = RUN_WITH_PROFILE) -> Verdict:
    """The verdict on one curve from its cells (and its profiles by core count, where recorded); no_profile
    is the advice where a profile would have said where (profile_advice)."""
    cells = s.ok_cells()
    if len(cells) < 2:
        return Verdict(s.name, s.variant, cells[0].cores if cells else 0, cells[0].cores if cells else 0, "unknown",
                       "needs measurements at two core counts or more", "low", (), None)
    lo, hi = cells[0], cells[-1]
    if (idle := s.unsaturated_baseline()) is not None:
        return Verdict(s.name, s.variant, lo.cores, hi.cores, "unknown",
                       f"baseline not saturated: the {lo.cores}-core point idles {idle:.0%} (over "
                       f"{BASELINE_IDLE_MAX:.0%}), so a per-core ratio against it measures the offered load: give "
                       "it more", "low", (), None)
    ratio = hi.best / lo.best
    loss = 1 - ratio
    a, b = parts(lo), parts(hi)
    grown = {k: b.get(k, 0.0) - a.get(k, 0.0) for k in ("user", "system", "idle", "steal", "client", "others")}
    evidence = [f"per-core throughput at {hi.cores} cores is {ratio:.2f} of {lo.cores} cores'; CPU per unit "
                f"{_fmt(a['total'])} → {_fmt(b['total'])}: "
                + ", ".join(f"{k} {'+' if v >= 0 else ''}{_fmt(v)}" for k, v in grown.items() if abs(v) > 0)]
    separated = max(hi.per_core) < min(lo.per_core) if ratio < 1 else min(hi.per_core) > max(lo.per_core)
    if ratio >= SCALES:
        return Verdict(s.name, s.variant, lo.cores, hi.cores, "scales",
                       f"per-core throughput at {hi.cores} cores is {ratio:.2f} of {lo.cores} cores'",
                       "high" if separated or ratio >= 1 else "medium", tuple(evidence), loss)
    main = max(grown, key=lambda k: grown[k])
    total_growth = b["total"] - a["total"]
    share = grown[main] / total_growth if total_growth > 0 else 0.0
    evidence.append(f"{main} time per unit grew most: {share:.0%} of the growth")

    low_p = profiles.get(lo.cores) if profiles else None
    high_p = profiles.get(hi.cores) if profiles else None
    grew = growth(low_p, high_p, top=20) if low_p and high_p else []
    category, cause, agrees = _explain(main, grown, grew, low_p, high_p, client_bound, evidence, no_profile)
    score = (share >= DOMINANT) + agrees + separated
    if not separated:
        evidence.append("the trials at the two core counts overlap: noise may be part of the difference")
    confidence = "high" if score == 3 else "medium" if score == 2 else "low"
    return Verdict(s.name, s.variant, lo.cores, hi.cores, category, cause, confidence, tuple(evidence), loss)


def _explain(main: str, grown: dict[str, float], grew: list, low_p: Profile | None, high_p: Profile | None,
             client_bound: bool | None, evidence: list[str], no_profile: str) -> tuple[str, str, bool]:
    """(category, cause, whether the profile agrees with the main part)."""
    positive = [g for g in grew if g.change_us > 0]
    if positive:
        evidence.append("grew most per unit (own time): " + ", ".join(
            f"{g.function} {'+' if g.change_us >= 0 else ''}{_fmt(g.change_us)}" for g in positive[:4]))
    kernel_grew = [g for g in positive if kind_of(g.function).startswith("kernel")]
    user_grew = [g for g in positive if not kind_of(g.function).startswith("kernel")]
    if main == "steal":
        return "hardware", "the hypervisor took the CPUs (steal time grew): the host, not this kernel", False
    if main == "others":
        return "interference", f"other programs ran on the measured CPUs ({_fmt(grown['others'])} more of their " \
                               "user time per unit): not this workload's bottleneck; measure on a quiet machine", False
    if main == "client":
        return "lack of work", "the load generator shares the measured CPUs and took the growth", False
    if main == "idle":
        return _idle(grown, kernel_grew, user_grew, low_p, high_p, client_bound, evidence)
    if main == "system":
        if not kernel_grew or high_p is None:
            return "kernel", f"system time per unit grew {_fmt(grown['system'])} (no profile to say where: " \
                             f"{no_profile})", False
        lock_fn, via_lock = _kernel_time_under_user_locks(low_p, high_p)
        if lock_fn and via_lock >= STANDS_OUT * grown["system"]:
            evidence.append(f"profile: {_fmt(via_lock)} more kernel time per unit under {lock_fn} (the futex calls "
                            "of a contended user-space lock)")
            return "application", f"the application's lock ({lock_fn}): its waiters and wakers in the kernel", True
        top = kernel_grew[0]
        if kind_of(top.function) == "kernel lock":
            site, said = _lock_site(low_p, high_p, top.function)
            evidence.extend(said)
            return "kernel", f"lock contention on {site}", True
        outward = _callers(high_p, top.function) or []
        found = kernel_object([top.function, *outward])
        where = f", under {found[1]} ({found[0]})" if found else ""
        return "kernel", f"{_bare(top.function)} grew {_fmt(top.change_us)} per unit{where}", True
    # user
    if not user_grew:
        return "application", f"user time per unit grew {_fmt(grown['user'])} (no profile to say where: " \
                              f"{no_profile})", False
    top = user_grew[0]
    share = top.change_us / max(sum(g.change_us for g in user_grew), 1e-12)
    if share < STANDS_OUT:
        return "hardware", "user time grew across functions with none standing out: memory bandwidth or " \
                           "caches", True
    if kind_of(top.function) == "user lock":
        return "application", f"the application's lock ({top.function})", True
    return "application", f"{top.function} grew {_fmt(top.change_us)} per unit: data it shares between cores " \
                          "(a shared cache line or atomic)", True


def _kernel_time_under_user_locks(low: Profile | None, high: Profile) -> tuple[str | None, float]:
    """The user-space lock function most kernel samples sit under, and the growth per unit of the
    kernel time under any such function (a pthread mutex's futex waits and wakes)."""
    def under(prof: Profile) -> tuple[float, dict[str, int]]:
        total, by_fn = 0, {}
        for stack, n in prof.stacks.items():
            frames = stack.split(";")
            if not frames[-1].endswith(KERNEL):
                continue
            user_locks = [f for f in frames[1:] if not f.endswith(KERNEL) and USER_LOCK.search(f)]
            if user_locks:
                total += n
                by_fn[user_locks[-1]] = by_fn.get(user_locks[-1], 0) + n
        return prof.us_per_unit(total), by_fn

    hi_us, by_fn = under(high)
    lo_us = under(low)[0] if low is not None else 0.0
    return (max(by_fn, key=by_fn.get) if by_fn else None), hi_us - lo_us


def _idle(grown, kernel_grew, user_grew, low_p, high_p, client_bound, evidence) -> tuple[str, str, bool]:
    if client_bound:
        return "lack of work", "the client was the limit (its CPUs saturated while the server's idled)", True
    waits = high_p.lock_waits() if high_p is not None else []
    if waits:
        _, record, wait, _ = waits[0]
        traced = _traced_lock_site(low_p, high_p)
        if traced and record["type"] not in ("spinlock",) and wait > 0.2 * grown["idle"]:
            site, said = traced
            evidence.extend(said)
            return "kernel", f"tasks sleep on a contended kernel lock: {site}", True
    sleeping = [g for g in user_grew if kind_of(g.function) == "user lock"] + \
               [g for g in kernel_grew if USER_LOCK.search(_bare(g.function))]
    if sleeping:
        return "application", f"tasks sleep on the application's lock ({_bare(sleeping[0].function)})", True
    return "lack of work", f"the CPUs idled {_fmt(grown['idle'])} more per unit: a serial phase, a sleeping " \
                           "wait or too little load", False


def judge_all(series: list[Series], profiles: BySeries, no_profile: str = RUN_WITH_PROFILE) -> list[Verdict]:
    """A verdict for every curve; profiles by series as labelled."""
    out = []
    for s in series:
        cells = s.ok_cells()
        judged = [t.metrics for t in (cells[-1].trials if cells else []) if "client_bound" in t.metrics]
        bound = sum(bool(m["client_bound"]) for m in judged) > len(judged) / 2 if judged else None
        out.append(judge(s, profiles.get(s.key), bound, no_profile))
    return out
