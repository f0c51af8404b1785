"""What changed between runs, as tables and sentences: each significant change's explanation
(analysis/explain), built once for `mosbench compare`, `ab`, `bisect`, `history` (analysis/explain_history)
and the report's "What changed" section, and the differential flame graph of B against A for the report.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from markupsafe import Markup

from mosbench.analysis import explain
from mosbench.analysis.explain import REPLICATES, Delta, Explained, Explanation, FunctionDelta, Unprofiled
from mosbench.analysis.history import Shape
from mosbench.filenames import file_stem
from mosbench.report import flamegraph
from mosbench.report.rows import Column, TableModel, p_value
from mosbench.units import plain

if TYPE_CHECKING:
    from mosbench.analysis.explain_history import HistoryExplained

TERMINAL_TOP = 5  # functions a list the terminal shows (--json: all)
REPORT_TOP = 12


def _signed(x: float) -> str:
    return ("+" if x >= 0 else "") + plain(x)


def _interval(d: Delta) -> str:
    return "–" if d.low is None or d.high is None else f"{_signed(d.low)} … {_signed(d.high)}"


def heading(found: Explained | HistoryExplained) -> str:
    """The change in one line: the point, the sides, the ratio with its interval."""
    if not isinstance(found, Explained):
        return _history_heading(found)
    c = found.change
    a, b = found.found.labels
    interval = f" [{c.low:.3f}–{c.high:.3f}]" if c.low is not None and c.high is not None else ""
    return f"{c.point.text()}: {c.verdict}, {b}/{a} {c.ratio:.3f}{interval} per-core throughput"


def _history_heading(found: HistoryExplained) -> str:
    """A history's change in one line: the point, the boundary, the ratio of the levels with its interval."""
    d = found.change.difference
    drift = " (a drift)" if found.shift.shape is Shape.DRIFT else ""
    interval = f" [{d.low:.3f}–{d.high:.3f}]" if d.low is not None and d.high is not None else ""
    return (f"{found.point.text()}: {'faster' if d.ratio > 1 else 'slower'} from {found.before.name} to "
            f"{found.after.name}{drift}, {d.ratio:.3f}×{interval} per-core throughput, p adj. "
            f"{p_value(found.change.p_adjusted)}")


def _both_ways(found: list[FunctionDelta], change: Callable[[FunctionDelta], float],
               top: int | None) -> list[FunctionDelta]:
    """The `top` largest changes, and then the largest few of the other sign where none made it: time that
    moves from one path to another shrinks in one and grows in the other, and both say why."""
    if top is None:
        return found
    first = found[:top]
    signs = {change(f) > 0 for f in first}
    rest = [f for f in found[top:] if (change(f) > 0) not in signs][:2]
    return first + rest


def table(e: Explanation, top: int | None = TERMINAL_TOP) -> TableModel:
    """The explanation's deltas, each side's mean and the change's 95% interval: the measured CPU time
    first, then the named functions by own time (with their callers) and by inclusive time, then the
    locks, shared cache lines and system calls that moved."""
    a, b = e.labels
    t = TableModel(f"{e.point.text()}: per {e.unit}, A = {a} → B = {b} ({e.trials[0]} and {e.trials[1]} profiled "
                   "trials; µs unless named)",
                   [Column("what", left=True, wraps=True), Column("kind", left=True), Column("A"), Column("B"),
                    Column("change"), Column("95% interval")])

    def add(d: Delta, kind: str) -> None:
        t.add([d.name, kind, plain(d.a), plain(d.b), _signed(d.change), _interval(d)],
              cell_styles={4: "poor" if d.change > 0 else "good"} if d.named else {})

    for d in (e.cpu, *e.times):
        add(d, "measured")
    add(e.profiled, "perf samples")
    t.breaks.add(len(t.rows) - 1)
    own = _both_ways(e.own, lambda f: f.own.change, top)
    for f in own:
        add(f.own, f"{f.kind}, own")
        for c in [c for c in f.callers if c.named][:3]:
            add(Delta(f"  ← {c.name}", c.a, c.b, c.low, c.high, c.named), "caller")
    shown = {f.function for f in own}
    for f in _both_ways([f for f in e.inclusive if f.function not in shown], lambda f: f.inclusive.change, top):
        add(f.inclusive, f"{f.kind}, inclusive")
    if own or e.inclusive:
        t.breaks.add(len(t.rows) - 1)
    for d in [d for d in e.locks if d.named][:top]:
        add(d, "lock wait (perf lock)")
    if e.hitm:
        add(e.hitm[0], "HITMs (perf c2c)")
        for d in [d for d in e.hitm[1:] if d.named][:top]:
            add(d, "HITMs (perf c2c)")
    for d in e.syscalls[:top]:
        add(d, "system calls")
    return t


def lines(e: Explanation) -> list[str]:
    """The share of the change the named functions account for, and what the explanation could not see."""
    out = []
    if not e.replicated:
        out.append(f"{min(e.trials)} profiled trial on a side: no spread to judge a change by, so nothing is named "
                   f"(profile {REPLICATES} trials a side)")
    elif e.share is None:
        out.append(f"CPU time per {e.unit} did not change; the named functions moved {_signed(e.attributed)} µs")
    else:
        rest = e.cpu.change - e.attributed
        if abs(rest) < 1e-9 * abs(e.cpu.change):
            rest = 0.0  # the sums' rounding, not a figure: "+0.000000000000000444 µs" says nothing
        out.append(f"The named functions account for {e.share:.0%} of the measured change in CPU time per {e.unit} "
                   f"({_signed(e.attributed)} of {_signed(e.cpu.change)} µs); {_signed(rest)} µs "
                   f"({1 - e.share:.0%}) not attributed")
    if not e.cpu.named and e.replicated:
        out.append(f"the measured change in CPU time per {e.unit} is within its trials' spread: the throughput "
                   "moved by other means (idle, waiting) or too little to attribute")
    out.extend(e.absent)
    return out


def anchor(found: Explained | HistoryExplained) -> str:
    """The report's id for a change's explanation, what the comparison tables and the History section
    link to: a comparison's by its other run and point, a history's by its two runs and point."""
    k = found.found.point
    side = (f"history_{found.before.id}_{found.after.id}" if not isinstance(found, Explained)
            else f"vs_{found.found.labels[1]}")
    return "why_" + file_stem(f"{side}_{k.workload}_{k.test}_{k.variant}_{k.cores}")


@dataclass(frozen=True)
class Block:
    """One explained change as both outputs show it: its heading, its table and its lines."""

    found: Explained | HistoryExplained  # a comparison's change (compare, ab, bisect) or a history's
    heading: str
    table: TableModel
    lines: tuple[str, ...]
    anchor: str  # the report's id for it


def blocks(found: Sequence[Explained | HistoryExplained], top: int | None = TERMINAL_TOP) -> list[Block]:
    return [Block(x, heading(x), table(x.found, top), tuple(lines(x.found)), anchor(x))
            for x in found if isinstance(x.found, Explanation)]


@dataclass(frozen=True)
class Unexplained:
    """The changes a side of which was not profiled, together: which, and the fewest commands that would
    profile them (a run and workload each)."""

    line: str
    commands: tuple[str, ...]


def unexplained(found: Sequence[Explained | HistoryExplained]) -> Unexplained | None:
    missing = [x.found for x in found if isinstance(x.found, Unprofiled)]
    if not missing:
        return None
    named = [f"{u.point.text()} ({' and '.join(u.missing)})" for u in missing[:6]]
    more = f" and {len(missing) - 6} more" if len(missing) > 6 else ""
    return Unexplained(f"{len(missing)} significant change{'s' if len(missing) > 1 else ''} not explained: a side "
                       f"was not profiled ({'; '.join(named)}{more}). Profile with:",
                       tuple(explain.profile_commands(missing)))


def fold_command(command: str, width: int) -> str:
    """A command for the terminal, indented and folded between its words with a shell's backslash, so it
    fits `width` and a copy of it still runs (a quoted word stays whole)."""
    out, line = [], "  "
    for word in map(shlex.quote, shlex.split(command)):
        if line.strip() and len(line) + 1 + len(word) > width - 2:
            out.append(line)
            line = "    "
        line += ("" if not line.strip() else " ") + word
    return " \\\n".join([*out, line])


def flame(e: Explanation) -> str | None:
    """B's profile, each frame coloured by its change from A's, per unit of work (red grew, blue shrank)."""
    return flamegraph.svg(e.a_profile, e.b_profile, e.labels[0], e.labels[1], e.unit)


def flames(found: Sequence[Block], files: Path) -> list[Markup | None]:
    """Each block's differential flame graph for the page (None where it has no frame), each also written to
    files as <test>_<variant>_<cores>_<B>_vs_<A>_flame.svg."""
    out: list[Markup | None] = []
    for b in found:
        e = b.found.found
        assert isinstance(e, Explanation)
        graph = flame(e)
        if graph:
            k = e.point
            files.mkdir(parents=True, exist_ok=True)
            stem = "_".join(file_stem(x) for x in (k.name, k.variant, str(k.cores), e.labels[1], "vs", e.labels[0]))
            (files / f"{stem}_flame.svg").write_text(graph)
        out.append(Markup(graph) if graph else None)
    return out
