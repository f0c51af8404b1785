"""--clients: load generators on client hosts over SSH, here network namespaces with real sshd.

The unit tests need nothing; the rest run on client hosts (testing/clienthosts.py: two plain hosts shared by
the tests that need no more, two with a skewed clock shared by those of a skew) and run mosbench as a user
would, then check the per-host figures, each failure (a host unreachable, a generator killed mid-window, a
skewed clock, a host too busy) and that nothing is left on the hosts or here.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mosbench import native
from mosbench.analysis.network import flows_of
from mosbench.errors import UserError
from mosbench.testing.clienthosts import QUEUES, ClientHosts, leftovers, why_not
from mosbench.workloads.server import hostresult, limits, ports, remote, ssh
from mosbench.workloads.server.histogram import Histogram, bucket_of, bucket_top
from mosbench.workloads.server.hosts import ClientHost, parse_clients
from tests.conftest import mosbench_here

MOSBENCH = [sys.executable, "-m", "mosbench"]


# --- what needs no host ---------------------------------------------------------------------------------

def test_client_lists_and_files(tmp_path: Path) -> None:
    assert [h.name for h in parse_clients("c1, root@c2,169.254.1.2")] == ["c1", "root@c2", "169.254.1.2"]
    assert parse_clients("") == ()
    listing = tmp_path / "hosts"
    listing.write_text("# the rack\nc1 0-15\n\nc2   # all its CPUs\n")
    hosts = parse_clients(f"@{listing}")
    assert hosts == (ClientHost("c1", tuple(range(16))), ClientHost("c2"))


@pytest.mark.parametrize("text, words", [
    ("-oProxyCommand=sh", "not a host name"),  # never an ssh option
    ("c1,c1", "twice"),
    ("c1;reboot", "not a host name"),
    (",", "no host"),
    ("@/nonexistent/hosts", "cannot read"),
])
def test_bad_client_lists(text: str, words: str) -> None:
    with pytest.raises(UserError, match=words):
        parse_clients(text)


def test_bad_cpu_list_in_a_file_names_its_line(tmp_path: Path) -> None:
    listing = tmp_path / "hosts"
    listing.write_text("c1 0-3\nc2 zero\n")
    with pytest.raises(UserError, match=r"hosts:2: 'zero' is not a CPU list"):
        parse_clients(f"@{listing}")


def test_histogram_buckets_match_the_generators() -> None:
    """bucket_of/bucket_top are hist.c's: every value falls in a bucket whose top is at least it, and the
    previous bucket's top is below it, across the whole range."""
    rng = random.Random(5)
    values = list(range(300)) + [rng.randrange(1, 1 << 62) for _ in range(5000)] + [(1 << k) - 1 for k in range(8, 63)]
    for v in values:
        i = bucket_of(v)
        assert bucket_top(i) >= v
        assert i == 0 or bucket_top(i - 1) < v
        # The bucket's width is within 1/64 of its values (the generators' stated precision).
        assert bucket_top(i) - v <= max(1, v // 64)


def test_merging_hosts_is_exact() -> None:
    """Two hosts' histograms added bucket by bucket equal one histogram of all their values; averaging
    their percentiles would not (a slow host's tail vanishes)."""
    rng = random.Random(7)
    fast = [rng.randrange(50_000, 60_000) for _ in range(9000)]
    slow = [rng.randrange(5_000_000, 9_000_000) for _ in range(1000)]
    merged = Histogram.of(fast)
    merged.add(Histogram.of(slow))
    assert merged.summary() == Histogram.of(fast + slow).summary()
    averaged = (Histogram.of(fast).percentile(0.99) + Histogram.of(slow).percentile(0.99)) / 2
    assert merged.percentile(0.99) > 1.5 * averaged


def test_a_generators_own_percentiles_read_back_from_its_buckets() -> None:
    """One host's result, merged alone, gives exactly the percentiles the generator printed."""
    port = ports.ports_for(0, 1, udp=True)[0]
    server = subprocess.Popen(["memcached", "-u", "nobody", "-l", "127.0.0.1", "-p", str(port), "-U", str(port),
                               "-t", "1"])
    try:
        for _ in range(50):
            if not ports.is_free(port):
                break
            time.sleep(0.1)
        gen = subprocess.Popen([str(native.binary("mosbench-memload")), "--ports", str(port), "--cpus", "0",
                                "--contexts-per-port", "4", "--control", "--limit", "20"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert gen.stdin is not None
        gen.stdin.write("w\n")
        gen.stdin.flush()
        time.sleep(0.5)
        stdout, _ = gen.communicate("a\nq\n", timeout=30)
    finally:
        server.terminate()
        server.wait()
    out = subprocess.CompletedProcess([], 0, stdout)
    result = json.loads(out.stdout.split("RESULT\n", 1)[1])
    h = Histogram.from_result(result["hist"])
    assert h.count == result["latency_ns"]["count"] > 0
    assert h.summary() == result["latency_ns"]
    assert result["usage"]["cpus"] == 1


def test_client_bound_verdict_names_the_host() -> None:
    point = {"window_s": 2.0, "user_s": 0.4, "system_s": 0.6, "idle_s": 1.0, "steal_s": 0.0}
    hosts = [{"host": "c1", "busy": 0.55}, {"host": "c3", "busy": 0.97}]
    v = limits.judge_hosts(point, hosts)
    assert v is not None and v.client_bound
    assert v.evidence == "client host c3 at 97% busy while the server's CPUs idled 50% (the other hosts at most 55%)"
    v = limits.judge_hosts({**point, "idle_s": 0.0, "user_s": 0.8, "system_s": 1.2}, hosts)
    assert v is not None and not v.client_bound and "both saturated" in v.evidence
    assert limits.judge_hosts(point, [{"host": "c1", "busy": None}]) is None


def test_skewed_clock_and_apart_windows_are_named() -> None:
    metrics = {"client_hosts": [{"host": "c2", "clock_offset_ms": 5001.2, "clock_offset_error_ms": 0.2}],
               "client_window_spread_ms": 120.0}
    notes = hostresult.host_notes(metrics)
    assert notes[0].startswith("client host c2's clock is +5.001 s off ours")
    assert notes[1] == "CLIENT WINDOWS APART: the hosts' windows opened up to 120 ms apart"


def test_the_remote_command_keeps_nothing() -> None:
    """The session's line: a private directory removed at exit, the binary and files read by size, their
    paths substituted, every other argument quoted."""
    line = ssh.remote_command([100, 7], ["--files", "/x/list", "--domain", "a b"], [Path("/x/list")])
    assert line.startswith("d=$(mktemp -d /tmp/mosbench-client.XXXXXX) || exit 1; trap 'rm -rf \"$d\"' EXIT;")
    assert 'head -c 100 > "$d/g"' in line and 'head -c 7 > "$d/f0"' in line
    assert line.endswith('"$d/g" --files "$d/f0" --domain \'a b\'')


def test_outputs_come_back_after_the_generator() -> None:
    """A file the generator writes is printed after it between markers and read back as it was, beside
    the result: run here with sh as the session would run on a host."""
    script = b'#!/bin/sh\necho RESULT\necho \'{"done": 3}\'\nprintf \'{"sessions": [\\n]}\\nEND 1\\n\' > "$2"\nexit 4\n'
    line = ssh.remote_command([len(script)], ["--ledger", "/x/ledger"], [], [Path("/x/ledger")])
    out = subprocess.run(["sh", "-c", line], input=script, capture_output=True)
    assert out.returncode == 4  # the generator's status, not the printing's
    lines = out.stdout.decode().splitlines()
    assert lines[0] == "RESULT"
    result, outputs = ssh.split_outputs(lines[1:])
    assert json.loads("\n".join(result)) == {"done": 3}
    # A line like another output's end marker is content.
    assert json.loads(outputs[0].split("END 1")[0]) == {"sessions": []} and "END 1" in outputs[0]


def test_exim_shares_sessions_among_hosts() -> None:
    from mosbench.workloads.exim import merge_ledgers, session_share
    shares = [session_share(96, i, 5) for i in range(5)]
    firsts = [int(s[3]) for s in shares]
    sizes = [int(s[1]) for s in shares]
    assert sum(sizes) == 96 and max(sizes) - min(sizes) <= 1
    assert firsts == [sum(sizes[:i]) for i in range(5)]
    assert session_share(96, 0, 1) == ["--sessions", "96", "--first-session", "0"]
    merged = merge_ledgers(['{"sessions": [{"user": "u00000"}]}', '{"sessions": [{"user": "u00001"}]}\n\n'])
    assert [s["user"] for s in merged["sessions"]] == ["u00000", "u00001"]


# --- on client hosts --------------------------------------------------------------------------------------

WHY_NOT = why_not()
needs_hosts = pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")
SKEW_MS = 5000


@pytest.fixture(scope="module")
def plain_hosts() -> Iterator[ClientHosts]:
    """Two hosts, built once for every test here that needs two plain ones (keys, two namespaces on a bridge,
    two sshd): a rig costs more to make and remove than most of these tests' runs."""
    with ClientHosts(2) as rig:
        yield rig


@pytest.fixture
def hosts(plain_hosts: ClientHosts) -> Iterator[ClientHosts]:
    """The shared plain hosts, handed to the next test as this one found them: a host whose sshd it stopped
    (to make it unreachable) is listening again."""
    yield plain_hosts
    for i in range(plain_hosts.count):
        plain_hosts.start_sshd(i)


@pytest.fixture(scope="module")
def skewed_hosts() -> Iterator[ClientHosts]:
    """Two hosts, c2's clock SKEW_MS ahead in its sessions (libfaketime), for the tests of a skewed clock."""
    with ClientHosts(2, skew={1: SKEW_MS / 1000}) as rig:
        yield rig


def _run(hosts: ClientHosts, store: Path, *args: str, timeout: float = 300,
         home: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*MOSBENCH, "run", *args, "--clients", hosts.clients(), "--server-address",
                           hosts.server_address, "--ssh-config", str(hosts.ssh_config), "--store", f"sqlite:///{store}",
                           "--no-wait"], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "HOME": str(home)} if home else None)


def _points(store: Path) -> list[dict]:
    db = sqlite3.connect(store)
    db.row_factory = sqlite3.Row
    return [dict(r) for r in db.execute("select * from points order by id")]


def _nothing_left(hosts: ClientHosts) -> None:
    assert leftovers(hosts) == []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "mosbench-" not in netns.replace("mosbench-test-", "")


@needs_hosts
def test_memcached_from_two_client_hosts(hosts: ClientHosts, tmp_path: Path) -> None:
    out = _run(hosts, tmp_path / "r.db", "memcached", "--variant", "per-core", "--cores", "1", "--trials", "1",
               "--warmup", "0.5", "--duration", "1.5", "--max-interference", "100")
    assert out.returncode == 0, out.stderr
    (point,) = _points(tmp_path / "r.db")
    m = json.loads(point["metrics"])
    assert m["net"] == "client hosts"
    assert [h["host"] for h in m["client_hosts"]] == ["c1", "c2"]
    # Per host and in all: the total is the hosts' sum, and each host did its share.
    assert sum(h["done"] for h in m["client_hosts"]) == m["client_done"] == point["work"]
    assert all(h["done"] > 1000 and h["cpu_us_per_request"] > 0 for h in m["client_hosts"])
    assert all(abs(h["clock_offset_ms"]) < 50 for h in m["client_hosts"])
    assert m["client_window_spread_ms"] < 50
    assert m["client_evidence"]
    # No CPU of this machine was taken for a local client.
    assert point["loadgen_cpus"] is None
    _nothing_left(hosts)


@needs_hosts
def test_an_unreachable_host_is_refused_before_the_run(hosts: ClientHosts, tmp_path: Path) -> None:
    hosts.stop_sshd(1)
    out = _run(hosts, tmp_path / "r.db", "memcached", "--cores", "1", "--trials", "1")
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("mosbench: client host c2: ssh: connect to host"), out.stderr
    assert not (tmp_path / "r.db").exists()  # refused before anything was made
    _nothing_left(hosts)


def _generators() -> Iterator[tuple[int, list[bytes]]]:
    """Every generator started over SSH now running (ours: the test started the run): its PID and argv."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and cmd[0].startswith(b"/tmp/mosbench-client.") and b"--control" in cmd:
            yield int(pid), cmd


def _kill_first_generator(deadline: float, killed: list[int]) -> None:
    """Waits for a generator to be in its window, then kills it by PID."""
    while time.monotonic() < deadline and not killed:
        for pid, _ in _generators():
            time.sleep(1.2)  # past the 0.5 s warm-up: mid-window
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return
        time.sleep(0.05)


@needs_hosts
def test_a_generator_that_dies_fails_its_point_and_the_run_goes_on(hosts: ClientHosts, tmp_path: Path) -> None:
    killed: list[int] = []
    killer = threading.Thread(target=_kill_first_generator, args=(time.monotonic() + 120, killed))
    killer.start()
    out = _run(hosts, tmp_path / "r.db", "memcached", "--variant", "per-core", "--cores", "1", "--trials", "2",
               "--warmup", "0.5", "--duration", "2", "--max-interference", "100")
    killer.join()
    assert killed
    first, second = _points(tmp_path / "r.db")
    assert first["status"] == "failed"
    assert first["reason"].startswith("client host c"), first["reason"]
    assert second["status"] == "ok"
    assert out.returncode == 3  # some points failed
    _nothing_left(hosts)


@needs_hosts
def test_a_skewed_clock_is_measured_and_named(skewed_hosts: ClientHosts, tmp_path: Path) -> None:
    out = _run(skewed_hosts, tmp_path / "r.db", "memcached", "--variant", "per-core", "--cores", "1", "--trials", "1",
               "--warmup", "0.5", "--duration", "1", "--max-interference", "100")
    assert out.returncode == 0, out.stderr
    (point,) = _points(tmp_path / "r.db")
    c1, c2 = json.loads(point["metrics"])["client_hosts"]
    assert abs(c1["clock_offset_ms"]) < 50
    assert SKEW_MS - 100 < c2["clock_offset_ms"] < SKEW_MS + 100
    # The window opened by message: corrected by the offset, the hosts' windows still opened together.
    assert json.loads(point["metrics"])["client_window_spread_ms"] < 50
    assert f"client host c2's clock is +{SKEW_MS / 1000:.1f}" in out.stderr
    _nothing_left(skewed_hosts)


@needs_hosts
def test_a_host_too_busy_to_keep_up_is_the_limit(hosts: ClientHosts, tmp_path: Path) -> None:
    """Both hosts' generators on CPU 1 with a spinning program beside them: the hosts' CPU is full while
    the one-core server on CPU 0 waits for requests."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    listing = tmp_path / "hosts"
    listing.write_text("c1 1\nc2 1\n")
    hog = subprocess.Popen(["taskset", "-c", "1", "sh", "-c", "while :; do :; done"])
    try:
        out = subprocess.run([*MOSBENCH, "run", "memcached", "--variant", "per-core", "--cores", "1",
                              "--trials", "1", "--warmup", "0.5", "--duration", "1.5", "--max-interference",
                              "100", "-p", "contexts=2", "--clients", f"@{listing}", "--server-address",
                              hosts.server_address, "--ssh-config", str(hosts.ssh_config), "--store",
                              f"sqlite:///{tmp_path / 'r.db'}"], capture_output=True, text=True, timeout=300)
    finally:
        hog.kill()
        hog.wait()
    assert out.returncode == 0, out.stderr
    (point,) = _points(tmp_path / "r.db")
    m = json.loads(point["metrics"])
    assert m["client_bound"], m["client_evidence"]
    assert m["client_evidence"].startswith("client host c")
    assert "2 client hosts " in out.stderr and "CLIENT-BOUND (client host c" in out.stderr
    _nothing_left(hosts)


@needs_hosts
def test_doctor_checks_each_client_host(hosts: ClientHosts) -> None:
    hosts.stop_sshd(1)
    out = mosbench_here("doctor", "--clients", hosts.clients(), "--server-address", hosts.server_address,
                        "--ssh-config", str(hosts.ssh_config), env={"COLUMNS": "250"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"{hosts.server_address} on {hosts.bridge}" in text
    assert "route to " in text and f"src {hosts.hosts[0].address}" in text
    assert "mosbench-memload" in text and "runs there" in text
    assert "clock offset" in text
    # The host that cannot be reached is a row of its own, with ssh's reason.
    assert "client host c2: ssh: connect to host" in text
    _nothing_left(hosts)


def _generator_args(deadline: float, seen: dict[int, list[str]], done: threading.Event) -> None:
    """Every generator's arguments as it runs, until the run is done."""
    while time.monotonic() < deadline and not done.is_set():
        for pid, cmd in _generators():
            seen.setdefault(pid, [w.decode() for w in cmd if w])
        time.sleep(0.02)


@needs_hosts
def test_balanced_flows_from_client_hosts(hosts: ClientHosts, tmp_path: Path) -> None:
    """Each host's contexts get source ports of its own choosing, distinct on that host, and all the
    hosts' flows together land evenly on the server device's receive queues (its RSS: the verification
    key over the rig's bridge's queues); every flow listed and hashed."""
    seen: dict[int, list[str]] = {}
    done = threading.Event()
    watcher = threading.Thread(target=_generator_args, args=(time.monotonic() + 120, seen, done))
    watcher.start()
    try:
        out = _run(hosts, tmp_path / "r.db", "memcached", "--variant", "per-core", "--cores", "1", "--trials",
                   "1", "--warmup", "0.3", "--duration", "0.7", "--max-interference", "100", "-p",
                   "flows=balanced")
    finally:
        done.set()
        watcher.join()
    assert out.returncode == 0, out.stderr
    (point,) = _points(tmp_path / "r.db")
    m = json.loads(point["metrics"])
    # 8 contexts a server core (the default) in all, shared: 4 from each host, each listed.
    assert m["flows"] == 8 and [h["host"] for h in m["client_hosts"]] == ["c1", "c2"]
    assert len(bytes.fromhex(m["flow_hash_low_bytes"])) == m["flows"]
    assert m["flows_chosen"] == "balanced"
    assert sum(m["flow_queues_predicted"].values()) == m["flows"]
    flows = flows_of(m)
    assert flows is not None and flows.queue_count == QUEUES
    least, most = flows.queue_spread() or (0, 0)
    assert most - least <= 1, m["flow_queues_predicted"]  # 2 a queue; the kernel's ports rarely give that
    # Each host's generator was given its contexts' source ports: 4, none twice.
    chosen = [args[args.index("--source-ports") + 1].split(",") for args in seen.values()]
    assert len(chosen) == 2, seen
    assert all(len(ports) == 4 and len(set(ports)) == 4 for ports in chosen), chosen
    _nothing_left(hosts)


@needs_hosts
@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/sbin/exim4").exists(), reason="needs root and exim4")
def test_exim_from_two_client_hosts(hosts: ClientHosts, tmp_path: Path) -> None:
    """Each host mails its own share of the users; both ledgers come back over the session and every
    message either accepted is checked in the mailboxes here."""
    out = _run(hosts, tmp_path / "r.db", "exim", "--variant", "tuned", "--cores", "1", "--trials", "1",
               "--warmup", "0.5", "--duration", "1.5", "--max-interference", "100", "-p", "clients=8")
    assert out.returncode == 0, out.stderr
    (point,) = _points(tmp_path / "r.db")
    m = json.loads(point["metrics"])
    assert m["net"] == "client hosts"
    assert [h["host"] for h in m["client_hosts"]] == ["c1", "c2"]
    assert all(h["done"] > 0 for h in m["client_hosts"])
    # Every message accepted on either host was found once in its mailbox (the point would fail otherwise).
    assert m["messages_checked"] >= sum(h["done"] for h in m["client_hosts"])
    assert point["work"] > 0
    _nothing_left(hosts)


@needs_hosts
@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/lib/postgresql/15/bin/postgres").exists(),
                    reason="needs root and PostgreSQL 15")
def test_postgres_from_two_client_hosts(skewed_hosts: ClientHosts, cache_home: Path, tmp_path: Path) -> None:
    """A pgbench on each host with half the connections; each host's transaction log comes back over its
    session, moved onto our clock, and the server's own index-lookup count matches both together."""
    out = _run(skewed_hosts, tmp_path / "r.db", "postgres/read-only", "--variant", "small-cache", "--cores", "1",
               "--trials", "1", "--warmup", "0.5", "--duration", "1.5", "--max-interference", "100",
               "-p", "rows=20000", "-p", "clients_per_core=2", "-p", "batch=16", "-p", "syscalls=false",
               home=cache_home)
    assert out.returncode == 0, out.stderr
    (point,) = _points(tmp_path / "r.db")
    m = json.loads(point["metrics"])
    assert m["net"] == "client hosts" and m["clients"] == 2
    c1, c2 = m["client_hosts"]
    assert (c1["host"], c2["host"]) == ("c1", "c2")
    assert c1["done"] > 0 and c2["done"] > 0
    # c2's clock is 5 s ahead: its transactions were moved back onto ours, so its window's share
    # is its own and not 5 s of another interval.
    assert SKEW_MS - 100 < c2["clock_offset_ms"] < SKEW_MS + 100
    assert 0.5 < c1["done"] / c2["done"] < 2
    assert abs(c1["done"] + c2["done"] - point["work"]) <= 2 * 16
    assert all(h["cpu_us_per_request"] and h["busy"] is not None for h in m["client_hosts"])
    assert m["latency_p50_us"] > 0
    _nothing_left(skewed_hosts)


@needs_hosts
@pytest.mark.skipif(not Path("/usr/sbin/apache2").exists(), reason="needs apache2")
def test_apache_file_set_searches_its_load_from_client_hosts(hosts: ClientHosts, tmp_path: Path) -> None:
    """The response-rule search steps the client hosts' connections as a local client's: every step's
    answers judged good on both hosts add up, and the point runs at the highest step that met the rule."""
    out = _run(hosts, tmp_path / "r.db", "apache/files", "--variant", "per-core", "--cores", "1", "--trials",
               "1", "--warmup", "0.3", "--duration", "1", "--max-interference", "100", "-p", "dirs=1",
               "-p", "connections=2", "-p", "qos_step_s=0.3")
    assert out.returncode == 0, out.stderr
    (point,) = _points(tmp_path / "r.db")
    m = json.loads(point["metrics"])
    assert [s["connections"] for s in m["qos_steps"]] == [1, 2] and m["qos_connections"] == 2
    assert all(s["done"] > 0 and s["good_share"] == 1.0 for s in m["qos_steps"])
    assert m["good_share"] == 1.0  # the hosts' good answers added, over their answers added
    assert sum(h["done"] for h in m["client_hosts"]) == m["client_done"]
    _nothing_left(hosts)


def test_merged_hosts_add_their_judged_answers() -> None:
    from types import SimpleNamespace
    gens = [SimpleNamespace(host=h, cpus=(0,), offset_s=0.0, offset_error_s=0.0) for h in ("c1", "c2")]
    results = [{"done": 10, "good": 9, "tolerable": 10, "connections": 4, "window_s": 1.0},
               {"done": 5, "good": 5, "tolerable": 5, "connections": 4, "window_s": 1.0}]
    total = remote.merge(gens, results)  # type: ignore[arg-type]
    assert total is not None
    assert (total.done, total.good, total.tolerable, total.connections) == (15, 14, 15, 8)
