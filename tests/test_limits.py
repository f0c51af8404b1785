"""The client-bound verdict from a point's numbers, each way it can go."""

from mosbench.workloads.server import limits


def point(**kw):
    base = dict(window_s=2.0, user_s=0.5, system_s=1.0, idle_s=0.5, steal_s=0.0, loadgen_user_s=0.4,
                loadgen_system_s=1.5, loadgen_shared=False)
    return {**base, **kw}


def test_saturated_client_and_idle_server_is_client_bound():
    v = limits.judge(point(), loadgen_cpus=1)  # client 1.9 of 2 s busy; server CPUs 25% idle
    assert v.client_bound and v.evidence == "client CPUs 95% busy while the server's were 25% idle"


def test_both_saturated_is_not_client_bound():
    v = limits.judge(point(idle_s=0.0, system_s=1.5), loadgen_cpus=1)
    assert not v.client_bound and "both saturated" in v.evidence


def test_client_with_room_is_not_the_limit():
    v = limits.judge(point(loadgen_system_s=0.2), loadgen_cpus=2)  # 0.6 s of 4 CPU-seconds
    assert not v.client_bound and v.evidence.startswith("client CPUs 15% busy")


def test_shared_cpus_judged_by_who_took_the_busy_time():
    shared = point(loadgen_shared=True, idle_s=0.0, cgroup_user_s=0.3, cgroup_system_s=0.5, loadgen_user_s=0.6,
                   loadgen_system_s=0.6)
    v = limits.judge(shared, loadgen_cpus=2)
    assert v.client_bound and "took 60% of their busy time" in v.evidence
    v = limits.judge({**shared, "loadgen_system_s": 0.1}, loadgen_cpus=2)
    assert not v.client_bound


def test_no_client_numbers_no_verdict():
    assert limits.judge(point(loadgen_user_s=None), loadgen_cpus=1) is None
    assert limits.judge(point(window_s=0.0), loadgen_cpus=1) is None
