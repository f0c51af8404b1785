"""The workload registry: every workload mosbench can run, by name. Apart from the package's __init__, so
importing one workload (which may import a sibling) never imports them all."""

from __future__ import annotations

from mosbench.errors import UserError
from mosbench.workloads.apache import Apache
from mosbench.workloads.base import Workload
from mosbench.workloads.commute import Commute
from mosbench.workloads.exim import Exim
from mosbench.workloads.fxmark import Fxmark
from mosbench.workloads.gmake import Gmake
from mosbench.workloads.memcached import Memcached
from mosbench.workloads.metis import Metis
from mosbench.workloads.micro import Micro
from mosbench.workloads.postgres.workload import Postgres
from mosbench.workloads.psearchy import Psearchy
from mosbench.workloads.scale import Scale

REGISTRY: dict[str, type[Workload]] = {
    w.name: w for w in (Micro, Scale, Commute, Fxmark, Metis, Psearchy, Gmake, Memcached, Apache, Exim,
                         Postgres)
}


def get(name: str) -> Workload:
    try:
        return REGISTRY[name]()
    except KeyError:
        raise UserError(f"unknown workload {name!r} (known: {', '.join(sorted(REGISTRY))})") from None


def all_workloads() -> list[Workload]:
    return [cls() for cls in REGISTRY.values()]
