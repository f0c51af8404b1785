"""--trials auto[:MAX]: the interval that decides, the rounds that interleave, and a sweep that stops
each point where it is sure."""

import math
import statistics
import time
from typing import ClassVar

import pytest
from scipy import stats

from mosbench.analysis.precision import Cell, relative_half_width
from mosbench.errors import UserError
from mosbench.run import plan
from mosbench.workloads import registry
from mosbench.workloads.base import Instance, Sample, Variant, Workload


@pytest.mark.parametrize("spec,expected", [("5", (5, 0)), ("auto", (3, 10)), ("AUTO:20", (3, 20)), ("auto:3", (3, 3))])
def test_parse_trials(spec, expected):
    assert plan.parse_trials(spec) == expected


@pytest.mark.parametrize("spec,message", [("0", "1 to 100"), ("auto:2", "MAX must be 3 to 100"),
                                          ("auto:x", "auto\\[:MAX\\]"), ("some", "auto\\[:MAX\\]"),
                                          ("auto:101", "MAX must be")])
def test_bad_trials_are_one_line(spec, message):
    with pytest.raises(UserError, match=message):
        plan.parse_trials(spec)


def test_half_width_is_students_interval():
    values = [100.0, 104.0, 98.0, 101.0]
    mean = statistics.fmean(values)
    t = stats.t.ppf(0.975, 3)
    assert relative_half_width(values) == pytest.approx(t * statistics.stdev(values) / math.sqrt(4) / mean)
    assert relative_half_width([5.0]) is None
    assert relative_half_width([0.0, 0.0]) is None
    # The same spread is surer with more trials: t falls and √n grows.
    assert relative_half_width(values * 3) < relative_half_width(values) / 2


def test_when_a_point_wants_another_trial():
    assert not Cell(3, [100.0, 100.5, 99.8]).wants_more(0.02, 10)  # ±0.9%
    assert Cell(3, [100.0, 110.0, 95.0]).wants_more(0.02, 10)
    assert not Cell(10, [100.0, 110.0, 95.0]).wants_more(0.02, 10)  # the budget is spent
    assert not Cell(4, [100.0]).wants_more(0.02, 10)  # mostly failed: failing again says nothing new
    assert Cell(3, [100.0, 130.0]).wants_more(0.02, 10)  # one failure of three: go on


def _plan(**kw) -> plan.Plan:
    base = dict(selections=[("scale", "lock"), ("scale", "counter")], variants={"scale": ["stock"]},
                cores=[1, 2], trials=3, trials_max=6)
    return plan.Plan(**{**base, **kw})


def test_auto_measures_in_rounds_across_the_sweep():
    keys = _plan().points()
    trials = [k.trial for k in keys]
    assert trials == sorted(trials)  # every point's first trial, then every second, …
    assert len(keys) == 3 * 4
    # A fixed count keeps a point's trials together (variants innermost)
    fixed = [k.trial for k in _plan(trials_max=0).points()]
    assert fixed[:3] == [1, 2, 3]


def _row(test, cores, trial, throughput, status="ok", interfered=False):
    return dict(workload="scale", test=test, variant="stock", cores=cores, trial=trial, status=status, cpus="0",
                throughput=throughput, work=throughput, user_s=0.5, system_s=0.5, idle_s=0.0,
                interfered=interfered)


def test_next_round_is_the_unsure_points_next_trial():
    p = _plan()
    rows = [_row("lock", 1, t, v) for t, v in ((1, 100), (2, 101), (3, 99.9))]  # sure: ±1.5%
    rows += [_row("lock", 2, t, v) for t, v in ((1, 100), (2, 120), (3, 90))]  # unsure
    rows += [_row("counter", 1, t, v) for t, v in ((1, 100), (2, 120), (3, 90), (4, 95), (5, 99), (6, 101))]
    rows += [_row("counter", 2, 1, 0, "failed"), _row("counter", 2, 2, 0, "failed"), _row("counter", 2, 3, 50)]
    assert [(k.test, k.cores, k.trial) for k in p.next_round(rows)] == [("lock", 2, 4)]
    # An interfered trial does not count toward the interval: the point is measured again
    rows[2] = _row("lock", 1, 3, 99.9, interfered=True)
    assert [(k.test, k.cores, k.trial) for k in p.next_round(rows)] == [("lock", 1, 4), ("lock", 2, 4)]
    assert _plan(trials_max=0).next_round(rows) == []


def test_a_plan_stored_before_auto_loads_with_fixed_trials():
    stored = _plan(trials_max=0).to_json()
    del stored["trials_max"], stored["precision"]
    loaded = plan.Plan.from_json(stored)
    assert not loaded.auto and loaded.trials == 3


class _Steady(Instance):
    """Counts at the rate its variant says: steady always the same, noisy alternating ×3."""

    starts: ClassVar[dict[str, int]] = {}

    def __init__(self, variant: str):
        n = _Steady.starts[variant] = _Steady.starts.get(variant, 0) + 1
        self.rate = 1000.0 * (3 if variant == "noisy" and n % 2 else 1)
        self.t0 = time.monotonic()

    def sample(self) -> Sample:
        return Sample(self.rate * (time.monotonic() - self.t0))

    def check(self) -> None:
        pass

    def stop(self) -> dict:
        return {}


class _Fake(Workload):
    name, description, unit = "fakerate", "counts at a set rate", "op"
    variants = (Variant("steady", "always 1000/s"), Variant("noisy", "1000/s and 3000/s in turn"))

    def start(self, ctx):
        return _Steady(ctx.variant)


def test_the_sweep_stops_each_point_where_it_is_sure(tmp_path, monkeypatch):
    from mosbench.machine import topology
    from mosbench.run.sweep import Sweep
    from mosbench.store import db as store

    monkeypatch.setitem(registry.REGISTRY, "fakerate", _Fake)
    monkeypatch.setenv("MOSBENCH_STATE", str(tmp_path / "state"))
    _Steady.starts.clear()
    db = store.Store(str(tmp_path / "s.sqlite"))
    the_plan = plan.Plan(selections=[("fakerate", "")], variants={"fakerate": ["steady", "noisy"]}, cores=[1],
                         trials=3, trials_max=5, precision=0.05, warmup=0.05, duration=0.2, interval=0,
                         isolation="affinity")
    run_id = db.create_run(the_plan.to_json(), {"hostname": "h"}, "test")
    outcome = Sweep(db, the_plan, topology.read(), cache=tmp_path / "cache").run(run_id)
    assert outcome.status == "complete" and outcome.failed == 0
    points = sorted(db.points(run_id), key=lambda p: p["started_at"])
    assert [p["trial"] for p in points if p["variant"] == "steady"] == [1, 2, 3]
    assert [p["trial"] for p in points if p["variant"] == "noisy"] == [1, 2, 3, 4, 5]
    # Rounds: the noisy point's 4th trial came after every point's 3rd
    assert [(p["variant"], p["trial"]) for p in points][-2:] == [("noisy", 4), ("noisy", 5)]
