"""The network section: the client hosts, the network work per CPU and the flows' randomness of each
server point that stored them, from its best trial; nothing for a point that stored none."""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from mosbench.analysis import cells as analysis
from mosbench.analysis import network
from mosbench.analysis.randomness import parse_ent
from mosbench.report import html, table
from mosbench.report import network as network_report
from mosbench.store import db as store
from mosbench.workloads.server.hostresult import ClientSide, HostResult

FLOW_BYTES = random.Random(2007).randbytes(512)
# What Debian's ent 1.2 printed for FLOW_BYTES (`ent FILE`, recorded with the real ent), so the figures
# are held against ent's own even where ent is not installed; the hash says the bytes are still those.
ENT_REPORT = Path(__file__).parent / "fixtures" / "ent-random2007-512-bytes.txt"
FLOW_BYTES_SHA256 = "992672f725774024ff5dac6b8caa877b685565e9b04b114dc7d7c5958f5a9a64"


def _hosts(done: tuple[int, int]) -> list[dict[str, Any]]:
    return [{"host": f"c{i + 1}", "sent": n + 5, "done": n, "lost": 0, "errors": 0, "latency_p50_us": 180.0,
             "latency_p99_us": 950.0, "cpus": cpus, "cpu_us_per_request": us, "busy": busy,
             "clock_offset_ms": offset, "clock_offset_error_ms": 0.04}
            for i, (n, cpus, us, busy, offset) in enumerate(zip(done, (4, 2), (3.2, 4.1), (0.41, 0.95),
                                                                (0.12, -1.5), strict=True))]


def _networked(done: tuple[int, int]) -> dict[str, Any]:
    """A memcached point on CPUs 0-3 driven from two hosts through a 4-queue NIC: CPU 3 got no NET_RX
    and CPU 5, outside the point, did some."""
    return {
        "net": "client hosts", "client_done": sum(done),
        "client_hosts": _hosts(done), "client_window_spread_ms": 0.8, "client_cpu_us_per_request": 3.5,
        "nic_dev": "eth1", "nic_summary": "NET_RX: 83% on the point's 4 CPUs; 17% elsewhere (CPU 5)",
        "nic_net_rx_per_cpu": {"0": 10000, "1": 10020, "2": 9990, "5": 6000}, "nic_net_tx_per_cpu": {"0": 12},
        "nic_irq_per_cpu": {"0": 700, "1": 690, "5": 300}, "nic_net_rx_on_point": 30010 / 36010,
        "nic_steering": "steered 4 queue IRQs, RPS", "nic_rx_packets_q0": 9000, "nic_rx_packets_q1": 9100,
        "nic_rx_packets_q2": 0, "nic_rx_packets_q3": None,
        "flows": len(FLOW_BYTES), "flow_hash_low_bytes": FLOW_BYTES.hex(),
        "flow_queues_predicted": {"0": 200, "1": 200, "3": 112}, "rss_device": "eth1",
        "rss_source": "ethtool -x eth1", "flows_chosen": "kernel",
    }


def _point(db: store.Store, run: int, cores: int, trial: int, work: float, metrics: dict[str, Any],
           workload: str = "memcached") -> None:
    db.add_point(run, workload=workload, test="", variant="per-core", cores=cores, trial=trial, status="ok",
                 started_at=store.now(), cpus=f"0-{cores - 1}", unit="request", window_s=1.0, work=work,
                 throughput=work, user_s=0.5, system_s=cores - 0.5, idle_s=0.0, steal_s=0.0, samples=[],
                 metrics=metrics)


@pytest.fixture
def networked(tmp_path) -> tuple[store.Store, int]:
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}] * 8}}, "cmd")
    # Trial 2 is the faster: its hosts are the ones shown, not trial 1's.
    _point(db, run, 4, 1, 1e5, _networked((40000, 10000)))
    _point(db, run, 4, 2, 2e5, _networked((150000, 50000)))
    db.finish_run(run, "complete")
    return db, run


def _series(db: store.Store, run: int) -> list[analysis.Series]:
    return analysis.build_series(db.points(run))


def test_the_best_trials_hosts_a_row_each_after_all_of_them(networked):
    db, run = networked
    ((_, group),) = analysis.group_by_test(_series(db, run)).items()
    (clients,) = [t for t in network_report.section(group)[0].tables if "client hosts" in t.title]
    assert clients.column("host") == ["all 2", "c1", "c2"]
    assert clients.column("answered") == ["200k", "150k", "50k"]
    assert clients.column("CPU/req") == ["3.5 µs", "3.2 µs", "4.1 µs"]
    # All hosts' busy share is weighed by their generator CPUs: (0.41 × 4 + 0.95 × 2) / 6
    assert clients.column("busy") == ["59%", "41%", "95%"]
    assert clients.column("clock") == ["spread 0.8 ms", "+0.12±0.04 ms", "-1.5±0.04 ms"]
    # A host this busy may have been the limit: its busy cell says so.
    busy = [c.title for c in clients.columns].index("busy")
    assert [r.cell_styles.get(busy) for r in clients.rows] == [None, None, "poor"]


def test_a_hosts_window_is_one_record_from_its_measure_to_the_report(tmp_path):
    """What a host measured, rounded as a point stores it, reads back from the stored point as the same
    record, under the keys points have always stored; the report's all-hosts row is the hosts' sum."""
    c1 = HostResult.of_window("c1", 150_005, 150_000, 0, 0, {"p50": 180_049, "p99": 950_000}, 4, 0.48, 4.1, 5.9,
                              0.00012, 0.00004, 1_700_000_000_000_000_000)
    # c2 saw no CPU time: its busy share is unknown, not 0.
    c2 = HostResult.of_window("c2", 50_005, 50_000, 0, 0, {"p50": 200_000, "p99": 1_000_000}, 2, 0.205, 0.0, 0.0,
                              -0.0015, 0.00004, 1_700_000_000_000_400_000)
    assert (c1.busy, c2.busy) == (0.41, None) and (c1.cpu_us_per_request, c2.cpu_us_per_request) == (3.2, 4.1)
    side = ClientSide.of([c1, c2])
    # Opened 0.4 ms apart on their clocks, whose offsets differ by 1.62 ms: 2.02 ms apart on ours.
    assert side.window_spread_ms == 2.02 and side.cpu_us_per_request == 3.425
    stored = json.loads(json.dumps(side.metrics()))
    assert ClientSide.read(stored) == side
    assert list(stored["client_hosts"][0]) == [
        "host", "sent", "done", "lost", "errors", "latency_p50_us", "latency_p99_us", "cpus",
        "cpu_us_per_request", "busy", "clock_offset_ms", "clock_offset_error_ms"]
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}] * 8}}, "cmd")
    _point(db, run, 4, 1, 2e5, {"net": "client hosts", **stored})
    (p,) = network.points(_series(db, run))
    assert p.clients == side
    (clients,) = [t for t in network_report.tables(_series(db, run)) if "client hosts" in t.title]
    assert clients.column("answered") == ["200k", "150k", "50k"] and clients.column("busy") == ["41%", "41%", "–"]


def test_the_network_work_per_cpu_and_where_the_rest_went(networked):
    db, run = networked
    (work,) = [t for t in network_report.tables(_series(db, run)) if "network work" in t.title]
    assert work.column("on point") == ["83%"]
    # CPU 3 did none of the point's NET_RX: the least CPU against an even split is 0, and flagged.
    assert work.column("least") == ["0.00"]
    assert work.rows[0].cell_styles == {2: "poor", 3: "poor"}
    assert work.column("NET_RX per CPU") == ["0-1=10k 2=9.99k 3=0 | elsewhere 5=6k"]
    assert work.column("NIC IRQs per CPU") == ["0=700 1=690 2-3=0 | elsewhere 5=300"]
    assert work.column("steering") == ["steered 4 queue IRQs, RPS"]
    assert work.column("rx packets per queue") == ["q0=9k q1=9.1k q2=0 q3=–"]
    assert work.note.startswith("Over client hosts (eth1).")


def _ents_cells(report: str) -> dict[str, str]:
    """The figures of ent's report as it prints them: the table's cells, character for character."""
    number = r"(-?[\d.]+)"
    found = {name: re.search(pattern, report) for name, pattern in {
        "entropy": rf"Entropy = {number} bits per byte", "χ²": rf"for \d+ samples is {number}, and randomly",
        "p": rf"would exceed this value {number} percent", "mean": rf"data bytes is {number} \(",
        "Monte Carlo π": rf"Pi is {number} \(error", "π err": rf"\(error {number} percent\)",
        "serial": rf"coefficient is {number} \(", "bytes": r"of this (\d+) byte file"}.items()}
    missing = [name for name, m in found.items() if m is None]
    assert not missing, f"ent's report has no {missing}: {report}"
    cells = {name: m.group(1) for name, m in found.items() if m is not None}
    return {**cells, "p": f"{cells['p']}%", "π err": f"{cells['π err']}%"}


def test_the_recorded_ent_report_is_ents_on_the_flow_bytes(tmp_path):
    """The fixture is ent's report of exactly FLOW_BYTES: the bytes are the recorded ones, and an ent
    installed here prints the same report for them, character for character."""
    assert hashlib.sha256(FLOW_BYTES).hexdigest() == FLOW_BYTES_SHA256
    ent = shutil.which("ent")
    if ent is None:
        pytest.skip("Debian's ent is not installed (apt-get install ent): the recorded report is used as is")
    (tmp_path / "flows.bin").write_bytes(FLOW_BYTES)
    printed = subprocess.run([ent, str(tmp_path / "flows.bin")], capture_output=True, text=True, check=True,
                             timeout=60).stdout
    assert printed == ENT_REPORT.read_text()


def test_the_flows_randomness_is_ents_on_the_same_bytes(networked):
    db, run = networked
    (p,) = network.points(_series(db, run))
    assert p.flows is not None and p.flows.hash_low_bytes == FLOW_BYTES
    ents = _ents_cells(ENT_REPORT.read_text())
    # The stored point's figures are ent's, to the digits ent prints (read back from ent's own report).
    ours = p.flows.randomness()
    assert ours is not None and ours.printed() == parse_ent(ENT_REPORT.read_text())
    tables = {t.title.split(": ", 1)[1]: t for t in network_report.tables(_series(db, run))}
    t3 = tables["the flows' RSS hash, low byte (Veal & Foong's Table 3; best trial)"]
    (row,) = t3.rows
    # Each of Table 3's cells is what ent printed for these bytes.
    assert dict(zip([c.title for c in t3.columns], row.cells, strict=True)) == {
        "variant": "per-core", "cores": "4", **ents}
    # Queue 2 got no flow: it is in the spread (the device's four queues are known), not left out.
    flows = tables["flows and the receive queues RSS predicts (best trial)"]
    assert flows.column("per queue") == ["0–200"] and flows.column("queues") == ["4"]
    assert flows.column("ports") == ["kernel"] and flows.column("RSS key and table") == ["ethtool -x eth1"]
    assert flows.rows[0].cell_styles == {4: "poor"}


def test_a_queue_count_unknown_spreads_over_the_queues_hit():
    flows = network.flows_of({"flow_hash_low_bytes": "0102", "flow_queues_predicted": {"1": 2, "4": 1},
                              "rss_source": "ethtool -x eth9"})
    assert flows is not None and flows.queue_count is None and flows.queue_spread() == (1, 2)
    default = network.flows_of({"flow_hash_low_bytes": "0102", "flow_queues_predicted": {"0": 2},
                                "rss_source": "lo reports no RSS key or table: the verification key over 2 "
                                              "queue(s) round robin"})
    assert default is not None and default.queue_count == 2 and default.queue_spread() == (0, 2)


def test_a_loopback_point_without_the_keys_shows_nothing_new(tmp_path):
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}] * 2}}, "cmd")
    _point(db, run, 1, 1, 1e5, {"net": "loopback", "instances": 1, "client_done": 100000, "latency_p99_us": 90.0})
    series = _series(db, run)
    assert network.points(series) == [] and network_report.section(series) == []
    assert [t.title for t in table.series_tables(series)] == [
        "memcached: request/sec/core, CPU µs per request"]
    text = html.write(db, [str(run)], tmp_path / "r.html").read_text()
    assert 'id="network"' not in text and 'href="#network"' not in text


def test_the_section_in_the_terminal_fits_80_columns_and_in_the_report(networked, tmp_path):
    db, run = networked
    series = _series(db, run)
    console = Console(width=80, record=True)
    shown = table.series_tables(series)
    for t in shown[1:]:  # the cell table before them is as wide as it always was
        console.print(t)
    out = console.export_text()
    assert [t.title for t in shown[1:]] == [
        "memcached: client hosts (best trial)", "memcached: network work over the window (best trial)",
        "memcached: flows and the receive queues RSS predicts (best trial)",
        "memcached: the flows' RSS hash, low byte (Veal & Foong's Table 3; best trial)"]
    assert "…" not in out and max(len(line.rstrip()) for line in out.splitlines()) <= 80
    assert _ents_cells(ENT_REPORT.read_text())["entropy"] in out and "0-1=10k" in out
    text = html.write(db, [str(run)], tmp_path / "r.html").read_text()
    assert 'href="#network"' in text and '<h2 id="network">Network</h2>' in text
    assert "NET_RX: 83% on the point&#39;s 4 CPUs" in text and ">c2</td>" in text


def test_bytes_that_are_not_random_say_so_as_ent_does(tmp_path):
    """Every flow hashing to one low byte: χ²'s p is below what ent prints (flagged), serial correlation
    undefined."""
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}] * 2}}, "cmd")
    _point(db, run, 2, 1, 1e5, {"net": "veth", "flows": 64, "flow_hash_low_bytes": "2a" * 64,
                                "flow_queues_predicted": {"0": 64}, "flows_chosen": "kernel"})
    tables = network_report.tables(_series(db, run))
    assert [t.title.split(": ", 1)[1].split(" (")[0] for t in tables] == [
        "flows and the receive queues RSS predicts", "the flows' RSS hash, low byte"]
    (row,) = tables[1].rows
    assert row.cells[4] == "<0.01%" and row.cell_styles == {4: "poor"} and row.cells[7] == "–"
    assert tables[0].column("per queue") == ["64–64"] and tables[0].column("queues") == ["–"]
