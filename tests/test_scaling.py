"""Scaling models: the USL and Amdahl fitted with their intervals, checked against a published fit."""

import math

import numpy as np
import pytest

from mosbench.analysis import scaling
from mosbench.analysis.cells import scaling_ratio
from mosbench.report import rows

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


def _new_measurement_coverage(model: str, curve, trials_per_count: int, runs: int = 40, at: int = 32):
    """How often the band at `at` cores held a new measurement of a known curve (2% noise), fitted from
    1-16 cores; and the band's median width over the true value there."""
    held, widths = 0, []
    for seed in range(runs):
        rng = np.random.default_rng(seed)
        trials = {n: list(curve(n) * rng.normal(1, 0.02, trials_per_count)) for n in (1, 2, 4, 8, 16)}
        f = scaling.fit(model, trials, seed=seed, with_holdout=False)
        new = curve(at) * rng.normal(1, 0.02)
        low, high = (float(v[0]) for v in f.band([at]))
        held += low <= new <= high
        widths.append((high - low) / curve(at))
    return held / runs, float(np.median(widths))


def test_prediction_bands_hold_new_measurements_about_as_often_as_they_say():
    """Past the measured cores (16 → 32), a 95% band must hold a new measurement about 95% of the time,
    from trials (three a count) and from residuals (one a count); seeded. A band of the mean curve alone
    (the bootstrap's curves without a new measurement's noise) held 87% and 75% of them here, and the
    bands of the bootstrap without its small-sample corrections 80% and 75%."""
    usl, usl_width = _new_measurement_coverage("usl", lambda n: scaling.usl(n, 1000.0, 0.05, 0.0008), 3)
    amdahl, amdahl_width = _new_measurement_coverage("amdahl", lambda n: scaling.amdahl(n, 1000.0, 0.05), 1)
    assert usl >= 0.85 and amdahl >= 0.85 and (usl + amdahl) / 2 >= 0.9, (usl, amdahl)
    assert usl_width < 0.5 and amdahl_width < 0.5  # and not by being wide enough to hold anything


def test_a_fall_at_the_largest_count_that_no_smaller_fit_foresees_is_marked():
    """Flat to 8 cores, then a third of per-core throughput at 16: fitted without 16, both models predict
    it far too high and their hold-out says they missed; the same curve without the fall is not missed."""
    rng = np.random.default_rng(1)
    flat = {n: list(scaling.amdahl(n, 1000.0, 0.01) * rng.normal(1, 0.01, 2)) for n in (1, 2, 4, 8, 16)}
    fallen = {**flat, 16: [x / 3 for x in flat[16]]}
    for model in scaling.MODELS:
        h = scaling.fit(model, fallen).holdout
        assert h is not None and h.fitted_on == (1, 2, 4, 8) and h.cores == 16
        assert h.missed and h.error > 1.5 and h.text().endswith("missed"), model
        assert h.measured == pytest.approx(np.mean(fallen[16]) / 16)
        assert not scaling.fit(model, flat).holdout.missed, model
    f = scaling.fit("amdahl", fallen)
    assert rows.holdout_cell(f) == (f.holdout.text(), "poor")
    # Three counts hold none out; four leave the USL three, which it refuses, and says so.
    assert scaling.fit("amdahl", {n: flat[n] for n in (1, 2, 4)}).holdout is None
    refused = scaling.fit("usl", {n: flat[n] for n in (1, 2, 4, 8)}).holdout
    assert refused.refused and refused.error is None and not refused.missed and refused.text() == "refused"


def test_points_that_do_not_fall_name_no_peak():
    """Per-core throughput flat within the trials' spread from 1 to 8 cores (Welch's p well over 0.05):
    neither model can tell whether it falls, so the USL names no peak and both say why; their bands
    hold perfect scaling. A clear fall (the book's curve) is told, and its peak named."""
    # A 1% fall from 1 to 8 cores, the trials 3% apart at every count.
    flat = {n: [1000.0 * n * (1 - 0.01 * math.log2(n) / 3) * k for k in (0.97, 1.0, 1.03)] for n in (1, 2, 4, 8)}
    for model in scaling.MODELS:
        f = scaling.fit(model, flat)
        assert f.undetermined.startswith("cannot tell from cores 1-8") and "measure at 16 or more" in f.undetermined
        assert f.peak(256) is None and f.peak_interval(256) is None
        low, high = f.band([256])
        assert low[0] <= 1000.0 * 256 <= high[0] * 1.02
    assert "within the trials' spread" in scaling.fit("usl", flat).undetermined
    # One trial a count: the spread is the fit's own scatter, and said so.
    single = {n: [xs[0]] for n, xs in flat.items()}
    assert "within the fit's scatter" in scaling.fit("amdahl", single).undetermined
    book = scaling.fit("usl", {n: [x] for n, x in enumerate(CISCO, start=1)})
    assert not book.undetermined and math.floor(book.peak(64)) == 35


def test_unbounded_intervals_are_written_as_or_more():
    """A peak whose upper end is past 100 times the measured cores, or none at all, is no bound."""
    assert rows.count_interval(36, (26, 1090797400997.0), 16) == "36 [26 or more]"
    assert rows.count_interval(36, (26, math.inf), 16) == "36 [26 or more]"
    assert rows.count_interval(36, (26, 48), 16) == "36 [26–48]"
    assert rows.count_interval(24, (24, 24), 512) == "24"
    assert rows.count_interval(18210485, (129, 1.6e14), 16) == "over 1600"
    assert rows._param(3.17e-22, (4.1e-29, 6e-05), ".2g") == "0 [0–6e-05]"
    assert scaling.bounded(1e12, 16) is None and scaling.bounded(math.inf, 16) is None
    assert scaling.bounded(48.0, 16) == 48.0
    # In the JSON, an unbounded end is null, never a 13-digit number or Infinity.
    assert scaling.interval_json(36.0, (26.0, 1.09e12), 16) == {"value": 36.0, "low": 26.0, "high": None}


def test_the_scaling_ratio_is_the_most_cores_over_one_core():
    """One rule for the cells' Figure 3, history's shifts and heat map and the file systems' table."""
    assert scaling_ratio({1: 100.0, 2: 90.0, 8: 50.0}) == (0.5, 8)
    assert scaling_ratio({2: 90.0, 8: 50.0}) is None  # no one-core point: a ratio to 2 cores is another figure
    assert scaling_ratio({1: 100.0}) is None
    assert scaling_ratio({1: 100.0, 4: 80.0, 8: None}) is None  # the most cores unmeasured: not the next count
    assert scaling_ratio({1: 0.0, 8: 5.0}) is None
