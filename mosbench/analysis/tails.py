"""The distribution functions `mosbench history` tests with: Student's t's two-sided tail and its quantile,
Fisher's F's upper tail, Kolmogorov's limiting distribution's upper tail, and the trigamma function.

Straight from scipy.special, the functions scipy.stats calls for these (the same floats): scipy.stats takes
three times as long to import, a second of a `show` or a short `history`. Imported on the first call, so a
command that tests nothing starts without them."""

from __future__ import annotations


def t_two_sided(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom."""
    from scipy.special import stdtr

    return float(2 * stdtr(df, -abs(t)))


def t_quantile(level: float, df: float) -> float:
    """The t that a two-sided interval of confidence `level` reaches (level 0.95: the 97.5% quantile)."""
    from scipy.special import stdtrit

    return float(stdtrit(df, 0.5 + level / 2))


def f_upper(f: float, d1: float, d2: float) -> float:
    """P(F >= f) for Fisher's F with d1 and d2 degrees of freedom."""
    from scipy.special import fdtrc

    return float(fdtrc(d1, d2, f))


def kolmogorov_tail(x: float) -> float:
    """P(sup |B(t)| >= x) for a Brownian bridge B: Kolmogorov's limiting distribution's upper tail."""
    from scipy.special import kolmogorov

    return float(kolmogorov(x))


def trigamma(x: float) -> float:
    """The second derivative of ln Γ at x: the variance of ln of a χ² variable's share, used to weigh noise."""
    from scipy.special import polygamma

    return float(polygamma(1, x))
