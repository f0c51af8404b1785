"""Scaling models fitted to a measured curve: Amdahl's law and the Universal Scalability Law.

    Amdahl   X(N) = λN / (1 + σ(N−1))
    USL      X(N) = λN / (1 + σ(N−1) + κN(N−1))

X is total throughput at N cores, λ one core's, σ the serial (contention) share and κ the cost of
keeping shared data coherent, which grows with every pair of cores: with κ > 0 throughput peaks at
N* = √((1−σ)/κ) and then falls, as the paper's locks and reference counts did. Fitted by nonlinear
least squares on total throughput (as Gunther's and Schwartz's texts do), with σ and κ held to
[0, 1]. A fit needs more core counts than parameters, else it is refused with the reason: a model
through every point says nothing about the next one.

How far to trust a model, the same for every model here and the workloads' own (lockmodel.py):

- Its spread comes from a bootstrap of 100 rounds, each refitted: with two or more trials at every
  core count, each count's mean with trial-to-trial deviations redrawn (pooled over the counts);
  with one trial a count, the fit's relative residuals redrawn onto its curve. Both are widened for
  the few values they redraw (resamples). The parameters' 95% intervals are the rounds' percentiles.
- Its band is a prediction interval of a new measurement, not of the mean curve: each round's curve
  times normal noise of the residuals' spread, read at the percentiles where z equals Student's t
  with N − p degrees of freedom (tail: a bootstrap of a dozen trials is no surer than a t interval).
- Where the points cannot tell whether per-core throughput falls at all (`undetermined`: Welch's
  test of the fewest cores against the most, as compare.py, or with one trial a count the fall
  against the fit's scatter; or no more counts than parameters), the model names no peak or
  collapse, says why in one line, and its band also holds the model without the fall (σ = κ = 0
  here), as many rounds each: the points cannot choose between them.
- With four or more core counts it is also fitted without the largest and predicts it (`Holdout`):
  its error there, and whether its band missed the measured mean.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats
from scipy.optimize import OptimizeWarning, curve_fit

from mosbench.analysis.significance import ALPHA, CONFIDENCE, welch

MODELS = ("amdahl", "usl")
PARAMS = {"amdahl": ("lam", "sigma"), "usl": ("lam", "sigma", "kappa")}
BOOTSTRAP_ROUNDS = 100
# New measurements drawn about each bootstrap curve: a band's tails of 100 curves alone would rest on 2 or 3.
NOISE_DRAWS = 50
# An interval's end past this many times the most cores measured is no bound: it reads "or more".
UNBOUNDED = 100
HOLDOUT_MIN_COUNTS = 4  # a hold-out leaves a model as many counts as the USL needs
EXPANSION_DOF = 3  # the fewest degrees of freedom a band's ends are read at (tail)


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

    @property
    def label(self) -> str:
        return "USL" if self.model == "usl" else "Amdahl"

    def as_json(self, cores: list[int] | None = None) -> dict[str, Any]:
        return {"model": self.model, "refused": self.reason}


# --- What every model shares: bootstrap, prediction interval, undetermined fall, hold-out ---------------------


@dataclass(frozen=True)
class Holdout:
    """A model fitted without the largest core count, predicting it: per-core throughput, units/s."""

    fitted_on: tuple[int, ...]
    cores: int
    measured: float  # mean of the trials there
    predicted: float | None = None  # None where the smaller fit was refused
    low: float | None = None  # its prediction interval
    high: float | None = None
    refused: str = ""

    @property
    def error(self) -> float | None:
        """(predicted − measured) / measured."""
        return None if self.predicted is None else (self.predicted - self.measured) / self.measured

    @property
    def missed(self) -> bool:
        """The measured value lies outside the held-out fit's prediction interval."""
        if self.low is None or self.high is None:
            return False
        return not self.low <= self.measured <= self.high

    def text(self) -> str:
        """"+0.5%", "−48% missed", "refused": the error at the held-out count."""
        if self.error is None:
            return "refused"
        return f"{self.error:+.1%}".replace("-", "−") + (" missed" if self.missed else "")

    def as_json(self) -> dict[str, Any]:
        return {"fitted_on": list(self.fitted_on), "cores": self.cores, "measured": self.measured,
                "predicted": self.predicted, "low": self.low, "high": self.high, "error": self.error,
                "missed": self.missed, "refused": self.refused or None}


def resamples(trials: dict[int, list[float]], fitted: Callable[[int], float], rounds: int,
              rng: np.random.Generator, params: int) -> list[dict[int, list[float]]]:
    """The bootstrap's data sets. With two or more trials at every count, each count's (geometric) mean
    times trial-to-trial deviations redrawn from every count's: two or three trials a count, redrawn
    alone, give a mean three or ten values at most. Else the fit's relative residuals redrawn onto its
    curve (fitted(n): the fit's value at n), p parameters fitted.

    Redrawn values lie closer together than the measurements they stand for (n trials' deviations
    from their mean hold (n−1)/n of their variance; N residuals of p parameters, (N−p)/N), so each is
    widened by the inverse: bands from two or three trials would otherwise be too narrow.
    """
    counts = sorted(trials)
    if by_trials(trials):
        logs = {c: np.log(np.asarray(trials[c], dtype=float)) for c in counts}
        deviations = np.concatenate([(v - v.mean()) * math.sqrt(len(v) / (len(v) - 1)) for v in logs.values()])
        return [{c: list(np.exp(logs[c].mean() + rng.choice(deviations, size=len(logs[c])))) for c in counts}
                for _ in range(rounds)]
    log_res = np.array([math.log(v / fitted(c)) for c in counts for v in trials[c]])
    dof = len(log_res) - params
    centred = (log_res - log_res.mean()) * math.sqrt(len(log_res) / dof) if dof > 0 else np.zeros_like(log_res)
    return [{c: list(fitted(c) * np.exp(rng.choice(centred, size=len(trials[c])))) for c in counts}
            for _ in range(rounds)]


def batch_least_squares(residuals: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
                        x0: np.ndarray, lower: np.ndarray, upper: np.ndarray, free: np.ndarray | None = None,
                        steps: int = 200) -> np.ndarray:
    """Every bootstrap round's fit at once, from the full fit x0: Levenberg-Marquardt steps for all
    rounds together (R × P parameters; residuals(x, rows) gives the residuals of those rows, R' × T,
    and their Jacobian, R' × T × P), each step projected onto the bounds, with a bound that a round
    presses against held (projected Newton), and parameters not free held at x0. A round stops once
    a step gains less than a part in 10^10, or no step gains. A hundred rounds cost about one cold fit."""
    rounds, size = x0.shape
    free = np.ones(size, dtype=bool) if free is None else free
    x = x0.copy()
    damping = np.full(rounds, 1e-3)
    r, jac = residuals(x, np.arange(rounds))
    cost = np.sum(r**2, axis=1)
    done = ~np.isfinite(cost)
    eye = np.eye(size)
    for _ in range(steps):
        rows = np.flatnonzero(~done)
        if not len(rows):
            break
        xs, rs, js = x[rows], r[rows], jac[rows]
        grad = np.einsum("rti,rt->ri", js, rs)
        held = ((xs <= lower + 1e-12 * np.abs(lower)) & (grad > 0)) | ((xs >= upper) & (grad < 0)) | ~free
        keep = (~held).astype(float)
        h = np.einsum("rti,rtj->rij", js, js) * keep[:, :, None] * keep[:, None, :]
        diag = np.einsum("rii->ri", h)
        h = h + np.einsum("ri,ij->rij", damping[rows, None] * (diag + 1e-300) + held, eye)
        try:
            step = -np.linalg.solve(h, (grad * keep)[:, :, None])[:, :, 0] * keep
        except np.linalg.LinAlgError:
            break
        trial = np.clip(xs + step, lower, upper)
        r_new, jac_new = residuals(trial, rows)
        cost_new = np.sum(r_new**2, axis=1)
        better = cost_new < cost[rows]
        gained = cost[rows] - cost_new
        done[rows] = (better & (gained <= 1e-10 * cost[rows])) | (~better & (damping[rows] > 1e6))
        at = rows[better]
        x[at], r[at], jac[at], cost[at] = trial[better], r_new[better], jac_new[better], cost_new[better]
        damping[rows] = np.where(better, damping[rows] / 3, damping[rows] * 4)
    return x


def by_trials(trials: dict[int, list[float]]) -> bool:
    """Whether the bootstrap redraws trials (two or more at every count) rather than residuals."""
    return all(len(xs) >= 2 for xs in trials.values())


def noise_draws(log_residuals: np.ndarray, params: int, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """(rounds, NOISE_DRAWS) log factors of a new measurement about a curve: normal, with the residuals'
    standard deviation (p parameters fitted to N trials: N − p in its denominator). Not the residuals
    themselves redrawn: a dozen of them hold no 2.5% tail. Zeros where no spread is known (N ≤ p)."""
    n = len(log_residuals)
    if n <= params or rounds == 0:
        return np.zeros((rounds, NOISE_DRAWS))
    sd = math.sqrt(float(np.sum((log_residuals - log_residuals.mean()) ** 2)) / (n - params))
    return sd * rng.standard_normal(size=(rounds, NOISE_DRAWS))


def tail(trials: int, params: int) -> float:
    """The percentile each end of a 95% band is read at: where the normal's z equals Student's t at 95%
    with N − p degrees of freedom (Hesterberg's expanded percentile interval). A bootstrap of a dozen
    trials knows the spread no better than a t interval does, yet its percentiles read as if it were
    known. Taken at no fewer than EXPANSION_DOF degrees of freedom: with one or two, t (12.7, 4.3)
    would read a band off its most extreme rounds alone, and such fits say "cannot tell" besides."""
    dof = max(trials - params, EXPANSION_DOF)
    return float(stats.norm.cdf(-stats.t.ppf(1 - (1 - CONFIDENCE) / 2, dof))) * 100


@dataclass(frozen=True)
class Bootstrap:
    """One fit's part of a prediction band: its parameters' bootstrap rounds, and the log factors of a
    new measurement about each round's curve (rounds × NOISE_DRAWS)."""

    draws: tuple[tuple[float, ...], ...]
    noise: np.ndarray = field(compare=False, repr=False)


def prediction_interval(curves: Callable[[np.ndarray], np.ndarray], fitted: tuple[float, ...],
                        parts: tuple[Bootstrap, ...], trials: int, params: int) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval of a new measurement at each core count, p parameters fitted to N trials.
    curves(params) gives the model's total throughput for each row of parameters (rows × cores). Every
    round's curve times its redrawn noise, the parts' rounds pooled (a fit and, where the points cannot
    tell a fall, the model without it), read at tail()'s percentiles; widened to hold the fit's own
    curve, which a band of rounds skewed to one side (a fit at a bound) can leave outside."""
    pooled = [curves(np.array([fitted]))]
    for p in parts:
        rounds = curves(np.array(p.draws))
        pooled.append((rounds[:, None, :] * np.exp(p.noise)[:, :, None]).reshape(-1, rounds.shape[1]))
    values = np.vstack(pooled[1:])
    end = tail(trials, params)
    low, high = np.percentile(values, end, axis=0), np.percentile(values, 100 - end, axis=0)
    return np.minimum(low, pooled[0][0]), np.maximum(high, pooled[0][0])


def percentile_interval(values) -> tuple[float, float]:
    """The 95% interval of bootstrap values, ends taken outward (a round past every finite value, inf,
    stays inf rather than making the interpolation nan)."""
    arr = np.sort(np.asarray(values, dtype=float))
    k = math.floor((1 - CONFIDENCE) / 2 * (len(arr) - 1))
    return float(arr[k]), float(arr[len(arr) - 1 - k])


def fall_p(per_core: dict[int, list[float]], log_residuals: np.ndarray, params: int) -> float | None:
    """p of the fall (or rise) in per-core throughput from the fewest cores to the most: Welch's
    t-test where both have two or more trials (as compare.py tests a change); with one trial, a t-test
    of the difference of logs against the fit's own scatter (its residuals, N − p degrees of freedom);
    None where no spread is known (one trial a count, no residual left over)."""
    counts = sorted(per_core)
    a, b = per_core[counts[0]], per_core[counts[-1]]
    if len(a) >= 2 and len(b) >= 2:
        return welch(a, b).p
    dof = len(log_residuals) - params
    if dof < 1:
        return None
    sd = math.sqrt(float(np.sum((log_residuals - log_residuals.mean()) ** 2)) / dof)
    diff = math.log(np.mean(a) / np.mean(b))
    if sd == 0:
        return 0.0 if diff else 1.0
    t = diff / (sd * math.sqrt(1 / len(a) + 1 / len(b)))
    return float(2 * stats.t.sf(abs(t), dof))


def undetermined(per_core: dict[int, list[float]], log_residuals: np.ndarray, params: int) -> str:
    """Why the points cannot determine whether (and how fast) per-core throughput falls, in one line;
    "" where they can. A fall not told from the trials' spread fits contention that may be noise; and
    counts no more than the parameters fit any fall exactly, so nothing tests that the fall grows with
    cores as the model says rather than being a one-off cost of a second core."""
    counts = sorted(per_core)
    lo, hi = counts[0], counts[-1]
    mean_lo, mean_hi = float(np.mean(per_core[lo])), float(np.mean(per_core[hi]))
    fall = 1 - mean_hi / mean_lo
    p = fall_p(per_core, log_residuals, params)
    if len(counts) <= params:
        why = f"{len(counts)} core count{'s' if len(counts) > 1 else ''} cannot test a model of {params} parameters"
    elif p is None:
        why = "one trial a count: no spread known"
    elif fall <= 0:
        why = "per-core throughput did not fall"
    elif p >= ALPHA:
        spread = "the trials' spread" if by_trials({lo: per_core[lo], hi: per_core[hi]}) else "the fit's scatter"
        why = f"per-core throughput fell {fall:.1%}, within {spread} (p = {p:.2g})"
    else:
        return ""
    return f"cannot tell from cores {lo}-{hi}: {why}; measure at {2 * hi} or more"


def holdout(trials: dict[int, list[float]], refit: Callable[[dict[int, list[float]]], Any]) -> Holdout | None:
    """With HOLDOUT_MIN_COUNTS or more counts (trials: totals by count), the model refitted without the
    largest (refit: the model's fit, without a hold-out of its own) and its prediction there; None
    with fewer counts."""
    counts = sorted(trials)
    if len(counts) < HOLDOUT_MIN_COUNTS:
        return None
    top = counts[-1]
    rest = {c: trials[c] for c in counts[:-1]}
    measured = float(np.mean(trials[top])) / top
    smaller = refit(rest)
    if isinstance(smaller, Refusal):
        return Holdout(tuple(counts[:-1]), top, measured, refused=smaller.reason)
    predicted = float(np.atleast_1d(smaller.throughput(top))[0]) / top
    band = smaller.band([top])
    low, high = (float(band[0][0]) / top, float(band[1][0]) / top) if band is not None else (None, None)
    return Holdout(tuple(counts[:-1]), top, measured, predicted, low, high)


def bounded(high: float | None, measured_max: int) -> float | None:
    """An interval's upper end, or None where it is no bound (infinite, or past UNBOUNDED times the
    most cores measured: the fit's rounds only say "more")."""
    if high is None or not math.isfinite(high) or high > UNBOUNDED * measured_max:
        return None
    return high


def interval_json(value: float | None, interval: tuple[float, float] | None, measured_max: int | None = None
                  ) -> dict[str, Any]:
    """{"value", "low", "high"} with high None where unbounded (only for core counts: measured_max)."""
    low, high = interval if interval else (None, None)
    if high is not None and measured_max is not None:
        high = bounded(high, measured_max)
    return {"value": value, "low": low, "high": high}


def predictions_json(f, cores: list[int]) -> list[dict[str, Any]]:
    """Per-core throughput predicted at each count, with its prediction interval (units/s)."""
    n = np.asarray(cores, dtype=float)
    values = np.atleast_1d(f.throughput(n)) / n
    band = f.band(n)
    out = []
    for i, c in enumerate(cores):
        lo_hi = (float(band[0][i] / c), float(band[1][i] / c)) if band is not None else None
        out.append({"cores": c, **interval_json(float(values[i]), lo_hi)})
    return out


# --- Amdahl and the USL -------------------------------------------------------------------------------------


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
    undetermined: str = ""  # why no peak is named; "" where the fall is determined
    holdout: Holdout | None = None
    # The band's parts: the fit's bootstrap and, where the points cannot tell a fall, the model without
    # it (λN: σ = κ = 0) beside it.
    spread: tuple[Bootstrap, ...] = ()
    trials: int = 0  # how many were fitted

    def throughput(self, n) -> np.ndarray:
        return usl(n, self.lam, self.sigma, self.kappa)

    @property
    def label(self) -> str:
        return "USL" if self.model == "usl" else "Amdahl"

    @property
    def counts(self) -> tuple[int, ...]:
        return self.measured

    def peak(self, up_to: int) -> float | None:
        """Where total throughput peaks; None where it only levels off or the points cannot tell."""
        return None if self.undetermined else self.peak_cores

    def peak_interval(self, up_to: int) -> tuple[float, float] | None:
        return None if self.undetermined else self.ci.get("peak")

    def band(self, cores) -> tuple[np.ndarray, np.ndarray] | None:
        """The 95% prediction interval of total throughput at cores: where a new measurement falls."""
        if not self.spread:
            return None
        n = np.atleast_1d(np.asarray(cores, dtype=float))
        return prediction_interval(lambda p: usl(n[None, :], p[:, :1], p[:, 1:2], p[:, 2:3]),
                                   (self.lam, self.sigma, self.kappa), self.spread, self.trials,
                                   len(PARAMS[self.model]))

    def describe(self) -> str:
        return "; ".join(filter(None, [
            f"cores {', '.join(map(str, self.measured))}; intervals from {self.rounds} resamples of the "
            f"{'trials' if self.ci_method == 'trials' else 'residuals'}", self.undetermined]))

    @property
    def peak_cores(self) -> float | None:
        """N* where throughput is highest; None where it only levels off (κ = 0)."""
        return peak_cores(self.sigma, self.kappa)

    def as_json(self, cores: list[int]) -> dict[str, Any]:
        top = max(self.measured)
        return {"model": self.model, "label": self.label, "fitted_on": list(self.measured),
                "params": {name: interval_json(getattr(self, name), self.ci.get(name)) for name in PARAMS[self.model]},
                "fit_error": self.rms_log_error, "intervals_from": self.ci_method, "rounds": self.rounds,
                "peak": None if self.peak(top) is None else interval_json(self.peak(top), self.peak_interval(top), top),
                "undetermined": self.undetermined or None, "predictions": predictions_json(self, cores),
                "holdout": self.holdout.as_json() if self.holdout else None}


def peak_cores(sigma: float, kappa: float) -> float | None:
    """√((1−σ)/κ), and 1 where that is less (σ = 1 included): total throughput is then highest at one
    core; None where it only levels off (κ = 0)."""
    if kappa <= 0:
        return None
    return max(1.0, math.sqrt(max(0.0, 1 - sigma) / kappa))


def _least_squares(model: str, n: np.ndarray, x: np.ndarray) -> np.ndarray | None:
    """(λ, σ[, κ]) minimising the squared error in throughput; None where the solver fails."""
    one = x[n == n.min()] / n.min()
    p0 = [float(np.median(one)), 0.01, 0.0001][: len(PARAMS[model])]
    upper = [np.inf, 1.0, 1.0][: len(PARAMS[model])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)
        try:
            p, _ = curve_fit(FUNCTIONS[model], n, x, p0=p0, bounds=([0.0] * len(p0), upper), maxfev=20000,
                             jac=JACOBIANS[model])
        except (RuntimeError, ValueError):
            return None
    return p if np.all(np.isfinite(p)) else None


def _flatten(trials: dict[int, list[float]]) -> tuple[np.ndarray, np.ndarray]:
    counts = sorted(trials)
    return (np.array([c for c in counts for _ in trials[c]], dtype=float),
            np.array([v for c in counts for v in trials[c]], dtype=float))


def _linear(trials: dict[int, list[float]]) -> tuple[float, ...]:
    """The null model, X = λN (σ = κ = 0): λ by least squares on total throughput."""
    n, x = _flatten(trials)
    return (float(np.sum(n * x) / np.sum(n * n)), 0.0, 0.0)


def _draws(model: str, trials: dict[int, list[float]], full: tuple[float, ...], rounds: int,
           rng: np.random.Generator) -> list[tuple[float, ...]]:
    """The bootstrap rounds' (λ, σ, κ), all refitted at once from the full fit (unweighted least squares
    on total throughput, as the fit)."""
    samples = resamples(trials, lambda c: float(usl(c, *full)), rounds, rng, len(PARAMS[model]))
    if not samples:
        return []
    n = _flatten(trials)[0]
    y = np.array([_flatten(sample)[1] for sample in samples])
    free = np.array([True, True, model == "usl"])

    def residuals(x: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lam, sigma, kappa = (x[:, i, None] for i in range(3))
        d = 1 + sigma * (n - 1) + kappa * n * (n - 1)
        pred = lam * n / d
        jac = np.stack([n / d, -pred * (n - 1) / d, -pred * n * (n - 1) / d], axis=2) * free
        return pred - y[rows], jac

    x0 = np.tile(np.array(full, dtype=float), (len(samples), 1))
    x = batch_least_squares(residuals, x0, np.zeros(3), np.array([np.inf, 1.0, 1.0]), free)
    return [tuple(map(float, row)) for row in x if np.all(np.isfinite(row))]


def fit(model: str, trials: dict[int, list[float]], rounds: int = BOOTSTRAP_ROUNDS,
        seed: int = 0, with_holdout: bool = True) -> ModelFit | Refusal:
    """Fits model to total throughputs by core count (every trial of each); a Refusal says why not."""
    trials = {c: list(xs) for c, xs in trials.items() if xs}
    counts = sorted(trials)
    needed = len(PARAMS[model]) + 1
    if len(counts) < needed:
        measured = ", ".join(map(str, counts)) or "none"
        return Refusal(model, f"{len(counts)} core count{'s' if len(counts) != 1 else ''} measured ({measured}); "
                              f"{'the USL' if model == 'usl' else 'Amdahl'} needs {needed}")
    n, x = _flatten(trials)
    if np.any(x <= 0):
        return Refusal(model, "a trial measured no throughput")
    p = _least_squares(model, n, x)
    if p is None:
        return Refusal(model, "the least-squares fit did not converge")
    full = (*p, 0.0) if model == "amdahl" else tuple(p)
    log_residuals = np.log(x / usl(n, *full))
    rms = float(np.sqrt(np.mean(log_residuals**2)))
    nparams = len(PARAMS[model])

    rng = np.random.default_rng(seed)
    draws = _draws(model, trials, full, rounds, rng)
    ci: dict[str, tuple[float, float]] = {}
    converged = len(draws) >= rounds // 2
    if converged:
        arr = np.array(draws)
        for i, name in enumerate(PARAMS[model]):
            ci[name] = percentile_interval(arr[:, i])
        if model == "usl":  # a round whose κ is 0 levels off: its peak is past any count
            ci["peak"] = percentile_interval([peak_cores(s, k) or math.inf for _, s, k in arr])
    per_core = {c: [v / c for v in trials[c]] for c in counts}
    why = undetermined(per_core, log_residuals, nparams)
    spread: list[Bootstrap] = []
    if converged:
        spread.append(Bootstrap(tuple(draws), noise_draws(log_residuals, nparams, len(draws), rng)))
    if why and converged:
        null = _linear(trials)
        samples = resamples(trials, lambda c: float(usl(c, *null)), len(draws), rng, 1)
        spread.append(Bootstrap(tuple(_linear(sample) for sample in samples),
                                noise_draws(np.log(x / usl(n, *null)), 1, len(samples), rng)))
    held = holdout(trials, lambda rest: fit(model, rest, rounds, seed + 1, with_holdout=False)) \
        if with_holdout else None
    return ModelFit(model, float(full[0]), float(full[1]), float(full[2]), tuple(counts), rms, ci,
                    "trials" if by_trials(trials) else "residuals", len(draws),
                    tuple(tuple(map(float, d)) for d in draws) if converged else (), why, held, tuple(spread),
                    len(x))


def curve_trials(cells) -> dict[int, list[float]]:
    """Total throughputs of every ok trial by core count, from a series' cells."""
    return {c.cores: [v * c.cores for v in c.per_core] for c in cells if c.per_core}


def prediction_band(f, cores: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The 95% prediction interval of total throughput at cores (any model's band)."""
    return f.band(cores)
