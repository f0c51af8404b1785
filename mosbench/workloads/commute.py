"""The scalable commutativity rule (Clements et al., SOSP 2013; the talk's insight 4) on the running kernel.

Each test is a situation: two POSIX operations A and B in a state where they commute (different names in
one directory, disjoint ranges of one address space, ...) or, as contrast, where they do not. The native
situations (native/commute) are testcases of the micro driver; every one has two roles, and the state is
built for both whichever role runs, so A alone runs in exactly the state it has beside B:

  a     every task runs A: at one core, A's alone rate;
  b     every task runs B: at one core, B's alone rate;
  pair  task i runs A if i is even, else B: one operation per core, both at once.

A pair scales when each side keeps at least SCALES_AT of its alone rate (analysis/commute.py). The rule
says a commutative pair *can* scale; a pair that does not is this kernel's implementation sharing a line it
need not, and the profile's growth names where.
"""

from __future__ import annotations

import functools
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosbench import native
from mosbench.errors import UserError
from mosbench.workloads.base import Instance, PointContext, TestInfo, Variant
from mosbench.workloads.micro import Micro, MicroInstance

BINARY = "mosbench-commute"
# COMMUTER's 18 operations, in the order of its model (and of its published figure's axes).
CALLS = ("open", "link", "unlink", "rename", "stat", "fstat", "lseek", "close", "pipe", "read", "write", "pread",
         "pwrite", "mmap", "munmap", "mprotect", "memread", "memwrite")
SIDE = {"a": 0, "b": 1, "pair": 2}


@dataclass(frozen=True)
class Situation:
    name: str  # "open-unlink/diffname-samedir"
    call_a: str
    call_b: str
    commutes: bool
    mode: str  # "threads" (one process: shared descriptors and address space) or "procs"
    state: str  # the state, and what one iteration of each side does
    why: str  # why the two calls commute there, or why not


def parse_list(text: str) -> tuple[Situation, ...]:
    """The situations from `mosbench-commute --list`: NAME, VERDICT, MODE, STATE, WHY separated by tabs."""
    out = []
    for line in text.splitlines():
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != 5 or fields[1] not in ("commutes", "conflicts") or fields[2] not in ("threads", "procs"):
            raise UserError(f"{BINARY} --list gave a line this mosbench cannot read ({line[:60]!r}): rebuild native/")
        name, verdict, mode, state, why = fields
        pair = name.split("/", 1)[0]
        call_a, _, call_b = pair.partition("-")
        if call_a not in CALLS or call_b not in CALLS:
            raise UserError(f"{BINARY}: situation {name!r} names a call outside COMMUTER's 18")
        out.append(Situation(name, call_a, call_b, verdict == "commutes", mode, state, why))
    return tuple(out)


@functools.cache
def situations_of(binary: Path) -> tuple[Situation, ...]:
    return parse_list(subprocess.run([binary, "--list"], capture_output=True, text=True, check=True).stdout)


def situations() -> dict[str, Situation]:
    """Every situation of the built binary by name; empty where it is not built."""
    try:
        return {s.name: s for s in situations_of(native.binary(BINARY))}
    except UserError:
        return {}


class CommuteInstance(MicroInstance):
    """The driver's instance, which also keeps each role's rate over the window: a pair's two sides are
    judged apart, each against its own alone rate."""

    def __init__(self, ctx: PointContext, binary: Path, situation: Situation, workdir: Path):
        self._marks: list[tuple[float, list[float]]] = []
        self.situation = situation
        super().__init__(ctx, binary, situation.name, situation.mode, workdir, {"side": SIDE[ctx.variant]})

    def _mark(self) -> None:
        per_task = self.sample().per_task or []
        self._marks.append((time.monotonic(), per_task))

    def window_opened(self) -> None:
        self._mark()

    def window_closed(self) -> None:
        self._mark()

    def stop(self) -> dict[str, Any]:
        metrics = {**super().stop(), "commutes": self.situation.commutes}
        if len(self._marks) >= 2 and self.ctx.variant == "pair":
            (t0, c0), (t1, c1) = self._marks[0], self._marks[-1]
            rates = [(b - a) / (t1 - t0) for a, b in zip(c0, c1, strict=True)]
            # Task i is role i % 2: the sides' mean rate per task (per core: one task a core).
            for side, name in ((0, "a"), (1, "b")):
                mine = rates[side::2]
                if mine:
                    metrics[f"side_{name}_per_core"] = sum(mine) / len(mine)
                    metrics[f"side_{name}_work"] = sum(b - a for a, b in zip(c0[side::2], c1[side::2], strict=True))
        return metrics


class Commute(Micro):
    name = "commute"
    description = "pairs of POSIX calls where they commute (and where not): does each side keep its alone rate?"
    unit = "op"
    variants = (
        Variant("a", "every task runs the first call (at one core: its alone rate)"),
        Variant("b", "every task runs the second call (at one core: its alone rate)"),
        Variant("pair", "one call per core, the two calls side by side (from two cores)"),
    )
    paper = ("The talk's insight 4 (Clements et al., SOSP 2013): commutative calls can scale; "
             "which do on this kernel, as COMMUTER asks of Linux 3.8 without a modified QEMU")
    curves = False  # each situation's sides are judged against their alone rates, as one matrix

    def tests(self) -> list[TestInfo]:
        return [TestInfo(s.name, f"{'commutes' if s.commutes else 'does not commute'} ({s.mode}): {s.state}. "
                         f"Why: {s.why}") for s in situations().values()]

    def measures(self, test: str, variant: str, cores: int) -> bool:
        return (cores == 1) == (variant != "pair")

    def check_available(self) -> None:
        native.binary(BINARY)

    def setup(self, ctx) -> None:
        super().setup(ctx)
        ctx.extra["situations"] = situations()

    def start(self, ctx: PointContext) -> Instance:
        situation = ctx.run.extra["situations"][ctx.test]
        return CommuteInstance(ctx, native.binary(BINARY), situation, ctx.run.extra["workdir"])
