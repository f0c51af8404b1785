"""Apache end to end with real apache2 servers on loopback, its config, and each way a point fails."""

from pathlib import Path

import pytest

from mosbench.errors import UserError
from mosbench.workloads import apache
from tests.servers import needs_server, run_points, taken_port


def test_config_is_self_contained(tmp_path):
    conf = apache.config(tmp_path / "root", tmp_path / "htdocs", "127.0.0.1", 20123, workers=40)
    assert "/etc/apache2" not in conf and "Include" not in conf and "CustomLog" not in conf
    assert "Listen 127.0.0.1:20123" in conf and "ListenCoresBucketsRatio" not in conf
    for line in conf.splitlines():
        if line.startswith("LoadModule"):
            assert Path(line.split()[2]).name.startswith("mod_")
    # 40 workers fit one child of 64 threads; with 4 buckets every bucket gets a child of its own.
    assert "ServerLimit 1" in conf
    bucketed = apache.config(tmp_path / "root", tmp_path / "htdocs", "127.0.0.1", 20123, workers=40, buckets=4)
    assert "ListenCoresBucketsRatio 1" in bucketed and "ServerLimit 4" in bucketed
    assert "ThreadsPerChild 10" in bucketed and "MaxRequestWorkers 40" in bucketed


servers = needs_server(apache.APACHE)


@servers
@pytest.mark.parametrize("test", ["close", "keepalive"])
def test_both_variants_serve_checked_responses(tmp_path, monkeypatch, test):
    points = run_points(tmp_path, monkeypatch, "apache", test, variants=("per-core", "single"))
    assert sorted(p["variant"] for p in points) == ["per-core", "single"]  # one point each, none lost
    for p in points:
        assert p["status"] == "ok", p.get("reason")
        m = p["metrics"]
        assert m["client_errors"] == 0 and m["client_lost"] == 0 and m["client_done"] > 100
        assert 0 < m["latency_p50_us"] <= m["latency_p99_us"]
        assert isinstance(m["client_bound"], bool)


@servers
def test_a_port_taken_by_another_program_fails_the_point(tmp_path, monkeypatch):
    with taken_port() as port:
        (p,) = run_points(tmp_path, monkeypatch, "apache", "close", variants=("single",), port=port)
    assert p["status"] == "failed"
    assert f"apache2-{port}" in p["reason"] and "Address already in use" in p["reason"]


@servers
def test_a_wrong_file_fails_the_point(tmp_path, monkeypatch):
    monkeypatch.setattr(apache, "page", lambda size: b"m" * (size - 1))  # one byte short of what is expected
    (p,) = run_points(tmp_path, monkeypatch, "apache", "close", variants=("per-core",))
    assert p["status"] == "failed" and "body of 299 bytes for /index.html, 300 expected" in p["reason"]


def test_config_for_256_cpus():
    """The paper's connection count at 256 cores: 2 x 8 x 256 workers over a child per bucket."""
    conf = apache.config(Path("/r"), Path("/d"), "127.0.0.1", 20000, workers=2 * 8 * 256, buckets=256)
    assert "ServerLimit 256" in conf and "ThreadsPerChild 16" in conf and "MaxRequestWorkers 4096" in conf


@servers
def test_a_config_apache_refuses_fails_the_point_with_its_cause(tmp_path, monkeypatch):
    real = apache.config
    monkeypatch.setattr(apache, "config", lambda *a, **k: real(*a, **k) + "NoSuchDirective on\n")
    (p,) = run_points(tmp_path, monkeypatch, "apache", "close", variants=("per-core",))
    assert p["status"] == "failed" and "Invalid command 'NoSuchDirective'" in p["reason"]


def test_missing_package_is_one_clear_line(monkeypatch):
    monkeypatch.setattr(apache, "APACHE", Path("/nonexistent/apache2"))
    with pytest.raises(UserError, match=r"apache2 is not installed \(Debian: apt-get install apache2\)"):
        apache.Apache().check_available()


@servers
def test_the_file_set_searches_its_load_and_counts_kilobytes_sent(tmp_path, monkeypatch):
    (p,) = run_points(tmp_path, monkeypatch, "apache", "files", variants=("per-core",), dirs=1, connections=2,
                      qos_step_s=0.3)
    assert p["status"] == "ok", p.get("reason")
    m = p["metrics"]
    # Every body checked against its file's size; the work is the bodies' bytes, in kilobytes.
    assert m["client_errors"] == 0 and m["client_lost"] == 0 and m["client_done"] > 10
    assert p["work"] == pytest.approx(m["client_bytes"] / 1000, rel=0.05)
    assert 1e5 <= m["mean_response_bytes"] <= 3.8e7  # between the set's smallest and largest file
    assert [s["connections"] for s in m["qos_steps"]] == [1, 2] and m["qos_connections"] == 2
    assert all(s["good_share"] == 1.0 and s["kilobytes_per_s"] > 0 for s in m["qos_steps"])
    assert m["good_share"] == 1.0 and m["context_switches"] > 0


@servers
def test_the_baseline_offers_a_tenth_to_all_of_the_maximum_at_one_core_only(tmp_path, monkeypatch):
    points = run_points(tmp_path, monkeypatch, "apache", "baseline", variants=("per-core",), cores=[1, 2], dirs=1,
                        connections=2, qos_step_s=0.2)
    assert [p["cores"] for p in points] == [1]
    (p,) = points
    assert p["status"] == "ok", p.get("reason")
    m = p["metrics"]
    top = m["baseline_max"]["requests_per_s"]
    assert [s["rate"] for s in m["baseline"]] == pytest.approx([top * k / 10 for k in range(1, 11)])
    light = m["baseline"][0]
    # A handful of requests are due in so short a step: one either side of the window is a large share.
    assert light["schedule_kept"] == pytest.approx(1.0, abs=0.25)
    # /proc/stat counts in 10 ms ticks: the lightest step's few ms of server CPU may round to none, the
    # full rate's may not.
    assert all(s["server_us_per_kilobyte"] is not None for s in m["baseline"])
    assert m["baseline"][-1]["server_us_per_kilobyte"] > 0
