import pytest

from mosbench.errors import UserError
from mosbench.machine.placement import parse_core_counts


def test_forms(load_topology):
    t = load_topology("2x24")
    assert parse_core_counts("1,2,4..48", t) == [1, 2, 4, 8, 16, 32, 48]
    assert parse_core_counts("8..max", t) == [8, 16, 32, 48]
    assert parse_core_counts("4..16:4,max", t) == [4, 8, 12, 16, 48]
    assert parse_core_counts("max", t) == [48]
    assert parse_core_counts(None, t) == [1, 2, 4, 8, 16, 24, 32, 48]


@pytest.mark.parametrize("spec,message", [
    ("1,two", "malformed core list"), ("0,1", "start at 1"), ("1,64", "has 48 online CPUs"),
    ("8..4", "bad core range"), ("2..8:0", "step"),
])
def test_errors(load_topology, spec, message):
    with pytest.raises(UserError, match=message):
        parse_core_counts(spec, load_topology("2x24"))
