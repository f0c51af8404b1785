"""A point's work shared over its client hosts: every host a contiguous part within one of the others,
and every server port its full count of connections or contexts however many hosts send to it."""

from __future__ import annotations


def share(total: int, host: int, hosts: int) -> int:
    """Host `host`'s part of `total` units shared by `hosts`: contiguous, sizes within one of each other."""
    return total * (host + 1) // hosts - total * host // hosts


def slot_share(ports: list[int], per_port: int, host: int, hosts: int) -> tuple[list[int], int] | None:
    """The ports a host's generator sends to and its contexts (or connections) on each, so that over
    all hosts every port gets exactly `per_port`: with as many ports as hosts or more each host takes
    every n-th port whole; with fewer, the hosts on a port share its `per_port`. None: the host has no
    share (more hosts on a port than it has contexts)."""
    if len(ports) >= hosts:
        return ports[host::hosts], per_port
    port = host % len(ports)
    sharing = len(range(port, hosts, len(ports)))
    count = share(per_port, host // len(ports), sharing)
    return ([ports[port]], count) if count else None
