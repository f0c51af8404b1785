"""The load generators' latency histogram (native/loadgen/hist.c) read back, so hosts merge exactly.

Percentiles of several hosts cannot be averaged: a host with a slow tail would vanish into the mean.
Each remote generator sends its window's buckets; they are added bucket by bucket here and the
percentiles read from the sum with the same bucket tops and the same rank rule as the C side, so one
host's merged result equals its own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

SUB_BITS = 7
SUB = 1 << SUB_BITS
HALF = SUB // 2
PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p999", 0.999))


def bucket_top(index: int) -> int:
    """The largest value bucket `index` holds (hist_bucket_top)."""
    if index < SUB:
        return index
    shift = (index - SUB) // HALF + 1
    mantissa = (index - SUB) % HALF + HALF
    return (mantissa << shift) + (1 << shift) - 1


def bucket_of(value: int) -> int:
    """The bucket a value falls in (hist_index)."""
    if value < SUB:
        return value
    shift = value.bit_length() - 1 - (SUB_BITS - 1)
    return SUB + (shift - 1) * HALF + ((value >> shift) - HALF)


@dataclass
class Histogram:
    buckets: Counter[int] = field(default_factory=Counter)
    min: int | None = None
    max: int = 0

    @classmethod
    def from_result(cls, hist: dict) -> Histogram:
        """A generator's `"hist"`: sub_bits (checked: the same layout), min, max, [index, count] pairs."""
        if hist.get("sub_bits") != SUB_BITS:
            raise ValueError(f"histogram with sub_bits {hist.get('sub_bits')}, {SUB_BITS} expected: "
                             "the client host runs another build of the generators")
        h = cls(Counter({int(i): int(c) for i, c in hist.get("buckets", [])}))
        if h.count:
            h.min, h.max = int(hist["min"]), int(hist["max"])
        return h

    @classmethod
    def of(cls, values: Iterable[int]) -> Histogram:
        h = cls()
        for v in values:
            h.record(v)
        return h

    @property
    def count(self) -> int:
        return sum(self.buckets.values())

    def record(self, value: int) -> None:
        self.buckets[bucket_of(value)] += 1
        self.min = value if self.min is None else min(self.min, value)
        self.max = max(self.max, value)

    def add(self, other: Histogram) -> None:
        self.buckets.update(other.buckets)
        if other.min is not None:
            self.min = other.min if self.min is None else min(self.min, other.min)
        self.max = max(self.max, other.max)

    def percentile(self, fraction: float) -> int:
        """hist_percentile: the top of the bucket holding the ceil(fraction × count)-th value, at most max."""
        count = self.count
        if not count:
            return 0
        if fraction <= 0:
            return self.min or 0
        rank = min(count, math.ceil(fraction * count))
        seen = 0
        for index in sorted(self.buckets):
            seen += self.buckets[index]
            if seen >= rank:
                return min(bucket_top(index), self.max)
        return self.max

    def summary(self) -> dict[str, int]:
        """As the generators write `latency_ns`: count, min, the percentiles, max."""
        out = {"count": self.count, "min": self.min or 0}
        out.update({name: self.percentile(f) for name, f in PERCENTILES})
        out["max"] = self.max
        return out
