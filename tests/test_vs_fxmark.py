"""benchmarks/vs_fxmark.py's wait for the guest's free page reporting to go quiet before each program:
against a stand-in count that grows in bursts, as the kernel's reported_kib does after a release."""

import threading
import time

from benchmarks import vs_fxmark
from mosbench.machine import interference


def test_each_program_waits_until_reporting_has_been_quiet(tmp_path, monkeypatch):
    reported = tmp_path / "reported_kib"
    reported.write_text("0\n")
    monkeypatch.setattr(interference, "REPORTED_KIB", reported)
    monkeypatch.setattr(vs_fxmark, "QUIET_S", 0.6)
    bursts_end = []

    def bursts():
        for kib in (448, 1216, 2244):  # a burst every 0.4 s, each inside the quiet time of the last
            time.sleep(0.4)
            reported.write_text(f"{kib}\n")
        bursts_end.append(time.monotonic())

    writer = threading.Thread(target=bursts)
    start = time.monotonic()
    writer.start()
    waited = vs_fxmark.settle()
    writer.join()
    assert time.monotonic() >= bursts_end[0] + 0.6  # quiet for QUIET_S after the last burst, not before
    assert 1.8 <= waited <= time.monotonic() - start


def test_waiting_is_bounded_and_absent_where_the_kernel_shows_no_count(tmp_path, monkeypatch):
    monkeypatch.setattr(interference, "REPORTED_KIB", tmp_path / "absent")
    assert vs_fxmark.settle() == 0.0
    reported = tmp_path / "reported_kib"
    reported.write_text("0\n")
    monkeypatch.setattr(interference, "REPORTED_KIB", reported)
    monkeypatch.setattr(vs_fxmark, "QUIET_S", 5.0)
    monkeypatch.setattr(vs_fxmark, "SETTLE_LIMIT_S", 1.0)
    stop = threading.Event()

    def always():
        kib = 0
        while not stop.is_set():
            kib += 64
            reported.write_text(f"{kib}\n")
            time.sleep(0.1)

    writer = threading.Thread(target=always)
    writer.start()
    try:
        assert 1.0 <= vs_fxmark.settle() < 1.5
    finally:
        stop.set()
        writer.join()
