"""The side-by-side table of mosbench-micro against will-it-scale (analysis/pairs.py's pairs), as
benchmarks/vs_will_it_scale.py and the many-core check print it."""

from __future__ import annotations

import statistics

from mosbench.analysis.pairs import Comparison, FailedPair, Pair, Verdict, tally


def header(rounds: int, same: bool = False) -> str:
    """The table's header; with `same` the first column is will-it-scale's too."""
    first = "theirs'" if same else "ours"
    return (f"{'test':18} {'mode':7} {'tasks':>5} {first + ' ops/s':>12} {'iqr%':>5} {'theirs ops/s':>12} "
            f"{'iqr%':>5} {'ratio':>6} {'95% interval':>13}  ({rounds} interleaved rounds, medians)")


def format_pair(p: Pair) -> str:
    """The pair's table line; a flag at its end when it is not within ±5%, naming each bimodal tool."""
    found = "; ".join(f"{label} {m.describe()}" for label, m in zip(p.labels, (p.ours_modes, p.theirs_modes),
                                                                      strict=True) if m.bimodal)
    if p.verdict is Verdict.BIMODAL:
        flag = f"  <-- {found}"
    elif p.verdict in (Verdict.APART, Verdict.UNCLEAR):
        flag = f"  <-- not within ±5%: {p.verdict.value}" + (f"; {found}" if found else "")
    else:
        flag = f"  ({found})" if found else ""
    return (f"{p.test:18} {p.mode:7} {p.tasks:5d} {p.ours_median:12.0f} {p.ours_spread:5.1f} "
            f"{p.theirs_median:12.0f} {p.theirs_spread:5.1f} {p.ratio:6.3f} {p.low:6.3f}–{p.high:6.3f}{flag}")


def format_failed(f: FailedPair) -> str:
    """A failed pair's table line: the reason, then the failing tool's last lines, indented."""
    return "\n".join([f"{f.test:18} {f.mode:7} {f.tasks:5d}  FAILED: {f.reason}", *(f"    {x}" for x in f.lines)])


def format_totals(c: Comparison) -> str:
    """The closing line: verdicts counted, ratios' median and range, the host's steal, the deadline's cut,
    the pairs that failed."""
    ratios = [p.ratio for p in c.pairs]
    why = "the interrupt" if c.interrupted else "the deadline"
    cut = f"; {len(c.not_run)} pairs not run before {why}" if c.not_run else ""
    cut += f"; {len(c.failed)} pairs FAILED" if c.failed else ""
    if not ratios:
        return f"no pair measured{cut}; steal {c.steal_pct:.2f}% of CPU time over the run"
    n = tally(c.pairs)
    # A host that steals time moves lock-bound tests by tens of percent (docs/WORKLOADS.md): say how much.
    return (f"{n[Verdict.WITHIN]} of {len(ratios)} within ±5%, {n[Verdict.UNCLEAR]} unclear, "
            f"{n[Verdict.APART]} apart, {n[Verdict.BIMODAL]} bimodal; median ratio "
            f"{statistics.median(ratios):.3f}, range {min(ratios):.3f}–{max(ratios):.3f}; steal "
            f"{c.steal_pct:.2f}% of CPU time over the run{cut}")
