"""How numbers are written for a person: throughputs and latencies, in the terminal and the report."""

from __future__ import annotations


def si(x: float | None, digits: int = 3) -> str:
    """1234567 → 1.23M: throughputs span nine orders of magnitude across workloads."""
    if x is None:
        return "–"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.{digits}g}{unit}"
    return f"{x:.{digits}g}"


def latency(us: float | None) -> str:
    if us is None:
        return "–"
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.3g} µs"
