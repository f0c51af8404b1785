"""The commutativity section: the calls × calls heat map of this kernel beside COMMUTER's published totals,
the table of every situation, and the commutative pairs that do not scale with what grew in their profile."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from mosbench.analysis import commute
from mosbench.analysis.cells import Series, SeriesKey
from mosbench.analysis.profiles import Profile
from mosbench.report.rows import Column, TableModel, grade
from mosbench.units import si
from mosbench.workloads.commute import CALLS


def _ratio(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def heat_map(found: list[commute.PairResult], kernel: str) -> Figure | None:
    """Calls × calls (lower triangle, COMMUTER's layout): the share of each pair's commutative situations
    that scale on this kernel, with the count; grey where no commutative situation of the pair ran. Beside
    it, the share over every situation against COMMUTER's published Linux and sv6 figures."""
    cells = commute.matrix(found)
    if not cells:
        return None
    n = len(CALLS)
    # Below the diagonal, -1 (drawn grey) where no commutative situation of the pair ran; above it, nothing.
    grid = np.where(np.tri(n, dtype=bool), -1.0, np.nan)
    index = {c: i for i, c in enumerate(CALLS)}
    for (a, b), cell in cells.items():
        i, j = sorted((index[a], index[b]), reverse=True)
        grid[i, j] = cell.share
    fig = plt.figure(figsize=(10.5, 6.4), layout="constrained")
    ax, bars = fig.subplots(1, 2, width_ratios=(3.2, 1))
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(under="#e8e8e8", bad="white")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=1)
    for (a, b), cell in cells.items():
        i, j = sorted((index[a], index[b]), reverse=True)
        ax.text(j, i, f"{cell.scaling}/{cell.total}", ha="center", va="center", fontsize=6)
    ax.set_xticks(range(n), CALLS, rotation=90, fontsize=7)
    ax.set_yticks(range(n), CALLS, fontsize=7)
    ax.set_title(f"commutative situations that scale on {kernel}\n(each side ≥ {commute.SCALES_AT:.0%} of its "
                 "alone rate; scaling/measured)", fontsize=9)
    fig.colorbar(image, ax=ax, shrink=0.6, label="share that scales")
    scaling = sum(c.scaling for c in cells.values())
    total = sum(c.total for c in cells.values())
    labels = [f"this kernel\n{total} situations\nthroughput"] + [
        f"{name.replace(' (COMMUTER)', '')}\n{of:,} tests\nconflict-free" for name, _, of in commute.PUBLISHED]
    shares = [scaling / total] + [k / of for _, k, of in commute.PUBLISHED]
    bars.bar(range(len(shares)), shares, color=["#4c72b0", "#999999", "#cccccc"])
    for x, share in enumerate(shares):
        bars.text(x, share + 0.01, f"{share:.1%}", ha="center", fontsize=8)
    bars.set_xticks(range(len(shares)), labels, fontsize=6.5)
    bars.set_ylim(0, 1.1)
    bars.set_title("share that scales, against\nCOMMUTER's published figures\n(SOSP 2013)", fontsize=9)
    return fig


def situations_table(found: list[commute.PairResult]) -> TableModel:
    """Every situation at every pair core count: both sides alone and beside each other."""
    t = TableModel(f"Each side's rate beside the other over its rate alone (one core, same state); a pair "
                   f"scales where both keep {commute.SCALES_AT:.0%}",
                   # The rates alone are the ratios' context, shown with --wide: the verdict's columns fit 80.
                   [Column("situation", left=True), Column("calls", left=True), Column("cores"),
                    Column("A alone/s", essential=False), Column("B alone/s", essential=False),
                    Column("A beside B"), Column("B beside A"), Column("scales", left=True)])
    for r in found:
        said = "–" if r.scales is None else "yes" if r.scales else "NO"
        if r.interfered:
            said += " (interfered)"
        expected = r.commutes is None or r.scales is None or r.scales or not r.commutes
        style = {7: "good" if r.scales else ("poor" if not expected else "fair")} if r.scales is not None else {}
        for col, ratio in ((5, r.ratio_a), (6, r.ratio_b)):
            if ratio is not None:
                style[col] = grade(ratio)
        t.add([r.test, "commute" if r.commutes else "conflict" if r.commutes is False else "?", str(r.cores),
               "–" if r.alone_a is None else si(r.alone_a), "–" if r.alone_b is None else si(r.alone_b),
               _ratio(r.ratio_a), _ratio(r.ratio_b), said], cell_styles=style)
    return t


def not_scaling_table(series: list[Series], found: list[commute.PairResult],
                      profiles: dict[tuple[str, str, str], dict[int, Profile]]) -> TableModel:
    """The kernel's list to fix: commutative pairs that do not scale, the worst loss first, with the
    kernel functions whose time per operation grew from alone to side by side (where profiled)."""
    t = TableModel("Commutative pairs that do not scale on this kernel, the worst first",
                   [Column("situation", left=True), Column("cores"), Column("worst side kept"),
                    Column("grew (µs/op, alone → beside)", left=True, wraps=True),
                    Column("shared lines (perf c2c)", left=True, wraps=True)])
    for r in commute.not_scaling(found):
        grew = commute.pair_growth(r, profiles, commute.pair_work(series, r))
        text = "; ".join(f"{g.function} {g.low_us:.2f}→{g.high_us:.2f}" for g in grew) if grew else (
            "not profiled (run with --profile commute)")
        t.add([r.test, str(r.cores), _ratio(r.worst), text,
               _shared_lines(profiles.get(SeriesKey(commute.WORKLOAD, r.test, "pair"), {}).get(r.cores))],
              cell_styles={2: grade(r.worst or 0.0)})
    return t


def _shared_lines(prof: Profile | None) -> str:
    """HITM samples per operation and the code touching the hottest line; or why there are none."""
    if prof is None:
        return "not profiled"
    per_unit = prof.hitm_per_unit()
    if per_unit is None:
        return f"absent: {prof.c2c_absent or 'not recorded'}"
    hottest = prof.c2c_lines[0] if prof.c2c_lines else None
    code = ", ".join(str(c["symbol"]) for c in hottest["code"][:3]) if hottest and hottest.get("code") else ""
    return f"{per_unit:.3g} HITM/op" + (f"; hottest line {hottest['address']}: {code}" if hottest else "")


def changes_table(base_label: str, other_label: str, changes: list[commute.Change]) -> TableModel:
    t = TableModel(f"Situations whose verdict changed, {other_label} against {base_label}",
                   [Column("situation", left=True), Column("cores"), Column(f"worst side ({base_label})"),
                    Column(f"worst side ({other_label})"), Column("now", left=True)])
    for c in changes:
        now = "scales" if c.after.scales else "no longer scales"
        t.add([c.test, str(c.cores), _ratio(c.before.worst), _ratio(c.after.worst), now],
              cell_styles={4: "good" if c.after.scales else "poor"})
    return t
