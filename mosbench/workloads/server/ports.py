"""Loopback ports for private server instances: free ones found by binding, or the user's own."""

from __future__ import annotations

import socket

from mosbench.errors import UserError

HOST = "127.0.0.1"
# Below the kernel's default ephemeral range (32768-60999), so clients' own ports never collide.
FIRST, LAST = 20000, 32767


def is_free(port: int, udp: bool = False, host: str = HOST) -> bool:
    """Nothing listens on host:port over TCP (and UDP when asked) right now."""
    kinds = (socket.SOCK_STREAM, socket.SOCK_DGRAM) if udp else (socket.SOCK_STREAM,)
    for kind in kinds:
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_ports(count: int, udp: bool = False, start: int = FIRST, host: str = HOST) -> list[int]:
    """count ports, each free over TCP (and UDP) when looked at, consecutive where the range allows.

    Another program may take one between this look and the server's bind: the server then fails to
    start and says so, which fails the point with its message.
    """
    found: list[int] = []
    port = start
    while len(found) < count and port <= LAST:
        if is_free(port, udp, host):
            found.append(port)
        port += 1
    if len(found) < count:
        raise UserError(f"only {len(found)} free loopback ports in {start}-{LAST}, {count} needed")
    return found


def given_ports(base: int, count: int) -> list[int]:
    """The user's ports: base, base+1, ... (a port taken by another program fails the point)."""
    if not 1 <= base <= 65535 - count + 1:
        raise UserError(f"port {base} leaves no room for {count} consecutive ports")
    return list(range(base, base + count))


def ports_for(base: int, count: int, udp: bool = False, host: str = HOST) -> list[int]:
    """base 0: free ports found now; otherwise the user's consecutive ports from base."""
    return free_ports(count, udp, host=host) if base == 0 else given_ports(base, count)
