"""Client hosts at the paper's scale and past it, on recorded setups: what each host is given to run.

The paper drove memcached from 792 client threads on 22 machines and Apache from 25 machines, against
48 cores; a user of mosbench has 256 server cores. No such rack is here, so, as placement is tested on
recorded topologies, the shares are tested on recorded hosts files: every unit of work asked for
(contexts, connections, sessions, pgbench clients, client CPUs) is given out exactly once over the
hosts, evenly, and what each host and each server then holds fits what it is sized for.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mosbench import cpulist
from mosbench.errors import UserError
from mosbench.workloads.exim import session_share
from mosbench.workloads.server.base import client_cores, per_host_cpus
from mosbench.workloads.server.hosts import ClientHost, parse_clients
from mosbench.workloads.server.probe import HostFacts, check_host, host_cpus
from mosbench.workloads.server.shares import share, slot_share

SERVER_CORES = 256


def _hosts_file(tmp_path: Path, count: int, cpus: str) -> tuple[ClientHost, ...]:
    listing = tmp_path / "hosts"
    listing.write_text("# the rack\n" + "".join(f"client{i:02d}.rack {cpus}\n" for i in range(1, count + 1)))
    return parse_clients(f"@{listing}")


def _facts(host: ClientHost, online: int) -> HostFacts:
    import platform
    return HostFacts(host.name, host.name, platform.machine(), "6.1.0", tuple(range(online)),
                     "169.254.7.1 dev eth0 src 169.254.9.2 uid 0")


def _given_out(ports: int, per_port: int, hosts: int) -> tuple[list[int], dict[int, list[int]]]:
    """Each host's load (its ports × its contexts on each; 0 for a host with no share) and, per port, the
    contexts each host on it was given (0 for a host of the port's with no share)."""
    port_list = list(range(20000, 20000 + ports))
    on_port: dict[int, list[int]] = {p: [] for p in port_list}
    loads = []
    for h in range(hosts):
        mine = slot_share(port_list, per_port, h, hosts)
        if mine is None:
            # Only a host that would have had less than one context of a port it shares has nothing.
            assert ports < hosts and per_port < len(range(h % ports, hosts, ports))
            on_port[port_list[h % ports]].append(0)
            loads.append(0)
            continue
        mine_ports, count = mine
        assert mine_ports and count >= 1
        for p in mine_ports:
            on_port[p].append(count)
        loads.append(len(mine_ports) * count)
    return loads, on_port


@given(ports=st.integers(1, 300), per_port=st.integers(1, 4096), hosts=st.integers(1, 64))
@example(ports=256, per_port=8, hosts=22)  # more ports than hosts: the paper's memcached at 256 cores
@example(ports=300, per_port=4096, hosts=64)
@example(ports=64, per_port=3, hosts=64)  # as many: a port each
@example(ports=3, per_port=100, hosts=22)  # more hosts than ports: they share each port's contexts
@example(ports=2, per_port=7, hosts=3)  # one port shared by two hosts, the other a host's alone
@example(ports=1, per_port=3, hosts=64)  # more hosts on the port than it has contexts
def test_every_port_gets_exactly_its_contexts_over_all_hosts(ports: int, per_port: int, hosts: int) -> None:
    loads, on_port = _given_out(ports, per_port, hosts)
    assert {p: sum(counts) for p, counts in on_port.items()} == dict.fromkeys(on_port, per_port)
    if ports >= hosts:
        # Whole ports each: no host carries more than another by more than one port's worth.
        assert max(loads) - min(loads) <= per_port
    else:
        # Hosts share a port: its contexts split among them as evenly as counting allows.
        for counts in on_port.values():
            assert max(counts) - min(counts) <= 1, counts
    if ports >= hosts:
        # Whole ports, every host some, as evenly as whole ports go: within one port's worth of each other.
        assert min(loads) > 0 and max(loads) - min(loads) <= per_port, loads
    else:
        # A port's contexts are shared by its hosts within one context of each other, so no host carries
        # more than its port's fair part (per_port over the hosts on it) rounded up, nor more than
        # per_port over the fewest hosts any port has.
        for p, counts in on_port.items():
            assert len(counts) == len(range(p - 20000, hosts, ports))
            assert max(counts) - min(counts) <= 1, (p, counts)
            assert max(counts) <= -(-per_port // len(counts)), (p, counts)
        assert max(loads) <= -(-per_port // (hosts // ports)), loads


@pytest.mark.parametrize(("ports", "per_port", "hosts", "loads"), [
    (10, 8, 4, [24, 24, 16, 16]),  # more ports than hosts: 3, 3, 2 and 2 ports of 8
    (3, 10, 7, [3, 5, 5, 3, 5, 5, 4]),  # more hosts than ports: port 0's 10 over 3 hosts, 1's and 2's over 2
])
def test_each_hosts_load_on_a_small_rack(ports: int, per_port: int, hosts: int, loads: list[int]) -> None:
    assert _given_out(ports, per_port, hosts)[0] == loads


@given(total=st.integers(0, 100_000), hosts=st.integers(1, 300))
def test_shares_add_up_and_are_even(total: int, hosts: int) -> None:
    parts = [share(total, h, hosts) for h in range(hosts)]
    assert sum(parts) == total and max(parts) - min(parts) <= 1


def test_memcached_at_256_cores_from_the_papers_22_hosts(tmp_path: Path) -> None:
    """792 client threads on 22 hosts of 36 CPUs (the paper's), against 256 server cores: 36 generator
    CPUs a host, all of them; per-core memcached's 256 ports and 8 contexts each shared out exactly."""
    hosts = _hosts_file(tmp_path, 22, "0-35")
    params = {"client_cpus": 792 / SERVER_CORES}
    assert client_cores(SERVER_CORES, params) == 792
    per_host = per_host_cpus(SERVER_CORES, params, len(hosts))
    assert per_host == 36 and per_host * len(hosts) == 792
    for host in hosts:
        facts = _facts(host, 36)
        check_host(facts, host, per_host)
        assert host_cpus(host, facts, per_host) == tuple(range(36))
    ports = list(range(20000, 20000 + SERVER_CORES))  # a memcached per core, a port each
    shares = [slot_share(ports, 8, h, len(hosts)) for h in range(len(hosts))]
    assert all(s is not None for s in shares)
    assert sorted(p for s in shares for p in s[0]) == ports  # each port driven from one host, all 8 contexts
    # Descriptors: a host's memload holds a UDP socket per context, far below any hard limit a host has.
    assert max(len(s[0]) * s[1] for s in shares) == 12 * 8
    # The threaded variant's one port: 8 contexts a core, 2048 in all, 93 or 94 a host.
    counts = [slot_share([20000], 8 * SERVER_CORES, h, len(hosts))[1] for h in range(len(hosts))]
    assert sum(counts) == 2048 and set(counts) == {93, 94}


def test_a_host_short_of_cpus_is_named_before_the_run(tmp_path: Path) -> None:
    hosts = _hosts_file(tmp_path, 22, "")
    per_host = per_host_cpus(SERVER_CORES, {"client_cpus": 792 / SERVER_CORES}, len(hosts))
    with pytest.raises(UserError, match=r"client host client01.rack has 32 CPUs and a point wants 36 there"):
        check_host(_facts(hosts[0], 32), hosts[0], per_host)


def test_apache_at_256_cores_from_25_hosts() -> None:
    """The paper's 25 client machines: a server per core, 8 connections a core; every port's 8 come from
    the hosts together, so its MaxRequestWorkers (twice its connections) is never outrun, and each
    host holds ten or eleven ports' connections."""
    ports = list(range(20000, 20000 + SERVER_CORES))
    shares = [slot_share(ports, 8, h, 25) for h in range(25)]
    per_port = dict.fromkeys(ports, 0)
    for mine_ports, count in shares:  # type: ignore[misc]
        for p in mine_ports:
            per_port[p] += count
    assert set(per_port.values()) == {8}
    assert {len(s[0]) for s in shares} == {10, 11}  # type: ignore[index]
    # One apache2 for all cores (the stock variant): one port, 2048 connections, about 82 a host.
    counts = [slot_share([20000], 8 * SERVER_CORES, h, 25)[1] for h in range(25)]  # type: ignore[index]
    assert sum(counts) == 2048 and max(counts) - min(counts) <= 1


def test_exim_sessions_and_pgbench_clients_over_25_hosts() -> None:
    """Exim's 96 sessions mail 96 distinct users over 25 hosts (3 or 4 each, contiguous); PostgreSQL's
    256 connections (one a core) are 10 or 11 a host, max_connections sized from the 256."""
    users: list[int] = []
    for h in range(25):
        args = session_share(96, h, 25)
        assert args is not None
        count, first = int(args[1]), int(args[3])
        assert count in (3, 4)
        users += range(first, first + count)
    assert users == list(range(96))
    # More hosts than sessions: the hosts past them run nothing rather than mail a user twice.
    assert [session_share(3, h, 25) is not None for h in range(25)].count(True) == 3
    pg = [share(SERVER_CORES, h, 25) for h in range(25)]
    assert sum(pg) == SERVER_CORES and set(pg) == {10, 11}


def test_a_recorded_rack_with_cpu_lists_is_taken_as_given(tmp_path: Path) -> None:
    """A hosts file naming each host's CPUs (the second socket, say) keeps the generator there."""
    hosts = _hosts_file(tmp_path, 25, "32-63")
    for host in hosts:
        assert host.cpus == tuple(cpulist.parse("32-63"))
        facts = _facts(host, 64)
        check_host(facts, host, 11)
        assert host_cpus(host, facts, 11) == tuple(range(32, 64))
