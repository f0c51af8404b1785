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


def cpu_time(us: float | None) -> str:
    """CPU time per unit of work: "0.17 µs", "4.14 ms", "2.1 s", never "4.14e+03 µs"."""
    if us is None:
        return "–"
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    if us >= 1000:
        return f"{us / 1000:.3g} ms"
    return f"{us:.3g} µs"
