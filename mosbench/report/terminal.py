"""The terminal: the command line's two outputs and the blocks more than one command prints.

Output goes through `stdout` and `stderr`, which survive a reader that leaves; tables through
`table_console()`, which lays them out in the terminal's width (80 columns in a pipe). Every string these
consoles print goes through printable() first, whether the output is a terminal, a file or a pipe: a run's
label, hostname or command, a test's name or a failure's reason come from the store, which any machine of a
lab may write, and their escapes are shown, never obeyed."""

from __future__ import annotations

import io
import os
import shlex
import statistics
import sys
import textwrap
from collections.abc import Sequence

from rich.console import Console

from mosbench.errors import UserError
from mosbench.printable import printable
from mosbench.report import table


class OutputFailed(UserError):
    """Standard output could not be written (`mosbench export 1 > /dev/full`): said in one line on stderr."""


class PipeSafe(io.TextIOBase):
    """An output whose reader may leave (`mosbench run … | head`): later writes are dropped, so a closed
    pipe never ends a run or loses a point. Any other failure (a full disk behind `> file`) drops later
    writes too and, on standard output (`says`), is an OutputFailed: the command says so and exits 2
    rather than end with a traceback or seem to have written what it did not."""

    def __init__(self, stream, says: str | None = None):
        self.stream = stream
        self.broken = False
        self.says = says  # what it is, in the line that says it failed; None: it fails quietly (stderr)

    def _failed(self, e: OSError) -> None:
        self.broken = True
        if self.says is not None:
            raise OutputFailed(f"cannot write to {self.says}: {e.strerror or e}") from None

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self.broken = True
            except OSError as e:
                self._failed(e)
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self.broken = True
            except OSError as e:
                self._failed(e)

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()


stdout = PipeSafe(sys.stdout, "standard output")
stderr = PipeSafe(sys.stderr)


class EscapingConsole(Console):
    """A console that prints every string as printable() writes it, its line breaks kept: text from the
    store reaches the reader escaped whoever formatted it into a line. Tables escape their cells themselves
    (report/table.py), before they are measured."""

    def render_str(self, text: str, **kwargs):
        return super().render_str(printable(text, keep="\n"), **kwargs)


# soft_wrap: a line in a log or a pipe is one line, however long, never folded at 80 columns. No markup and no
# emoji codes: what a user typed (a label, a path, ":abc:") is printed as typed.
console = EscapingConsole(file=stdout, soft_wrap=True, emoji=False, markup=False)
err_console = EscapingConsole(file=stderr, soft_wrap=True, emoji=False, markup=False)


def table_console() -> Console:
    """Tables fit the terminal's width, or in a pipe COLUMNS where set and 80 where not; a table lays itself
    out in it (report/table.py), so print it with crop=False: one that cannot fit is drawn wider, not cut."""
    if stdout.isatty():
        return console
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() and int(columns) > 0 else 80
    return EscapingConsole(file=stdout, width=width, emoji=False, markup=False)


def print_indented(out: Console, line: str) -> None:
    """A line under a table, indented and folded at the console's width at its spaces (a number whole)."""
    out.print(textwrap.fill(line, width=out.width, initial_indent="  ", subsequent_indent="  ",
                            break_long_words=False, break_on_hyphens=False),
              markup=False, highlight=False, soft_wrap=True)


def say(line: str) -> None:
    """A line of progress, on stderr."""
    err_console.print(f"mosbench: {line}", markup=False, highlight=False, soft_wrap=True)


def print_lines(out: Console, lines: Sequence[str]) -> None:
    """A line each, however long: for grep."""
    for line in lines:
        out.print(line, markup=False, highlight=False, soft_wrap=True)


def print_comparison(out: Console, found, series, wide: bool = False) -> None:
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


def print_explained(out: Console, explained: list, wide: bool = False, lead: str = "Why") -> None:
    """Each explained change's table and share; then those a side of which was not profiled, with the
    commands that would profile them (folded as a shell folds them, so a copy still runs)."""
    from mosbench.report import whatchanged

    for block in whatchanged.blocks(explained):
        out.print(textwrap.fill(f"{lead}: {block.heading}", width=out.width, break_on_hyphens=False), markup=False,
                  highlight=False, soft_wrap=True)
        out.print(table.render(block.table, wide), crop=False)
        for line in block.lines:
            print_indented(out, line)
    if (left := whatchanged.unexplained(explained)) is not None:
        print_indented(out, left.line)
        for command in left.commands:
            out.print(whatchanged.fold_command(command, out.width), markup=False, highlight=False, soft_wrap=True)


def print_decisions(out: Console, decisions, rounds: int, max_rounds: int) -> None:
    """ab's and bisect's ends: how many boots, and each point's decision."""
    from mosbench.analysis.decide import State

    counts = {s: sum(d.state == s for d in decisions) for s in State}
    how = ("every point decided" if not counts[State.UNSURE] else
           f"the budget ended ({max_rounds} boots) with {counts[State.UNSURE]} point(s) undecided")
    out.print(f"after {rounds} boots, {how}: {counts[State.DIFFER]} differ, {counts[State.SAME]} the same, "
              f"{counts[State.UNSURE]} undecided", markup=False)
    for d in decisions:
        out.print(f"  {d.state.upper():7} {d.name}: B/A {d.text()}", markup=False, highlight=False)


def bisection_cost(build_seconds: Sequence[float], boot_seconds: Sequence[float]) -> str:
    """What a bisection took: each build, and the boots with their median (the upper one of an even count)."""
    median = statistics.median_high(boot_seconds) if boot_seconds else 0.0
    return (f"{len(build_seconds)} builds ({', '.join(f'{x / 60:.1f}' for x in build_seconds)} min), "
            f"{len(boot_seconds)} boots (median {median / 60:.1f} min each)")


def show_guest_line(line: str, elapsed: float) -> None:
    """A guest's output line, with the minutes since it started."""
    if "warning: host doesn't support requested feature" in line:
        return  # QEMU says it of every feature of the CPU model that emulation lacks, on every boot
    minutes, seconds = divmod(int(elapsed), 60)
    console.print(f"[{minutes:3d}:{seconds:02d}] {line}", markup=False, highlight=False)


# A run's status where `--resume` finishes it, and what stopped it.
UNFINISHED = {"killed": "was killed before it finished (its harness died)",
              "incomplete": "was interrupted before it finished"}


def print_run(out: Console, r: dict, pts: list[dict], history, resume: str, wide: bool = False,
              history_explained: tuple = ()) -> None:
    """`mosbench show`: the run's machine, how to finish it where it was stopped (`resume`, the command),
    the interference that marks its points, then its sections (`history`: report/history.of_run's, its
    changes explained by `history_explained`), the overview last."""
    from rich.text import Text

    from mosbench.analysis import profiles, verdict
    from mosbench.analysis.cells import build_series
    from mosbench.report import rows, sections

    series = build_series(pts)
    # The console keeps line breaks (a title may have two); a stored hostname's are escaped here.
    env = r["environment"]
    out.print(printable(f"run #{r['id']} ({r['status']}) on {env['hostname']}, kernel {env['kernel']}: "
                        f"{env.get('topology_summary', '')}"), soft_wrap=False)
    if why := UNFINISHED.get(r["status"]):
        out.print(f"run #{r['id']} {why} with {len(pts)} point{'s' if len(pts) != 1 else ''} stored: "
                  f"`{resume}` measures the rest", style="yellow", markup=False, highlight=False, soft_wrap=True)
    if banner := rows.interference_banner(series):
        out.print(f"⚠ {banner}", style="red", markup=False, highlight=False, soft_wrap=False)
    found_profiles = profiles.by_series(pts)
    run = sections.RunSeries(f"#{r['id']}", series, found_profiles, r["environment"].get("kernel", ""))
    view = sections.View(series, found_profiles, (run,), verdict.profile_advice(r["environment"]), history,
                         history_explained=history_explained)
    for section in sections.for_terminal(sections.build(view)):
        if section.headed:
            out.print(Text(printable(section.title), style="bold"), soft_wrap=False)
        for item in section.items():
            if isinstance(item, sections.Line):
                out.print(item.text, style=None if item.holds else "red", markup=False, highlight=False,
                          soft_wrap=False)
            else:
                out.print(table.render(item, wide), crop=False)


def print_runs(runs: list[dict]) -> None:
    """`mosbench runs`: a line a run, in aligned columns with the command last and whole (`| less -S` or
    `| grep` reads it, and it can be run again); a terminal cuts it at its width rather than folding one
    run over many lines. Every cell is printable(): a label's escapes (or line breaks) are shown, not obeyed."""
    header = ("id", "label", "status", "started", "host", "kernel", "points", "failed", "command")
    rows = [tuple(printable(str(cell)) for cell in (
        r["id"], r["label"] or "", r["status"], r["started_at"].strftime("%Y-%m-%d %H:%M"),
        r["environment"].get("hostname", ""), r["environment"].get("kernel", ""), r["points"], r["failed"],
        r["command"] or "")) for r in runs]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    for row in (header, *rows):
        line = "  ".join([*(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)), row[-1]])
        if stdout.isatty() and len(line) > console.width:
            line = line[:console.width - 1] + "…"
        stdout.write(line + "\n")


def print_workloads(chosen: list) -> None:
    """`mosbench list`: each workload with its paper, variants, parameters and tests."""
    from rich.table import Table
    from rich.text import Text

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


def print_checks(rows: list[tuple[str, str, bool]]) -> None:
    """`mosbench doctor`: a line a check, what it found, marked where it falls short."""
    from rich.table import Table
    from rich.text import Text

    t = Table(show_header=False)
    for what, finding, ok in rows:
        # What the machine says is text, not markup: sysfs writes "[madvise]" for the chosen THP mode.
        t.add_row(Text("✓ " if ok else "! ", style="green" if ok else "yellow") + Text(printable(what)),
                  Text(printable(finding)))
    console.print(t)


def print_guest_steps(steps: list[dict], imported: list[int], url: str) -> None:
    """What a guest did: each step of its outcome, and where its runs were kept."""
    for s in steps:
        console.print(f"{'ok    ' if s['returncode'] == 0 else 'FAILED'} {s['name']} ({s['seconds']:.0f} s)",
                      markup=False)
    if imported:
        console.print(f"kept the guest's runs as {', '.join(map(str, imported))} in {url}", markup=False)


def print_ab(out: Console, outcome, found, series, explained: list, undecided: list, max_rounds: int) -> None:
    """`mosbench ab`'s outcome (guest/ab.Outcome): the kernels' configurations where they differ, A and B
    compared (`found`, `series`: analysis/runs_compared's), each point's decision, why those that differ
    do, what moved in the profiles of those left undecided, and where both are kept."""
    if outcome.config_differences:
        shown = outcome.config_differences[:12]
        out.print(f"config: {len(outcome.config_differences)} options differ, first "
                  + "; ".join(f"{k} {x} → {y}" for k, x, y in shown), markup=False, soft_wrap=True)
    print_comparison(out, found, series)
    print_decisions(out, outcome.decisions, outcome.rounds, max_rounds)
    print_explained(out, explained)
    if undecided:
        print_indented(out, "Undecided on throughput, but profiled on both sides: what moved in CPU time per unit "
                            "of work all the same (a function is named only where its change is beyond its "
                            "trials' spread; more boots would decide the throughput)")
        print_explained(out, undecided, lead="What moved")
    out.print(f"A and B are kept as runs {outcome.merged[0]} and {outcome.merged[1]} (each boot's run too): "
              f"`mosbench compare {outcome.merged[0]} {outcome.merged[1]}`, `mosbench report {outcome.merged[1]}`",
              markup=False, soft_wrap=True)


def say_waiting(holder) -> None:
    """While another command measures (machine/lock.Holder, or None where it cannot be read)."""
    who = holder.describe() if holder else "another mosbench"
    err_console.print(f"mosbench: waiting for this machine: it is measuring {who} (--no-wait refuses instead)",
                      style="yellow", markup=False, highlight=False)


def drop_if_reader_left() -> None:
    """Where the reader left (or standard output failed, already said), the interpreter's last flush goes
    nowhere rather than print an error."""
    if stdout.broken or stderr.broken:
        devnull = os.open(os.devnull, os.O_WRONLY)
        for s in (sys.stdout, sys.stderr):
            os.dup2(devnull, s.fileno())


def print_bisection(out: Console, outcome, max_rounds: int, build_seconds: Sequence[float],
                    boot_seconds: Sequence[float]) -> None:
    """`mosbench bisect`'s outcome (guest/bisect.Outcome): the ends' decisions, each step, what it took."""
    from mosbench.report import rows

    print_decisions(out, outcome.ends.decisions, outcome.ends.rounds, max_rounds)
    out.print(table.render(rows.bisect_table(outcome.steps)), crop=False)
    out.print(bisection_cost(build_seconds, boot_seconds), markup=False)


def echo_json(found: dict) -> None:
    """JSON on stdout, for CI systems: through `stdout`, so a reader that leaves (| head) never turns a
    gate's answer into click's exit 1."""
    import json

    import click

    click.echo(json.dumps(found, indent=1), file=stdout)


def print_run_start(the_plan, run) -> None:
    """What a run (run/start.Opened) is about to measure, and about how long it takes."""
    most = (f", up to {run.most_minutes:.1f} min if every point takes {the_plan.trials_max} trials"
            if run.most_minutes is not None else "")
    err_console.print(f"run #{run.run_id}: {len(run.left)} points ({the_plan.trials_text()}), cores {the_plan.cores}, "
                      f"about {run.minutes:.1f} min{most}")


def print_guest_start(guest, what: str, limit_s: float) -> None:
    """The guest about to boot (guest/host.Guest), what it will do there and when it is stopped."""
    console.print(f"guest: {guest.shape.describe()}, cgroup v{guest.cgroup_version}, "
                  f"{'KVM' if guest.kvm else 'emulated (TCG)'}, kernel {guest.kernel.name}; {what}, "
                  f"stopped after {limit_s / 60:.0f} min", markup=False)


def resume_command(run_id: int, store_url: str | None) -> str:
    """The command that measures what a stopped run has left, in the store it was given as."""
    return shlex.join(["mosbench", "run", "--resume", str(run_id), *(["--store", store_url] if store_url else [])])
