"""Confining a point's process tree to its CPUs: cpuset cgroups (v1 or v2), else CPU affinity.

A run makes one cgroup of its own (`mosbench-<pid>`) and, per point, child groups for the workload and
for its load generator, so each can be killed and accounted as a whole. `--isolation hotplug`
additionally takes every CPU the point does not use offline, as the paper did, and always brings them
back. Everything made is written to the run's journal first (see journal.py).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from mosbench import cpulist
from mosbench.errors import UserError
from mosbench.machine.journal import Journal, kill_cgroup_procs, remove_cgroup_dir

ISOLATIONS = ("cgroup", "affinity", "hotplug")
SYS_CPU = Path("/sys/devices/system/cpu")


def pluggable_cpus(sys_cpu: Path = SYS_CPU) -> list[int]:
    """CPUs with an `online` file: the ones hotplug may take offline (often not CPU 0)."""
    return sorted(int(p.parent.name[3:]) for p in sys_cpu.glob("cpu[0-9]*/online"))


@dataclass(frozen=True)
class CgroupLayout:
    version: int
    cpuset: Path  # the hierarchy holding the cpuset controller
    cpuacct: Path | None  # v1 only: cpuacct may be mounted apart from cpuset

    def describe(self) -> str:
        extra = f", cpuacct at {self.cpuacct}" if self.cpuacct and self.cpuacct != self.cpuset else ""
        return f"cgroup v{self.version} cpuset at {self.cpuset}{extra}"


def detect_cgroups(mounts: str | None = None) -> CgroupLayout | None:
    """Finds a usable cpuset hierarchy from /proc/mounts (v1 preferred where v1 holds cpuset)."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return None
    v1_cpuset = v1_cpuacct = None
    v2: Path | None = None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        path, fstype, options = Path(fields[1]), fields[2], fields[3].split(",")
        if fstype == "cgroup":
            if "cpuset" in options:
                v1_cpuset = path
            if "cpuacct" in options:
                v1_cpuacct = path
        elif fstype == "cgroup2" and v2 is None:
            v2 = path
    if v1_cpuset:
        return CgroupLayout(1, v1_cpuset, v1_cpuacct)
    if v2 is not None:
        try:
            if "cpuset" in (v2 / "cgroup.controllers").read_text().split():
                return CgroupLayout(2, v2, None)
        except OSError:
            return None
    return None


def preflight(mode: str) -> None:
    """Refuses a mode this process cannot use, before a run row or anything else is made."""
    if mode not in ISOLATIONS:
        raise UserError(f"unknown isolation {mode!r} (choose from {', '.join(ISOLATIONS)})")
    if mode == "cgroup":
        layout = detect_cgroups()
        if layout is None:
            raise UserError("no cpuset cgroup hierarchy is mounted; use --isolation affinity")
        if not os.access(layout.cpuset, os.W_OK):
            raise UserError(f"no permission to create cgroups under {layout.cpuset}; "
                            "run as root or use --isolation affinity")
    if mode == "hotplug":
        cpus = pluggable_cpus()
        if not cpus:
            raise UserError("no CPU on this machine can be taken offline; use --isolation cgroup")
        if not os.access(SYS_CPU / f"cpu{cpus[0]}" / "online", os.W_OK):
            raise UserError("no permission to take CPUs offline (hotplug needs root)")


class Group:
    """Where one set of a point's processes runs. The base class confines by affinity alone."""

    def __init__(self, cpus: tuple[int, ...]):
        self.cpus = cpus

    def join(self) -> None:
        """Called in a child between fork and exec (preexec_fn): must not allocate much or log."""
        os.sched_setaffinity(0, self.cpus)

    def cpu_seconds(self) -> tuple[float, float] | None:
        """(user, system) seconds used by the whole group so far, when the kernel keeps it."""
        return None

    def threads(self) -> list[int] | None:
        """Every thread in the group now; None where there is no group to list."""
        return None

    def kill_all(self) -> None:
        """Kills what is left of the group; the affinity form has no group to search."""

    def remove(self) -> None:
        pass


class CgroupGroup(Group):
    def __init__(self, layout: CgroupLayout, dirs: list[Path], cpus: tuple[int, ...]):
        super().__init__(cpus)
        self.layout = layout
        self.dirs = dirs  # cpuset dir first, then a separate cpuacct dir on v1 split mounts
        # Preformatted so join() in the forked child only writes.
        self._procs_files = [str(d / "cgroup.procs") for d in dirs]

    def join(self) -> None:
        pid = str(os.getpid())
        for f in self._procs_files:
            fd = os.open(f, os.O_WRONLY)
            try:
                os.write(fd, pid.encode())
            finally:
                os.close(fd)
        os.sched_setaffinity(0, self.cpus)

    def cpu_seconds(self) -> tuple[float, float] | None:
        acct = self.dirs[-1]
        try:
            if self.layout.version == 2:
                stat = dict(line.split() for line in (acct / "cpu.stat").read_text().splitlines())
                return int(stat["user_usec"]) / 1e6, int(stat["system_usec"]) / 1e6
            usage_user, usage_sys = acct / "cpuacct.usage_user", acct / "cpuacct.usage_sys"
            if usage_user.exists():
                return int(usage_user.read_text()) / 1e9, int(usage_sys.read_text()) / 1e9
            stat = dict(line.split() for line in (acct / "cpuacct.stat").read_text().splitlines())
            hz = os.sysconf("SC_CLK_TCK")
            return int(stat["user"]) / hz, int(stat["system"]) / hz
        except (OSError, KeyError, ValueError):
            return None

    def threads(self) -> list[int] | None:
        listing = self.dirs[0] / ("cgroup.threads" if self.layout.version == 2 else "tasks")
        try:
            return [int(t) for t in listing.read_text().split()]
        except (OSError, ValueError):
            return None

    def kill_all(self) -> None:
        for d in self.dirs:
            kill_cgroup_procs(d)


class Isolator:
    """Makes the groups for each point and removes them; one per run."""

    def __init__(self, mode: str, journal: Journal, layout: CgroupLayout | None = None):
        if mode not in ISOLATIONS:
            raise UserError(f"unknown isolation {mode!r} (choose from {', '.join(ISOLATIONS)})")
        self.mode = mode
        self.journal = journal
        self.layout = layout if layout is not None else detect_cgroups()
        self.roots: list[Path] = []
        self.hotplug = Hotplug(journal) if mode == "hotplug" else None
        self._serial = 0
        if mode in ("cgroup", "hotplug") and self.layout is not None:
            try:
                self._make_roots()
            except OSError as e:
                self.close()
                if mode == "cgroup":
                    raise UserError(
                        f"cannot create cgroups under {self.layout.cpuset} ({e.strerror}); "
                        "run as root or use --isolation affinity"
                    ) from None
                self.layout = None
        elif mode == "cgroup":
            raise UserError("no cpuset cgroup hierarchy is mounted; use --isolation affinity")

    @property
    def description(self) -> str:
        if self.layout is None:
            return "CPU affinity" + (" + hotplug" if self.hotplug else "")
        return self.layout.describe() + (" + hotplug" if self.hotplug else "")

    def _make_roots(self) -> None:
        assert self.layout is not None
        name = f"mosbench-{os.getpid()}"
        hierarchies = [self.layout.cpuset]
        if self.layout.cpuacct and self.layout.cpuacct != self.layout.cpuset:
            hierarchies.append(self.layout.cpuacct)
        if self.layout.version == 2:
            _enable_controllers(self.layout.cpuset)
        for h in hierarchies:
            root = h / name
            self.journal.add_cgroup(root)
            root.mkdir()
            self.roots.append(root)
            if h == self.layout.cpuset:
                self._inherit_cpuset(root)
            if self.layout.version == 2:
                _enable_controllers(root)

    def _inherit_cpuset(self, d: Path) -> None:
        assert self.layout is not None
        if self.layout.version == 1:
            # v1 starts a new cpuset empty; v1 also drops CPUs that go offline from it for good,
            # so this is redone before every point.
            for f in ("cpuset.cpus", "cpuset.mems"):
                (d / f).write_text((d.parent / f).read_text().strip() or "\n")

    def group(self, role: str, cpus: tuple[int, ...]) -> Group:
        if self.layout is None or not self.roots:
            return Group(cpus)
        self._serial += 1
        dirs: list[Path] = []
        for root in self.roots:
            if root == self.roots[0]:
                self._inherit_cpuset(root)
            d = root / f"{role}-{self._serial}"
            self.journal.add_cgroup(d)
            d.mkdir()
            dirs.append(d)
        cs = dirs[0]
        if self.layout.version == 1:
            (cs / "cpuset.mems").write_text((self.roots[0] / "cpuset.mems").read_text().strip())
        (cs / "cpuset.cpus").write_text(cpulist.format(cpus))
        return CgroupGroup(self.layout, dirs, cpus)

    def release(self, group: Group) -> None:
        group.kill_all()
        if isinstance(group, CgroupGroup):
            for d in group.dirs:
                if remove_cgroup_dir(d):
                    self.journal.remove_cgroup(d)

    def close(self) -> None:
        for root in reversed(self.roots):
            for child in root.iterdir():
                if child.is_dir():
                    kill_cgroup_procs(child)
                    if remove_cgroup_dir(child):
                        self.journal.remove_cgroup(child)
            if remove_cgroup_dir(root):
                self.journal.remove_cgroup(root)
        self.roots = []
        if self.hotplug:
            self.hotplug.restore()


def _enable_controllers(d: Path) -> None:
    control = d / "cgroup.subtree_control"
    with contextlib.suppress(OSError):
        if "cpuset" not in control.read_text().split():
            control.write_text("+cpuset")


class Hotplug:
    """Takes CPUs offline for a point and always brings them back (see Isolator.close and journal)."""

    def __init__(self, journal: Journal, sys_cpu: Path = SYS_CPU):
        self.journal = journal
        self.sys = sys_cpu
        self.offlined: list[int] = []

    def keep_only(self, keep: set[int]) -> None:
        """Brings back any CPU in keep, takes offline the pluggable CPUs outside it."""
        for cpu in list(self.offlined):
            if cpu in keep:
                self._set(cpu, True)
        for cpu in pluggable_cpus(self.sys):
            if cpu not in keep and cpu not in self.offlined:
                self._set(cpu, False)

    def restore(self) -> None:
        for cpu in list(self.offlined):
            self._set(cpu, True)

    def _set(self, cpu: int, online: bool) -> None:
        f = self.sys / f"cpu{cpu}" / "online"
        if online:
            f.write_text("1")
            self.offlined.remove(cpu)
            self.journal.remove_offlined(cpu)
        else:
            self.journal.add_offlined(cpu)  # written down before it happens
            try:
                f.write_text("0")
            except OSError as e:
                self.journal.remove_offlined(cpu)
                raise UserError(f"cannot take CPU {cpu} offline ({e.strerror}); hotplug needs root") from None
            self.offlined.append(cpu)
