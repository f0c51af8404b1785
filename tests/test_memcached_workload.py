"""memcached end to end with real servers on loopback: the work it counts, and each way a point fails."""

import os
import shutil
import socket
import stat
import sys
from pathlib import Path

import pytest

from mosbench.errors import UserError
from mosbench.workloads import memcached
from tests.conftest import FIXTURES, needs_native, needs_root, refused
from tests.servers import run_points, taken_port
from tests.test_run_system import _leftovers

pytestmark = [needs_native, needs_root,
              pytest.mark.skipif(not shutil.which("memcached"), reason="memcached not installed")]


def _run(tmp_path: Path, monkeypatch, variants=("per-core", "threaded"), cores=None, **params):
    points = run_points(tmp_path, monkeypatch, "memcached", "", variants, cores, **params)
    assert not _leftovers("memcached -u")
    return points


def test_both_variants_count_replies_and_measure_the_client(tmp_path, monkeypatch):
    ncpu = len(os.sched_getaffinity(0))
    points = _run(tmp_path, monkeypatch, cores=sorted({1, ncpu}))
    assert len(points) == 2 * len({1, ncpu})
    for p in points:
        assert p["status"] == "ok", p.get("reason")
        m = p["metrics"]
        assert m["instances"] == (p["cores"] if p["variant"] == "per-core" else 1)
        assert m["client_errors"] == 0 and m["client_done"] > 1000
        # Work is replies: the client's window count and the harness's agree within a sample's worth.
        assert abs(m["client_done"] - p["work"]) <= 0.2 * p["work"]
        assert 0 < m["latency_p50_us"] <= m["latency_p99_us"] <= m["latency_p999_us"] <= m["latency_max_us"]
        assert p["loadgen_user_s"] + p["loadgen_system_s"] > 0
        assert isinstance(m["client_bound"], bool) and m["client_evidence"]


def test_a_port_taken_by_another_program_fails_the_point_with_memcacheds_word(tmp_path, monkeypatch):
    """Taken after the run's checks (which refuse a port taken before: below), between them and the point."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        (p,) = _run(tmp_path, monkeypatch, variants=("threaded",), port=port)
    assert p["status"] == "failed"
    assert f"memcached-{port}" in p["reason"] and "Address already in use" in p["reason"]


def test_a_server_answering_errors_fails_the_point(tmp_path, monkeypatch):
    fake = tmp_path / "memcached"
    fake.write_text(f"#!{sys.executable}\n" + (FIXTURES / "fake_memcached.py").read_text())
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(memcached.shutil, "which", lambda name: str(fake) if name == "memcached" else None)
    (p,) = _run(tmp_path, monkeypatch, variants=("threaded",))
    assert p["status"] == "failed"
    assert "answered a get of a missing key with 'SERVER_ERROR out of memory'" in p["reason"]


def test_veth_path_runs_and_leaves_no_namespace(tmp_path, monkeypatch):
    from mosbench.workloads.server import netns

    made = []
    create = netns.create
    monkeypatch.setattr(netns, "create", lambda journal, tag: made.append(create(journal, tag)) or made[-1])
    (p,) = run_points(tmp_path, monkeypatch, "memcached", "", ("per-core",), net="veth")
    assert p["status"] == "ok", p.get("reason")
    assert p["metrics"]["net"] == "veth" and p["metrics"]["client_done"] > 1000
    (link,) = made
    assert link.server_addr.startswith("169.254.")
    assert not Path("/run/netns", link.name).exists()
    assert not Path("/sys/class/net", link.server_if).exists()


def test_missing_package_is_one_clear_line(monkeypatch):
    monkeypatch.setattr(memcached.shutil, "which", lambda name: None)
    with pytest.raises(UserError, match=r"memcached is not installed \(Debian: apt-get install memcached\)"):
        memcached.Memcached().check_available()


@pytest.mark.skipif(int(memcached.UNPRIVILEGED_PORT_START.read_text()) < 2, reason="every port is unprivileged here")
def test_a_privileged_port_is_refused_before_the_run(tmp_path):
    """memcached gives up root before it binds: a port below the kernel's start would fail every point."""
    start = int(memcached.UNPRIVILEGED_PORT_START.read_text())
    line = refused(tmp_path, "run", "memcached", "--cores", "1", "-p", f"port={start - 1}")
    assert f"memcached port {start - 1} is below {start} (net.ipv4.ip_unprivileged_port_start)" in line


def test_a_taken_port_is_refused_before_the_run(tmp_path):
    with taken_port() as port:
        line = refused(tmp_path, "run", "memcached", "--cores", "1", "-p", f"port={port}")
    assert f"memcached TCP or UDP port {port} is taken on 127.0.0.1" in line
