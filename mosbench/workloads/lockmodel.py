"""The lock-collapse model of "Non-scalable locks are dangerous" (Boyd-Wickizer et al., 2012).

n cores each loop: work `a` ns outside the lock, then acquire it. State k is the number of cores
waiting for or holding the lock. Cores arrive at rate (n - k) / a; the holder leaves at rate
1 / (s + c·k) for a ticket lock, whose handoff costs time in proportion to its k waiters (each release
invalidates the line every waiter spins on, and the next owner's read queues behind theirs), and at
1 / (s + c) for a scalable (MCS) lock, whose handoff touches one waiter. The stationary distribution of
this birth-death chain gives the lock's throughput Σ π_k · μ_k at each n.

`fit` finds s and c for a measured curve (a is the benchmark's par_ns), so the model can carry a
measurement from a small machine to a large one. With the measurement from two core counts only, the
fit is determined exactly and its extrapolation is indicative, not a prediction. For a scalable lock
the model sees only s + c, so only their sum is determined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.optimize import least_squares

from mosbench.workloads.base import base_variant

Kind = Literal["ticket", "scalable"]

# Which lock each scale/lock variant is, for the model.
KIND_OF_VARIANT: dict[str, Kind] = {"stock": "ticket", "ck-ticket": "ticket", "scalable": "scalable",
                                    "ck-mcs": "scalable"}


@dataclass(frozen=True)
class LockParams:
    a: float  # ns outside the critical section per acquisition
    s: float  # ns inside it, with an uncontended acquire and release
    c: float  # ns of handoff per waiter (ticket) or per handoff (scalable)
    kind: Kind

    def throughput(self, n: int) -> float:
        """Acquisitions per second by all n cores together."""
        k = np.arange(1, n + 1, dtype=float)
        service = self.s + (self.c * k if self.kind == "ticket" else self.c)
        # log π_k - log π_0 = Σ_{i<=k} log((n - i + 1) · service_i / a); logs, as n! overflows at n = 171.
        log_ratio = np.log(n - k + 1) + np.log(service) - np.log(self.a)
        log_pi = np.concatenate(([0.0], np.cumsum(log_ratio)))
        log_pi -= np.logaddexp.reduce(log_pi)
        return float(np.sum(np.exp(log_pi[1:]) / service) * 1e9)

    def per_core(self, n: int) -> float:
        return self.throughput(n) / n

    def collapse(self, up_to: int) -> int | None:
        """The core count where total throughput peaks, if it then falls by more than 10% before
        up_to: beyond it, each added core makes the whole machine slower. A scalable lock levels off
        at 1 / (s + c) instead, which is no collapse."""
        totals = np.array([self.throughput(n) for n in range(1, up_to + 1)])
        peak = int(np.argmax(totals))
        return peak + 1 if totals[peak:].min() < 0.9 * totals[peak] else None


@dataclass(frozen=True)
class Fit:
    params: LockParams
    cores: tuple[int, ...]
    measured: tuple[float, ...]  # acquisitions/s/core
    rms_log_error: float
    note: str = ""

    # What scaling's table and figure read of any fitted model.
    model = "lock"

    @property
    def label(self) -> str:
        return f"{self.params.kind} lock model"

    def throughput(self, n) -> np.ndarray:
        """Acquisitions per second of all n cores (n an array, as scaling's models take it)."""
        return np.array([self.params.throughput(int(k)) for k in np.atleast_1d(n)], dtype=float)

    def peak(self, up_to: int) -> float | None:
        return self.params.collapse(up_to)

    def describe(self) -> str:
        p = self.params
        return "; ".join(filter(None, [f"s {p.s:.0f} ns inside, c {p.c:.1f} ns a handoff, a {p.a:.0f} ns outside",
                                       self.note]))


def fit(cores: list[int], per_core: list[float], a: float, kind: Kind, s_min: float = 1e-3) -> Fit:
    """Least-squares s and c (on log throughput) for a measured per-core curve, with a known.

    s_min is the time the benchmark itself spends inside the lock (its cs_ns): s cannot be less,
    which keeps a fit from few core counts from putting all the time into the handoff.
    """
    order = np.argsort(cores)
    n = np.asarray(cores, dtype=float)[order]
    y = np.asarray(per_core, dtype=float)[order]
    note = ""
    one_core_ns = 1e9 / y[0] if n[0] == 1 else 1e9 / y[0] * 0.9
    if one_core_ns <= a:
        # The measured loop is faster than its nominal outside time (a coarse clock, a short run):
        # the outside time is taken as 90% of the measured iteration so s stays positive.
        note = f"par_ns {a:.0f} exceeds the measured {one_core_ns:.0f} ns per iteration; used 90% of it"
        a = 0.9 * one_core_ns

    def residual(x: np.ndarray) -> np.ndarray:
        p = LockParams(a, x[0], x[1], kind)
        return np.log([p.per_core(int(c)) for c in n]) - np.log(y)

    start = max(one_core_ns - a, 1.0)
    s_min = min(max(s_min, 1e-3), start)
    x0 = [max(start * 0.9, s_min * 1.001), start * 0.1]
    result = least_squares(residual, x0=x0, bounds=([s_min, 0.0], [np.inf, np.inf]))
    params = LockParams(a, float(result.x[0]), float(result.x[1]), kind)
    rms = float(np.sqrt(np.mean(result.fun**2)))
    if len(set(cores)) < 3:
        note = "; ".join(filter(None, [note, f"fit from {len(set(cores))} core counts: the extrapolation "
                                             "is indicative"]))
    return Fit(params, tuple(int(c) for c in n), tuple(float(v) for v in y), rms, note)


def fit_series(s, a: float, s_min: float = 1e-3) -> Fit | None:
    """The model fitted to one analysis.Series (best trial per core count); None for a variant that
    is not a lock the model knows (the pthread mutex)."""
    kind = KIND_OF_VARIANT.get(base_variant(s.variant))
    cells = s.ok_cells()
    if kind is None or not cells:
        return None
    return fit([c.cores for c in cells], [c.best for c in cells], a, kind, s_min)


def core_axis(up_to: int) -> list[int]:
    """Every core count to 64, then a coarser step: smooth curves without 10^5 chain solves."""
    step = max(1, up_to // 256)
    return sorted(set(range(1, min(up_to, 64) + 1)) | set(range(64, up_to + 1, step)) | {up_to})
