"""`--clients` (`-p client_hosts=`): the client hosts a run names, as a list or a file with their CPUs.

The paper drove its servers from 22 to 25 client machines through a NIC; over loopback every
request's receive path runs on the client's CPU instead. With `--clients HOST[,HOST…]` each host runs
the workload's client, pinned to CPUs of its own, and the servers listen on the address the clients
reach (`--server-address`). Nothing here reaches a host: probe.py does, over ssh.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mosbench import cpulist
from mosbench.errors import UserError

# A name ssh takes as a host (an alias of the user's config, host, user@host, an address); never an option.
_HOST = re.compile(r"^[A-Za-z0-9_.@%:\[\]-]+$")


@dataclass(frozen=True)
class ClientHost:
    name: str  # as ssh takes it
    cpus: tuple[int, ...] | None = None  # the client's CPUs there; None: chosen from its online CPUs


def parse_clients(text: str) -> tuple[ClientHost, ...]:
    """HOST[,HOST…], or @FILE with a host a line and optionally its CPUs (`c3 0-15`); empty: the clients
    run on this machine."""
    text = text.strip()
    if not text:
        return ()
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            lines = path.read_text().splitlines()
        except OSError as e:
            raise UserError(f"--clients {text}: cannot read {path}: {e.strerror}") from None
        hosts = []
        for number, line in enumerate(lines, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) > 2:
                raise UserError(f"{path}:{number}: expected HOST [CPUS], got {line.strip()!r}")
            cpus = None
            if len(words) == 2:
                try:
                    cpus = tuple(cpulist.parse(words[1]))
                except ValueError:
                    raise UserError(f"{path}:{number}: {words[1]!r} is not a CPU list (0-15,32)") from None
            hosts.append(ClientHost(_checked_host(words[0], f"{path}:{number}"), cpus))
    else:
        hosts = [ClientHost(_checked_host(h.strip(), "--clients")) for h in text.split(",") if h.strip()]
    if not hosts:
        raise UserError(f"--clients {text}: no host named")
    names = [h.name for h in hosts]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"--clients names {twice[0]} twice: one generator a host (give it more CPUs instead)")
    return tuple(hosts)


def _checked_host(name: str, where: str) -> str:
    if not name or name.startswith("-") or not _HOST.match(name):
        raise UserError(f"{where}: {name!r} is not a host name ssh takes")
    return name
