"""Scaling models fitted to a measured curve: Amdahl's law and the Universal Scalability Law.

    Amdahl   X(N) = λN / (1 + σ(N−1))
    USL      X(N) = λN / (1 + σ(N−1) + κN(N−1))

X is total throughput at N cores, λ one core's, σ the serial (contention) share and κ the cost of
keeping shared data coherent, which grows with every pair of cores: with κ > 0 throughput peaks at
N* = √((1−σ)/κ) and then falls, as the paper's locks and reference counts did. Fitted by nonlinear
least squares on total throughput (as Gunther's and Schwartz's texts do), with σ and κ held to
[0, 1]. The spread comes from a bootstrap: with two or more trials at every core count, each round
redraws each count's trials; with one trial a count, it redraws the fit's relative residuals. A fit
needs more core counts than parameters, else it is refused with the reason: a model through every
point says nothing about the next one.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import OptimizeWarning, curve_fit

MODELS = ("amdahl", "usl")
PARAMS = {"amdahl": ("lam", "sigma"), "usl": ("lam", "sigma", "kappa")}
BOOTSTRAP_ROUNDS = 100
CONFIDENCE = 0.95


def usl(n, lam: float, sigma: float, kappa: float = 0.0):
    n = np.asarray(n, dtype=float)
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def amdahl(n, lam: float, sigma: float):
    return usl(n, lam, sigma, 0.0)


FUNCTIONS = {"amdahl": amdahl, "usl": usl}


def _usl_jacobian(n, lam: float, sigma: float, kappa: float = 0.0) -> np.ndarray:
    """∂X/∂(λ, σ, κ) of the USL: given to the solver, it is spared estimating them by differences
    (a report fits every curve 101 times for its intervals)."""
    n = np.asarray(n, dtype=float)
    d = 1 + sigma * (n - 1) + kappa * n * (n - 1)
    x = lam * n / d
    return np.column_stack([n / d, -x * (n - 1) / d, -x * n * (n - 1) / d])


def _amdahl_jacobian(n, lam: float, sigma: float) -> np.ndarray:
    return _usl_jacobian(n, lam, sigma)[:, :2]


JACOBIANS = {"amdahl": _amdahl_jacobian, "usl": _usl_jacobian}


@dataclass(frozen=True)
class Refusal:
    model: str
    reason: str


@dataclass(frozen=True)
class ModelFit:
    model: str
    lam: float  # one core's throughput, units/s
    sigma: float
    kappa: float  # 0 for Amdahl
    measured: tuple[int, ...]  # the core counts fitted
    rms_log_error: float  # of the fit against every trial
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)  # 95% intervals, by parameter and "peak"
    ci_method: str = ""
    rounds: int = 0  # bootstrap rounds that converged
    draws: tuple[tuple[float, float, float], ...] = ()  # their (λ, σ, κ), for prediction bands

    def throughput(self, n) -> np.ndarray:
        return usl(n, self.lam, self.sigma, self.kappa)

    @property
    def label(self) -> str:
        return "USL" if self.model == "usl" else "Amdahl"

    def peak(self, up_to: int) -> float | None:
        return self.peak_cores

    def describe(self) -> str:
        return f"cores {', '.join(map(str, self.measured))}; intervals from {self.rounds} resamples of the " \
               f"{'trials' if self.ci_method == 'trials' else 'residuals'}"

    @property
    def peak_cores(self) -> float | None:
        """N* where throughput is highest; None where it only levels off (κ = 0)."""
        return peak_cores(self.sigma, self.kappa)


def peak_cores(sigma: float, kappa: float) -> float | None:
    if kappa <= 0 or sigma >= 1:
        return None
    return math.sqrt((1 - sigma) / kappa)


def _least_squares(model: str, n: np.ndarray, x: np.ndarray, start: np.ndarray | None = None) -> np.ndarray | None:
    """(λ, σ[, κ]) minimising the squared error in throughput, from `start` where given (a bootstrap
    round starts from the full fit); None where the solver fails."""
    one = x[n == n.min()] / n.min()
    p0 = list(start) if start is not None else [float(np.median(one)), 0.01, 0.0001][: len(PARAMS[model])]
    upper = [np.inf, 1.0, 1.0][: len(PARAMS[model])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)
        try:
            p, _ = curve_fit(FUNCTIONS[model], n, x, p0=p0, bounds=([0.0] * len(p0), upper), maxfev=20000,
                             jac=JACOBIANS[model])
        except (RuntimeError, ValueError):
            return None
    return p if np.all(np.isfinite(p)) else None


def fit(model: str, trials: dict[int, list[float]], rounds: int = BOOTSTRAP_ROUNDS,
        seed: int = 0) -> ModelFit | Refusal:
    """Fits model to total throughputs by core count (every trial of each); a Refusal says why not."""
    counts = sorted(c for c, xs in trials.items() if xs)
    needed = len(PARAMS[model]) + 1
    if len(counts) < needed:
        measured = ", ".join(map(str, counts)) or "none"
        return Refusal(model, f"{len(counts)} core count{'s' if len(counts) != 1 else ''} measured ({measured}); "
                              f"{'the USL' if model == 'usl' else 'Amdahl'} needs {needed}")
    n = np.array([c for c in counts for _ in trials[c]], dtype=float)
    x = np.array([v for c in counts for v in trials[c]], dtype=float)
    if np.any(x <= 0):
        return Refusal(model, "a trial measured no throughput")
    p = _least_squares(model, n, x)
    if p is None:
        return Refusal(model, "the least-squares fit did not converge")
    full = (*p, 0.0) if model == "amdahl" else tuple(p)
    predicted = usl(n, *full)
    rms = float(np.sqrt(np.mean(np.log(predicted / x) ** 2)))

    rng = np.random.default_rng(seed)
    by_trials = all(len(trials[c]) >= 2 for c in counts)
    draws: list[tuple[float, ...]] = []
    relative = x / predicted
    for _ in range(rounds):
        if by_trials:
            xb = np.array([v for c in counts for v in rng.choice(trials[c], size=len(trials[c]))], dtype=float)
        else:
            xb = predicted * rng.choice(relative, size=len(relative))
        pb = _least_squares(model, n, xb, start=np.clip(p, 1e-12, [np.inf, 1.0, 1.0][: len(p)]))
        if pb is not None:
            draws.append((*pb, 0.0) if model == "amdahl" else tuple(pb))
    ci: dict[str, tuple[float, float]] = {}
    if len(draws) >= rounds // 2:
        arr = np.array(draws)
        tail = (1 - CONFIDENCE) / 2 * 100
        for i, name in enumerate(("lam", "sigma", "kappa")[: len(PARAMS[model])]):
            lo, hi = np.percentile(arr[:, i], [tail, 100 - tail])
            ci[name] = (float(lo), float(hi))
        peaks = [peak_cores(s, k) for _, s, k in arr]
        if model == "usl" and all(pk is not None for pk in peaks):
            lo, hi = np.percentile(np.array(peaks, dtype=float), [tail, 100 - tail])
            ci["peak"] = (float(lo), float(hi))
    return ModelFit(model, float(full[0]), float(full[1]), float(full[2]), tuple(counts), rms, ci,
                    "trials" if by_trials else "residuals", len(draws),
                    tuple(tuple(map(float, d)) for d in draws) if ci else ())


def curve_trials(cells) -> dict[int, list[float]]:
    """Total throughputs of every ok trial by core count, from a series' cells."""
    return {c.cores: [v * c.cores for v in c.per_core] for c in cells if c.per_core}


def series_fits(group, params: dict | None = None) -> dict[str, dict[str, Any]]:
    """Amdahl's and the USL for each series (variant) of a test, and the models its workload has of
    its own for it (scale/lock: the lock-collapse model), fitted with the run's parameters of that
    workload: one place for every model fitted to a curve, drawn one way (plots.scaling_figure)."""
    from mosbench.analysis.cells import own_models

    own = own_models(group[0], params) if group else {}
    out: dict[str, dict[str, Any]] = {}
    for s in group:
        out[s.variant] = {m: fit(m, curve_trials(s.ok_cells())) for m in MODELS}
        for name, fit_own in own.items():
            if (f := fit_own(s)) is not None:
                out[s.variant][name] = f
    return out


def prediction_band(f: ModelFit, cores: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The 95% band of the predicted throughput at cores, from the fit's bootstrap draws."""
    if not f.draws:
        return None
    curves = np.array([usl(cores, *p) for p in f.draws])
    tail = (1 - CONFIDENCE) / 2 * 100
    return np.percentile(curves, tail, axis=0), np.percentile(curves, 100 - tail, axis=0)
