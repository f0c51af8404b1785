"""The mosbench command line."""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
from pathlib import Path

import click

from mosbench import outfile
from mosbench.analysis import cells as analysis
from mosbench.analysis.precision import DEFAULT_PRECISION
from mosbench.commands.mail import mail as mail_command
from mosbench.commands.options import FiniteFloat, comma_list, commit_id, open_store, store_option, wide_option
from mosbench.commands.serve import serve as serve_command
from mosbench.errors import UserError
from mosbench.machine import journal, topology
from mosbench.machine import lock as machine_lock
from mosbench.machine import placement as placing
from mosbench.machine.isolation import ISOLATIONS
from mosbench.printable import error_line
from mosbench.report import gate, table, terminal
from mosbench.report.terminal import console, err_console, say, stdout
from mosbench.run.plan import AUTO_MAX_TRIALS, AUTO_MIN_TRIALS, Plan
from mosbench.store import export as exporting
from mosbench.workloads import registry

EXIT_POINTS_FAILED = 3
EXIT_INTERRUPTED = 130


def _recover() -> None:
    """Undoes what runs killed without their guardian left behind, and marks those runs killed."""
    for action in journal.recover_stale():
        err_console.print(f"mosbench: cleaned up after an earlier run: {action}", style="yellow", markup=False)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name=None, version=__import__("mosbench").__version__)
def cli() -> None:
    """Multicore OS-scalability benchmark: run kernel-intensive workloads at growing core counts."""
    # Every command first undoes what a run killed with its guardian left behind (its journal names it all);
    # with no dead run's journal, this is one look at the journal directory.
    _recover()


@cli.command()
@click.argument("selections", nargs=-1)
@click.option("--cores", default=None, help="Core counts: 1,2,4..48,max (a..b doubles, a..b:s steps). "
              "Default: 1, doublings and every L3/socket/SMT boundary of this machine.")
@click.option("--variant", "--mode", "variants", callback=comma_list, help="Variants to run (default all).")
@click.option("--trials", "trials_spec", default=str(Plan.trials), show_default=True, metavar="N|auto[:MAX]",
              help=f"Trials per point, or auto: {AUTO_MIN_TRIALS}, then more (a round over the sweep at a time) for "
                   f"each point whose 95% interval is wider than --precision, up to MAX ({AUTO_MAX_TRIALS}).")
@click.option("--precision", type=click.FloatRange(0.1, 50), metavar="PERCENT",
              help="With --trials auto: the 95% interval of a point's mean to reach, ± this share of it "
                   f"({DEFAULT_PRECISION * 100:g}).")
@click.option("--duration", default=Plan.duration, show_default=True, type=FiniteFloat(0.1), help="Window seconds.")
@click.option("--warmup", default=Plan.warmup, show_default=True, type=FiniteFloat(0), help="Warm-up seconds.")
@click.option("--interval", default=Plan.interval, show_default=True, type=FiniteFloat(0),
              help="Sampling period in seconds; 0 reads only the window's ends.")
@click.option("--placement", type=click.Choice(placing.PLACEMENTS), default=Plan.placement, show_default=True)
@click.option("--isolation", type=click.Choice(ISOLATIONS), default=Plan.isolation, show_default=True,
              help="cgroup (cpuset; affinity if none is mounted), affinity, or hotplug (offlines other CPUs).")
@click.option("-p", "--param", "params", multiple=True, help="Workload parameter name=value or workload.name=value.")
@click.option("--clients", metavar="HOST[,HOST…]|@FILE",
              help="Run the server workloads' load generators on these hosts over ssh (-p client_hosts=).")
@click.option("--server-address", metavar="ADDR",
              help="The address the servers listen on, alone, and client hosts reach (-p server_address=).")
@click.option("--ssh-config", type=click.Path(dir_okay=False), help="ssh_config for the client hosts (ssh -F).")
@click.option("--profile", "profiling", is_flag=False, flag_value="all", default=None, metavar="[SELECTIONS]",
              help="Profile each window with perf (call graphs, kernel lock contention, PMU counts) and store it "
                   "with the point: every point, or those of the given workloads or workload/tests (a,b/c).")
@click.option("--label", help="A name for this run (e.g. the kernel under test).")
@click.option("--commit", "kernel_commit", metavar="ID", callback=commit_id,
              help="The running kernel's commit id in its tree (7 to 40 hex digits), recorded with the run: "
                   "`mosbench history --order commit` orders runs by it and `--bisect` bisects between them (vm, "
                   "ab and bisect record a built tree's HEAD themselves).")
@click.option("--resume", "resume_ref", help="Finish an interrupted run (id or 'latest').")
@click.option("--max-interference", default=Plan.max_interference * 100, show_default=True,
              type=click.FloatRange(0, 100),
              metavar="PERCENT", help="Mark a point interfered where other programs (and steal) took more than "
                                      "this share of its CPUs' time in its window.")
@click.option("--retry-interfered", default=Plan.retry_interfered, show_default=True, type=click.IntRange(0, 100),
              metavar="N",
              help="Measure an interfered point again, up to N times.")
@click.option("--no-wait", is_flag=True, help="Refuse (exit 2) rather than wait while another run measures.")
@store_option
def run(selections, cores, variants, trials_spec, precision, duration, warmup, interval, placement, isolation, params,
        clients, server_address, ssh_config, profiling, label, kernel_commit, resume_ref, max_interference,
        retry_interfered, no_wait, store_url) -> None:
    """Run SELECTIONS (workload or workload/test) over core counts, storing every point."""
    from mosbench.run import start

    topo = topology.read()
    if resume_ref:
        if selections:
            raise UserError("--resume takes its plan from the stored run; give no workloads with it")
        db = open_store(store_url)
        previous, the_plan = start.stored_plan(db, resume_ref, topo)
    else:
        the_plan = start.new_plan(start.request(click.get_current_context().params), topo)
    # A run that refuses to wait (--no-wait) has made nothing, not even a new store.
    with _measuring(no_wait) as lock:
        if resume_ref:
            begun = start.opened(the_plan, *start.reopen(db, previous))
        else:
            db = open_store(store_url)
            begun = start.opened(the_plan, start.create(db, the_plan, topo, _command_line(), label, kernel_commit),
                                 set())
        run_id = begun.run_id
        lock.note(run_id, db.shown_url)
        terminal.print_run_start(the_plan, begun)
        try:
            outcome = start.measure(db, the_plan, topo, begun, err_console)
        except KeyboardInterrupt as e:
            raise RunInterrupted(run_id, store_url) from e
    interfered = (f", {outcome.interfered} interfered (other programs used their CPUs: "
                  f"`mosbench run --retry-interfered N` measures them again)" if outcome.interfered else "")
    console.print(f"run #{run_id} {outcome.status}: {outcome.measured} points measured, {outcome.failed} failed"
                  f"{interfered}. See `mosbench show {run_id}` and `mosbench report {run_id}`.")
    if outcome.failed:
        sys.exit(EXIT_POINTS_FAILED)


def _command_line() -> str:
    return shlex.join(["mosbench", *sys.argv[1:]])


def _measuring(no_wait: bool) -> contextlib.AbstractContextManager[machine_lock.MachineLock]:
    """The machine lock, held while a command measures: waited for (saying who holds it) unless --no-wait."""
    return machine_lock.held(_command_line(), wait=not no_wait, waiting=terminal.say_waiting)


@cli.command("list")
@click.argument("names", nargs=-1, metavar="[WORKLOAD]...")
def list_cmd(names: tuple[str, ...]) -> None:
    """Workloads, their tests, variants and parameters (all, or those named)."""
    # Every name is looked up before anything is printed: an unknown one is the only line.
    terminal.print_workloads([registry.get(n) for n in dict.fromkeys(names)] if names else registry.all_workloads())


@cli.command()
@store_option
def runs(store_url) -> None:
    """Stored runs, one line each."""
    terminal.print_runs(open_store(store_url, create=False).list_runs())


@cli.command()
@click.argument("run_ref", default="latest")
@wide_option
@store_option
def show(run_ref, wide, store_url) -> None:
    """A run as terminal tables (RUN is an id or 'latest'): the essential columns in the terminal's width
    (80 in a pipe), every column with --wide."""
    from mosbench.report import history as history_report

    db = open_store(store_url, create=False)
    r = db.run(run_ref)
    pts = db.points(r["id"], with_profiles=True, with_samples=False)
    found, explained = history_report.of_run_explained(db, r)
    terminal.print_run(terminal.table_console(), r, pts, found, terminal.resume_command(r["id"], store_url), wide,
                       explained)


@cli.command()
@click.argument("run_refs", nargs=-1)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("report/report.html"),
              show_default=True)
@store_option
def report(run_refs, output: Path, store_url) -> None:
    """HTML report of one run, or of several compared (figures also as PNG and SVG beside it; a device or
    pipe such as /dev/stdout gets the page alone, which holds every figure)."""
    from mosbench.report import html

    db = open_store(store_url, create=False)
    # Checked before a figure is drawn; written whole or not at all, with its figures (outfile.py).
    out = outfile.target(output, "the report")
    html.write(db, list(run_refs) or ["latest"], out)
    if out.in_place:
        err_console.print(f"wrote {output}")  # stdout may be where the page went
    else:
        console.print(f"wrote {output} (figures in {output.parent / (output.stem + '_files')})")


@cli.command()
@click.argument("run_refs", nargs=-1, required=True)
@click.option("--include-interfered", is_flag=True,
              help="Compare trials that other programs interfered with too (left out by default).")
@click.option("--fail-on-regression", "fail_on", type=float, default=None, metavar="PCT",
              help="A gate: exit 1 when any matched point is significantly slower than the baseline by more "
                   "than PCT percent (exit 0 otherwise, 2 for errors).")
@click.option("--json", "as_json", is_flag=True, help="The comparison as JSON on stdout, for CI systems.")
@wide_option
@store_option
def compare(run_refs, include_interfered, fail_on, as_json, wide, store_url) -> None:
    """Runs compared with the first (RUN is an id or 'latest'): the environment's differences first,
    then each matched point's change with its 95% interval, flagged where Welch's t-test says so, and
    under them why each significant change happened: what moved in its profiles, or the command that
    would profile it. Trials that other programs interfered with are left out unless --include-interfered."""
    from mosbench.analysis import compare as comparing
    from mosbench.analysis import runs_compared

    if len(run_refs) < 2:
        raise UserError("compare needs two runs or more: mosbench compare BASELINE OTHER [OTHER…]")
    if fail_on is not None and not 0 <= fail_on < 100:
        raise UserError(f"--fail-on-regression takes a percentage from 0 up to 100, not {fail_on:g}")
    db = open_store(store_url, create=False)
    runs = [db.run(ref) for ref in run_refs]
    if len({r["id"] for r in runs}) < len(runs):
        raise UserError("compare was given the same run twice")
    found, series = runs_compared.comparison(db, runs, include_interfered)
    regressed = comparing.regressions(found, fail_on) if fail_on is not None else []
    explained = runs_compared.explained(db, runs, found, include_interfered)
    if as_json:
        said = {(x.found.labels[1], x.change.point): x.found.as_json() for x in explained}
        terminal.echo_json(comparing.as_json(found, fail_on, said))
        sys.exit(1 if regressed else 0)
    out = terminal.table_console()
    terminal.print_comparison(out, found, series, wide)
    terminal.print_explained(out, explained, wide)
    if fail_on is None:
        return
    terminal.print_lines(out, gate.lines(gate.REGRESSION, gate.regressions(regressed), fail_on))
    if regressed:
        sys.exit(1)


@cli.command()
@click.argument("run_ref", default="latest")
@click.option("--format", "fmt", type=click.Choice([f.value for f in exporting.Format]),
              default=exporting.Format.CSV.value, show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
@store_option
def export(run_ref, fmt, output, store_url) -> None:
    """A run's points as CSV or JSON (JSON includes the run, samples and logs): the store's data as it was
    stored, labels and reasons included (printed to a terminal, their escapes are the terminal's to obey:
    `mosbench show` prints them escaped)."""
    if not output:
        stdout.write(exporting.export(open_store(store_url, create=False), run_ref, exporting.Format(fmt)))
        return
    out = outfile.target(output, f"the {fmt.upper()} export")
    with out.writing():
        out.write_text(exporting.export(open_store(store_url, create=False), run_ref, exporting.Format(fmt)))


@cli.group()
def model() -> None:
    """Models that carry measurements past the cores this machine has."""


@model.command("lock")
@click.argument("run_ref", required=False)
@click.option("--cores", "up_to", type=click.IntRange(2, 1 << 16), default=256, show_default=True,
              help="Extrapolate to this many cores.")
@click.option("--a", "a_ns", type=click.FloatRange(min=0, min_open=True),
              help="ns outside the lock per acquisition (default: the run's par_ns; with --s, the talk's 9800); "
                   "fitting a run, the least it may be.")
@click.option("--s", "s_ns", type=click.FloatRange(min=0, min_open=True),
              help="ns inside the lock: with --c, model without measurements.")
@click.option("--c", "c_ns", type=click.FloatRange(min=0), help="ns of handoff per waiting core.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Also draw it (PNG or SVG).")
@click.option("--json", "as_json", is_flag=True,
              help="The fits as JSON on stdout: parameters and predictions with their intervals, the hold-out.")
@wide_option
@store_option
def model_lock(run_ref, up_to, a_ns, s_ns, c_ns, output, as_json, wide, store_url) -> None:
    """Ticket against scalable locks in the Markov model of "Non-scalable locks are dangerous".

    With RUN (default: the latest run), a, s and c are fitted to its scale/lock points for each lock
    (a no less than the run's par_ns, s than its cs_ns), with 95% prediction intervals past the
    measured cores and, from four core counts, the largest held out and predicted; with --s and --c,
    the model is drawn from them alone.
    """
    from mosbench.analysis import lockmodel
    from mosbench.commands.options import figure_target
    from mosbench.report import fits as fits_report

    if (s_ns is None) != (c_ns is None):
        raise UserError("give --s and --c together, or neither to fit them to a run")
    drawn = figure_target(output) if output else None
    if s_ns is not None:
        from mosbench.workloads.scale import PAR_NS

        fits = lockmodel.given(a_ns or float(PAR_NS), s_ns, c_ns)
    else:
        db = open_store(store_url, create=False)
        r = db.run(run_ref or "latest")
        fits = lockmodel.fit_run(analysis.build_series(db.points(r["id"])), r["plan"].get("params", {}), a_ns)
        if not fits:
            raise UserError(f"run {r['id']} has no measured scale/lock points to fit "
                            "(run `mosbench run scale/lock` or give --s and --c)")
    if as_json:
        terminal.echo_json(fits_report.lock_json(fits, up_to, None if s_ns is not None else r["id"]))
    else:
        out = terminal.table_console()
        for t in table.lock_model_tables(fits, up_to, wide):
            out.print(t, crop=False)
        for line in fits_report.lock_lines(fits):
            terminal.print_indented(out, line)
    if drawn:
        with drawn.writing():
            scratch = drawn.scratch() / output.name
            fits_report.draw_lock(fits, up_to, scratch)
            drawn.write_bytes(scratch.read_bytes())
        (err_console if as_json or drawn.in_place else console).print(f"wrote {output}")


@model.command("scaling")
@click.argument("run_ref", required=False)
@click.option("--cores", "up_to", type=click.IntRange(2, 1 << 16), default=256, show_default=True,
              help="Read the models out to this many cores.")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
              help="Also draw each test's fits into this directory (PNG and SVG).")
@click.option("--json", "as_json", is_flag=True,
              help="The fits as JSON on stdout: parameters and predictions with their intervals, the hold-out.")
@wide_option
@store_option
def model_scaling(run_ref, up_to, output, as_json, wide, store_url) -> None:
    """Amdahl's law and the Universal Scalability Law fitted to every curve of RUN (default: latest),
    with 95% bootstrap intervals, the predicted peak, per-core throughput past the measured cores with
    its 95% prediction interval and, from four core counts, the largest held out and predicted."""
    from mosbench.analysis import models
    from mosbench.report import fits as fits_report
    from mosbench.report import rows

    db = open_store(store_url, create=False)
    r = db.run(run_ref or "latest")
    groups = analysis.group_by_test(analysis.build_series(db.points(r["id"])))
    if not groups:
        raise UserError(f"run {r['id']} has no measured points")
    tests = []
    # The figures are drawn into a hidden folder in -o and moved in once all are there (outfile.py).
    with outfile.files_into(output, "the figures") if output else contextlib.nullcontext() as staged:
        drawn = []
        for name, group in groups.items():
            fits = models.series_fits(group, r["plan"].get("params", {}).get(group[0].workload, {}))
            if as_json:
                tests.append(fits_report.scaling_test_json(name, group, fits, up_to))
            else:
                out = terminal.table_console()
                for t in rows.scaling_tables(group, fits, up_to):
                    out.print(table.render(t, wide), crop=False)
                for line in fits_report.scaling_lines(group, fits):
                    terminal.print_indented(out, line)
            if staged and (path := fits_report.draw_scaling(name, group, fits, up_to, staged)):
                drawn.append(path.name)
    for name in drawn:
        (err_console if as_json else console).print(f"wrote {output / name}.png and .svg", markup=False)
    if as_json:
        terminal.echo_json(fits_report.scaling_json(r["id"], up_to, tests))


@cli.command()
@click.option("--clients", metavar="HOST[,HOST…]|@FILE", help="Also check these client hosts over ssh.")
@click.option("--server-address", metavar="ADDR", help="The address the client hosts reach the servers at.")
@click.option("--ssh-config", type=click.Path(dir_okay=False, exists=True), help="ssh_config for the hosts (ssh -F).")
def doctor(clients, server_address, ssh_config) -> None:
    """What this machine supports: topology, cgroups, hotplug, perf events, huge pages, packages; with
    --clients, each client host's reach, CPUs, route, clock and generators, and the server's NIC."""
    from mosbench.machine import doctor as checks

    rows = list(checks.checks())
    if clients:
        from mosbench.workloads.server.clientdoctor import clients_rows

        rows += clients_rows(clients, server_address, ssh_config)
    terminal.print_checks(rows)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("--shape", default="4x8x2", show_default=True,
              help="Guest topology SOCKETSxCORESxTHREADS (4x8x2: 64 vCPUs).")
@click.option("--nodes", type=click.IntRange(1, 64), default=None, help="NUMA nodes (default: one per socket).")
@click.option("--memory", "memory_mb", type=click.IntRange(512), default=None,
              help="Guest memory in MiB (default: 128 a vCPU, at least 2048).")
@click.option("--cgroup", "cgroup_version", type=click.Choice(["1", "2", "both"]), default="2", show_default=True,
              help="The guest's cgroup hierarchy (the guest kernel's command line chooses it); both: a guest of "
                   "each, side by side where emulated (one host CPU each).")
@click.option("--suite", type=click.Choice(["ci", "full"]), default=None,
              help="ci (the default without SELECTIONS): every isolation and placement path at full size, fewest "
                   "points; full: every workload at every core count of the default series, both isolations and "
                   "placements.")
@click.option("--kernel", "kernel_spec", default=None, metavar="KERNEL",
              help="The guest's kernel: an installed version, a linux-image .deb, a kernel image or a built tree "
                   "(default: the newest installed kernel with 9p).")
@click.option("--timeout", "timeout_min", type=click.FloatRange(1), default=None,
              help="Minutes before the guest is stopped (default: 20 for ci and SELECTIONS, 240 for full).")
@click.option("--no-wait", is_flag=True, help="Refuse (exit 2) rather than wait while a run measures.")
@click.argument("run_args", nargs=-1, type=click.UNPROCESSED, metavar="[SELECTIONS] [RUN OPTIONS]")
@store_option
def vm(shape, nodes, memory_mb, cgroup_version, suite, kernel_spec, timeout_min, no_wait, run_args,
       store_url) -> None:
    """Boot this machine's userland in a guest (QEMU) and measure there: a suite that sweeps every path at
    many-core size and checks what only a big machine can fail, or SELECTIONS with any `mosbench run`
    options (e.g. `mosbench vm --kernel 6.1.0-56-rt-amd64 --shape 1x2x1 micro/getppid1 --cores 1,2`).
    The guest's runs are kept in this store. Throughput there is a performance figure only under KVM with
    no more vCPUs than this machine's CPUs."""
    from mosbench.guest import host as guest_vm
    from mosbench.guest import kernels

    if run_args and suite:
        raise UserError("give a --suite or SELECTIONS to run, not both")
    checked = _checked_run_args(run_args) if run_args else None
    want = guest_vm.parse_shape(shape, nodes, memory_mb)
    kernel = kernels.resolve(kernel_spec) if kernel_spec else None
    guest_vm.require_tools()
    db = open_store(store_url)
    guests = [guest_vm.Guest(want, version, kernel)
              for version in ((2, 1) if cgroup_version == "both" else (int(cgroup_version),))]
    suite = suite or ("ci" if checked is None else None)
    limit_s = guest_vm.timeout_s(suite, timeout_min)

    # The guest's vCPUs are this machine's CPUs: no other run may measure while it boots and sweeps.
    with _measuring(no_wait):
        for guest in guests:
            terminal.print_guest_start(guest, f"suite {suite}" if suite else shlex.join(checked or []), limit_s)
        done = guest_vm.run_vms(db, guests, shape, checked, suite, limit_s, terminal.show_guest_line)
    for guest, did in zip(guests, done, strict=True):
        if len(guests) > 1:
            console.print(f"cgroup v{guest.cgroup_version} guest:", markup=False)
        terminal.print_guest_steps(did.steps, did.imported, db.url)
    for guest, did in zip(guests, done, strict=True):
        which = f"the cgroup v{guest.cgroup_version} guest" if len(guests) > 1 else "the guest"
        if did.result.timed_out:
            raise UserError(f"{which} did not finish within {limit_s / 60:.0f} min and was stopped")
        if not did.steps:
            raise UserError(f"{which} ended (exit {did.result.returncode}) before its first step")
    if not all(did.passed(suite) for did in done):
        sys.exit(EXIT_POINTS_FAILED)


def _checked_run_args(args: tuple[str, ...]) -> list[str]:
    """`mosbench run`'s selections and options for a guest, checked here, before any guest boots, as
    `run` checks them (start.check_request; what this machine must hold, core counts included, is the guest's)."""
    from mosbench.guest import host as guest_vm
    from mosbench.run import start

    guest_vm.refuse_owned_options(args)
    with run.make_context("run", list(args)) as ctx:
        options = ctx.params
    if not options["selections"]:
        raise UserError("name what to measure in the guest, e.g. micro/getppid1 --cores 1,2")
    start.check_request(start.request(options))
    return list(args)


_KERNEL_COMMAND_OPTIONS = [
    click.option("--shape", default=None, help="Guest topology SOCKETSxCORESxTHREADS (default 1xNx1, N this "
                                               "machine's CPUs)."),
    click.option("--rounds", "first_rounds", type=click.IntRange(2, 100), default=4, show_default=True,
                 help="Boots before the first decision, alternating A B B A."),
    click.option("--max-rounds", type=click.IntRange(2, 200), default=12, show_default=True,
                 help="The budget: boots in all, while points are undecided."),
    click.option("--precision", type=click.FloatRange(0.1, 50), default=DEFAULT_PRECISION * 100, show_default=True,
                 metavar="PERCENT",
                 help="A point is the same on both sides when the 95% interval of its ratio is within ± this."),
    click.option("--boot-timeout", "boot_timeout_min", type=click.FloatRange(1), default=20, show_default=True,
                 help="Minutes a guest may take (boot and run) before it is stopped."),
    click.option("--no-wait", is_flag=True, help="Refuse (exit 2) rather than wait while a run measures."),
    click.argument("run_args", nargs=-1, type=click.UNPROCESSED, metavar="SELECTIONS [RUN OPTIONS]"),
    store_option,
]


def _kernel_command_options(f):
    for option in reversed(_KERNEL_COMMAND_OPTIONS):
        f = option(f)
    return f


def _booter(db, shape, run_args, boot_timeout_min):
    from mosbench.guest import ab as ab_rounds
    from mosbench.guest import host as guest_vm

    guest_vm.require_tools()
    return ab_rounds.Booter(db, shape, 2, run_args, 60 * boot_timeout_min, terminal.show_guest_line)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("--kernel", "kernel_specs", multiple=True, metavar="KERNEL",
              help="Twice: A then B (an installed version, a linux-image .deb, a kernel image or a built tree).")
@_kernel_command_options
def ab(kernel_specs, shape, first_rounds, max_rounds, precision, boot_timeout_min, no_wait, run_args,
       store_url) -> None:
    """Kernel A against kernel B: each booted in turn in the same guest, SELECTIONS measured in each boot
    (any `mosbench run` options), rounds A B B A … until every point is decided (Welch's test says they
    differ, or the ratio's 95% interval is within ±--precision) or --max-rounds; then compare's table,
    and for each point that differs, why: with --profile among the run options every boot is profiled, and
    the functions, locks and system calls whose time per unit moved from A to B beyond their trials' spread
    are named (docs/ANALYSIS.md); for a profiled point the boots left undecided, what moved all the same."""
    from mosbench.analysis import runs_compared
    from mosbench.guest import ab as ab_rounds
    from mosbench.guest import host as guest_vm
    from mosbench.guest import kernels

    if len(kernel_specs) != 2:
        raise UserError("ab compares two kernels: --kernel A --kernel B")
    if first_rounds > max_rounds:
        raise UserError(f"--rounds {first_rounds} is more than --max-rounds {max_rounds}")
    checked = _checked_run_args(run_args)
    a, b = (kernels.resolve(k) for k in kernel_specs)
    want = guest_vm.host_sized_shape(shape)
    db = open_store(store_url)
    booter = _booter(db, want, checked, boot_timeout_min)
    with _measuring(no_wait):
        say(f"A: {a.describe()}; B: {b.describe()}; guest {want.describe()}, "
             f"{first_rounds} to {max_rounds} boots of about {booter.timeout_s / 60:.0f} min at most each")
        outcome = ab_rounds.run(booter, a, b, first_rounds, max_rounds, precision / 100, say)
    runs = [db.run(r) for r in outcome.merged]
    found, series = runs_compared.comparison(db, runs)
    explained = runs_compared.ab_explained(db, runs, found, outcome.decisions)
    terminal.print_ab(terminal.table_console(), outcome, found, series, explained.differing, explained.undecided,
                      max_rounds)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("--tree", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="A kernel git tree (only read: mosbench bisects a clone of its own).")
@click.option("--good", required=True, help="A revision without the change.")
@click.option("--bad", required=True, help="A later revision with it.")
@click.option("--work", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the clone and its builds live, kept for the next bisection of this tree "
                   "(default ~/.cache/mosbench/bisect/…).")
@click.option("--step-rounds", type=click.IntRange(2, 50), default=4, show_default=True,
              help="Boots a candidate may take to be decided before it is skipped.")
@click.option("--jobs", type=click.IntRange(1), default=None, help="make's jobs (default: this machine's CPUs).")
@_kernel_command_options
def bisect(tree, good, bad, work, step_rounds, jobs, shape, first_rounds, max_rounds, precision, boot_timeout_min,
           no_wait, run_args, store_url) -> None:
    """The commit that made SELECTIONS slower (or faster) between --good and --bad: the ends measured first
    in A B B A rounds (refused where they do not differ), then `git bisect`, each candidate built with
    virtme-ng's configuration, booted, measured and called good, bad or skip by Welch's test against
    both ends."""
    from mosbench.guest import bisect as bisecting
    from mosbench.guest import host as guest_vm

    checked = _checked_run_args(run_args)
    good_id, bad_id = bisecting.resolve_revisions(tree, good, bad)
    bisecting.check_build_tools()
    want = guest_vm.host_sized_shape(shape)
    db = open_store(store_url)
    booter = _booter(db, want, checked, boot_timeout_min)
    builder = bisecting.Builder(tree, work or bisecting.default_work(tree), jobs or len(os.sched_getaffinity(0)))
    with _measuring(no_wait):
        say(f"bisecting {good_id[:12]}..{bad_id[:12]} of {tree} in {builder.work}; guest {want.describe()}")
        outcome = bisecting.run(booter, builder, good_id, bad_id, first_rounds, max_rounds, step_rounds,
                                precision / 100, say)
    out = terminal.table_console()
    terminal.print_bisection(out, outcome, max_rounds, builder.build_seconds, booter.boot_seconds)
    if outcome.first_bad:
        out.print(f"first bad commit: {outcome.first_bad} {builder.subject(outcome.first_bad)}", markup=False)
        terminal.print_explained(out, bisecting.explained(db, outcome, builder))
    else:
        out.print(f"no single first bad commit: {outcome.message}", markup=False)
        sys.exit(EXIT_POINTS_FAILED)


@cli.command()
@click.argument("selections", nargs=-1)
@click.option("--host", "hostname", default=None, help="The machine (its hostname) where the store holds several "
                                           "(default: the newest run's).")
@click.option("--order", type=click.Choice(["time", "kernel", "commit"]), default="time", show_default=True,
              help="The runs in time order, kernel version order, or the commit order of --tree.")
@click.option("--tree", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="The kernel git tree (only read) for --order commit and --bisect.")
@click.option("--fail-on-change", "fail_on", type=float, default=None, metavar="PCT",
              help="A gate: exit 1 when the newest run begins a significant change worse than PCT percent "
                   "(0 otherwise, 2 for errors).")
@click.option("--json", "as_json", is_flag=True, help="The series and the changes as JSON on stdout.")
@click.option("--bisect", "then_bisect", is_flag=True,
              help="Then bisect the newest change whose two sides carry kernel commits, between them, for "
                   "the points that moved (mosbench bisect; needs --tree).")
@wide_option
@store_option
@click.pass_context
def history(ctx, selections, hostname, order, tree, fail_on, as_json, then_bisect, wide, store_url) -> None:
    """A machine's runs as one series per point (SELECTIONS: workload or workload/test; all by default),
    in time, kernel-version or commit order: per test, per-core throughput at one core and the most cores
    over the runs, and the changes found in them (PELT candidates kept where Welch's test, corrected over
    all candidates, says the two sides differ), each with its kind, what moved with it and what differed."""
    from mosbench.analysis import explain_history
    from mosbench.analysis import history as hist
    from mosbench.report import history as history_report
    from mosbench.run.plan import stored_selections

    if fail_on is not None and not 0 <= fail_on < 100:
        raise UserError(f"--fail-on-change takes a percentage from 0 up to 100, not {fail_on:g}")
    if then_bisect and tree is None:
        raise UserError("--bisect needs the kernel tree the runs' commits come from: --tree DIR")
    # Names are checked as `run` checks them: an unknown one is said, not searched for.
    chosen = stored_selections(list(selections))
    db = open_store(store_url, create=False)
    found = hist.build(db.list_runs(), db.history_points, chosen, hostname, hist.Order(order), tree)
    worse = found.worse_than(fail_on) if fail_on is not None else []
    explained = explain_history.explained(db, found)
    if as_json:
        terminal.echo_json(explain_history.add_to_json(history_report.as_json(found, fail_on), found, explained))
        sys.exit(1 if worse else 0)
    out = terminal.table_console()
    for model in (history_report.series_table(found), history_report.shifts_table(found)):
        out.print(table.render(model, wide), crop=False)
    terminal.print_lines(out, history_report.summary_lines(found))
    terminal.print_explained(out, explained, wide)
    if fail_on is not None:
        terminal.print_lines(out, gate.lines(gate.CHANGE, gate.changes(found, worse), fail_on))
    if then_bisect:
        target = hist.bisect_target(found)
        if target is None:
            raise UserError("no change has kernel commits recorded on both sides (mosbench run --commit REV "
                            "records one; vm, ab and bisect record the tree's)")
        say(f"bisecting {target.good[:12]}..{target.bad[:12]} for {' '.join(target.selections)} "
             f"at {target.cores} cores")
        ctx.invoke(bisect, tree=tree, good=target.good, bad=target.bad,
                   run_args=(*target.selections, "--cores", target.cores), store_url=store_url)
    if worse:
        sys.exit(1)


cli.add_command(mail_command)
cli.add_command(serve_command)


def main() -> None:
    try:
        _main()
    finally:
        terminal.drop_if_reader_left()


def _main() -> None:
    try:
        cli.main(standalone_mode=False)
        stdout.flush()  # what is still buffered, written while a failure (a full disk) can be said
    except UserError as e:
        # Whichever module wrote it, a user's 100 KB name or a label's escapes in it stay one readable line.
        err_console.print(f"mosbench: {error_line(str(e))}", style="red", markup=False, highlight=False)
        sys.exit(2)
    except (click.exceptions.Abort, KeyboardInterrupt) as e:
        # Click turns Ctrl-C (and SIGTERM or SIGHUP, which a sweep raises as one) into an Abort whose cause
        # is the interrupt.
        stopped = e if isinstance(e, KeyboardInterrupt) else e.__cause__
        if not isinstance(stopped, RunInterrupted):  # no sweep stopped: a wait for the machine, a report
            err_console.print("mosbench: interrupted", markup=False, highlight=False)
        else:
            err_console.print(f"mosbench: interrupted; run #{stopped.run_id}'s finished points are kept "
                              f"(`{terminal.resume_command(stopped.run_id, stopped.store_url)}` measures the rest)",
                              markup=False, highlight=False)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as e:
        # One line, as for every error a user can cause; `-h` has the usage.
        err_console.print(f"mosbench: {error_line(e.format_message())}", style="red", markup=False,
                          highlight=False)
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP) during a run's sweep, with the run it stopped, for the --resume hint."""

    def __init__(self, run_id: int, store_url: str | None):
        super().__init__(run_id)
        self.run_id = run_id
        self.store_url = store_url


if __name__ == "__main__":
    main()
