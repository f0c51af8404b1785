"""The machine's CPU topology, read from sysfs (or from a recorded copy of it, for tests).

Each online CPU gets its socket, L3 domain, physical core and NUMA node. The L3 domain is what
decides cache sharing (the paper's Psearchy "RR" result), so it is read from the cache directory,
not guessed from the socket: AMD parts have several L3 domains per socket.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path

from mosbench import cpulist

SYS_CPU = "sys/devices/system/cpu"
SYS_NODE = "sys/devices/system/node"


@dataclass(frozen=True)
class Cpu:
    id: int
    socket: int
    core: int  # index of the physical core, unique machine-wide
    l3: int  # index of the L3 domain, unique machine-wide
    node: int
    thread: int  # 0 for the first hardware thread of its core, 1.. for SMT siblings


@dataclass(frozen=True)
class Topology:
    cpus: tuple[Cpu, ...]
    model: str = ""

    @property
    def ids(self) -> list[int]:
        return [c.id for c in self.cpus]

    @property
    def sockets(self) -> int:
        return len({c.socket for c in self.cpus})

    @property
    def l3_domains(self) -> int:
        return len({c.l3 for c in self.cpus})

    @property
    def physical_cores(self) -> int:
        return len({c.core for c in self.cpus})

    @property
    def smt(self) -> int:
        return max(c.thread for c in self.cpus) + 1

    @property
    def nodes(self) -> int:
        return len({c.node for c in self.cpus})

    def by_id(self, cpu: int) -> Cpu:
        for c in self.cpus:
            if c.id == cpu:
                return c
        raise KeyError(cpu)

    def summary(self) -> str:
        return (
            f"{len(self.cpus)} CPUs: {self.sockets} socket(s), {self.l3_domains} L3 domain(s), "
            f"{self.physical_cores} cores, {self.smt} thread(s)/core, {self.nodes} NUMA node(s)"
        )

    def to_json(self) -> dict:
        return {"model": self.model, "cpus": [asdict(c) for c in self.cpus]}

    @classmethod
    def from_json(cls, data: dict) -> Topology:
        return cls(tuple(Cpu(**c) for c in data["cpus"]), data.get("model", ""))


def _read(path: Path, default: str | None = None) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        if default is None:
            raise
        return default


def _cpu_model(root: Path) -> str:
    try:
        for line in (root / "proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def read(root: Path | str = "/") -> Topology:
    """Reads the topology of the online CPUs under root (a real "/" or a recorded sysfs tree)."""
    root = Path(root)
    base = root / SYS_CPU
    online = cpulist.parse(_read(base / "online"))

    node_of: dict[int, int] = {}
    node_dir = root / SYS_NODE
    if node_dir.is_dir():
        for d in node_dir.glob("node[0-9]*"):
            for cpu in cpulist.parse(_read(d / "cpulist", "")):
                node_of[cpu] = int(d.name[4:])

    core_key: dict[tuple[int, str], int] = {}
    l3_key: dict[str, int] = {}
    thread_seen: dict[int, int] = {}
    cpus: list[Cpu] = []
    for cpu in sorted(online):
        topo = base / f"cpu{cpu}" / "topology"
        socket = int(_read(topo / "physical_package_id", "0"))
        siblings = _read(topo / "thread_siblings_list", str(cpu))
        l3_cpus = _l3_shared(base / f"cpu{cpu}" / "cache") or _read(topo / "core_siblings_list", siblings)
        # Keys are the sibling lists themselves: core_id repeats across sockets and dies.
        core = core_key.setdefault((socket, siblings), len(core_key))
        l3 = l3_key.setdefault(l3_cpus, len(l3_key))
        thread = thread_seen.get(core, 0)
        thread_seen[core] = thread + 1
        cpus.append(Cpu(cpu, socket, core, l3, node_of.get(cpu, 0), thread))
    return Topology(tuple(cpus), _cpu_model(root))


def _l3_shared(cache_dir: Path) -> str | None:
    if not cache_dir.is_dir():
        return None
    for index in sorted(cache_dir.glob("index[0-9]*")):
        if _read(index / "level", "") == "3":
            return _read(index / "shared_cpu_list", "") or None
    return None


def record(root: Path | str = "/") -> dict[str, str]:
    """The sysfs files `read` looks at, as {relative path: content}: a recording for fixtures and bug reports."""
    root = Path(root)
    wanted = ["topology/physical_package_id", "topology/thread_siblings_list", "topology/core_siblings_list"]
    files: dict[str, str] = {}

    def keep(p: Path) -> None:
        with contextlib.suppress(OSError):
            files[str(p.relative_to(root))] = p.read_text()

    base = root / SYS_CPU
    keep(base / "online")
    for cpu in cpulist.parse(_read(base / "online")):
        d = base / f"cpu{cpu}"
        for w in wanted:
            keep(d / w)
        for index in sorted((d / "cache").glob("index[0-9]*")):
            keep(index / "level")
            keep(index / "shared_cpu_list")
    for n in sorted((root / SYS_NODE).glob("node[0-9]*")):
        keep(n / "cpulist")
    return files


def materialize(files: dict[str, str], root: Path) -> Path:
    """Writes a recording back out as a directory tree that `read` accepts."""
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    return root
