"""The network section: for each server point with a network side (analysis/network.py), the best
trial's client hosts, the network work its window put on each CPU, and its flows' RSS hashes tested
as Veal & Foong tested theirs (their Table 3).

Its question: does every server core get its share of the network work, and where did the rest go?
A point measured over loopback without a NIC, client hosts or flows has no row here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mosbench import cpulist
from mosbench.analysis import network
from mosbench.analysis.cells import Series, group_by_test
from mosbench.analysis.network import PointNetwork
from mosbench.report import nic
from mosbench.report.rows import Column, TableModel
from mosbench.units import cpu_time, latency, si
from mosbench.workloads.server.hostresult import CLOCK_SKEW_NOTE_S, WINDOW_SPREAD_NOTE_S, HostResult
from mosbench.workloads.server.limits import SATURATED

# More groups of equal counts than this read as a range: 48 CPUs' counts listed one by one would fill
# the terminal with a column of numbers no one compares by eye.
MOST_GROUPS = 4
# Below these the point's CPUs did not get the network work evenly or wholly: the server's cores then
# wait on, or are helped by, CPUs whose time the point's figures do not hold.
EVEN_ENOUGH = 0.8  # the least CPU's NET_RX against an even split of the point's
WHOLLY_ENOUGH = 0.9  # the point's CPUs' share of all NET_RX
# Every table's first columns. The variant folds: these tables are all numbers, and a long variant
# ("small-cache") would otherwise push the last of them past 80 columns.
POINT = (Column("variant", left=True, wraps=True), Column("cores"))


def _share(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def _groups(counts: Mapping[int, int]) -> list[tuple[list[int], str]]:
    """CPUs whose counts read the same, together, in CPU order."""
    by_text: dict[str, list[int]] = {}
    for cpu in sorted(counts):
        by_text.setdefault(si(counts[cpu]), []).append(cpu)
    return sorted(((cpus, text) for text, cpus in by_text.items()), key=lambda g: g[0][0])


def _listed(counts: Mapping[int, int]) -> str:
    groups = _groups(counts)
    if len(groups) <= MOST_GROUPS:
        return " ".join(f"{cpulist.format(cpus)}={text}" for cpus, text in groups)
    least = min(counts, key=lambda c: (counts[c], c))
    most = max(counts, key=lambda c: (counts[c], -c))
    return f"{si(counts[least])} (CPU {least}) to {si(counts[most])} (CPU {most}) on {len(counts)} CPUs"


def compact_counts(work: network.NetworkWork, counts: Mapping[int, int]) -> str:
    """A per-CPU count, short: the point's CPUs first (CPU list=count, a CPU that did none as 0), then
    any other CPU that did some; "–" where no CPU did any."""
    if not any(counts.values()):
        return "–"
    text = _listed(work.on_point(counts)) if work.point_cpus else ""
    if other := work.elsewhere(counts):
        text += f" | elsewhere {_listed(other)}"
    return text.strip(" |")


def every_cpu(counts: Mapping[int, int]) -> str:
    """Every CPU's count, for the HTML report's wide column."""
    return " ".join(f"{cpu}={n}" for cpu, n in sorted(counts.items())) or "–"


def _clock(h: HostResult) -> str:
    if h.clock_offset_ms is None:
        return "–"
    error = "" if h.clock_offset_error_ms is None else f"±{h.clock_offset_error_ms:.2g}"
    return f"{h.clock_offset_ms:+.3g}{error} ms"


def client_table(name: str, found: Sequence[PointNetwork]) -> TableModel | None:
    """Per point driven from client hosts: all hosts together (the spread of their windows' openings
    on our clock), then each host's answered requests, generator CPU per request, busy share and clock."""
    t = TableModel(f"{name}: client hosts (best trial)",
                   [*POINT, Column("host", left=True, wraps=True), Column("answered"), Column("CPU/req"),
                    Column("busy"), Column("clock", left=True, wraps=True),
                    Column("lost/errors", wide=True), Column("sent", wide=True), Column("p50", wide=True),
                    Column("p99", wide=True), Column("generator CPUs", wide=True)],
                   note="CPU/req: the generator's own CPU time per answered request. busy: the share of a "
                        "host's generator CPUs busy over the window (its own /proc/stat; all hosts: weighed by "
                        "CPUs). clock: each host's clock against ours ± the probe's error; on the all-hosts "
                        "row, how far apart the hosts' windows opened on our clock.")
    for p in found:
        c = p.clients
        if c is None:
            continue
        spread = "–" if c.window_spread_ms is None else f"spread {c.window_spread_ms:.3g} ms"
        styles = {}
        if c.lost or c.errors:
            styles[3] = styles[7] = "poor"
        if c.window_spread_ms is not None and c.window_spread_ms >= WINDOW_SPREAD_NOTE_S * 1000:
            styles[6] = "poor"  # the hosts' counts then cover moments further apart than a round trip
        t.add([p.variant, str(p.cores), f"all {len(c.hosts)}", si(c.done), cpu_time(c.cpu_us_per_request),
               _share(c.busy), spread, f"{c.lost}/{c.errors}", si(sum(h.sent for h in c.hosts)), "", "",
               str(sum(h.cpus or 0 for h in c.hosts))], cell_styles=styles)
        for h in c.hosts:
            styles = {}
            if h.lost or h.errors:
                styles[3] = styles[7] = "poor"
            if h.busy is not None and h.busy >= SATURATED:
                styles[5] = "poor"  # a host this busy may have been the limit (limits.judge_hosts)
            if h.clock_offset_ms is not None and abs(h.clock_offset_ms) >= CLOCK_SKEW_NOTE_S * 1000:
                styles[6] = "fair"
            t.add(["", "", h.host, si(h.done), cpu_time(h.cpu_us_per_request), _share(h.busy), _clock(h),
                   f"{h.lost}/{h.errors}", si(h.sent), latency(h.latency_p50_us), latency(h.latency_p99_us),
                   "–" if h.cpus is None else str(h.cpus)], cell_styles=styles)
        t.breaks.add(len(t.rows) - 1)
    return t if t.rows else None


def work_table(name: str, found: Sequence[PointNetwork]) -> TableModel | None:
    """Per point with the NIC counted over its window: the point's CPUs' share of NET_RX, the least of
    them against an even split, NET_RX and the NIC's interrupts per CPU, the steering applied."""
    # A NIC's queue interrupts only where some point had any: veth and loopback have none to count.
    irqs = any(p.work is not None and any(p.work.irqs.values()) for p in found)
    t = TableModel(f"{name}: network work over the window (best trial)",
                   [*POINT, Column("on point"), Column("least"), Column("NET_RX per CPU", left=True, wraps=True),
                    Column("NIC IRQs per CPU", left=True, wraps=True, wide=not irqs),
                    Column("steering", left=True, wraps=True), Column("net", left=True, wide=True),
                    Column("device", left=True, wide=True), Column("NET_RX every CPU", left=True, wide=True),
                    Column("NET_TX per CPU", left=True, wide=True),
                    Column("rx packets per queue", left=True, wide=True), Column("summary", left=True, wide=True)],
                   note="on point: NET_RX on the point's CPUs, the share of the window's receive softirqs done "
                        "there; least: the point's CPU that did least of them against an even split (1.00: each "
                        "did its share). Per CPU: CPU list=count, the point's CPUs first (0 for one that did "
                        "none), then any other CPU that did some.")
    paths: dict[str, None] = {}
    for p in found:
        w = p.work
        if w is None:
            continue
        least = w.least_of_even(w.net_rx)
        styles = {}
        if w.net_rx_on_point is not None and w.net_rx_on_point < WHOLLY_ENOUGH:
            styles[2] = "poor"
        if least is not None and least < EVEN_ENOUGH:
            styles[3] = "poor"
        queues = " ".join(f"q{q}={'–' if n is None else si(n)}" for q, n in w.rx_packets.items()) or "–"
        t.add([p.variant, str(p.cores), _share(w.net_rx_on_point), "–" if least is None else f"{least:.2f}",
               compact_counts(w, w.net_rx), compact_counts(w, w.irqs), w.steering or "none", w.path or "–",
               w.device or "–", every_cpu(w.net_rx), every_cpu(w.net_tx), queues, nic.summary(w)],
              cell_styles=styles)
        paths[f"{w.path or 'a network'} ({w.device})"] = None
    if not t.rows:
        return None
    # The terminal leaves the wide columns out: which network the counts are of, said once.
    t.note = f"Over {', '.join(paths)}. {t.note}"
    return t


def _fixed(x: float | None, digits: int) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def flows_table(name: str, found: Sequence[PointNetwork]) -> TableModel | None:
    """Per point with flows: how many, how they were chosen, the fewest and most flows a receive queue
    gets by the indirection table, and the key and table they were hashed with."""
    t = TableModel(f"{name}: flows and the receive queues RSS predicts (best trial)",
                   [*POINT, Column("flows"), Column("ports", left=True), Column("per queue"), Column("queues"),
                    Column("RSS key and table", left=True, wraps=True)],
                   note="ports: the flows' source ports, the kernel's ephemeral ones or chosen so the flows "
                        "spread evenly over the queues (-p flows=balanced). per queue: the fewest–most flows "
                        "a receive queue gets; queues: how many the device has (where a point says).")
    for p in found:
        f = p.flows
        if f is None:
            continue
        spread = f.queue_spread()
        styles = {}
        if spread is not None and spread[0] == 0 and f.queue_count and 1 < f.queue_count <= f.count:
            styles[4] = "poor"  # a queue, and the CPU it interrupts, left without a flow it could have had
        t.add([p.variant, str(p.cores), str(f.count), f.chosen or "–",
               "–" if spread is None else f"{spread[0]}–{spread[1]}",
               "–" if f.queue_count is None else str(f.queue_count), f.rss_source or "–"], cell_styles=styles)
    return t if t.rows else None


def _chance(p: float) -> str:
    """χ²'s p as ent words it: a percentage to two places, bounded below 0.01% and above 99.99%."""
    return "<0.01%" if p < 0.0001 else ">99.99%" if p > 0.9999 else f"{p:.2%}"


def _chance_style(p: float) -> dict[int, str]:
    """ent's own reading of χ²'s p: beyond 1% or 99% the bytes are almost surely not random, within 5%
    or 95% suspect."""
    if p < 0.01 or p > 0.99:
        return {4: "poor"}
    return {4: "fair"} if p < 0.05 or p > 0.95 else {}


def randomness_table(name: str, found: Sequence[PointNetwork]) -> TableModel | None:
    """Per point with flows: ent's figures of their hashes' low bytes, as ent prints them (Veal & Foong's
    Table 3, where the NIC's Toeplitz hash spread flows as a random function would)."""
    t = TableModel(f"{name}: the flows' RSS hash, low byte (Veal & Foong's Table 3; best trial)",
                   [*POINT, Column("entropy"), Column("χ²"), Column("p"), Column("mean"), Column("π err"),
                    Column("serial"), Column("bytes", wide=True), Column("Monte Carlo π", wide=True)],
                   note="As ent prints them (π err: the Monte Carlo π's error). Random bytes: entropy near 8 "
                        "bits per byte (at most log2 of the flows), χ²'s p between 10% and 90%, mean 127.5, π "
                        "close, serial correlation near 0; a few flows cannot look random.")
    for p in found:
        f = p.flows
        r = f.randomness() if f is not None else None
        if r is None:
            continue
        shown = r.printed()
        t.add([p.variant, str(p.cores), _fixed(shown.entropy, 6), _fixed(shown.chi_square, 2),
               _chance(r.chi_square_p), _fixed(shown.mean, 4),
               "–" if shown.monte_carlo_error is None else f"{shown.monte_carlo_error:.2f}%",
               _fixed(shown.serial_correlation, 6), str(r.count), _fixed(shown.monte_carlo_pi, 9)],
              cell_styles=_chance_style(r.chi_square_p))
    return t if t.rows else None


@dataclass(frozen=True)
class NetworkGroup:
    """One test's network tables, in the order the section shows them."""

    name: str
    tables: tuple[TableModel, ...]


def section(series: list[Series]) -> list[NetworkGroup]:
    """Per test with any point that has a network side; empty where none has (loopback, older runs)."""
    groups = []
    for name, group in group_by_test(series).items():
        mine = network.points(group)
        made = (make(name, mine) for make in (client_table, work_table, flows_table, randomness_table))
        tables = [t for t in made if t is not None]
        if tables:
            groups.append(NetworkGroup(name, tuple(tables)))
    return groups


def tables(series: list[Series]) -> list[TableModel]:
    return [t for g in section(series) for t in g.tables]
