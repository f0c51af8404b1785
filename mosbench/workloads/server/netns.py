"""The load generator behind a real device: its own network namespace, joined by a veth pair.

On loopback a packet never leaves the sending CPU's softirq and never meets a device queue. With
`-p net=veth` the client runs in a namespace of its own and reaches the servers through a veth pair,
so every request crosses a device with its queue, its softirq processing and, on the server's side,
receive packet steering (RPS) over the server's CPUs: the software form of the RSS queue steering
the paper configured on its NIC.

The two ends get link-local addresses (169.254.0.0/16: never routed, so nothing leaves the pair),
a /30 of their own per run. The namespace is journaled before it is made; deleting it removes the
pair, which the run does at its end, its guardian after a crash, or the next mosbench command.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from dataclasses import dataclass

from mosbench.errors import PointFailed, UserError
from mosbench.machine.journal import NETNS_PREFIX, Journal

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True)
    if out.returncode:
        raise PointFailed(f"ip {' '.join(args)}: {out.stderr.strip() or out.returncode}")


@dataclass
class VethLink:
    name: str  # the namespace, also under /run/netns
    server_if: str  # the root namespace's end
    client_if: str
    server_addr: str
    client_addr: str


def check_available() -> None:
    if os.geteuid() != 0:
        raise UserError("-p net=veth needs root (network namespaces and veth devices)")
    if subprocess.run(["ip", "-V"], capture_output=True).returncode:
        raise UserError("-p net=veth needs the ip command (Debian: iproute2)")


def create(journal: Journal, tag: str) -> VethLink:
    """A namespace with one end of a fresh veth pair, the other end here, both up and addressed."""
    pid = os.getpid()
    # Interface names are 15 bytes at most; the pid and the tag keep concurrent runs apart.
    short = f"{pid % 100000}{tag[:3]}"
    subnet = (pid * 7 + sum(map(ord, tag))) % (254 * 64)
    third, fourth = 1 + subnet // 64, (subnet % 64) * 4
    link = VethLink(f"{NETNS_PREFIX}{pid}-{tag}", f"mbs{short}", f"mbc{short}",
                    f"169.254.{third}.{fourth + 1}", f"169.254.{third}.{fourth + 2}")
    journal.add_netns(link.name)
    try:
        _ip("netns", "add", link.name)
        _ip("link", "add", link.server_if, "type", "veth", "peer", "name", link.client_if, "netns", link.name)
        _ip("addr", "add", f"{link.server_addr}/30", "dev", link.server_if)
        _ip("link", "set", link.server_if, "up")
        _ip("-n", link.name, "addr", "add", f"{link.client_addr}/30", "dev", link.client_if)
        _ip("-n", link.name, "link", "set", link.client_if, "up")
        _ip("-n", link.name, "link", "set", "lo", "up")
    except BaseException:
        remove(journal, link)
        raise
    return link


def remove(journal: Journal, link: VethLink) -> None:
    subprocess.run(["ip", "netns", "delete", link.name], capture_output=True, check=False)
    journal.remove_netns(link.name)


def entering(link: VethLink):
    """A pre-exec step that moves the new process into the link's namespace."""
    path = f"/run/netns/{link.name}"

    def enter() -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET):
                raise OSError(ctypes.get_errno(), f"setns {path}")
        finally:
            os.close(fd)
    return enter
