import math

import pytest

from mosbench.workloads.lockmodel import LockParams, core_axis, fit


def test_one_core_is_the_loop_time():
    for kind in ("ticket", "scalable"):
        p = LockParams(a=9800, s=200, c=30, kind=kind)
        assert math.isclose(p.throughput(1), 1e9 / (9800 + 200 + 30), rel_tol=1e-12)


def test_ticket_collapses_and_scalable_levels_off():
    ticket = LockParams(a=9800, s=200, c=30, kind="ticket")
    mcs = LockParams(a=9800, s=200, c=30, kind="scalable")
    knee = ticket.collapse(256)
    assert knee is not None and 8 < knee < 64
    assert ticket.throughput(256) < 0.2 * ticket.throughput(knee)  # total throughput falls: a collapse
    assert mcs.collapse(256) is None
    # A scalable lock saturates at one handoff per (s + c), and never falls below it.
    assert math.isclose(mcs.throughput(1024), 1e9 / 230, rel_tol=1e-3)
    assert all(mcs.throughput(n + 1) >= mcs.throughput(n) * (1 - 1e-9) for n in range(1, 300))


def test_long_critical_sections_do_not_collapse():
    """The talk's lesson: non-scalable locks are fine for long sections (handoffs are then negligible)."""
    long_section = LockParams(a=9_800_000, s=200_000, c=30, kind="ticket")  # still 2% inside the lock
    assert long_section.collapse(256) is None
    assert LockParams(a=9800, s=200, c=30, kind="ticket").collapse(256) is not None


def test_large_machines_stay_finite():
    p = LockParams(a=1000, s=100, c=10, kind="ticket")
    assert 0 < p.throughput(4096) < 1e10


@pytest.mark.parametrize("kind", ["ticket", "scalable"])
def test_fit_recovers_parameters(kind):
    truth = LockParams(a=9800, s=250, c=40, kind=kind)
    cores = [1, 2, 4, 8, 16, 32, 48]
    f = fit(cores, [truth.per_core(n) for n in cores], 9800, kind)
    assert f.rms_log_error < 1e-6 and not f.note
    if kind == "ticket":
        assert math.isclose(f.params.s, 250, rel_tol=1e-3) and math.isclose(f.params.c, 40, rel_tol=1e-2)
    else:  # a scalable lock's service time is s + c: only the sum is determined
        assert math.isclose(f.params.s + f.params.c, 290, rel_tol=1e-3)


def test_fit_from_two_points_says_so_and_respects_the_floor():
    truth = LockParams(a=9800, s=250, c=40, kind="ticket")
    f = fit([1, 2], [truth.per_core(1), truth.per_core(2) * 0.99], 9800, "ticket", s_min=200)
    assert f.params.s >= 200 and "indicative" in f.note


def test_core_axis_covers_the_range():
    axis = core_axis(1024)
    assert axis[0] == 1 and axis[-1] == 1024 and axis == sorted(set(axis)) and len(axis) < 400
