"""analysis/tails.py against mpmath at 40 digits, the exact values. scipy.special computes the same
functions in doubles, but is no reference for their deep tails: its fdtrc(42, 2986, 43) is 1.8e-9 off in
relative terms, where tails.f_upper is 1.2e-12 off (a CI run found it)."""

import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mosbench.analysis import tails

RELATIVE = 1e-9
degrees = st.floats(1.0, 5000.0)  # Welch's degrees of freedom are fractions
mpmath.mp.dps = 40


def close(ours: float, exact: mpmath.mpf, tiny: float = 1e-300) -> bool:
    return math.isclose(ours, float(exact), rel_tol=RELATIVE, abs_tol=tiny)


def exact_t_two_sided(t: float, df: float) -> mpmath.mpf:
    t, df = mpmath.mpf(t), mpmath.mpf(df)
    return mpmath.betainc(df / 2, mpmath.mpf(1) / 2, 0, df / (df + t * t), regularized=True)


@settings(max_examples=400, deadline=None)
@given(t=st.floats(0.0, 60.0), df=degrees)
def test_t_two_sided_is_exact(t, df):
    assert close(tails.t_two_sided(t, df), exact_t_two_sided(t, df))
    assert tails.t_two_sided(-t, df) == tails.t_two_sided(t, df)


@settings(max_examples=200, deadline=None)
@given(level=st.floats(0.5, 0.9999), df=degrees)
def test_t_quantile_reaches_its_level(level, df):
    quantile = tails.t_quantile(level, df)
    # The tail changes by density × dt where t moves: the tail's relative error is the quantile's, times this.
    slope = float(2 * quantile * tails.t_density(quantile, df) / (1 - level))
    assert math.isclose(float(exact_t_two_sided(quantile, df)), 1 - level, rel_tol=1e-9 * max(1.0, slope))


@settings(max_examples=300, deadline=None)
@given(f=st.floats(0.0, 200.0), d1=st.floats(1.0, 500.0), d2=st.floats(1.0, 5000.0))
def test_f_upper_is_exact(f, d1, d2):
    f, d1, d2 = mpmath.mpf(f), mpmath.mpf(d1), mpmath.mpf(d2)
    exact = mpmath.betainc(d2 / 2, d1 / 2, 0, d2 / (d2 + d1 * f), regularized=True) if f > 0 else 1
    assert close(tails.f_upper(float(f), float(d1), float(d2)), exact)


def test_f_upper_where_scipy_is_not_exact():
    assert tails.f_upper(43.0, 42.0, 2986.0) == pytest.approx(9.707069943744592e-271, rel=1e-11)


def exact_kolmogorov_tail(x: float) -> mpmath.mpf:
    x = mpmath.mpf(x)
    return 2 * mpmath.nsum(lambda k: (-1) ** (k - 1) * mpmath.exp(-2 * k * k * x * x), [1, mpmath.inf])


@settings(max_examples=300, deadline=None)
@given(x=st.floats(0.2, 8.0))
def test_kolmogorov_tail_is_exact(x):
    assert close(tails.kolmogorov_tail(x), exact_kolmogorov_tail(x), tiny=1e-15)


@settings(max_examples=300, deadline=None)
@given(x=st.floats(0.05, 1e5))
def test_trigamma_is_exact(x):
    assert close(tails.trigamma(x), mpmath.psi(1, x))


@pytest.mark.parametrize(("level", "df", "known"), [(0.95, 1, 12.706204736), (0.95, 10, 2.228138852),
                                                     (0.99, 3, 5.840909310), (0.95, 1e6, 1.959966)])
def test_t_quantile_against_printed_tables(level, df, known):
    assert tails.t_quantile(level, df) == pytest.approx(known, rel=1e-6)


def test_infinite_t_and_the_edges():
    assert tails.t_two_sided(math.inf, 5) == 0.0
    assert tails.t_two_sided(0.0, 5) == pytest.approx(1.0)
    assert tails.f_upper(0.0, 3, 4) == 1.0
    assert tails.kolmogorov_tail(0.0) == 1.0
    assert tails.kolmogorov_tail(0.05) == 1.0
