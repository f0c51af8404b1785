"""The workload registry: every workload mosbench can run, by name. Apart from the package's __init__, so
importing one workload (which may import a sibling) never imports them all; and a workload's module is
imported when it is asked for, since the eleven together (their servers, clients and parsers) took a tenth of a
second of every command's start, `history` and `show` included, which run none of them."""

from __future__ import annotations

import importlib

from mosbench.errors import UserError
from mosbench.workloads.base import Workload

# name → (module, class), in the order `mosbench list` shows them.
WHERE: dict[str, tuple[str, str]] = {
    "micro": ("mosbench.workloads.micro", "Micro"),
    "scale": ("mosbench.workloads.scale", "Scale"),
    "commute": ("mosbench.workloads.commute", "Commute"),
    "fxmark": ("mosbench.workloads.fxmark", "Fxmark"),
    "metis": ("mosbench.workloads.metis", "Metis"),
    "psearchy": ("mosbench.workloads.psearchy", "Psearchy"),
    "gmake": ("mosbench.workloads.gmake", "Gmake"),
    "memcached": ("mosbench.workloads.memcached", "Memcached"),
    "apache": ("mosbench.workloads.apache", "Apache"),
    "exim": ("mosbench.workloads.exim", "Exim"),
    "postgres": ("mosbench.workloads.postgres.workload", "Postgres"),
}

# Workloads registered at run time (tests' fakes); they come before WHERE's.
REGISTRY: dict[str, type[Workload]] = {}


def workload_class(name: str) -> type[Workload]:
    if name in REGISTRY:
        return REGISTRY[name]
    try:
        module, cls = WHERE[name]
    except KeyError:
        known = ", ".join(sorted({*WHERE, *REGISTRY}))
        raise UserError(f"unknown workload {name!r} (known: {known})") from None
    return getattr(importlib.import_module(module), cls)


def get(name: str) -> Workload:
    return workload_class(name)()


def all_workloads() -> list[Workload]:
    return [get(name) for name in dict.fromkeys([*WHERE, *REGISTRY])]
