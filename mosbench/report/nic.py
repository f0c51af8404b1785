"""A point's network work in words: did each of its CPUs get its share of the NET_RX and NET_TX softirqs
and of the NIC's interrupts, and where did the rest go. Composed from the counts the point stored
(analysis/network.py), never stored: points stored before the words moved here carry their own
sentence, shown as it was.
"""

from __future__ import annotations

from collections.abc import Mapping

from mosbench.analysis.network import NetworkWork


def summary(work: NetworkWork) -> str:
    """One line, each kind of work that any CPU did: "NET_RX: 83% on the point's 4 CPUs (min 0%, max 33% of
    it per CPU); 17% elsewhere (CPU 5)"."""
    if work.summary is not None:
        return work.summary
    lines = [_line(what, work.on_point(counts), work.elsewhere(counts))
             for what, counts in (("NET_RX", work.net_rx), ("NET_TX", work.net_tx), ("NIC interrupts", work.irqs))
             if any(counts.values())]
    return " | ".join(lines) if lines else f"no network work on {work.device} in the window"


def _line(what: str, point: Mapping[int, int], elsewhere: Mapping[int, int]) -> str:
    n = len(point)
    done = sum(point.values())
    on = done / (done + sum(elsewhere.values()))
    cpus = f"the point's {n} CPUs" if n > 1 else "the point's CPU"
    text = f"{what}: {_percent(on)} on {cpus}" if on else f"{what}: none on {cpus}"
    if done and n > 1:
        least, most = min(point.values()) / done, max(point.values()) / done
        text += f" (min {_percent(least)}, max {_percent(most)} of it per CPU)"
    if not elsewhere:
        return text + "; none elsewhere"
    return text + f"; {_percent(1 - on)} elsewhere ({_cpu_names(elsewhere)})"


def _percent(x: float) -> str:
    shown = round(100 * x)
    if shown == 0 and x > 0:
        return "<1%"
    if shown == 100 and x < 1:
        return ">99%"
    return f"{shown}%"


def _cpu_names(counts: Mapping[int, int], most: int = 3) -> str:
    ranked = sorted(counts, key=lambda c: (-counts[c], c))
    if len(ranked) == 1:
        return f"CPU {ranked[0]}"
    shown = ", ".join(str(c) for c in ranked[:most])
    return f"CPUs {shown} and {len(ranked) - most} more" if len(ranked) > most else f"CPUs {shown}"
