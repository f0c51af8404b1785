"""The interface every workload implements, and what the harness hands it.

Lifecycle, per run: `check_available` and `check_params` (before anything is created), `setup` once
(expensive work such as loading a database or unpacking a tree, cached; its processes go through the
run's launcher like every other), then per point `start` on a CPU set, which returns an Instance that
the harness samples over the warm-up and the window and finally stops; `teardown` once at the end,
also after errors.

What a workload knows stays in the workload: its variants in before/after order, its unit per test,
whether it is a job, and any figure of its own; analysis and report ask it rather than naming it.

A workload reports cumulative work done; the harness turns it into throughput per second per core.
"window" workloads run until stopped (servers, microbenchmarks); "job" workloads (a build, an index)
finish on their own, and one job is the unit of work.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from mosbench.launch.processes import Launcher
from mosbench.machine.isolation import Group
from mosbench.machine.memory import meminfo_kb

if TYPE_CHECKING:
    from mosbench.workloads.server.runhosts import RunHosts


@dataclass(frozen=True)
class Param:
    name: str
    default: Any  # None: chosen for each run by the workload's fill_params (shown as "auto")
    help: str
    unit: str = ""
    kind: type | None = None  # the value's type where the default (None) cannot say it

    def parse(self, text: str) -> Any:
        """The value of `-p name=text` in the default's type; ValueError for text that is not one."""
        kind = self.kind or type(self.default)
        if kind is bool:
            word = text.strip().lower()
            if word in ("1", "true", "yes", "on"):
                return True
            if word in ("0", "false", "no", "off"):
                return False
            raise ValueError(f"{text!r} is not a boolean (true/false, yes/no, on/off, 1/0)")
        if kind is float:
            value = float(text)
            if not math.isfinite(value):
                raise ValueError(f"{text!r} is not a finite number")
            return value
        return kind(text)


@dataclass(frozen=True)
class ModelSpec:
    """A scaling model of a workload's own for one of its tests, named, with what it needs of the run and
    of the workload (analysis implements it: "lock" is analysis/lockmodel.py)."""

    name: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Variant:
    name: str
    description: str


@dataclass(frozen=True)
class TestInfo:
    name: str
    description: str


@dataclass
class Sample:
    work: float  # cumulative units of work since the instance started
    per_task: list[float] | None = None


def cache_root() -> Path:
    """Where workloads keep what survives runs (each under its own name) unless a run says otherwise."""
    return Path.home() / ".cache" / "mosbench"


@dataclass
class RunContext:
    """What a workload gets once per run."""

    scratch: Path  # tmpfs directory of this run, removed at the end
    cache: Path  # survives runs: unpacked corpora, loaded databases
    params: dict[str, Any]
    launcher: Launcher  # setup's processes (a database load, an unpack) run journaled like any other
    group: Group  # where setup's processes run: every CPU the run may use
    extra: dict[str, Any] = field(default_factory=dict)  # what setup found or made, for start
    client_hosts: RunHosts | None = None  # --clients: each host reached and probed (server workloads' setup)
    # What the run's results depend on beyond the machine (a server's version and settings): recorded
    # in the run's environment under the workload's name once the sweep ends.
    facts: dict[str, Any] = field(default_factory=dict)

    def scratch_in(self, parent: Path, name: str) -> Path:
        """A scratch directory of this run in another filesystem, journaled: a killed run's is removed."""
        from mosbench.machine.journal import SCRATCH_PREFIX

        d = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}-{name}-", dir=parent))
        self.launcher.journal.add_dir(d)
        return d

    def run(self, name: str, argv: list[str], timeout: float | None = None, env: dict[str, str] | None = None,
            user: str | None = None) -> tuple[int, str]:
        """Runs a setup program to its end, journaled, in the setup group: (exit status, its last error)."""
        status = self.launcher.run(name, argv, self.group, timeout, env=env, user=user)
        return status, self.launcher.last_error(name)

    def remove_scratch(self, d: Path) -> None:
        shutil.rmtree(d, ignore_errors=True)
        self.launcher.journal.remove_dir(d)


@dataclass
class PointContext:
    """What a workload gets per point."""

    run: RunContext
    test: str
    variant: str
    cpus: tuple[int, ...]
    group: Group
    loadgen_cpus: tuple[int, ...]
    loadgen_group: Group | None
    launcher: Launcher
    scratch: Path  # tmpfs directory of this point
    timeout: float  # the instance must stop by itself after this many seconds
    # Seconds from start()'s return to the window's end (warm-up and window; 0 for a job): a client
    # that must be told how long to run (pgbench -T) runs past it.
    window_end: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def params(self) -> dict[str, Any]:
        return self.run.params


class Instance(ABC):
    """A workload running on one point's CPUs."""

    @abstractmethod
    def sample(self) -> Sample: ...

    @abstractmethod
    def check(self) -> None:
        """Raises PointFailed if the workload died or reported an error."""

    @abstractmethod
    def stop(self) -> dict[str, Any]:
        """Ends every process of the instance; returns the workload's own metrics. Idempotent."""

    def begin(self) -> None:
        """For job workloads: start the job now (the window opens). start() only made it ready."""

    def window_opened(self) -> None:
        """The measurement window starts now (a load generator starts its latency histogram)."""

    def window_closed(self) -> None:
        """The measurement window ended now."""

    def window_work(self) -> float | None:
        """After stop(): the work done in the window as the client counted it exactly, for a client that
        can say so only once it has ended (pgbench's transaction log); None keeps the sampled count."""
        return None

    @property
    def finished(self) -> bool:
        """For job workloads: the job is done."""
        return False

    def logs(self) -> str:
        return ""


@dataclass(frozen=True)
class PointNote:
    """What a workload reads in one trial's metrics that a reader must see (Exim: deliveries fell behind
    acceptances, so the throughput is not one the server could keep)."""

    tag: str  # a few words, counted over a point's trials in the report's limit column: "queue grew"
    text: str  # for the trial's line as it is measured: "DELIVERIES LAG (the queue grew by 120 in the window)"


@dataclass(frozen=True)
class MetricColumn:
    """A column of a workload's own in the report's table of a test, read from each point's best trial."""

    title: str
    text: Callable[[dict[str, Any]], str]  # the best trial's metrics (empty for a failed point) → the cell


@dataclass(frozen=True)
class MetricFigure:
    """A figure of a workload's own: metrics of each point's best trial against cores, one line per
    metric (colour) and variant (line style). The workload says which metrics and what they mean; the
    report draws every such figure one way."""

    name: str  # the figure's files: <test>_<name>.svg and .png
    heading: str  # the report's heading above it
    note: str  # the report's words under the heading: how the figures were counted and how to read them
    title: str
    y_label: str  # "{unit}" stands for the test's unit of work
    suffix: str  # the metrics drawn: every one whose name ends so, labelled without it
    total: str = ""  # the metric that sums the others: drawn last, in black, labelled "all"


class Workload(ABC):
    name: str
    description: str
    unit: str  # what one unit of work is, e.g. "op", "message", "job"
    kind: Literal["window", "job"] = "window"
    # Baselines first, then their fixes, then other forms: the order of figures, tables and points.
    variants: tuple[Variant, ...]
    params: tuple[Param, ...] = ()
    paper: str = ""  # where it maps to the OSDI 2010 paper
    # Whether its tests are curves of throughput against cores, each a report section with the summary's and
    # the verdicts' rows; False for series read otherwise, in a section of their own (commute's pairs).
    curves: bool = True

    def tests(self) -> list[TestInfo]:
        """Sub-tests selectable as name/test; a workload without any has one unnamed test."""
        return [TestInfo("", self.description)]

    def variants_for(self, test: str) -> list[str]:
        """The variants a test has; most workloads run every variant for every test."""
        return [v.name for v in self.variants]

    def measures(self, test: str, variant: str, cores: int) -> bool:
        """Whether the plan has a point of this variant at `cores` CPUs; every one by default."""
        return True

    def setup_seconds(self, test: str, params: dict[str, Any]) -> float:
        """Seconds a point of this test spends before its warm-up (searches, calibration), for the run's
        estimate; 0 by default."""
        return 0.0

    def loadgen_cores(self, cores: int, params: dict[str, Any]) -> int:
        """CPUs the load generator wants for a point on `cores` CPUs; 0 for none."""
        return 0

    def check_available(self) -> None:
        """Raises UserError naming what is missing (a package, a build) before a run starts."""

    def check_params(self, params: dict[str, Any]) -> None:
        """Raises UserError for parameters that cannot work (a missing input file), before a run exists."""

    def fill_params(self, params: dict[str, Any], max_cores: int) -> None:
        """Sets the parameters left to the run (default None) from the most cores it will use, in place,
        so the stored plan holds the values every point used."""

    def check_cores(self, params: dict[str, Any], cores: int) -> None:
        """Raises UserError where this machine cannot hold a point on `cores` CPUs (memory, limits)."""

    def setup(self, ctx: RunContext) -> None:
        pass

    @abstractmethod
    def start(self, ctx: PointContext) -> Instance: ...

    def teardown(self, ctx: RunContext) -> None:
        pass

    def unit_for(self, test: str) -> str:
        return self.unit

    def variant_rank(self, variant: str) -> int:
        """Where a variant goes among a test's: its place in `variants`, unknown ones last."""
        names = [v.name for v in self.variants]
        return names.index(variant) if variant in names else len(names)

    # Metrics that point_notes or columns_for show: the report's text of the workload's metrics leaves them out.
    metrics_shown_apart: tuple[str, ...] = ()

    def point_notes(self, metrics: dict[str, Any]) -> list[PointNote]:
        """What one trial's metrics say that its line and the report must show; nothing by default."""
        return []

    def columns_for(self, test: str) -> tuple[MetricColumn, ...]:
        """Columns of the workload's own in the report's table of a test."""
        return ()

    def figures_for(self, test: str) -> tuple[MetricFigure, ...]:
        """Figures of the workload's own for a test, drawn from its metrics by the report."""
        return ()

    def models_for(self, test: str, params: dict[str, Any]) -> list[ModelSpec]:
        """Scaling models of the workload's own for a test, beside Amdahl's and the USL, with the run's
        parameters they need (analysis/models.py fits them)."""
        return []


def mem_available_mb() -> float:
    """What a point can take without pushing the page cache or another program out (for check_cores)."""
    available = meminfo_kb("MemAvailable")
    return float("inf") if available is None else available / 1024


def open_path_to(path: Path, stop: Path) -> None:
    """Lets other users (a server that drops root) traverse every directory from stop down to path.

    The run's scratch directories are made private (0700); a server running as www-data or postgres
    must still reach its files inside them. Search permission only: nothing becomes listable.
    """
    path, stop = path.resolve(), stop.resolve()
    for d in [path, *path.parents]:
        if d == stop.parent or not d.is_relative_to(stop):
            break
        mode = d.stat().st_mode
        if not mode & 0o001:
            d.chmod((mode & 0o7777) | 0o011)


def test_name(workload: str, test: str) -> str:
    """"workload/test" as every table and message names it; the workload alone where it has no tests."""
    return f"{workload}/{test}" if test else workload


def base_variant(variant: str) -> str:
    """The workload's variant name of a series: compared runs label theirs "stock (run)"."""
    return variant.split(" (")[0]
