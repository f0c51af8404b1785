"""The mosbench command line."""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from mosbench.analysis import cells as analysis
from mosbench.analysis import profiles
from mosbench.errors import UserError
from mosbench.launch.processes import harness_priority
from mosbench.machine import journal, topology
from mosbench.machine import lock as machine_lock
from mosbench.machine import placement as placing
from mosbench.machine.isolation import ISOLATIONS
from mosbench.report import table
from mosbench.run import profiler as profile
from mosbench.store import db as store
from mosbench.workloads import registry

if TYPE_CHECKING:
    from mosbench.run.start import Request  # imported where used: `list` stays fast


class PipeSafe(io.TextIOBase):
    """An output whose reader may leave (`mosbench run … | head`): later writes are dropped, so a closed
    pipe never ends a run or loses a point."""

    def __init__(self, stream):
        self.stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self.broken = True
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self.broken = True

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


stdout = PipeSafe(sys.stdout)
stderr = PipeSafe(sys.stderr)
# soft_wrap: a line in a log or a pipe is one line, however long, never folded at 80 columns. No markup and no
# emoji codes: what a user typed (a label, a path, ":abc:") is printed as typed.
console = Console(file=stdout, soft_wrap=True, emoji=False, markup=False)
err_console = Console(file=stderr, soft_wrap=True, emoji=False, markup=False)

EXIT_POINTS_FAILED = 3
EXIT_INTERRUPTED = 130

store_option = click.option("--store", "store_url", envvar="MOSBENCH_STORE", default=None,
                            help="Results store: an SQLite path or a SQLAlchemy URL (postgresql+psycopg://…). "
                                 f"Default {store.DEFAULT_PATH}.")


def _table_console() -> Console:
    """Tables fit the terminal's width, or in a pipe COLUMNS where set and 80 where not; a table lays itself
    out in it (report/table.py), so print it with crop=False: one that cannot fit is drawn wider, not cut."""
    if stdout.isatty():
        return console
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else 80
    return Console(file=stdout, width=width, emoji=False, markup=False)


def _print_indented(out: Console, line: str) -> None:
    """A line under a table, indented and folded at the console's width at its spaces (a number whole)."""
    import textwrap

    out.print(textwrap.fill(line, width=out.width, initial_indent="  ", subsequent_indent="  ",
                            break_long_words=False, break_on_hyphens=False),
              markup=False, highlight=False, soft_wrap=True)


wide_option = click.option("--wide", is_flag=True,
                           help="Every column, at the width it needs (by default the essential ones fit the "
                                "terminal, or 80 columns in a pipe; the HTML report has them all).")


class FiniteFloat(click.ParamType):
    """A float at least `least`; nan and inf are refused (a window of inf seconds never ends)."""

    name = "seconds"

    def __init__(self, least: float):
        self.least = least

    def convert(self, value, param, ctx) -> float:
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        if x < self.least:
            self.fail(f"{value} is below {self.least}", param, ctx)
        return x


def _recover() -> None:
    """Undoes what runs killed without their guardian left behind, and marks those runs killed."""
    for action in journal.recover_stale():
        err_console.print(f"mosbench: cleaned up after an earlier run: {action}", style="yellow", markup=False)


def _comma_list(_ctx, _param, value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _commit_id(_ctx, _param, value: str | None) -> str | None:
    """--commit: a commit id as git prints it (history orders and bisects runs by it), lower-cased."""
    if value is not None and not re.fullmatch(r"[0-9a-fA-F]{7,40}", value):
        raise UserError(f"--commit {value!r} is not a commit id: give its 7 to 40 hex digits "
                        "(`git -C TREE rev-parse REV` prints them)")
    return value.lower() if value else None


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
@click.option("--variant", "--mode", "variants", callback=_comma_list, help="Variants to run (default all).")
@click.option("--trials", "trials_spec", default="3", show_default=True, metavar="N|auto[:MAX]",
              help="Trials per point, or auto: 3, then more (a round over the sweep at a time) for each point "
                   "whose 95% interval is wider than --precision, up to MAX (10).")
@click.option("--precision", type=click.FloatRange(0.1, 50), metavar="PERCENT",
              help="With --trials auto: the 95% interval of a point's mean to reach, ± this share of it (2).")
@click.option("--duration", default=5.0, show_default=True, type=FiniteFloat(0.1), help="Window seconds.")
@click.option("--warmup", default=2.0, show_default=True, type=FiniteFloat(0), help="Warm-up seconds.")
@click.option("--interval", default=1.0, show_default=True, type=FiniteFloat(0),
              help="Sampling period in seconds; 0 reads only the window's ends.")
@click.option("--placement", type=click.Choice(placing.PLACEMENTS), default="pack", show_default=True)
@click.option("--isolation", type=click.Choice(ISOLATIONS), default="cgroup", show_default=True,
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
@click.option("--commit", "kernel_commit", metavar="ID", callback=_commit_id,
              help="The running kernel's commit id in its tree (7 to 40 hex digits), recorded with the run: "
                   "`mosbench history --order commit` orders runs by it and `--bisect` bisects between them (vm, "
                   "ab and bisect record a built tree's HEAD themselves).")
@click.option("--resume", "resume_ref", help="Finish an interrupted run (id or 'latest').")
@click.option("--max-interference", default=2.0, show_default=True, type=click.FloatRange(0, 100),
              metavar="PERCENT", help="Mark a point interfered where other programs (and steal) took more than "
                                      "this share of its CPUs' time in its window.")
@click.option("--retry-interfered", default=0, show_default=True, type=click.IntRange(0, 100), metavar="N",
              help="Measure an interfered point again, up to N times.")
@click.option("--no-wait", is_flag=True, help="Refuse (exit 2) rather than wait while another run measures.")
@store_option
def run(selections, cores, variants, trials_spec, precision, duration, warmup, interval, placement, isolation, params,
        clients, server_address, ssh_config, profiling, label, kernel_commit, resume_ref, max_interference,
        retry_interfered, no_wait, store_url) -> None:
    """Run SELECTIONS (workload or workload/test) over core counts, storing every point."""
    from mosbench.run import start
    from mosbench.run.sweep import Sweep  # the sweep pulls in rich's live display; keep `list` fast

    topo = topology.read()
    if resume_ref:
        if selections:
            raise UserError("--resume takes its plan from the stored run; give no workloads with it")
        db = store.Store(store_url)
        previous, the_plan = start.stored_plan(db, resume_ref, topo)
    else:
        the_plan = start.new_plan(_request(click.get_current_context().params), topo)
    # A run that refuses to wait (--no-wait) has made nothing, not even a new store.
    with _measuring(no_wait) as lock:
        if resume_ref:
            run_id, skip = start.reopen(db, previous)
        else:
            db = store.Store(store_url)
            run_id, skip = start.create(db, the_plan, topo, _command_line(), label), set()
            if kernel_commit:
                db.note_environment(run_id, kernel_commit=kernel_commit)
        lock.note(run_id, db.shown_url)
        left = [k for k in the_plan.points() if k not in skip]
        most = ""
        if the_plan.auto:
            most = (f", up to {the_plan.seconds(left) * the_plan.trials_max / the_plan.trials / 60:.1f} min "
                    f"if every point takes {the_plan.trials_max} trials")
        err_console.print(f"run #{run_id}: {len(left)} points ({the_plan.trials_text()}), cores {the_plan.cores}, "
                          f"about {the_plan.seconds(left) / 60:.1f} min{most}")
        with harness_priority() as scheduling:
            db.note_environment(run_id, harness_scheduling=scheduling)
            if the_plan.profile:
                db.note_environment(run_id, profiling=profile.describe())
            try:
                outcome = Sweep(db, the_plan, topo, err_console).run(run_id, skip)
            except KeyboardInterrupt as e:
                raise RunInterrupted(run_id, store_url) from e
    interfered = (f", {outcome.interfered} interfered (other programs used their CPUs: "
                  f"`mosbench run --retry-interfered N` measures them again)" if outcome.interfered else "")
    console.print(f"run #{run_id} {outcome.status}: {outcome.measured} points measured, {outcome.failed} failed"
                  f"{interfered}. See `mosbench show {run_id}` and `mosbench report {run_id}`.")
    if outcome.failed:
        sys.exit(EXIT_POINTS_FAILED)


def _request(options: dict[str, Any]) -> Request:
    """`mosbench run`'s options (its click parameters) as the run they ask for."""
    from mosbench.run import start

    params = list(options["params"])
    # The client options are the server workloads' parameters: stored with the plan, so --resume has them.
    for name, option in (("client_hosts", "clients"), ("server_address", "server_address"),
                         ("ssh_config", "ssh_config")):
        if value := options[option]:
            params.append(f"{name}={Path(value).resolve() if name == 'ssh_config' else value}")
    trials, trials_max, precision = start.trials(options["trials_spec"], options["precision"])
    return start.Request(
        selections=list(options["selections"]), cores=options["cores"], variants=options["variants"], trials=trials,
        warmup=options["warmup"], duration=options["duration"], interval=options["interval"],
        placement=options["placement"], isolation=options["isolation"], params=params, profiling=options["profiling"],
        max_interference=options["max_interference"] / 100, retry_interfered=options["retry_interfered"],
        trials_max=trials_max, precision=precision)


def _command_line() -> str:
    return shlex.join(["mosbench", *sys.argv[1:]])


def _measuring(no_wait: bool) -> contextlib.AbstractContextManager[machine_lock.MachineLock]:
    """The machine lock, held while a command measures: waited for (saying who holds it) unless --no-wait."""
    return machine_lock.held(_command_line(), wait=not no_wait, waiting=_say_waiting)


def _say_waiting(holder: machine_lock.Holder | None) -> None:
    who = holder.describe() if holder else "another mosbench"
    err_console.print(f"mosbench: waiting for this machine: it is measuring {who} (--no-wait refuses instead)",
                      style="yellow", markup=False, highlight=False)


@cli.command("list")
@click.argument("names", nargs=-1, metavar="[WORKLOAD]...")
def list_cmd(names: tuple[str, ...]) -> None:
    """Workloads, their tests, variants and parameters (all, or those named)."""
    # Every name is looked up before anything is printed: an unknown one is the only line.
    chosen = [registry.get(n) for n in dict.fromkeys(names)] if names else registry.all_workloads()
    for w in chosen:
        console.print(Text.assemble((w.name, "bold"), f": {w.description} (unit: {w.unit}, {w.kind})"))
        if w.paper:
            console.print(f"  paper: {w.paper}")
        console.print("  variants: " + "; ".join(f"{v.name} ({v.description})" for v in w.variants))
        for p in w.params:
            value = "auto" if p.default is None else f"{p.default}{' ' + p.unit if p.unit else ''}"
            console.print(f"  -p {p.name}={value}: {p.help}")
        tests = w.tests()
        if tests and tests[0].name:
            t = Table(show_header=False, box=None, padding=(0, 2))
            for info in tests:
                t.add_row(f"  {w.name}/{info.name}", info.description)
            console.print(t)


@cli.command()
@store_option
def runs(store_url) -> None:
    """Stored runs, one line each."""
    header = ("id", "label", "status", "started", "host", "kernel", "points", "failed", "command")
    rows = [(str(r["id"]), r["label"] or "", r["status"], r["started_at"].strftime("%Y-%m-%d %H:%M"),
             r["environment"].get("hostname", ""), r["environment"].get("kernel", ""), str(r["points"]),
             str(r["failed"]), r["command"]) for r in store.Store(store_url, create=False).list_runs()]
    # A line a run, in aligned columns with the command last and whole (`| less -S` or `| grep` reads it, and it
    # can be run again); a terminal cuts it at its width rather than folding one run over many lines.
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    for row in (header, *rows):
        line = "  ".join([*(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)), row[-1]])
        if stdout.isatty() and len(line) > console.width:
            line = line[:console.width - 1] + "…"
        stdout.write(line + "\n")


@cli.command()
@click.argument("run_ref", default="latest")
@wide_option
@store_option
def show(run_ref, wide, store_url) -> None:
    """A run as terminal tables (RUN is an id or 'latest'): the essential columns in the terminal's width
    (80 in a pipe), every column with --wide."""
    db = store.Store(store_url, create=False)
    from mosbench.analysis import verdict
    from mosbench.report import history as history_report
    from mosbench.report import rows, sections

    r = db.run(run_ref)
    pts = db.points(r["id"], with_profiles=True, with_samples=False)
    series = analysis.build_series(pts)
    console = _table_console()
    console.print(f"run #{r['id']} ({r['status']}) on {r['environment']['hostname']}, "
                  f"kernel {r['environment']['kernel']}: {r['environment'].get('topology_summary', '')}",
                  soft_wrap=False)
    if why := UNFINISHED.get(r["status"]):
        console.print(f"run #{r['id']} {why} with {len(pts)} point{'s' if len(pts) != 1 else ''} stored: "
                      f"`{_resume_command(r['id'], store_url)}` measures the rest", style="yellow", markup=False,
                      highlight=False, soft_wrap=True)
    if banner := rows.interference_banner(series):
        console.print(f"⚠ {banner}", style="red", markup=False, highlight=False, soft_wrap=False)
    found_profiles = profiles.by_series(pts)
    run = sections.RunSeries(f"#{r['id']}", series, found_profiles, r["environment"].get("kernel", ""))
    view = sections.View(series, found_profiles, (run,), verdict.profile_advice(r["environment"]),
                         history_report.of_run(db, r))
    for section in sections.for_terminal(sections.build(view)):
        if section.headed:
            console.print(Text(section.title, style="bold"), soft_wrap=False)
        for item in section.items():
            if isinstance(item, sections.Line):
                console.print(item.text, style=None if item.holds else "red", markup=False, highlight=False,
                              soft_wrap=False)
            else:
                console.print(table.render(item, wide), crop=False)


# A run's status where `--resume` finishes it, and what stopped it.
UNFINISHED = {"killed": "was killed before it finished (its harness died)",
              "incomplete": "was interrupted before it finished"}


def _resume_command(run_id: int, store_url: str | None) -> str:
    return shlex.join(["mosbench", "run", "--resume", str(run_id), *(["--store", store_url] if store_url else [])])


def _check_writable(output: Path) -> None:
    """Where a report goes is checked before a figure is drawn: its folder made (and the figures' beside
    it) and a file written there, or one line saying why not."""
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=output.parent, prefix=f".{output.name}."):
            pass
    except OSError as e:
        raise UserError(f"cannot write the report to {output}: {e.strerror or e}") from None


@cli.command()
@click.argument("run_refs", nargs=-1)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("report/report.html"),
              show_default=True)
@store_option
def report(run_refs, output: Path, store_url) -> None:
    """HTML report of one run, or of several compared (figures also as PNG and SVG beside it)."""
    from mosbench.report import html

    db = store.Store(store_url, create=False)
    _check_writable(output)
    path = html.write(db, list(run_refs) or ["latest"], output)
    console.print(f"wrote {path} (figures in {path.parent / (path.stem + '_files')})")


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
    import json

    from mosbench.analysis import compare as comparing
    from mosbench.report import rows

    if len(run_refs) < 2:
        raise UserError("compare needs two runs or more: mosbench compare BASELINE OTHER [OTHER…]")
    if fail_on is not None and not 0 <= fail_on < 100:
        raise UserError(f"--fail-on-regression takes a percentage from 0 up to 100, not {fail_on:g}")
    db = store.Store(store_url, create=False)
    runs = [db.run(ref) for ref in run_refs]
    if len({r["id"] for r in runs}) < len(runs):
        raise UserError("compare was given the same run twice")
    found, series = _comparison(db, runs, include_interfered)
    regressed = comparing.regressions(found, fail_on) if fail_on is not None else []
    explained = _explained(db, runs, found, include_interfered)
    if as_json:
        click.echo(json.dumps(comparing.as_json(found, fail_on, {(x.found.labels[1], x.change.point):
                                                                 x.found.as_json() for x in explained}), indent=1),
                   file=stdout)
        sys.exit(1 if regressed else 0)
    out = _table_console()
    _print_comparison(out, found, series, wide)
    _print_explained(out, explained, wide)
    if fail_on is None:
        return
    for line in rows.regression_lines(regressed, fail_on):
        out.print(line, markup=False, highlight=False, soft_wrap=True)  # a line each, however long: for grep
    if regressed:
        sys.exit(1)


def _comparison(db: store.Store, runs: list[dict], include_interfered: bool = False):
    from mosbench.analysis import compare as comparing

    series = [analysis.build_series(db.points(r["id"], with_samples=False)) for r in runs]
    return comparing.compare_runs(runs, series, comparing.run_labels(runs), include_interfered), series


def _explained(db: store.Store, runs: list[dict], found, include_interfered: bool = False) -> list:
    """Each significant change explained by its two sides' profiles (analysis/explain), or the command
    that would profile them; the profiles are read only where something changed."""
    from mosbench.analysis import explain

    if not any(c.significant for run in found.changes for c in run):
        return []
    rows = [db.points(r["id"], with_profiles=True, with_samples=False) for r in runs]
    return explain.comparison(found, runs, rows, include_interfered)


def _print_explained(out: Console, explained: list, wide: bool = False) -> None:
    """Each explained change's table and share; then those a side of which was not profiled, with the
    commands that would profile them (folded as a shell folds them, so a copy still runs)."""
    import textwrap

    from mosbench.report import whatchanged

    for block in whatchanged.blocks(explained):
        out.print(textwrap.fill(f"Why: {block.heading}", width=out.width, break_on_hyphens=False), markup=False,
                  highlight=False, soft_wrap=True)
        out.print(table.render(block.table, wide), crop=False)
        for line in block.lines:
            _print_indented(out, line)
    if (left := whatchanged.unexplained(explained)) is not None:
        _print_indented(out, left.line)
        for command in left.commands:
            out.print(whatchanged.fold_command(command, out.width), markup=False, highlight=False, soft_wrap=True)


def _print_comparison(out: Console, found, series, wide: bool = False) -> None:
    """compare's tables: the environment's differences, every matched point, commutativity changes."""
    from mosbench.analysis import commute
    from mosbench.analysis import compare as comparing
    from mosbench.report import commute as commute_report
    from mosbench.report import rows

    for model in rows.comparison_tables(found):
        out.print(table.render(model, wide), crop=False)
    base_pairs = commute.results(series[0])
    for label, other in zip(found.labels[1:], series[1:], strict=True):
        if changes := commute.changed(base_pairs, commute.results(other)):
            out.print(table.render(commute_report.changes_table(found.labels[0], label, changes), wide), crop=False)
    significant = sum(c.significant for run in found.changes for c in run)
    out.print(f"{significant} significant change{'s' if significant != 1 else ''} "
              f"(Welch's t-test, p < {comparing.ALPHA}) among "
              f"{sum(c.matched for run in found.changes for c in run)} points measured in both runs.", markup=False,
              soft_wrap=True)


@cli.command()
@click.argument("run_ref", default="latest")
@click.option("--format", "fmt", type=click.Choice(["csv", "json"]), default="csv", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None)
@store_option
def export(run_ref, fmt, output, store_url) -> None:
    """A run's points as CSV or JSON (JSON includes the run, samples and logs)."""
    import csv
    import io
    import json

    db = store.Store(store_url, create=False)
    r = db.run(run_ref)
    if fmt == "json":
        text = json.dumps({"run": json.loads(store.dumps([r]))[0],
                           "points": json.loads(store.dumps(db.points(r["id"], with_logs=True)))}, indent=1)
    else:
        rows = db.points(r["id"])
        buf = io.StringIO()
        skip = {"samples", "metrics"}
        fields = [k for k in (rows[0] if rows else {}) if k not in skip]
        writer = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: store.to_jsonable(v) for k, v in row.items()})
        text = buf.getvalue()
    if output:
        output.write_text(text)
    else:
        stdout.write(text)


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
    from mosbench.report import rows

    if (s_ns is None) != (c_ns is None):
        raise UserError("give --s and --c together, or neither to fit them to a run")
    if s_ns is not None:
        from mosbench.workloads.scale import PAR_NS

        fits = lockmodel.given(a_ns or float(PAR_NS), s_ns, c_ns)
    else:
        db = store.Store(store_url, create=False)
        r = db.run(run_ref or "latest")
        fits = lockmodel.fit_run(analysis.build_series(db.points(r["id"])), r["plan"]["params"], a_ns)
        if not fits:
            raise UserError(f"run {r['id']} has no measured scale/lock points to fit "
                            "(run `mosbench run scale/lock` or give --s and --c)")
    if as_json:
        import json

        counts = rows.lock_model_counts(fits, up_to)
        click.echo(json.dumps({"run": None if s_ns is not None else r["id"], "up_to": up_to, "cores": counts,
                               "models": [{"variant": name, **f.as_json(counts)} for name, f in fits.items()]},
                              indent=1), file=stdout)
    else:
        out = _table_console()
        for t in table.lock_model_tables(fits, up_to, wide):
            out.print(t, crop=False)
        for name, f in fits.items():
            for line in (f.note, f.undetermined):
                if line and line != "given":
                    _print_indented(out, f"{name}: {line}")
    if output:
        from mosbench.report import plots

        fig = plots.lock_model_figure(fits, up_to)
        output.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(output, dpi=130)
        (err_console if as_json else console).print(f"wrote {output}")


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
    from mosbench.analysis import models, scaling
    from mosbench.report import plots, rows

    db = store.Store(store_url, create=False)
    r = db.run(run_ref or "latest")
    groups = analysis.group_by_test(analysis.build_series(db.points(r["id"])))
    if not groups:
        raise UserError(f"run {r['id']} has no measured points")
    tests = []
    for name, group in groups.items():
        fits = models.series_fits(group, r["plan"]["params"].get(group[0].workload, {}))
        if as_json:
            counts = rows.extrapolation_counts(max((c.cores for s in group for c in s.ok_cells()), default=1), up_to)
            tests.append({"test": name, "unit": group[0].unit, "cores": counts,
                          "variants": [{"variant": s.variant, "models": [f.as_json(counts) for f in
                                                                          fits[s.variant].values()]} for s in group]})
        else:
            out = _table_console()
            for t in rows.scaling_tables(group, fits, up_to):
                out.print(table.render(t, wide), crop=False)
            for s in group:
                for f in fits[s.variant].values():
                    line = f"refused: {f.reason}" if isinstance(f, scaling.Refusal) else f.undetermined
                    if line:
                        _print_indented(out, f"{s.variant} {f.label}: {line}")
        if output and (fig := plots.scaling_figure(group, fits, up_to)):
            stem = f"{plots.file_stem(name)}_scaling"
            plots.save(fig, output, stem)
            (err_console if as_json else console).print(f"wrote {output / stem}.png and .svg", markup=False)
    if as_json:
        import json

        click.echo(json.dumps({"run": r["id"], "up_to": up_to, "rates": "per second per core", "tests": tests},
                              indent=1), file=stdout)


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
        from mosbench import native
        from mosbench.workloads.postgres.pgbench import check_version
        from mosbench.workloads.server.clientdoctor import GENERATORS, doctor_rows
        from mosbench.workloads.server.hosts import parse_clients

        hosts = parse_clients(clients)
        if not server_address:
            raise UserError("doctor --clients needs --server-address: the address the hosts reach this machine at")
        rows += checks.server_nic_rows(server_address)
        rows += doctor_rows(hosts, str(Path(ssh_config).resolve()) if ssh_config else "", server_address,
                            [native.binary(n) for n in GENERATORS], {"pgbench": check_version})
    t = Table(show_header=False)
    for what, finding, ok in rows:
        # What the machine says is text, not markup: sysfs writes "[madvise]" for the chosen THP mode.
        t.add_row(Text("✓ " if ok else "! ", style="green" if ok else "yellow") + Text(what), Text(finding))
    console.print(t)


@cli.command(context_settings={"ignore_unknown_options": True})
@click.option("--shape", default="4x8x2", show_default=True,
              help="Guest topology SOCKETSxCORESxTHREADS (4x8x2: 64 vCPUs).")
@click.option("--nodes", type=click.IntRange(1, 64), default=None, help="NUMA nodes (default: one per socket).")
@click.option("--memory", "memory_mb", type=click.IntRange(512), default=None,
              help="Guest memory in MiB (default: 128 a vCPU, at least 2048).")
@click.option("--cgroup", "cgroup_version", type=click.Choice(["1", "2"]), default="2", show_default=True,
              help="The guest's cgroup hierarchy (the guest kernel's command line chooses it).")
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
    missing = guest_vm.missing_tools()
    if missing:
        raise UserError("cannot boot a guest: missing " + "; ".join(missing))
    db = store.Store(store_url)
    guest = guest_vm.Guest(want, int(cgroup_version), kernel)
    suite = suite or ("ci" if checked is None else None)
    limit_s = 60 * (timeout_min or (240 if suite == "full" else 20))

    # The guest's vCPUs are this machine's CPUs: no other run may measure while it boots and sweeps.
    with _measuring(no_wait):
        console.print(f"guest: {want.describe()}, cgroup v{guest.cgroup_version}, "
                      f"{'KVM' if guest.kvm else 'emulated (TCG)'}, kernel {guest.kernel.name}; "
                      f"{'suite ' + suite if suite else shlex.join(checked or [])}, "
                      f"stopped after {limit_s / 60:.0f} min", markup=False)
        if checked is not None:
            done = guest_vm.run_selection(db, guest, checked, f"vm {kernel.release if kernel else guest.kernel.name}",
                                          limit_s, _show_guest_line)
        else:
            done = guest_vm.run_suite(db, guest, shape, suite, limit_s, _show_guest_line)
    for s in done.steps:
        console.print(f"{'ok    ' if s['returncode'] == 0 else 'FAILED'} {s['name']} ({s['seconds']:.0f} s)",
                      markup=False)
    if done.imported:
        console.print(f"kept the guest's runs as {', '.join(map(str, done.imported))} in {db.url}", markup=False)
    if done.result.timed_out:
        raise UserError(f"the guest did not finish within {limit_s / 60:.0f} min and was stopped")
    if not done.steps:
        raise UserError(f"the guest ended (exit {done.result.returncode}) before its first step")
    if any(s["returncode"] for s in done.steps) or (suite and done.steps[-1]["name"] != "checks"):
        sys.exit(EXIT_POINTS_FAILED)


def _show_guest_line(line: str, elapsed: float) -> None:
    if "warning: host doesn't support requested feature" in line:
        return  # QEMU says it of every feature of the CPU model that emulation lacks, on every boot
    minutes, seconds = divmod(int(elapsed), 60)
    console.print(f"[{minutes:3d}:{seconds:02d}] {line}", markup=False, highlight=False)


# Set by the commands that boot guests themselves (one label per boot, the guest's own store).
_GUEST_OWNS = ("--store", "--resume", "--label", "--no-wait", "--commit")


def _checked_run_args(args: tuple[str, ...]) -> list[str]:
    """`mosbench run`'s selections and options for a guest, checked here, before any guest boots, as
    `run` checks them (start.check: what this machine must hold, core counts included, is the guest's)."""
    from mosbench.run import start

    for a in args:
        if a.split("=")[0] in _GUEST_OWNS:
            raise UserError(f"{a.split('=')[0]} is set by mosbench for each guest's run; leave it out")
    with run.make_context("run", list(args)) as ctx:
        options = ctx.params
    if not options["selections"]:
        raise UserError("name what to measure in the guest, e.g. micro/getppid1 --cores 1,2")
    start.check(_request(options))
    return list(args)


def _guest_shape(shape: str | None):
    """A/B and bisection guests: as many vCPUs as this machine has CPUs unless told (one socket), so
    under KVM every vCPU has a host CPU of its own."""
    from mosbench.guest import host as guest_vm

    return guest_vm.parse_shape(shape or f"1x{min(len(os.sched_getaffinity(0)), guest_vm.MAX_VCPUS)}x1")


_KERNEL_COMMAND_OPTIONS = [
    click.option("--shape", default=None, help="Guest topology SOCKETSxCORESxTHREADS (default 1xNx1, N this "
                                               "machine's CPUs)."),
    click.option("--rounds", "first_rounds", type=click.IntRange(2, 100), default=4, show_default=True,
                 help="Boots before the first decision, alternating A B B A."),
    click.option("--max-rounds", type=click.IntRange(2, 200), default=12, show_default=True,
                 help="The budget: boots in all, while points are undecided."),
    click.option("--precision", type=click.FloatRange(0.1, 50), default=2.0, show_default=True, metavar="PERCENT",
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

    missing = guest_vm.missing_tools()
    if missing:
        raise UserError("cannot boot a guest: missing " + "; ".join(missing))
    return ab_rounds.Booter(db, shape, 2, run_args, 60 * boot_timeout_min, _show_guest_line)


def _say(line: str) -> None:
    err_console.print(f"mosbench: {line}", markup=False, highlight=False, soft_wrap=True)


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
    are named (docs/ANALYSIS.md)."""
    from mosbench.guest import ab as ab_rounds
    from mosbench.guest import kernels

    if len(kernel_specs) != 2:
        raise UserError("ab compares two kernels: --kernel A --kernel B")
    if first_rounds > max_rounds:
        raise UserError(f"--rounds {first_rounds} is more than --max-rounds {max_rounds}")
    checked = _checked_run_args(run_args)
    a, b = (kernels.resolve(k) for k in kernel_specs)
    want = _guest_shape(shape)
    db = store.Store(store_url)
    booter = _booter(db, want, checked, boot_timeout_min)
    with _measuring(no_wait):
        _say(f"A: {a.describe()}; B: {b.describe()}; guest {want.describe()}, "
             f"{first_rounds} to {max_rounds} boots of about {booter.timeout_s / 60:.0f} min at most each")
        outcome = ab_rounds.run(booter, a, b, first_rounds, max_rounds, precision / 100, _say)
    runs = [db.run(r) for r in outcome.merged]
    out = _table_console()
    if outcome.config_differences:
        shown = outcome.config_differences[:12]
        out.print(f"config: {len(outcome.config_differences)} options differ, first "
                  + "; ".join(f"{k} {x} → {y}" for k, x, y in shown), markup=False, soft_wrap=True)
    found, series = _comparison(db, runs)
    _print_comparison(out, found, series)
    _print_decisions(out, outcome.decisions, outcome.rounds, max_rounds)
    _print_explained(out, _ab_explained(db, runs, found, outcome))
    out.print(f"A and B are kept as runs {outcome.merged[0]} and {outcome.merged[1]} (each boot's run too): "
              f"`mosbench compare {outcome.merged[0]} {outcome.merged[1]}`, `mosbench report {outcome.merged[1]}`",
              markup=False, soft_wrap=True)


def _print_decisions(out: Console, decisions, rounds: int, max_rounds: int) -> None:
    from mosbench.analysis.decide import State

    counts = {s: sum(d.state == s for d in decisions) for s in State}
    how = ("every point decided" if not counts[State.UNSURE] else
           f"the budget ended ({max_rounds} boots) with {counts[State.UNSURE]} point(s) undecided")
    out.print(f"after {rounds} boots, {how}: {counts[State.DIFFER]} differ, {counts[State.SAME]} the same, "
              f"{counts[State.UNSURE]} undecided", markup=False)
    for d in decisions:
        out.print(f"  {d.state.upper():7} {d.name}: B/A {d.text()}", markup=False, highlight=False)


def _ab_explained(db: store.Store, runs: list[dict], found, outcome) -> list:
    """Where A and B differ, why: each point's profiles on the two sides (every boot's trials replicates,
    with `--profile` among the run options), or the `mosbench ab … --profile` that would record them."""
    from mosbench.analysis import explain
    from mosbench.analysis.decide import State

    differ = {d.point for d in outcome.decisions if d.state == State.DIFFER}
    if not differ:
        return []
    rows = [db.points(r["id"], with_profiles=True, with_samples=False) for r in runs]
    labels = (found.labels[0], found.labels[1])
    return [explain.Explained(c, explain.point(c.point, (runs[0], runs[1]), (rows[0], rows[1]), labels))
            for c in found.changes[0] if c.point in differ]


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
    from mosbench.report import rows

    checked = _checked_run_args(run_args)
    good_id, bad_id = bisecting.resolve_revisions(tree, good, bad)
    bisecting.check_build_tools()
    want = _guest_shape(shape)
    db = store.Store(store_url)
    booter = _booter(db, want, checked, boot_timeout_min)
    builder = bisecting.Builder(tree, work or bisecting.default_work(tree), jobs or len(os.sched_getaffinity(0)))
    with _measuring(no_wait):
        _say(f"bisecting {good_id[:12]}..{bad_id[:12]} of {tree} in {builder.work}; guest {want.describe()}")
        outcome = bisecting.run(booter, builder, good_id, bad_id, first_rounds, max_rounds, step_rounds,
                                precision / 100, _say)
    out = _table_console()
    _print_decisions(out, outcome.ends.decisions, outcome.ends.rounds, max_rounds)
    out.print(table.render(rows.bisect_table(outcome.steps)), crop=False)
    builds = builder.build_seconds
    out.print(f"{len(builds)} builds ({', '.join(f'{x / 60:.1f}' for x in builds)} min), {booter.boots} boots "
              f"(median {sorted(booter.boot_seconds)[len(booter.boot_seconds) // 2] / 60:.1f} min each)", markup=False)
    if outcome.first_bad:
        out.print(f"first bad commit: {outcome.first_bad} {builder.subject(outcome.first_bad)}", markup=False)
    else:
        out.print(f"no single first bad commit: {outcome.message}", markup=False)
        sys.exit(EXIT_POINTS_FAILED)


@cli.command()
@click.argument("selections", nargs=-1)
@click.option("--host", default=None, help="The machine (its hostname) where the store holds several "
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
def history(ctx, selections, host, order, tree, fail_on, as_json, then_bisect, wide, store_url) -> None:
    """A machine's runs as one series per point (SELECTIONS: workload or workload/test; all by default),
    in time, kernel-version or commit order: per test, per-core throughput at one core and the most cores
    over the runs, and the changes found in them (PELT candidates kept where Welch's test, corrected over
    all candidates, says the two sides differ), each with its kind, what moved with it and what differed."""
    import json

    from mosbench.analysis import history as hist
    from mosbench.report import history as history_report
    from mosbench.run.plan import stored_selections

    if fail_on is not None and not 0 <= fail_on < 100:
        raise UserError(f"--fail-on-change takes a percentage from 0 up to 100, not {fail_on:g}")
    if then_bisect and tree is None:
        raise UserError("--bisect needs the kernel tree the runs' commits come from: --tree DIR")
    # Names are checked as `run` checks them: an unknown one is said, not searched for.
    chosen = stored_selections(list(selections))
    db = store.Store(store_url, create=False)
    found = hist.build(db.list_runs(), db.history_points, chosen, host, hist.Order(order), tree)
    worse = found.worse_than(fail_on) if fail_on is not None else []
    if as_json:
        # Through stdout: a reader that leaves (| head) never turns the gate's answer into click's exit 1.
        click.echo(json.dumps(history_report.as_json(found, fail_on), indent=1), file=stdout)
        sys.exit(1 if worse else 0)
    out = _table_console()
    for model in (history_report.series_table(found), history_report.shifts_table(found)):
        out.print(table.render(model, wide), crop=False)
    for line in history_report.summary_lines(found):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    if fail_on is not None:
        for shift in worse:
            change = min(shift.changes, key=lambda c: c.difference.ratio)
            out.print(f"CHANGE at the newest run {found.runs[-1].name}: {shift.key.name} at {change.cores} cores "
                      f"{change.difference.ratio:.3f}× the level before, p adj. "
                      f"{change.p_adjusted:.2g}", markup=False, highlight=False, soft_wrap=True)
        if not worse:
            out.print(f"the newest run begins no significant change worse than {fail_on:g}%", markup=False)
    if then_bisect:
        target = hist.bisect_target(found)
        if target is None:
            raise UserError("no change has kernel commits recorded on both sides (mosbench run --commit REV "
                            "records one; vm, ab and bisect record the tree's)")
        _say(f"bisecting {target.good[:12]}..{target.bad[:12]} for {' '.join(target.selections)} "
             f"at {target.cores} cores")
        ctx.invoke(bisect, tree=tree, good=target.good, bad=target.bad,
                   run_args=(*target.selections, "--cores", target.cores), store_url=store_url)
    if worse:
        sys.exit(1)


def main() -> None:
    try:
        _main()
    finally:
        if stdout.broken or stderr.broken:
            # The reader left: let the interpreter's last flush go nowhere rather than print an error.
            devnull = os.open(os.devnull, os.O_WRONLY)
            for s in (sys.stdout, sys.stderr):
                os.dup2(devnull, s.fileno())


def _main() -> None:
    try:
        cli.main(standalone_mode=False)
    except UserError as e:
        err_console.print(f"mosbench: {e}", style="red", markup=False, highlight=False)
        sys.exit(2)
    except (click.exceptions.Abort, KeyboardInterrupt) as e:
        # Click turns Ctrl-C (and SIGTERM or SIGHUP, which a sweep raises as one) into an Abort whose cause
        # is the interrupt.
        stopped = _interrupted_run(e if isinstance(e, KeyboardInterrupt) else e.__cause__)
        if stopped is None:
            err_console.print("mosbench: interrupted", markup=False, highlight=False)
        else:
            err_console.print(f"mosbench: interrupted; run #{stopped.run_id}'s finished points are kept "
                              f"(`{_resume_command(stopped.run_id, stopped.store_url)}` measures the rest)",
                              markup=False, highlight=False)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as e:
        # One line, as for every error a user can cause; `-h` has the usage.
        err_console.print(f"mosbench: {e.format_message()}", style="red", markup=False, highlight=False)
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP) during a run's sweep, with the run it stopped, for the --resume hint."""

    def __init__(self, run_id: int, store_url: str | None):
        super().__init__(run_id)
        self.run_id = run_id
        self.store_url = store_url


def _interrupted_run(interrupt: BaseException | None) -> RunInterrupted | None:
    """The run an interrupt stopped; None where it stopped no sweep (a wait for the machine, a report)."""
    return interrupt if isinstance(interrupt, RunInterrupted) else None


if __name__ == "__main__":
    main()
