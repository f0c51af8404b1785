import pytest

from mosbench.machine import accounting
from tests.conftest import FIXTURES


def test_recorded_vm_stat():
    before = accounting.parse_proc_stat((FIXTURES / "proc-stat-vm-before.txt").read_text(), hz=100)
    after = accounting.parse_proc_stat((FIXTURES / "proc-stat-vm-after.txt").read_text(), hz=100)
    assert set(before) == {0, 1}
    u = accounting.usage(before, after, [0, 1])
    # One second apart at 100 Hz: cpu0 idled 100 ticks, cpu1 ran one user tick and idled 100.
    assert u.cpus == 2
    assert (u.user, u.system, u.idle, u.steal) == pytest.approx((0.01, 0.0, 2.0, 0.0))
    assert u.busy_fraction == pytest.approx(0.01 / 2.01)


def test_busy_idle_and_steal_add_up():
    """On a VM a hypervisor steals time: busy, idle and steal are shares of one whole."""
    before = accounting.parse_proc_stat("cpu0 0 0 0 0 0 0 0 0\ncpu1 0 0 0 0 0 0 0 0", hz=100)
    after = accounting.parse_proc_stat("cpu0 50 0 20 10 0 0 0 20\ncpu1 30 10 40 5 5 0 10 0", hz=100)
    u = accounting.usage(before, after, [0, 1])
    assert (round(u.user, 9), round(u.system, 9), round(u.idle, 9), round(u.steal, 9)) == (0.9, 0.7, 0.2, 0.2)
    busy, idle, steal = accounting.shares(u.user, u.system, u.idle, u.steal)
    assert (round(busy, 9), round(idle, 9), round(steal, 9)) == (0.8, 0.1, 0.1)
    assert busy == u.busy_fraction and idle == u.idle_fraction and abs(busy + idle + steal - 1) < 1e-12
    assert accounting.shares(0, 0, 0, 0) == (0.0, 0.0, 0.0)


def _stat_line(cpu: int, user: int, system: int, idle: int, steal: int = 0) -> str:
    return f"cpu{cpu} {user} 5 {system} {idle} 2 1 1 {steal} 0 0"


def test_large_machine_window_accounting():
    """512 CPUs, the measured 256 busy: user+system per unit comes only from the measured CPUs."""
    cpus = range(512)
    before = "\n".join(["cpu  1 1 1 1 1 1 1 1 0 0"] + [_stat_line(c, 1000, 1000, 1000) for c in cpus])
    after = "\n".join(["cpu  1 1 1 1 1 1 1 1 0 0"] + [
        _stat_line(c, 1000 + 60, 1000 + 30, 1000 + 10, 0) if c < 256 else _stat_line(c, 1000, 1000, 1100)
        for c in cpus])
    u = accounting.usage(accounting.parse_proc_stat(before, 100), accounting.parse_proc_stat(after, 100),
                         list(range(256)))
    assert u.cpus == 256
    assert abs(u.user - 256 * 0.60) < 1e-9
    assert abs(u.system - 256 * 0.30) < 1e-9
    assert abs(u.idle_fraction - 0.1) < 1e-9
    assert abs(accounting.per_unit_us(u.system, 76.8e6) - 1.0) < 1e-9  # 76.8 s of system over 76.8M units
    assert accounting.per_unit_us(1.0, 0) is None


def test_offline_cpu_has_no_line():
    text = "cpu  1 2 3 4\ncpu0 1 2 3 4 5 6 7 8\ncpu2 1 2 3 4 5 6 7 8\n"
    assert set(accounting.parse_proc_stat(text, 100)) == {0, 2}
