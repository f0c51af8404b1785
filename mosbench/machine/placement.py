"""Which CPUs a point runs on, and which core counts a sweep visits.

`pack` fills one L3 domain, then the rest of its socket, then the next socket; `spread` (the paper's
"RR") deals cores round-robin across sockets, and across L3 domains within a socket. Both use one
hardware thread per physical core before any SMT sibling, so "N cores" means N physical cores for as
long as the machine has them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import zip_longest

from mosbench.errors import UserError
from mosbench.machine.topology import Cpu, Topology

PLACEMENTS = ("pack", "spread")


def order(topo: Topology, placement: str) -> list[int]:
    """All online CPUs in the order a growing core count takes them."""
    if placement not in PLACEMENTS:
        raise UserError(f"unknown placement {placement!r} (choose from {', '.join(PLACEMENTS)})")
    key = lambda c: (c.socket, c.l3, c.core)  # noqa: E731
    result: list[int] = []
    for thread in range(topo.smt):
        layer = sorted((c for c in topo.cpus if c.thread == thread), key=key)
        result.extend(c.id for c in (layer if placement == "pack" else _round_robin(layer)))
    return result


def _round_robin(cpus: list[Cpu]) -> list[Cpu]:
    """Interleaves sockets, and within each socket its L3 domains, one core at a time."""

    def interleave(groups: list[list[Cpu]]) -> list[Cpu]:
        return [c for batch in zip_longest(*groups) for c in batch if c is not None]

    sockets: dict[int, dict[int, list[Cpu]]] = {}
    for c in cpus:
        sockets.setdefault(c.socket, {}).setdefault(c.l3, []).append(c)
    per_socket = [interleave(list(l3s.values())) for _, l3s in sorted(sockets.items())]
    return interleave(per_socket)


def boundaries(topo: Topology, placement: str) -> list[int]:
    """Core counts where the sharing changes, so a sweep sees each change on its own.

    The first L3 domain filled, each socket filled, every socket in use, every L3 domain in use, every
    physical core in use (the next CPU is an SMT sibling), and all CPUs.
    """
    primary = [topo.by_id(c) for c in order(topo, placement) if topo.by_id(c).thread == 0]
    l3_size: dict[int, int] = {}
    socket_size: dict[int, int] = {}
    for c in primary:
        l3_size[c.l3] = l3_size.get(c.l3, 0) + 1
        socket_size[c.socket] = socket_size.get(c.socket, 0) + 1
    l3_used: dict[int, int] = {}
    socket_used: dict[int, int] = {}
    marks = {topo.physical_cores, len(topo.cpus)}
    first_l3_full = False
    for n, c in enumerate(primary, start=1):
        l3_used[c.l3] = l3_used.get(c.l3, 0) + 1
        socket_used[c.socket] = socket_used.get(c.socket, 0) + 1
        if not first_l3_full and l3_used[c.l3] == l3_size[c.l3]:
            first_l3_full = True
            marks.add(n)
        if all(socket_used[s] == socket_size[s] for s in socket_used):
            marks.add(n)
        if len(socket_used) == len(socket_size) and len(socket_used) > 1 and n == len(socket_size):
            marks.add(n)
        if len(l3_used) == len(l3_size) and len(l3_size) > 1 and n == len(l3_size):
            marks.add(n)
    return sorted(marks)


def default_series(topo: Topology, placement: str) -> list[int]:
    """1, doublings, every sharing boundary, and the maximum."""
    top = len(topo.cpus)
    series = {1, top}
    n = 2
    while n < top:
        series.add(n)
        n *= 2
    series.update(boundaries(topo, placement))
    return sorted(series)


_RANGE = re.compile(r"^(\d+|max)\.\.(\d+|max)(?::(\d+))?$")


def parse_core_counts(spec: str | None, topo: Topology, placement: str = "pack") -> list[int]:
    """Parses "1,2,4..48", "8..max", "4..64:4" or "max"; None or "auto" gives the default series.

    `a..b` doubles from a and always includes b; `a..b:s` steps by s.
    """
    top = len(topo.cpus)
    if spec is None or spec.strip() in ("", "auto"):
        return default_series(topo, placement)

    def number(tok: str) -> int:
        return top if tok == "max" else int(tok)

    counts: set[int] = set()
    for part in (p.strip() for p in spec.split(",")):
        m = _RANGE.match(part)
        if m:
            lo, hi = number(m.group(1)), number(m.group(2))
            if lo < 1 or hi < lo:
                raise UserError(f"bad core range {part!r}: needs 1 <= start <= end")
            step = int(m.group(3)) if m.group(3) else 0
            if m.group(3) and step < 1:
                raise UserError(f"bad core range {part!r}: step must be at least 1")
            n = lo
            while n < hi:
                counts.add(n)
                n = n + step if step else n * 2
            counts.add(hi)
        elif part == "max" or part.isdigit():
            counts.add(number(part))
        else:
            raise UserError(f"malformed core list {spec!r}: expected e.g. 1,2,4..48,max")
    if 0 in counts:
        raise UserError("core counts start at 1")
    too_many = sorted(n for n in counts if n > top)
    if too_many:
        raise UserError(f"{too_many[-1]} cores asked for, but this machine has {top} online CPUs")
    return sorted(counts)


@dataclass(frozen=True)
class Assignment:
    cpus: tuple[int, ...]
    loadgen_cpus: tuple[int, ...] = ()
    loadgen_shared: bool = False  # True when the load generator had to share the measured CPUs


def assign(topo: Topology, placement: str, cores: int, loadgen_cores: int = 0) -> Assignment:
    """The measured CPUs for a point, and CPUs for its load generator.

    The load generator takes CPUs from the far end of the placement order (another socket when there
    is one), so it disturbs the measured domain least; only when no CPU is spare does it share.
    """
    seq = order(topo, placement)
    if cores > len(seq):
        raise UserError(f"{cores} cores asked for, but this machine has {len(seq)} online CPUs")
    cpus = tuple(seq[:cores])
    if not loadgen_cores:
        return Assignment(cpus)
    spare = seq[cores:]
    if spare:
        return Assignment(cpus, tuple(reversed(spare))[:loadgen_cores][::-1])
    return Assignment(cpus, cpus, loadgen_shared=True)
