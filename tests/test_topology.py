from hypothesis import given, settings
from hypothesis import strategies as st

from mosbench import cpulist
from mosbench.machine import topology
from mosbench.machine.placement import assign, boundaries, default_series, order
from tests.fixtures.make_topologies import machine


def test_two_socket_48_core(load_topology):
    t = load_topology("2x24")
    assert (len(t.cpus), t.sockets, t.l3_domains, t.physical_cores, t.smt) == (48, 2, 2, 48, 1)
    assert order(t, "pack")[:24] == list(range(24))
    assert order(t, "spread")[:4] == [0, 24, 1, 25]
    assert boundaries(t, "pack") == [24, 48]
    assert default_series(t, "pack") == [1, 2, 4, 8, 16, 24, 32, 48]


def test_four_socket_256_core_smt(load_topology):
    t = load_topology("4x64-smt2")
    assert (len(t.cpus), t.sockets, t.l3_domains, t.physical_cores, t.smt, t.nodes) == (512, 4, 32, 256, 2, 4)
    pack = order(t, "pack")
    # One L3 domain (8 cores), then its socket, and no SMT sibling before every core has a thread.
    assert {t.by_id(c).l3 for c in pack[:8]} == {t.by_id(0).l3}
    assert {t.by_id(c).socket for c in pack[:64]} == {0}
    assert all(t.by_id(c).thread == 0 for c in pack[:256])
    assert all(t.by_id(c).thread == 1 for c in pack[256:])
    assert pack[256] == 256  # the sibling of CPU 0
    assert {8, 64, 128, 192, 256, 512} <= set(boundaries(t, "pack"))
    series = default_series(t, "pack")
    assert series[:3] == [1, 2, 4] and series[-1] == 512 and 256 in series and 8 in series

    spread = order(t, "spread")
    assert [t.by_id(c).socket for c in spread[:8]] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert len({t.by_id(c).l3 for c in spread[:32]}) == 32  # every L3 domain before any shares
    assert set(boundaries(t, "spread")) >= {4, 32, 256, 512}


def test_paper_machine_round_robin(load_topology):
    t = load_topology("8x6-opteron")
    assert (t.sockets, t.l3_domains, len(t.cpus)) == (8, 8, 48)
    assert {t.by_id(c).socket for c in order(t, "spread")[:8]} == set(range(8))
    assert set(boundaries(t, "pack")) == {6, 12, 18, 24, 30, 36, 42, 48}


def test_this_vm_recording(load_topology):
    t = load_topology("this-vm-2cpu")
    assert len(t.cpus) == 2 and t.sockets == 1
    assert default_series(t, "pack") == [1, 2]


def test_loadgen_takes_far_cpus_then_shares(load_topology):
    t = load_topology("2x24")
    a = assign(t, "pack", 24, loadgen_cores=4)
    assert a.cpus == tuple(range(24)) and a.loadgen_cpus == (44, 45, 46, 47) and not a.loadgen_shared
    full = assign(t, "pack", 48, loadgen_cores=4)
    assert full.loadgen_shared and full.loadgen_cpus == full.cpus


def test_record_round_trip(tmp_path):
    files = machine(2, 4, 2, 2)
    t = topology.read(topology.materialize(files, tmp_path / "a"))
    again = topology.read(topology.materialize(topology.record(tmp_path / "a"), tmp_path / "b"))
    assert t.cpus == again.cpus


@settings(max_examples=40, deadline=None)
@given(sockets=st.integers(1, 4), l3=st.sampled_from([1, 2, 4]), per_l3=st.integers(1, 6), smt=st.integers(1, 2),
       placement=st.sampled_from(["pack", "spread"]))
def test_placement_properties(tmp_path_factory, sockets, l3, per_l3, smt, placement):
    files = machine(sockets, l3 * per_l3, smt, l3)
    t = topology.read(topology.materialize(files, tmp_path_factory.mktemp("sys")))
    seq = order(t, placement)
    assert sorted(seq) == sorted(t.ids)  # a permutation: every CPU exactly once
    cores = t.physical_cores
    assert len({t.by_id(c).core for c in seq[:cores]}) == cores  # physical cores before siblings
    if placement == "pack":
        for n in range(per_l3, cores + 1, per_l3):  # prefixes are whole L3 domains
            assert len({t.by_id(c).l3 for c in seq[:n]}) == n // per_l3
    else:
        assert len({t.by_id(c).socket for c in seq[:sockets]}) == sockets
    series = default_series(t, placement)
    assert series[0] == 1 and series[-1] == len(seq) and series == sorted(set(series))


def test_cpulist_round_trip():
    assert cpulist.parse("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert cpulist.format([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
