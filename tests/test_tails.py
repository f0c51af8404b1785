"""analysis/tails.py against scipy.special, which computes the same functions: the history's tests start
without importing it, but must give its numbers."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from mosbench.analysis import tails

RELATIVE = 1e-9
degrees = st.floats(1.0, 5000.0)  # Welch's degrees of freedom are fractions


def close(ours: float, theirs: float, tiny: float = 1e-300) -> bool:
    return math.isclose(ours, theirs, rel_tol=RELATIVE, abs_tol=tiny)


@settings(max_examples=400, deadline=None)
@given(t=st.floats(0.0, 60.0), df=degrees)
def test_t_two_sided_is_scipys(t, df):
    assert close(tails.t_two_sided(t, df), float(2 * special.stdtr(df, -t)))
    assert tails.t_two_sided(-t, df) == tails.t_two_sided(t, df)


@settings(max_examples=300, deadline=None)
@given(level=st.floats(0.5, 0.9999), df=degrees)
def test_t_quantile_is_scipys(level, df):
    assert math.isclose(tails.t_quantile(level, df), float(special.stdtrit(df, 0.5 + level / 2)), rel_tol=1e-9)


@settings(max_examples=300, deadline=None)
@given(f=st.floats(0.0, 200.0), d1=st.floats(1.0, 500.0), d2=st.floats(1.0, 5000.0))
def test_f_upper_is_scipys(f, d1, d2):
    assert close(tails.f_upper(f, d1, d2), float(special.fdtrc(d1, d2, f)))


@settings(max_examples=300, deadline=None)
@given(x=st.floats(0.0, 8.0))
def test_kolmogorov_tail_is_scipys(x):
    assert close(tails.kolmogorov_tail(x), float(special.kolmogorov(x)), tiny=1e-15)


@settings(max_examples=300, deadline=None)
@given(x=st.floats(0.05, 1e5))
def test_trigamma_is_scipys(x):
    assert close(tails.trigamma(x), float(special.polygamma(1, x)))


@pytest.mark.parametrize(("level", "df", "known"), [(0.95, 1, 12.706204736), (0.95, 10, 2.228138852),
                                                     (0.99, 3, 5.840909310), (0.95, 1e6, 1.959966)])
def test_t_quantile_against_printed_tables(level, df, known):
    assert tails.t_quantile(level, df) == pytest.approx(known, rel=1e-6)


def test_infinite_t_and_the_edges():
    assert tails.t_two_sided(math.inf, 5) == 0.0
    assert tails.t_two_sided(0.0, 5) == pytest.approx(1.0)
    assert tails.f_upper(0.0, 3, 4) == 1.0
    assert tails.kolmogorov_tail(0.0) == 1.0
