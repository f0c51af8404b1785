"""The lock-collapse model of "Non-scalable locks are dangerous" (Boyd-Wickizer et al., 2012).

n cores each loop: work `a` ns outside the lock, then acquire it. State k is the number of cores
waiting for or holding the lock. Cores arrive at rate (n - k) / a; the holder leaves at rate
1 / (s + c·k) for a ticket lock, whose handoff costs time in proportion to its k waiters (each release
invalidates the line every waiter spins on, and the next owner's read queues behind theirs), and at
1 / (s + c) for a scalable (MCS) lock, whose handoff touches one waiter. The stationary distribution of
this birth-death chain gives the lock's throughput Σ π_k · μ_k at each n.

`fit` finds a, s and c for a measured curve, so the model can carry a measurement from a small machine
to a large one. The benchmark spins par_ns outside the lock and cs_ns inside it; the loop's own time
beyond them (clock reads, the acquire and release) goes outside or inside by the curve's shape, so a
and s are fitted no less than those. That split is a ridge the points barely tell apart: a fit lands
at either end, so each bootstrap round draws a from the values the points do not reject (_outside) and
refits s and c. The model says how far to trust it as scaling.py's models do (the same bootstrap,
prediction band, undetermined rule and hold-out). Where the points cannot tell a fall (from two core
counts, three parameters fit any fall), no collapse is named and the band also holds the lock at its
floor: cs_ns inside it and no handoff cost. For a scalable lock the model sees only s + c, so only
their sum is determined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from scipy import stats
from scipy.optimize import least_squares

from mosbench.analysis import scaling
from mosbench.analysis.cells import Series, own_models
from mosbench.analysis.significance import CONFIDENCE
from mosbench.workloads.base import ModelSpec, base_variant

Kind = Literal["ticket", "scalable"]
PARAMS = 3  # a, s and c
CHUNK = 1 << 21  # chain states solved at once: bounds the memory of a band to thousands of cores
EXACT_UP_TO = 1024  # a collapse is looked for at every count to here, on core_axis's counts past it


def _chain(a, s, c, kind: Kind, ns: np.ndarray, grad: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Acquisitions per second by all n cores together, for R parameter sets (a, s, c: arrays of R, or
    numbers) at each n of ns: R × len(ns); with grad, also ∂log X/∂(a, s, c), R × len(ns) × 3, which
    spares a solver differencing the chain.

    log π_k − log π_0 = log(n!/(n−k)!) + Σ_{i≤k} log(service_i / a): the factorials are shared by every
    n (and taken as logs, as n! overflows at n = 171), so many curves are one array operation.
    """
    a, s, c = np.broadcast_arrays(*(np.atleast_1d(np.asarray(v, dtype=float)) for v in (a, s, c)))
    top = int(ns.max())
    k = np.arange(1, top + 1, dtype=float)
    below = ns[:, None] - np.arange(1, top + 1)[None, :]
    log_fact = np.concatenate(([0.0], np.cumsum(np.log(k))))
    # log(n!/(n−k)!) for each n and k, -inf past k = n: the states n cores cannot reach.
    choose = np.where(below >= 0, log_fact[ns][:, None] - log_fact[np.maximum(below, 0)], -np.inf)
    out = np.empty((len(a), len(ns)))
    deriv = np.empty((len(a), len(ns), 3)) if grad else None
    rows = max(1, CHUNK // (top * len(ns)))
    for i in range(0, len(a), rows):
        at = slice(i, i + rows)
        x, d = _chain_rows(a[at], s[at], c[at], kind, k, choose, grad)
        out[at] = x * 1e9
        if deriv is not None:
            deriv[at] = d
    return out, deriv


def _chain_rows(a: np.ndarray, s: np.ndarray, c: np.ndarray, kind: Kind, k: np.ndarray, choose: np.ndarray,
                grad: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """_chain for one block of parameter sets: acquisitions per ns, and ∂log/∂(a, s, c)."""
    per_waiter = k[None, :] if kind == "ticket" else np.ones_like(k)[None, :]
    service = s[:, None] + c[:, None] * per_waiter  # R × N
    log_pi = choose[None, :, :] + np.cumsum(np.log(service) - np.log(a)[:, None], axis=1)[:, None, :]
    # Normalised with π_0 (log 0) in the sum, by hand: scipy's logsumexp costs more than the chain.
    top_log = np.maximum(log_pi.max(axis=2, keepdims=True), 0.0)
    w = np.exp(log_pi - top_log)
    w /= np.exp(-top_log) + w.sum(axis=2, keepdims=True)  # π_k, k >= 1
    x = np.sum(w / service[:, None, :], axis=2)
    if not grad:
        return x, None
    # ∂service_k/∂θ and ∂log π_k/∂θ before normalising, for θ = a, s, c.
    d_service = [np.zeros_like(service), np.ones_like(service), np.broadcast_to(per_waiter, service.shape)]
    d_log_pi = [-k[None, :] / a[:, None], *(np.cumsum(d / service, axis=1) for d in d_service[1:])]
    deriv = np.empty((*x.shape, 3))
    for j in range(3):
        g = d_log_pi[j][:, None, :]
        dw = w * (g - np.sum(w * g, axis=2, keepdims=True))
        dx = np.sum(dw / service[:, None, :], axis=2) - np.sum(w * (d_service[j] / service**2)[:, None, :], axis=2)
        deriv[..., j] = dx / x
    return x, deriv


def totals(a: float, s: float, c: float, kind: Kind, ns) -> np.ndarray:
    """Acquisitions per second by all n cores together, for each n of ns."""
    return _chain(a, s, c, kind, np.atleast_1d(np.asarray(ns, dtype=int)))[0][0]


def collapse_grid(up_to: int) -> np.ndarray:
    return np.arange(1, up_to + 1) if up_to <= EXACT_UP_TO else np.array(core_axis(up_to))


def _collapse_of(curves: np.ndarray, grid: np.ndarray) -> list[int | None]:
    """Each curve's (row's) collapse: its peak, where total throughput then falls by more than 10%."""
    peaks = np.argmax(curves, axis=1)
    after = np.where(np.arange(curves.shape[1])[None, :] >= peaks[:, None], curves, np.inf).min(axis=1)
    top = curves[np.arange(len(curves)), peaks]
    return [int(grid[p]) if low < 0.9 * t else None for p, low, t in zip(peaks, after, top, strict=True)]


@dataclass(frozen=True)
class LockParams:
    a: float  # ns outside the critical section per acquisition
    s: float  # ns inside it, with an uncontended acquire and release
    c: float  # ns of handoff per waiter (ticket) or per handoff (scalable)
    kind: Kind

    def throughput(self, n: int) -> float:
        """Acquisitions per second by all n cores together."""
        return float(totals(self.a, self.s, self.c, self.kind, [n])[0])

    def per_core(self, n: int) -> float:
        return self.throughput(n) / n

    def collapse(self, up_to: int) -> int | None:
        """The core count where total throughput peaks, if it then falls by more than 10% before
        up_to: beyond it, each added core makes the whole machine slower. A scalable lock levels off
        at 1 / (s + c) instead, which is no collapse."""
        grid = collapse_grid(up_to)
        return _collapse_of(totals(self.a, self.s, self.c, self.kind, grid)[None, :], grid)[0]


# The name scale/lock declares this model by (workloads' models_for, ModelSpec).
NAME = "lock"


@dataclass(frozen=True)
class Fit:
    """The lock model fitted to a series' trials, or given by its parameters alone (no trials: `given`)."""

    params: LockParams
    cores: tuple[int, ...]  # of each trial fitted
    measured: tuple[float, ...]  # its acquisitions/s/core
    rms_log_error: float
    note: str = ""  # what the fit had to assume (a par_ns past the measured iteration)
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)  # 95% intervals of a, s and c
    ci_method: str = ""
    draws: tuple[tuple[float, float, float], ...] = ()  # each bootstrap round's (a, s, c)
    # The band's parts: the fit's bootstrap and, where the points cannot tell a fall, the lock at its
    # floor beside it ((a, s_min, 0): the benchmark's own time inside the lock, no handoff cost).
    spread: tuple[scaling.Bootstrap, ...] = ()
    undetermined: str = ""
    holdout: scaling.Holdout | None = None

    model = NAME

    @property
    def given(self) -> bool:
        """From parameters alone, measured nowhere."""
        return not self.cores

    @property
    def label(self) -> str:
        return f"{self.params.kind} lock model"

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.cores)))

    def throughput(self, n) -> np.ndarray:
        """Acquisitions per second of all n cores (n an array, as scaling's models take it)."""
        p = self.params
        return totals(p.a, p.s, p.c, p.kind, np.rint(np.atleast_1d(n)))

    def _curves(self, ns: np.ndarray, draws: tuple[tuple[float, float, float], ...]) -> np.ndarray:
        a, s, c = np.array(draws).T
        return _chain(a, s, c, self.params.kind, ns.astype(int))[0]

    def band(self, cores) -> tuple[np.ndarray, np.ndarray] | None:
        """The 95% prediction interval of total throughput at cores: each round's refitted chain times
        the fit's redrawn residuals."""
        if not self.spread:
            return None
        ns = np.rint(np.atleast_1d(cores)).astype(int)
        p = self.params
        return scaling.prediction_interval(lambda x: _chain(x[:, 0], x[:, 1], x[:, 2], p.kind, ns)[0], (p.a, p.s, p.c),
                                           self.spread, len(self.cores), PARAMS)

    def peak(self, up_to: int) -> float | None:
        """The collapse, unless the points cannot tell."""
        return None if self.undetermined else self.params.collapse(up_to)

    def peak_interval(self, up_to: int) -> tuple[float, float] | None:
        """The collapse's 95% interval over the bootstrap rounds (a round that does not collapse by
        up_to counts as past it: inf)."""
        if self.undetermined or not self.draws or self.params.kind != "ticket":
            return None
        grid = collapse_grid(up_to)
        return scaling.percentile_interval([k or math.inf for k in _collapse_of(self._curves(grid, self.draws), grid)])

    def describe(self) -> str:
        p = self.params
        return "; ".join(filter(None, [f"a {p.a:.0f} ns outside, s {p.s:.0f} ns inside, c {p.c:.1f} ns a handoff",
                                       self.remark(), self.undetermined]))

    def remark(self) -> str:
        """The note a table shows: "given" for a model from parameters alone, else what the fit assumed."""
        return "given" if self.given else self.note

    def as_json(self, cores: list[int]) -> dict[str, Any]:
        p, top = self.params, max(self.cores, default=1)
        up_to = max(cores, default=top)
        peak = self.peak(up_to)
        return {"model": self.model, "label": self.label, "kind": p.kind, "fitted_on": list(self.counts),
                "params": {name: scaling.interval_json(getattr(p, name), self.ci.get(name)) for name in "asc"},
                "fit_error": self.rms_log_error if self.cores else None, "intervals_from": self.ci_method or None,
                "rounds": len(self.draws),
                "peak": None if peak is None else scaling.interval_json(peak, self.peak_interval(up_to), top),
                "undetermined": self.undetermined or None, "predictions": scaling.predictions_json(self, cores),
                "holdout": self.holdout.as_json() if self.holdout else None, "note": self.remark() or None}


@dataclass(frozen=True)
class _Problem:
    """Trials at each count as the solvers take them: the counts (ns), each trial's index into them
    (where), and the bounds and free parameters of the fit."""

    kind: Kind
    ns: np.ndarray
    where: np.ndarray
    lower: np.ndarray  # a, s, c no less than these
    free: np.ndarray  # which of a, s, c are fitted (the null holds s and c)

    @classmethod
    def of(cls, trials: dict[int, list[float]], kind: Kind, lower: np.ndarray, free=(True, True, True)) -> _Problem:
        where = np.concatenate([[i] * len(xs) for i, xs in enumerate(trials.values())]).astype(int)
        return cls(kind, np.array(list(trials), dtype=int), where, lower, np.array(free))

    def residuals(self, x: np.ndarray, log_y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each round's residuals (R × trials) and their Jacobian (R × trials × 3) at x (R × 3)."""
        value, deriv = _chain(x[:, 0], x[:, 1], x[:, 2], self.kind, self.ns, grad=True)
        return np.log(value / self.ns)[:, self.where] - log_y, deriv[:, self.where, :] * self.free


def _least_squares(problem: _Problem, log_y: np.ndarray, x0: np.ndarray) -> np.ndarray:
    """One fit from a cold start: scipy's trust-region solver, with the chain's own derivatives."""
    free = problem.free

    def full(x: np.ndarray) -> np.ndarray:
        out = x0.copy()
        out[free] = x
        return out[None, :]

    def residual(x: np.ndarray) -> np.ndarray:
        return problem.residuals(full(x), log_y[None, :])[0][0]

    def jacobian(x: np.ndarray) -> np.ndarray:
        return problem.residuals(full(x), log_y[None, :])[1][0][:, free]

    result = least_squares(residual, x0[free], jac=jacobian, bounds=(problem.lower[free], np.inf),
                           x_scale=np.array([1000.0, 100.0, 10.0])[free])
    return full(result.x)[0]


def _draws(problem: _Problem, trials: dict[int, list[float]], x: np.ndarray, rounds: int,
           rng: np.random.Generator, outside: tuple[float, float] | None = None
           ) -> tuple[list[tuple[float, float, float]], np.ndarray]:
    """The bootstrap rounds' (a, s, c) about the fit x, and its log residuals. With `outside`, each
    round draws a from that range and refits s and c with it (see _outside)."""
    fitted = np.exp(problem.residuals(x[None, :], np.zeros((1, len(problem.where))))[0][0])
    at = dict(zip(trials, fitted[np.searchsorted(problem.where, np.arange(len(problem.ns)))], strict=True))
    log_residuals = np.log(np.concatenate([np.array(v) / at[n] for n, v in trials.items()]))
    samples = scaling.resamples(trials, at.__getitem__, rounds, rng, int(problem.free.sum()))
    if not samples:
        return [], log_residuals
    log_y = np.log(np.array([[v for vs in sample.values() for v in vs] for sample in samples]))
    starts = np.tile(x, (len(samples), 1))
    solver = problem
    if outside is not None:
        starts[:, 0] = rng.uniform(*outside, size=len(samples))
        starts[:, 1] = np.maximum(x[1] + x[0] - starts[:, 0], problem.lower[1])  # the one-core loop kept
        solver = replace(problem, free=np.array([False, True, True]))
    found = scaling.batch_least_squares(lambda xs, rows: solver.residuals(xs, log_y[rows]), starts, problem.lower,
                                        np.full(3, np.inf), solver.free)
    return [tuple(map(float, d)) for d in found], log_residuals


def _outside(problem: _Problem, log_y: np.ndarray, x: np.ndarray, most: float, steps: int = 9) -> tuple[float, float]:
    """The range of a that the points do not reject (its profile likelihood's 95% interval: s and c
    refitted at each a on a grid from par_ns to `most`, kept where the squared error exceeds the
    best's by less than F(1, N − 3) of its variance). The loop's own time beyond par_ns and cs_ns
    goes outside the lock or inside it nearly alike for a curve that barely falls: a fit lands at
    either end of that ridge, and its bootstrap, held at the bound, would not see the other end."""
    grid = np.unique(np.append(np.linspace(problem.lower[0], max(most, problem.lower[0]), steps), x[0]))
    starts = np.tile(x, (len(grid), 1))
    starts[:, 0] = grid
    starts[:, 1] = np.maximum(x[1] + x[0] - grid, problem.lower[1])
    ridge = replace(problem, free=np.array([False, True, True]))
    ys = np.tile(log_y, (len(grid), 1))
    found = scaling.batch_least_squares(lambda xs, rows: ridge.residuals(xs, ys[rows]), starts, problem.lower,
                                        np.full(3, np.inf), ridge.free)
    sse = np.sum(ridge.residuals(found, ys)[0] ** 2, axis=1)
    dof = len(log_y) - PARAMS
    if dof < 1:
        return float(grid[0]), float(grid[-1])
    kept = grid[sse - sse.min() <= sse.min() / dof * stats.f.ppf(CONFIDENCE, 1, dof)]
    return float(kept.min()), float(kept.max())


def _by_count(cores: list[int], per_core: list[float]) -> dict[int, list[float]]:
    trials: dict[int, list[float]] = {}
    for n, v in zip(cores, per_core, strict=True):
        trials.setdefault(int(n), []).append(float(v))
    return dict(sorted(trials.items()))


def fit(cores: list[int], per_core: list[float], a: float, kind: Kind, s_min: float = 1e-3,
        rounds: int = scaling.BOOTSTRAP_ROUNDS, seed: int = 0, with_holdout: bool = True) -> Fit:
    """Least-squares a, s and c (on log throughput) for measured per-core throughputs (one entry per
    trial; a core count may repeat); their bootstrap, band and hold-out as scaling.fit's.

    a is the time outside the lock the benchmark spins (its par_ns) and s the time it spins inside
    (its cs_ns): neither can be less. The loop's own time beyond them (its clock reads, the acquire and
    release) is fitted to a, s or c by the curve's shape: held to par_ns, all of it would go inside the
    lock, and a contention the curve never showed would be carried out to every larger machine.
    """
    trials = _by_count(cores, per_core)
    first = min(trials)
    note = ""
    one_core_ns = 1e9 / float(np.mean(trials[first])) * (1.0 if first == 1 else 0.9)
    if one_core_ns <= a:
        # The measured loop is faster than its nominal outside time (a coarse clock, a short run):
        # the outside time is taken as 90% of the measured iteration so s stays positive.
        note = f"par_ns {a:.0f} exceeds the measured {one_core_ns:.0f} ns per iteration; used 90% of it"
        a = 0.9 * one_core_ns
    start = max(one_core_ns - a, 1.0)
    lower = np.array([a, min(max(s_min, 1e-3), start), 0.0])
    problem = _Problem.of(trials, kind, lower)
    log_y = np.log(np.concatenate(list(trials.values())))
    x = _least_squares(problem, log_y, np.array([a, max(start * 0.9, lower[1] * 1.001), start * 0.1]))
    rng = np.random.default_rng(seed)
    outside = _outside(problem, log_y, x, one_core_ns - lower[1])
    draws, log_residuals = _draws(problem, trials, x, rounds, rng, outside)
    rms = float(np.sqrt(np.mean(log_residuals**2)))
    ci = {name: scaling.percentile_interval([d[i] for d in draws]) for i, name in enumerate("asc")} if draws else {}
    why = scaling.undetermined(trials, log_residuals, PARAMS)
    spread = [scaling.Bootstrap(tuple(draws), scaling.noise_draws(log_residuals, PARAMS, len(draws), rng))] \
        if draws else []
    if why and draws:
        # The least contention the benchmark allows: its own time inside the lock and no handoff cost.
        floor = _Problem.of(trials, kind, lower, free=(True, False, False))
        null = _least_squares(floor, log_y, np.array([max(one_core_ns - lower[1], a), lower[1], 0.0]))
        null_draws, null_residuals = _draws(floor, trials, null, rounds, rng)
        null_noise = scaling.noise_draws(null_residuals, 1, len(null_draws), rng)
        spread.append(scaling.Bootstrap(tuple(null_draws), null_noise))

    def refit(rest: dict[int, list[float]]) -> Fit:
        # The hold-out passes totals (scaling's convention); the model takes per-core throughputs.
        per = {n: [v / n for v in vs] for n, vs in rest.items()}
        return fit([n for n, vs in per.items() for _ in vs], [v for vs in per.values() for v in vs], lower[0], kind,
                   s_min, rounds, seed + 1, with_holdout=False)

    held = scaling.holdout({n: [v * n for v in vs] for n, vs in trials.items()}, refit) if with_holdout else None
    order = [(n, v) for n, vs in trials.items() for v in vs]
    return Fit(LockParams(*map(float, x), kind), tuple(n for n, _ in order), tuple(v for _, v in order), rms, note,
               ci, "trials" if scaling.by_trials(trials) else "residuals", tuple(draws), tuple(spread), why, held)


def fit_spec(spec: ModelSpec, s: Series, a_min: float | None = None) -> Fit | None:
    """The model as a workload declares it for a series (its parameters: a no less than the run's par_ns, or
    a_min where given, s than its cs_ns, and the kinds of lock its variants are)."""
    return fit_series(s, a_min or spec.params["a"], spec.params["s_min"], spec.params["kinds"])


def fit_series(s: Series, a: float, s_min: float, kinds: dict[str, Kind]) -> Fit | None:
    """The model fitted to one series (every ok trial of each core count); None for a variant that is not
    a lock the model knows (kinds, the workload's: the pthread mutex is neither)."""
    kind = kinds.get(base_variant(s.variant))
    cells = [c for c in s.ok_cells() if c.per_core]
    if kind is None or not cells:
        return None
    return fit([c.cores for c in cells for _ in c.per_core], [v for c in cells for v in c.per_core], a, kind, s_min)


def fit_run(series: list[Series], run_params: dict[str, dict[str, Any]], a_min: float | None = None) -> dict[str, Fit]:
    """A run's locks, by variant: each series whose workload declares this model for its test (models_for),
    fitted as the report fits it (models.fit_own: a no less than the run's par_ns, s than its cs_ns), or
    with a no less than a_min where given."""
    fits = {}
    for s in series:
        for spec in own_models(s, run_params.get(s.workload, {})):
            if spec.name == NAME and (f := fit_spec(spec, s, a_min)) is not None:
                fits[s.variant] = f
    return fits


def given(a: float, s: float, c: float) -> dict[str, Fit]:
    """Both kinds of lock from parameters alone, measured nowhere."""
    return {kind: Fit(LockParams(a, s, c, kind), (), (), 0.0) for kind in ("ticket", "scalable")}


def core_axis(up_to: int) -> list[int]:
    """Every core count to 64, then a coarser step: smooth curves without 10^5 chain solves."""
    step = max(1, up_to // 256)
    return sorted(set(range(1, min(up_to, 64) + 1)) | set(range(64, up_to + 1, step)) | {up_to})
