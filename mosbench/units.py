"""How numbers are written for a person: throughputs and latencies, in the terminal and the report.

One rule: three significant figures (two where asked), never in scientific notation. Throughputs and
counts take an SI prefix (63.6M, 98.9k); a number in a column whose title names its unit (CPU µs per unit,
wait µs) is written out, with thousands separated from 1,000 (0.0157, 10.1, 2,360); a time with its unit
takes the unit that keeps it under 1,000 (5.83 ms, 2.1 s).
"""

from __future__ import annotations

import math

PREFIXES = (("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3))


def _rounded(x: float, digits: int) -> tuple[float, int]:
    """x to `digits` significant figures, and its power of ten after rounding (999.7 → 1000, 3)."""
    r = float(f"{x:.{digits - 1}e}")
    return r, math.floor(math.log10(abs(r)))


def plain(x: float | None, digits: int = 3) -> str:
    """2360.4 → "2,360", 0.0157 → "0.0157", 2.0 → "2": `digits` significant figures, no exponent."""
    if x is None:
        return "–"
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    r, power = _rounded(x, digits)
    if power >= digits - 1:
        return f"{r:,.0f}"
    text = f"{r:.{digits - 1 - power}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def si(x: float | None, digits: int = 3) -> str:
    """1234567 → 1.23M: throughputs span nine orders of magnitude across workloads; 999,999 → 1M."""
    if x is None:
        return "–"
    if x == 0 or not math.isfinite(x):
        return plain(x)
    r, power = _rounded(x, digits)
    for prefix, exponent in PREFIXES:
        if power >= exponent:
            return plain(r / 10 ** exponent, digits) + prefix
    return plain(r, digits)


def _time(us: float | None) -> str:
    if us is None:
        return "–"
    r = float(f"{us:.2e}") if us and math.isfinite(us) else us
    if abs(r) >= 1e6:
        return f"{plain(us / 1e6)} s"
    if abs(r) >= 1000:
        return f"{plain(us / 1000)} ms"
    return f"{plain(us)} µs"


def latency(us: float | None) -> str:
    """A latency in µs as read: "90 µs", "5.83 ms", "1.2 s"."""
    return _time(us)


def cpu_time(us: float | None) -> str:
    """CPU time per unit of work: "0.17 µs", "4.14 ms", "2.1 s", never "4.14e+03 µs"."""
    return _time(us)
