"""The measurement window with a fake instance: warm-up kept at negative times, jobs polled, no work refused."""

import os
import time

import pytest

from mosbench.errors import PointFailed
from mosbench.machine.isolation import Group
from mosbench.run.window import Measured, Window, WindowGroups, measure
from mosbench.workloads.base import Instance, Sample

CPUS = tuple(sorted(os.sched_getaffinity(0)))


class Steady(Instance):
    """Does `rate` units of work a second from its start, split between tasks by `shares`; a job finishes
    `job_s` after begin()."""

    def __init__(self, rate: float, job_s: float | None = None, fail_at: float | None = None,
                 shares: tuple[float, ...] = (1.0,)):
        self.rate, self.job_s, self.fail_at, self.shares = rate, job_s, fail_at, shares
        self.t0 = time.monotonic()
        self.begun: float | None = None
        self.begins = 0

    def sample(self) -> Sample:
        if self.job_s is not None:
            return Sample(1.0 if self.finished else 0.0)
        done = self.rate * (time.monotonic() - self.t0)
        return Sample(done, [done * share for share in self.shares])

    def check(self) -> None:
        if self.fail_at is not None and time.monotonic() - self.t0 > self.fail_at:
            raise PointFailed("the fake died")

    def stop(self) -> dict:
        return {}

    def begin(self) -> None:
        self.begins += 1
        self.begun = time.monotonic()

    @property
    def finished(self) -> bool:
        return self.begun is not None and time.monotonic() - self.begun >= self.job_s


def test_window_keeps_warmup_samples_before_zero():
    v = measure(Steady(1000.0, shares=(0.25, 0.75)), "window", Window(warmup=0.3, duration=0.6, interval=0.1),
                WindowGroups(Group(CPUS)), CPUS)
    assert 0.6 <= v.window_s < 0.7
    assert abs(v.throughput - 1000.0) < 20 and abs(v.work - 1000.0 * v.window_s) < 1.0
    warm = [s for s in v.samples if s["phase"] == "warmup"]
    window = [s for s in v.samples if s["phase"] == "window"]
    assert len(warm) == 3 and all(-0.35 < s["t"] < 0.01 for s in warm)
    assert len(window) == 6 and all(0 < s["t"] < 0.7 for s in window)
    assert all(abs(s["rate"] - 1000.0) < 50 for s in window)
    assert all(0.0 <= s["busy"] <= 1.0 for s in v.samples)
    # Each task's rate over the window: the slowest and the fastest of the two.
    assert abs(v.per_task_min - 250.0) < 10 and abs(v.per_task_max - 750.0) < 20
    assert all(abs(s["per_task"][0] - 250.0) < 15 and abs(s["per_task"][1] - 750.0) < 40 for s in window)
    # affinity groups keep no CPU time of their own, so neither the point's share nor others' is known
    assert v.cgroup_user_s is None and v.interference is None


def test_a_job_is_timed_to_its_end_not_to_a_sample():
    inst = Steady(0.0, job_s=0.25)
    v = measure(inst, "job", Window(warmup=5.0, duration=5.0, interval=1.0), WindowGroups(Group(CPUS)), CPUS)
    assert inst.begins == 1
    assert 0.25 <= v.window_s < 0.3  # polled every 10 ms; no warm-up, the job is the window
    assert v.work == 1.0


def test_a_job_that_does_not_finish_fails():
    inst = Steady(0.0, job_s=10.0)
    with pytest.raises(PointFailed, match="job did not finish"):
        measure(inst, "job", Window(0, 0, 0.1, job_limit=0.2), WindowGroups(Group(CPUS)), CPUS)


def test_no_work_is_a_failure_not_a_zero():
    with pytest.raises(PointFailed, match="no work was done"):
        measure(Steady(0.0), "window", Window(warmup=0.0, duration=0.2, interval=0.1), WindowGroups(Group(CPUS)), CPUS)


def test_a_death_during_the_window_fails_the_point():
    with pytest.raises(PointFailed, match="the fake died"):
        measure(Steady(10.0, fail_at=0.15), "window", Window(0.0, 1.0, 0.05), WindowGroups(Group(CPUS)), CPUS)


def test_ends_only_sampling_still_measures():
    v = measure(Steady(500.0), "window", Window(warmup=0.1, duration=0.3, interval=0), WindowGroups(Group(CPUS)), CPUS)
    assert v.samples == [] and abs(v.throughput - 500.0) < 20


def test_a_clients_exact_count_replaces_the_sampled_one_which_stays_beside_it():
    sampled = Measured(window_s=2.0, work=1000.0, throughput=500.0, user_s=1.0, system_s=1.0, idle_s=0.0,
                       steal_s=0.0, samples=[], cpu_busy_s={})
    assert sampled.counted_exactly(None) is sampled and "sampled_work" not in sampled.metrics()
    exact = sampled.counted_exactly(1024.0)
    assert exact.work == 1024.0 and exact.throughput == 512.0 and exact.metrics()["sampled_work"] == 1000.0
    with pytest.raises(PointFailed, match="no work"):
        sampled.counted_exactly(0.0)
