"""Scaling models: the USL and Amdahl fitted with their intervals, checked against a published fit."""

import math

import numpy as np
import pytest

from mosbench.analysis import scaling

# The Cisco benchmark of Baron Schwartz's "Practical Scalability Analysis with the Universal Scalability
# Law" (concurrency 1..32, throughput), whose USL coefficients the book lists and usl4j reproduces to
# within 0.02%: σ = 0.02671591, κ = 7.690945e-4, λ = 995.6486, peak at 35 with 12341.
CISCO = [955.16, 1878.91, 2688.01, 3548.68, 4315.54, 5130.43, 5931.37, 6531.08, 7219.8, 7867.61, 8278.71, 8646.7,
         9047.84, 9426.55, 9645.37, 9897.24, 10097.6, 10240.5, 10532.39, 10798.52, 11151.43, 11518.63, 11806,
         12089.37, 12075.41, 12177.29, 12211.41, 12158.93, 12155.27, 12118.04, 12140.4, 12074.39]


def test_the_books_coefficients_are_reproduced_within_its_stated_error():
    f = scaling.fit("usl", {n: [x] for n, x in enumerate(CISCO, start=1)})
    assert isinstance(f, scaling.ModelFit)
    assert f.sigma == pytest.approx(0.02671591, rel=2e-4)
    assert f.kappa == pytest.approx(7.690945e-4, rel=2e-4)
    assert f.lam == pytest.approx(995.6486, rel=2e-4)
    assert math.floor(f.peak_cores) == 35
    assert float(f.throughput(35)) == pytest.approx(12341, rel=2e-4)
    lo, hi = f.ci["peak"]
    assert lo < f.peak_cores < hi and f.ci_method == "residuals"


def test_too_few_core_counts_are_refused_with_the_reason():
    refusal = scaling.fit("usl", {1: [5.0, 5.1], 2: [9.0], 4: [15.0]})
    assert isinstance(refusal, scaling.Refusal)
    assert refusal.reason == "3 core counts measured (1, 2, 4); the USL needs 4"
    assert isinstance(scaling.fit("amdahl", {1: [5.0], 2: [9.0]}), scaling.Refusal)
    assert isinstance(scaling.fit("amdahl", {1: [5.0], 2: [9.0], 4: [15.0]}), scaling.ModelFit)


def test_intervals_from_trials_cover_the_true_curve_as_often_as_they_say():
    """Over 30 noisy measurements of a known curve (2% noise, 5 trials at 8 core counts), each
    parameter's 95% interval must hold the true value nearly every time (a bootstrap of 5 trials runs
    a little narrow: at least 80% is asked)."""
    lam, sigma, kappa = 1000.0, 0.05, 0.0008
    truth = {"lam": lam, "sigma": sigma, "kappa": kappa, "peak": scaling.peak_cores(sigma, kappa)}
    counts = (1, 2, 4, 8, 16, 24, 32, 48)
    held = dict.fromkeys(truth, 0)
    runs = 30
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        trials = {n: list(scaling.usl(n, lam, sigma, kappa) * rng.normal(1, 0.02, 5)) for n in counts}
        f = scaling.fit("usl", trials, seed=seed)
        assert f.ci_method == "trials" and f.rounds >= scaling.BOOTSTRAP_ROUNDS // 2
        for name, true in truth.items():
            lo, hi = f.ci[name]
            held[name] += lo <= true <= hi
    assert all(n >= 0.8 * runs for n in held.values()), held
    band = scaling.prediction_band(f, np.array([64, 128, 256]))
    assert band is not None and np.all(band[0] <= band[1])


def test_amdahl_finds_the_serial_share_and_no_peak():
    trials = {n: [float(scaling.amdahl(n, 500.0, 0.1))] for n in (1, 2, 4, 8, 16)}
    f = scaling.fit("amdahl", trials)
    assert f.sigma == pytest.approx(0.1, rel=1e-4) and f.kappa == 0
    # Throughput only levels off, at Amdahl's asymptote λ/σ.
    assert f.peak_cores is None and f.throughput(1e9) == pytest.approx(5000, rel=1e-3)
