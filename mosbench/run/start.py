"""How a run starts: a new plan from what the user asked for, or a stored one to finish, checked the
same way on this machine before anything is made, then the run's row (new or reopened).

What was asked is checked in two parts: `check_request`, what any machine would refuse (selections,
variants, parameters, what to profile), which every command that runs `mosbench run` (vm, ab and bisect,
for their guests) goes through before it boots anything; and `check_machine`, what this machine must hold
(core counts, memory, isolation, perf), which a guest checks of its own."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosbench.analysis.precision import DEFAULT_PRECISION
from mosbench.errors import UserError
from mosbench.launch.processes import harness_priority
from mosbench.machine import environment
from mosbench.machine import placement as placing
from mosbench.machine.isolation import preflight
from mosbench.machine.topology import Topology
from mosbench.run import plan, profiler
from mosbench.run.plan import Plan, TrialKey
from mosbench.store.db import Store
from mosbench.workloads import registry
from mosbench.workloads.base import test_name

if TYPE_CHECKING:
    from rich.console import Console

    from mosbench.run.sweep import Outcome


@dataclass(frozen=True)
class Request:
    """A new run as the command line asks for it."""

    selections: list[str]
    cores: str | None
    variants: list[str] | None
    trials: int
    warmup: float
    duration: float
    interval: float
    placement: str
    isolation: str
    params: list[str]
    profiling: str | None
    max_interference: float
    retry_interfered: int
    trials_max: int = 0  # --trials auto:MAX
    precision: float = DEFAULT_PRECISION


def request(options: Mapping[str, Any]) -> Request:
    """`mosbench run`'s options (its click parameters, by name) as the run they ask for."""
    params = list(options["params"])
    # The client options are the server workloads' parameters: stored with the plan, so --resume has them.
    for name, option in (("client_hosts", "clients"), ("server_address", "server_address"),
                         ("ssh_config", "ssh_config")):
        if value := options[option]:
            params.append(f"{name}={Path(value).resolve() if name == 'ssh_config' else value}")
    first, most, precision = trials(options["trials_spec"], options["precision"])
    return Request(
        selections=list(options["selections"]), cores=options["cores"], variants=options["variants"], trials=first,
        warmup=options["warmup"], duration=options["duration"], interval=options["interval"],
        placement=options["placement"], isolation=options["isolation"], params=params, profiling=options["profiling"],
        max_interference=options["max_interference"] / 100, retry_interfered=options["retry_interfered"],
        trials_max=most, precision=precision)


def trials(spec: str, precision_percent: float | None) -> tuple[int, int, float]:
    """--trials and --precision as a request holds them: (trials, trials_max, precision as a share).
    --precision is --trials auto's target, nothing without it."""
    first, most = plan.parse_trials(spec)
    if precision_percent is not None and not most:
        raise UserError("--precision is the target of --trials auto; give --trials auto with it")
    return first, most, DEFAULT_PRECISION if precision_percent is None else precision_percent / 100


@dataclass(frozen=True)
class Resolved:
    """A request's names resolved: what the plan is made of."""

    selections: list[tuple[str, str]]
    variants: dict[str, list[str]]
    params: dict[str, dict[str, Any]]  # each selected workload's, its defaults filled in
    profile: list[str]


def check_request(req: Request) -> Resolved:
    """What any machine would refuse of a request: its selections (and their workloads' software), variants,
    parameters (each workload's own checks) and what to profile."""
    chosen = plan.resolve_selections(req.selections)
    variants = plan.resolve_variants(chosen, req.variants)
    params = plan.resolve_params(chosen, req.params)
    for wname, values in params.items():
        registry.get(wname).check_params(values)  # before fill_params: a guest's run fills them for its CPUs
    return Resolved(chosen, variants, params, plan.resolve_profile(chosen, req.profiling))


def new_plan(req: Request, topo: Topology) -> Plan:
    asked = check_request(req)
    cores = placing.parse_core_counts(req.cores, topo, req.placement)
    for wname, values in asked.params.items():
        registry.get(wname).fill_params(values, max(cores))
    the_plan = Plan(
        selections=asked.selections, variants=asked.variants,
        cores=cores, trials=req.trials, warmup=req.warmup,
        duration=req.duration, interval=req.interval, placement=req.placement, isolation=req.isolation,
        params=asked.params, profile=asked.profile,
        max_interference=req.max_interference, retry_interfered=req.retry_interfered,
        trials_max=req.trials_max, precision=req.precision,
    )
    check_machine(the_plan, topo)
    return the_plan


def stored_plan(db: Store, ref: str, topo: Topology) -> tuple[dict[str, Any], Plan]:
    """The run to finish and its plan, checked as a new run's would be: this machine and its software
    may have changed since it was planned."""
    previous = db.run(ref)
    if previous["status"] == "complete":
        raise UserError(f"run {previous['id']} is already complete")
    the_plan = Plan.from_json(previous["plan"])
    check_machine(the_plan, topo)
    return previous, the_plan


def check_machine(the_plan: Plan, topo: Topology) -> None:
    """Everything a run needs of this machine, its software and its parameters, before it exists."""
    for wname in dict.fromkeys(w for w, _ in the_plan.selections):
        w = registry.get(wname)
        w.check_available()
        params = the_plan.params.get(wname, {})
        w.check_params(params)
        w.check_cores(params, max(the_plan.cores))
    placing.parse_core_counts(",".join(map(str, the_plan.cores)), topo, the_plan.placement)
    refuse_empty_selections(the_plan)
    preflight(the_plan.isolation)
    if the_plan.profile and (why := profiler.unavailable()):
        raise UserError(f"--profile: {why}")


def refuse_empty_selections(the_plan: Plan) -> None:
    """A selection with no point at the asked core counts (apache/baseline is measured at one core only)
    would make a run that measures nothing: refused, saying where it has points."""
    measured = {(k.workload, k.test) for k in the_plan.points()}
    for w, t in the_plan.selections:
        if (w, t) in measured:
            continue
        wl = registry.get(w)
        variants = [v for v in the_plan.variants.get(w, []) if v in wl.variants_for(t)]
        name = test_name(w, t)
        if not variants:
            continue  # resolve_variants has refused it already, with its reason
        probe = range(1, max(the_plan.cores) + 3)
        where = sorted({n for n in probe for v in variants if wl.measures(t, v, n)})
        if not where:
            at = "it is measured at no core count"
        elif where[-1] == probe[-1]:
            at = f"it is measured from {where[0]} cores on"
        else:
            at = f"it is measured at {_counts(where)} only"
        raise UserError(f"{name} has no point at cores {','.join(map(str, the_plan.cores))}: {at}")


def _counts(cores: list[int]) -> str:
    if len(cores) == 1:
        return f"{cores[0]} core" + ("s" if cores[0] != 1 else "")
    return "cores " + ",".join(map(str, cores))


def create(db: Store, the_plan: Plan, topo: Topology, command: str, label: str | None,
           kernel_commit: str | None = None) -> int:
    """A new run's row, with this machine's environment and the kernel's commit where the user gave it."""
    run_id = db.create_run(the_plan.to_json(), environment.capture(topo), command, label)
    if kernel_commit:
        db.note_environment(run_id, kernel_commit=kernel_commit)
    return run_id


def reopen(db: Store, previous: dict[str, Any]) -> tuple[int, set[TrialKey]]:
    """The run's id and the trials it has, so the sweep measures only the rest."""
    run_id = previous["id"]
    skip = {TrialKey(r.workload, r.test, r.variant, r.cores, r.trial) for r in db.done_keys(run_id)}
    db.reopen_run(run_id)
    return run_id, skip


@dataclass(frozen=True)
class Opened:
    """A run made or reopened, and what it has left to measure."""

    run_id: int
    skip: set[TrialKey]  # the trials it has
    left: list[TrialKey]
    minutes: float  # about how long `left` takes
    most_minutes: float | None  # with --trials auto, if every point takes the most trials


def opened(the_plan: Plan, run_id: int, skip: set[TrialKey]) -> Opened:
    left = [k for k in the_plan.points() if k not in skip]
    seconds = the_plan.seconds(left)
    most = seconds * the_plan.trials_max / the_plan.trials / 60 if the_plan.auto else None
    return Opened(run_id, skip, left, seconds / 60, most)


def measure(db: Store, the_plan: Plan, topo: Topology, run: Opened, console: Console) -> Outcome:
    """The sweep of what the run has left, at the harness's scheduling priority; how it was measured (that
    priority, the profiler) is recorded with the run's environment."""
    from mosbench.run.sweep import Sweep  # the sweep pulls in rich's live display; keep `list` fast

    with harness_priority() as scheduling:
        db.note_environment(run.run_id, harness_scheduling=scheduling)
        if the_plan.profile:
            db.note_environment(run.run_id, profiling=profiler.describe())
        return Sweep(db, the_plan, topo, console).run(run.run_id, run.skip)
