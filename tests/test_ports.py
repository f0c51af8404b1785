"""Ports for private servers: free ones found by binding, the user's refused when they cannot fit."""

import socket

import pytest

from mosbench.errors import UserError
from mosbench.workloads.server import ports


def test_free_ports_skip_a_taken_one_and_cover_256_instances():
    (port,) = ports.free_ports(1)
    with socket.socket() as taken:
        taken.bind((ports.HOST, port))
        taken.listen()
        found = ports.free_ports(256, udp=True, start=port)
    assert port not in found and found[0] > port
    assert len(set(found)) == 256 and all(ports.FIRST <= p <= ports.LAST for p in found)


def test_user_ports_from_a_base():
    assert ports.ports_for(11300, 3) == [11300, 11301, 11302]
    with pytest.raises(UserError, match="no room for 4 consecutive ports"):
        ports.given_ports(65534, 4)
