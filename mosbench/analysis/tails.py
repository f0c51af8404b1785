"""The distribution functions `mosbench history` tests with: Student's t's two-sided tail and its quantile,
Fisher's F's upper tail, Kolmogorov's limiting distribution's upper tail, and the trigamma function.

Written here, in plain floats, though scipy.special has them all: importing scipy.special clones numpy's
namespace for the array API, and so imports numpy's f2py, testing, ma and random with it, 0.3 to 0.45 s of
a `history` that must start in under one (measured with python -X importtime, scipy 1.17). They agree with
mpmath's exact values to 1e-9 relative (tests/test_tails.py, over the ranges a history asks for and beyond),
where scipy.special's own fdtrc is 1.8e-9 off in the deepest tails."""

from __future__ import annotations

import math
import statistics

_TINY = 1e-300


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function, evaluated by Lentz's method; it converges
    quickly where x < (a + 1) / (a + b + 2)."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 1000):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def incomplete_beta(a: float, b: float, x: float, y: float) -> float:
    """The regularised incomplete beta function I_x(a, b), for a, b > 0, 0 <= x <= 1 and y = 1 - x (given
    apart, as the caller can compute it without losing x's last digits near 1)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = a * math.log(x) + b * math.log(y) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, y) / b


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return incomplete_beta(df / 2, 0.5, df / (df + t * t), t * t / (df + t * t))


def t_density(t: float, df: float) -> float:
    """Student's t's density."""
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))


def t_quantile(level: float, df: float) -> float:
    """The t that a two-sided interval of confidence `level` reaches (level 0.95: the 97.5% quantile), to 1e-9
    relative up to level 0.9999: Newton's method on the tail's logarithm from Cornish and Fisher's
    expansion, a few steps where bisection took forty (a history asks for it with ever new degrees of
    freedom: Welch's are fractions)."""
    target = 1.0 - level
    z = statistics.NormalDist().inv_cdf(1 - target / 2)
    t = z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df * df)
    low, high = 0.0, math.inf
    for _ in range(100):
        tail = t_two_sided(t, df)
        if tail > target:
            low = t
        else:
            high = t
        step = (math.log(tail) - math.log(target)) * tail / (2 * t_density(t, df))
        following = t + step
        if not low < following < high:  # Newton left the bracket: halve it (or double, with no top yet)
            following = (low + high) / 2 if high < math.inf else 2 * t
        if abs(following - t) <= 1e-13 * following:
            return following
        t = following
    return t


def f_upper(f: float, d1: float, d2: float) -> float:
    """P(F >= f) for Fisher's F with d1 and d2 degrees of freedom."""
    if f <= 0.0:
        return 1.0
    return incomplete_beta(d2 / 2, d1 / 2, d2 / (d2 + d1 * f), d1 * f / (d2 + d1 * f))


def kolmogorov_tail(x: float) -> float:
    """P(sup |B(t)| >= x) for a Brownian bridge B: Kolmogorov's limiting distribution's upper tail, from
    its alternating series where that converges fast (x >= 1) and from Jacobi's dual form below."""
    if x < 0.1:  # 1 - K(x) is below 1e-50 there, and x * x underflows near 0
        return 1.0
    if x >= 1.0:
        return max(0.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * x * x) for k in range(1, 20)))
    below = math.sqrt(2 * math.pi) / x * sum(math.exp(-((2 * k - 1) ** 2) * math.pi**2 / (8 * x * x))
                                               for k in range(1, 20))
    return min(1.0, max(0.0, 1.0 - below))


def trigamma(x: float) -> float:
    """ψ′(x), the second derivative of ln Γ, for x > 0: the recurrence ψ′(x) = ψ′(x + 1) + 1/x² up to 10, then
    the asymptotic series (Bernoulli numbers), good to 1e-12 there. Var(ln χ²_d) = ψ′(d/2)."""
    out = 0.0
    while x < 10:
        out += 1 / (x * x)
        x += 1
    inv2 = 1 / (x * x)
    return out + 1 / x + inv2 / 2 + inv2 / x * (1 / 6 - inv2 * (1 / 30 - inv2 * (1 / 42 - inv2 / 30)))
