"""Veal & Foong's method in the report: the one-core baseline curve (their Figures 2 and 3) with its
verdict, and the steps each file-set point took to find the most load SPECweb2005's rule allows."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from mosbench.analysis import baseline
from mosbench.analysis.cells import Series
from mosbench.report.rows import Column, TableModel
from mosbench.units import si


def baseline_figure(name: str, steps: list[baseline.BaselineStep], verdict: baseline.Verdict, unit: str) -> Figure:
    fig, (eff, thr) = plt.subplots(1, 2, figsize=(9, 3.4))
    # Points, not a line: under noise busy need not rise with every step, and a line would double back.
    busy = [s.busy * 100 for s in steps]
    eff.plot(busy, [s.cpu_us_per_unit or 0 for s in steps], "o", color="#4c72b0")
    if verdict.reference_us:
        eff.axhline(verdict.reference_us, color="#bbbbbb", lw=0.8)
        eff.axhline(verdict.reference_us * (1 + baseline.FLAT_WITHIN), color="#bbbbbb", lw=0.8, ls="--")
    eff.set_xlabel("server core busy (%)")
    eff.set_ylabel(f"server CPU µs per {unit}")
    eff.set_ylim(bottom=0)
    eff.set_title("efficiency under load (their Figure 2)", fontsize=9)
    offered = [s.offered for s in steps]
    thr.plot(offered, [s.carried for s in steps], "o-", color="#dd8452", label="carried")
    thr.plot(offered, offered, color="#bbbbbb", lw=0.8, ls="--", label="offered")
    thr.set_xlabel("offered requests/s")
    thr.set_ylabel("carried requests/s")
    thr.legend(fontsize=7)
    thr.set_title("throughput follows load (their Figure 3)", fontsize=9)
    fig.suptitle(f"{name}: one-core baseline", fontsize=10)
    fig.tight_layout()
    return fig


def baseline_table(name: str, steps: list[baseline.BaselineStep], verdict: baseline.Verdict,
                   unit: str) -> TableModel:
    t = TableModel(f"{name}: one-core baseline", [Column("offered (share of max)"), Column("offered/s"),
                                                   Column("carried/s"), Column("busy"), Column(f"CPU µs/{unit}")])
    for s in steps:
        bent = verdict.bends_at == s
        t.add([f"{s.offered_share:.0%}", si(s.offered), si(s.carried), f"{s.busy:.0%}",
               "–" if s.cpu_us_per_unit is None else f"{s.cpu_us_per_unit:.3g}"], style="failed" if bent else None)
    return t


def qos_table(series: list[Series]) -> TableModel | None:
    """Every file-set point's search: each step's connections, rate and verdicts, the chosen one marked."""
    t = TableModel("the search for the most load meeting SPECweb2005's rule (95% good, 99% tolerable)",
                   [Column("variant", left=True), Column("cores"), Column("connections per port"), Column("kB/s"),
                    Column("good"), Column("tolerable"), Column("p99 ms"), Column("server CPU µs/kB"),
                    Column("chosen", left=True)])
    for s in series:
        for cell in s.ok_cells():
            m = cell.best_metrics
            for step in m.get("qos_steps") or []:
                chosen = step["connections"] == m.get("qos_connections")
                t.add([s.variant, str(cell.cores), str(step["connections"]), si(step["kilobytes_per_s"]),
                       f"{step['good_share']:.1%}", f"{step['tolerable_share']:.1%}",
                       f"{step['latency_p99_us'] / 1000:.1f}",
                       "–" if step["server_us_per_kilobyte"] is None else f"{step['server_us_per_kilobyte']:.3g}",
                       "measured here" if chosen else ""], cell_styles={8: "good"} if chosen else None)
            if m.get("qos_steps"):
                t.breaks.add(len(t.rows) - 1)
    return t if t.rows else None


def baselines(series: list[Series]) -> list[tuple[Series, list[baseline.BaselineStep], baseline.Verdict]]:
    """Each series with a one-core baseline: its curve and the verdict on it."""
    out = []
    for s in series:
        one = s.cells.get(1)
        if one is None or not one.best_metrics.get("baseline"):
            continue
        steps = baseline.steps_from(one.best_metrics)
        out.append((s, steps, baseline.judge(steps)))
    return out
