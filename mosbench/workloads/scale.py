"""libscale's techniques raced stock against scalable: the paper's section 4 as user-space benchmarks.

Each structure of native/libscale is a test (scale/counter, scale/lock, …) with a form per variant:
`stock` is the structure as Linux 2.6.35 had it, `scalable` the paper's fix; the counter also has the
`percpu` form and the lock the pthread `mutex` baseline and Concurrency Kit's ticket and MCS locks.
The talk's insights 2 and 3 join them: `tree` (a VMA tree under a reader-writer lock, the Bonsai
form's lock-free lookups under RCU, and a spinlock), and `ranges`/`samerange` (a lock-free skip list
against a page-table-shaped radix tree, on each core's own key range and on one range).
The benchmarks are testcases of the micro driver (native/libscale/bench), named STRUCTURE/FORM.
"""

from __future__ import annotations

from typing import Any

from mosbench import native
from mosbench.errors import UserError
from mosbench.workloads.base import Instance, ModelSpec, Param, PointContext, TestInfo, Variant, Workload
from mosbench.workloads.micro import MicroInstance, list_tests

BINARY = "mosbench-scale"
# The talk's and the paper's lock experiment: 2% of the time inside the lock with cs_ns 200. It saturates a
# ticket lock only near 50 cores, so a run chooses its own (lock_par_ns) unless told this with -p par_ns=9800.
PAR_NS = 9800


def lock_par_ns(cs_ns: int, max_cores: int) -> int:
    """Time outside the lock that saturates it near half the run's cores: n cores each looping over
    par_ns + cs_ns keep the lock busy from n · cs_ns >= par_ns + cs_ns on. Never below cs_ns, so even a
    2- or 3-core run saturates it at 2 cores, and never 0, which the lock model cannot take."""
    saturated_at = max(2, max_cores // 2)
    return max(1, cs_ns * (saturated_at - 1))

UNITS = {"counter": "get/put", "lock": "acquisition", "dentry": "lookup", "mount": "lookup",
         "openlist": "open/close", "freelist": "alloc/free", "falseshare": "use", "tree": "lookup",
         "ranges": "insert/lookup/delete", "samerange": "insert/lookup/delete"}

# Which lock each scale/lock variant is, for the lock-collapse model: a ticket lock's handoff costs time per
# waiter, a queue lock's one waiter's.
LOCK_KINDS = {"stock": "ticket", "ck-ticket": "ticket", "scalable": "scalable", "ck-mcs": "scalable"}

# Where each structure comes from, for `mosbench list` and the docs.
PAPER = {"counter": "4.3 sloppy counters", "lock": "talk / 'Non-scalable locks are dangerous'",
         "dentry": "4.4 lock-free comparison", "mount": "4.5 per-core vfsmount tables",
         "openlist": "4.5 per-core open-file lists", "freelist": "4.5 per-core packet-buffer free lists",
         "falseshare": "4.6 false sharing", "tree": "talk insight 2: lock-free reads (Bonsai trees, ASPLOS 2012)",
         "ranges": "talk insight 3: skip list against radix tree, each core its own range (independent mmaps)",
         "samerange": "talk insight 3's contrast: every core in one range (the same mmaps)"}


class Scale(Workload):
    name = "scale"
    description = "libscale: the paper's scalability techniques, stock against scalable, in user space"
    unit = "op"
    variants = (
        Variant("stock", "the structure as Linux 2.6.35 had it (shared counter, ticket lock, one lock)"),
        Variant("scalable", "the paper's technique (sloppy counter, MCS, per-core, lock-free, split lines)"),
        Variant("percpu", "counter only: a percpu_counter-style approximate counter"),
        Variant("mutex", "lock only: pthread mutex, the application's baseline"),
        Variant("ck-ticket", "lock only: Concurrency Kit's ticket lock, for comparison"),
        Variant("ck-mcs", "lock only: Concurrency Kit's MCS lock, for comparison"),
        Variant("spinlock", "tree only: every lookup and update under one spinlock"),
        Variant("skiplist", "ranges only: a lock-free skip list (the books' design)"),
        Variant("radix", "ranges only: a radix tree shaped like a page table (per-slot atomics)"),
    )
    params = (
        Param("cs_ns", 200, "lock: time inside the critical section", "ns"),
        Param("par_ns", None, "lock: time outside it between acquisitions; auto: cs_ns x (max cores / 2 - 1), "
              f"so the ticket lock saturates near half the run's cores (the talk's 2% inside: {PAR_NS})", "ns",
              kind=int),
        Param("threshold", 16, "counter: spare references a sloppy counter's slot may keep"),
        Param("batch", 0, "counter: percpu_counter batch (0: Linux's max(32, 2 x CPUs))"),
        Param("update_percent", 1, "tree: the share of operations that are updates (munmap + mmap)", "%"),
        Param("vmas", 1000, "tree: ranges in the tree (a process's VMAs)"),
        Param("range_keys", 4096, "ranges, samerange: keys in each range"),
    )
    paper = "Section 4's techniques (4.3 to 4.6) and the lock-collapse talk, one structure at a time"

    def _forms(self) -> dict[str, dict[str, str]]:
        """{structure: {form: description}} from the runner's list."""
        forms: dict[str, dict[str, str]] = {}
        for info in list_tests(native.binary(BINARY)):
            structure, _, form = info.name.partition("/")
            forms.setdefault(structure, {})[form] = info.description
        return forms

    def tests(self) -> list[TestInfo]:
        try:
            forms = self._forms()
        except UserError:
            return []
        order = [v.name for v in self.variants]
        return [TestInfo(s, f"{PAPER.get(s, '')}. " + "; ".join(
            f"{f}: {fs[f]}" for f in sorted(fs, key=lambda f: order.index(f) if f in order else len(order))))
            for s, fs in forms.items()]

    def variants_for(self, test: str) -> list[str]:
        forms = self._forms().get(test, {})
        return [v.name for v in self.variants if v.name in forms]

    def unit_for(self, test: str) -> str:
        return UNITS.get(test, self.unit)

    def check_available(self) -> None:
        native.binary(BINARY)

    def fill_params(self, params: dict[str, Any], max_cores: int) -> None:
        if params.get("par_ns") is None:
            params["par_ns"] = lock_par_ns(int(params["cs_ns"]), max_cores)

    def check_params(self, params: dict[str, Any]) -> None:
        for name, least in (("cs_ns", 0), ("threshold", 1), ("batch", 0), ("update_percent", 0),
                            ("vmas", 16), ("range_keys", 2)):
            if params[name] < least:
                raise UserError(f"scale needs {name} >= {least} (got {params[name]})")
        # None until the run's cores are known (fill_params): a guest's run chooses it for its own CPUs.
        if params["par_ns"] is not None and params["par_ns"] < 0:
            raise UserError(f"scale needs par_ns >= 0 (got {params['par_ns']})")
        if params["update_percent"] > 100:
            raise UserError(f"scale needs update_percent <= 100 (got {params['update_percent']})")

    def models_for(self, test: str, params: dict[str, Any]) -> list[ModelSpec]:
        """scale/lock: the lock-collapse model, with a at least the run's par_ns and s at least its cs_ns,
        for the variants that are a ticket or a queue lock (the pthread mutex is neither)."""
        if test != "lock":
            return []
        return [ModelSpec("lock", {"a": float(params.get("par_ns") or PAR_NS), "s_min": float(params.get("cs_ns", 0)),
                                   "kinds": LOCK_KINDS})]

    def start(self, ctx: PointContext) -> Instance:
        params: dict[str, Any] = {p.name: int(ctx.params[p.name]) for p in self.params
                                  if ctx.params[p.name] is not None}
        return MicroInstance(ctx, native.binary(BINARY), f"{ctx.test}/{ctx.variant}", "threads", ctx.scratch, params)
