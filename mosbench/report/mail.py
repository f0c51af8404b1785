"""`mosbench mail`: what changed between two sides, as the kernel test robot (Intel's 0-day/LKP) writes it to
the kernel's lists: a typed record (`Mail`), laid out as plain text in the robot's sections and order
(`text`), or as one RFC 5322 message with a single text/plain part (`message`, `as_mbox`). docs/MAIL.md has
the form and where mosbench's meaning differs from the robot's. The data is analysis/mailrows'.

Text from the store (labels, hostnames, commands, environment values, a tree's commit subjects) goes through
printable.one_line: no control character or line break reaches the mail or its headers.
"""

from __future__ import annotations

import email.generator
import email.policy
import email.utils
import io
import math
import re
import shlex
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import mosbench
from mosbench.analysis import mailrows
from mosbench.analysis.cells import PointKey
from mosbench.analysis.mailrows import Boundary, Commit, Findings, Naming, ProfileRows, Reproduction, Row, Side
from mosbench.analysis.significance import ALPHA
from mosbench.machine.topology import Topology
from mosbench.printable import one_line
from mosbench.report.rows import p_value
from mosbench.workloads.base import test_name

WIDTH = 72  # prose and commands: the robot's mails are read in 80 columns, quoted
INDENT = " " * 8  # "To reproduce"'s commands, as the robot indents them
ARROW = "-" * (WIDTH - 1) + ">"  # "Details are as below:"'s (the robot's is 99 wide)
RULE = "=" * WIDTH  # above the parameter line (the robot's is 89 wide)
# The table's header, as lkp-tests' compare prints it: base in 10 columns and its ±N% in 6, the change in
# 11 and a space, new in 10 and its ±N% in 6, two spaces, the metric.
HEADER = ("         %stddev     %change         %stddev", "             \\          |                \\")
STDDEV_SHOWN = 2  # %stddev is printed above this (the robot's rule)


@dataclass(frozen=True)
class Mail:
    """One report, in the robot's order: the subject; the head's line; the commit block; testcase, test
    machine and parameters; how the change was found; the tag; the commands to reproduce; the parameter
    line; the two sides; the environment's differences; the table; notes."""

    subject: str
    headline: str
    commit: tuple[str, ...]
    testcase: str
    machine: str
    parameters: tuple[tuple[str, str], ...]
    found_by: tuple[str, ...]
    reported_by: str | None  # the tag to add to a fix; None where nothing regressed (the robot tags regressions)
    reproduce: Reproduction
    parameter_line: tuple[str, str]
    sides: tuple[str, str, str]  # the block's name (commit, kernel, run), base's line, new's
    environment: tuple[tuple[str, str, str], ...]
    columns: tuple[str, str]  # base's and new's names over the table
    findings: Findings
    notes: tuple[str, ...]


# Numbers as lkp-tests' compare prints them


def number(x: float) -> str:
    """A mean: below 1000 with two decimals, to 1e8 whole, above with four significant figures in
    e-notation (lkp-tests' rule); below 0.1 with two significant figures, where two decimals would read 0.00
    (mosbench's CPU µs per op: getppid's is 0.04)."""
    if not math.isfinite(x):
        return str(x)
    size = abs(x)
    if size > 1e8:
        return f"{x:.4g}"
    if size >= 1000:
        return f"{x:.0f}"
    if size >= 0.1 or x == 0:
        return f"{x:.2f}"
    return f"{x:.2g}"


def stddev(share: float | None) -> str:
    """" ±NN%", the relative standard deviation cut to a whole percent, where above STDDEV_SHOWN."""
    return f" ±{int(share):3d}%" if share is not None and share > STDDEV_SHOWN else " " * 6


def change(r: Row) -> str:
    c = r.change
    text = f"{c:+10.1f}" if not math.isfinite(c) or abs(c) < 100_000 else f"{c:+10.2g}"
    return text + (" " if r.absolute else "%")


def row_text(r: Row) -> str:
    """`base [± N%] change new [± N%]  metric`, in lkp-tests' columns."""
    return f"{number(r.base):>10}{stddev(r.base_spread)}{change(r)} {number(r.new):>10}{stddev(r.new_spread)}  " \
           f"{r.metric}"


# Prose


def wrap(text: str, indent: str = "", later: str | None = None) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent if later is None else later,
                         break_long_words=False, break_on_hyphens=False) or [""]


def command_lines(argv: Sequence[str]) -> list[str]:
    """A command as a shell takes it, folded at WIDTH with ` \\` (a word longer than a line is a line)."""
    quoted = [shlex.quote(one_line(w, 400)) for w in argv]
    # An option and its value stay on one line ("--cores 1,2", not "--cores \\ 1,2").
    words = []
    for w in quoted:
        if words and words[-1].startswith("-") and " " not in words[-1] and not w.startswith("-"):
            words[-1] += " " + w
        else:
            words.append(w)
    lines = [INDENT + words[0]]
    for w in words[1:]:
        if len(lines[-1]) + 1 + len(w) + 2 <= WIDTH:
            lines[-1] += " " + w
        else:
            lines[-1] += " \\"
            lines.append(INDENT + "    " + w)
    return lines


# Composing


def _side_name(side: Side, how: Naming, commit: Commit | None, width: int = 12) -> str:
    if how is Naming.COMMIT and commit is not None:
        return commit.id[:width]
    if how is Naming.KERNEL:
        return one_line(side.info.kernel, 60)
    return side.ids


def _label(side: Side) -> str:
    label = side.run.get("label")
    return f' ("{one_line(label, 80)}")' if label and len(side.runs) == 1 else ""


def _area(subject: str | None) -> str | None:
    """A commit subject's area, as the robot's subject brackets it: "x86/mm/tlb" of "x86/mm/tlb: Open-code …"."""
    found = re.match(r"([^\s:]{1,40}): ", subject or "")
    return found.group(1) if found else None


def _commit_block(a: Side, b: Side, how: Naming, commits: tuple[Commit | None, Commit | None],
                  tree: Path | None) -> tuple[str, ...]:
    lines: list[str] = []
    mine = commits[1]
    if mine is not None:
        subject = f' ("{one_line(mine.subject, 160)}")' if mine.subject else ""
        lines += wrap(f"commit: {one_line(mine.id, 60)}{subject}", later="  ")
        if mine.missing_from is not None:
            lines += wrap(f"({one_line(str(mine.missing_from), 200)} does not hold this commit: its subject is "
                          "left out)")
        elif tree is not None:
            lines += wrap(f"tree: {one_line(str(tree), 200)}")
    if a.info.kernel != b.info.kernel and (mine is None or how is not Naming.COMMIT):
        lines += wrap(f"kernel {one_line(a.info.kernel, 60)} → {one_line(b.info.kernel, 60)}")
    if how is Naming.RUN:
        lines += wrap(f"runs {a.ids}{_label(a)} → {b.ids}{_label(b)}", later="  ")
    return tuple(lines)


def _sides(a: Side, b: Side, how: Naming, commits: tuple[Commit | None, Commit | None]) -> tuple[str, str, str]:
    if how is Naming.COMMIT:
        named = [f"{c.id[:12]}" + (f' ("{one_line(c.subject, 160)}")' if c.subject else "")
                 for c in commits if c is not None]
        return ("commit", named[0], named[1])
    if how is Naming.KERNEL:
        return ("kernel", one_line(a.info.kernel, 60), one_line(b.info.kernel, 60))
    return ("run", f"{a.ids}{_label(a)}", f"{b.ids}{_label(b)}")


def _columns(a: Side, b: Side, how: Naming, commits: tuple[Commit | None, Commit | None]) -> tuple[str, str]:
    """The two sides' names over the table, cut to its columns (the robot's: 16 and 27 hex digits)."""
    return (_side_name(a, how, commits[0], 16)[:16], _side_name(b, how, commits[1], 27)[:27])


def machine_line(env: dict[str, Any]) -> str:
    """The test machine as the robot writes it: "16 threads 2 sockets MODEL with 64G memory", and where it was
    a guest, which."""
    try:
        topo = Topology.from_json(env["topology"])
        shape = f"{len(topo.cpus)} threads {topo.sockets} sockets"
    except (KeyError, TypeError, ValueError):
        shape = one_line(str(env.get("topology_summary") or "an unknown topology"), 120)
    model = f" {one_line(str(env['cpu_model']), 120)}" if env.get("cpu_model") else ""
    memory = env.get("memory_bytes")
    line = f"{shape}{model}" + (f" with {round(memory / 2**30)}G memory" if isinstance(memory, int | float) else "")
    vm = env.get("virtual_machine")
    if isinstance(vm, dict):
        line += f" (a guest: {one_line(str(vm.get('vcpus', '?')), 20)} vCPUs, " \
                f"{one_line(str(vm.get('accelerator', '?')), 20)})"
    return line


def _plan_value(plan: dict[str, Any], key: str, unit: str = "") -> str:
    value = plan.get(key)
    if key == "trials" and plan.get("trials_max"):
        value = f"auto:{plan['trials_max']}"
    if value is None:
        return "-"
    return one_line(f"{value:g}" if isinstance(value, float) else str(value), 40) + unit


def _points(findings: Findings) -> list[PointKey]:
    return list(dict.fromkeys(r.point for r in (*findings.table.significant, *findings.table.rest) if r.point))


def _parameters(b: Side, head: PointKey | None, findings: Findings) -> tuple[tuple[str, str], ...]:
    plan = b.run.get("plan") or {}
    keys = [head] if head else _points(findings)

    def joined(values: Iterable[object]) -> str:
        return one_line(",".join(dict.fromkeys(str(v) for v in values)), 120) or "-"

    unit = next((r.get("unit") for r in b.rows if head is None or PointKey.of(r) == head), None)
    env = b.run["environment"] or {}
    found = [("test", joined(k.test or k.workload for k in keys)), ("variant", joined(k.variant for k in keys)),
             ("cores", joined(k.cores for k in keys)), ("unit", one_line(str(unit or "op"), 40)),
             ("trials", _plan_value(plan, "trials")), ("duration", _plan_value(plan, "duration", "s")),
             ("warmup", _plan_value(plan, "warmup", "s")), ("placement", _plan_value(plan, "placement")),
             ("isolation", _plan_value(plan, "isolation"))]
    found += [(key, one_line(str(env[key]), 60)) for key in ("governor", "thp") if env.get(key)]
    return tuple(found)


def _parameter_line(b: Side, head: PointKey | None, findings: Findings) -> tuple[str, str]:
    plan = b.run.get("plan") or {}
    keys = [head] if head else _points(findings)
    parts = [",".join(dict.fromkeys(str(getattr(k, field) or "-") for k in keys)) or "-"
             for field in ("workload", "test", "variant", "cores")]
    parts += [_plan_value(plan, key) for key in ("trials", "duration", "warmup", "placement", "isolation")]
    return ("workload/test/variant/cores/trials/duration/warmup/placement/isolation",
            one_line("/".join(parts), 200))


def _found_by(a: Side, b: Side, boundary: Boundary | None, history_of: str | None) -> tuple[str, ...]:
    said = []
    if boundary is not None:
        moved = "; ".join(
            f"{test_name(s.key.workload, s.key.test)} {s.key.variant} at "
            f"{','.join(str(c.cores) for c in s.changes)} cores, "
            f"{s.ratio:.3f}×, p adj. {p_value(min(c.p_adjusted for c in s.changes))}" for s in boundary.shifts)
        said.append(f"mosbench history of {one_line(history_of or '?', 120)} confirmed this change between runs "
                    f"#{boundary.before[-1].id} and #{boundary.after[0].id}: {one_line(moved, 600)}. The base side "
                    f"pools the old level's runs nearest it ({a.ids}), the new side the new level's ({b.ids}).")
    env_a, env_b = (s.run["environment"] or {} for s in (a, b))
    if isinstance(env_a.get("ab"), dict) and isinstance(env_b.get("ab"), dict):
        said.append(f"Both sides are `mosbench ab`'s: {_rounds(env_a['ab'])} of kernel A against "
                    f"{_rounds(env_b['ab'])} of kernel B, in A B B A order.")
    if isinstance(env_b.get("bisect"), dict):
        said.append("The new side is a step of `mosbench bisect` (its kernel built from the commit above).")
    return tuple(said)


def _rounds(ab: dict[str, Any]) -> str:
    n = ab.get("rounds")
    return f"{n} boots" if isinstance(n, int) else "the boots"


def compose(a: Side, b: Side, findings: Findings, reported_by: str, tree: Path | None = None,
            boundary: Boundary | None = None, history_of: str | None = None) -> Mail:
    how = mailrows.naming(a.info, b.info)
    commits = (mailrows.commit_of(a.info, tree), mailrows.commit_of(b.info, tree))
    names = (_side_name(a, how, commits[0]), _side_name(b, how, commits[1]))
    head = findings.table.head
    area = _area(commits[1].subject) if commits[1] is not None and how is Naming.COMMIT else None
    prefix = f"[{one_line(area, 40)}] " if area else ""
    compared = findings.table.points
    if head is not None:
        kind = "regression" if head.regression else "improvement"
        subject = f"{prefix}{names[1]}: {head.metric} {head.change:+.1f}% {kind}"
        headline = f"mosbench noticed a {head.change:+.1f}% {kind} of {head.metric} on:"
    else:
        points = f"{compared} point{'s' if compared != 1 else ''}"
        subject = f"{prefix}{names[1]}: no significant change in {points}"
        headline = f"mosbench noticed no significant change in the {points} compared on:"
    head_point = head.point if head is not None else None
    workloads = dict.fromkeys(k.workload for k in ([head_point] if head_point else _points(findings)))
    return Mail(
        subject=one_line(subject, 240), headline=headline,
        commit=_commit_block(a, b, how, commits, tree),
        testcase=one_line(", ".join(workloads), 120) or "-",
        machine=machine_line(b.run["environment"] or {}),
        parameters=_parameters(b, head_point, findings),
        found_by=_found_by(a, b, boundary, history_of),
        reported_by=one_line(reported_by, 200) if head is not None and head.regression else None,
        reproduce=mailrows.reproduction(a, b, head_point),
        parameter_line=_parameter_line(b, head_point, findings),
        sides=_sides(a, b, how, commits),
        environment=tuple((one_line(k, 100), one_line(va, 300), one_line(vb, 300))
                          for k, va, vb in mailrows.environment(a, b)),
        columns=_columns(a, b, how, commits),
        findings=findings,
        notes=_notes(a, b),
    )


def _notes(a: Side, b: Side) -> tuple[str, ...]:
    return (
        f"Base and new are each side's mean over its trials that count (ok, not interfered): base {a.ids}, "
        f"new {b.ids}. %stddev is their relative sample standard deviation, shown above {STDDEV_SHOWN}%; "
        "%change is of the base, or the difference in points for a share (a name ending in %, and every "
        "perf-profile row).",
        f"A row is significant where Welch's t-test between the two sides' trials gives p < {ALPHA:g} (the test "
        "`mosbench compare` applies; it shows each change's 95% interval).",
        "per_core_ops: units of work per second per core (the unit above); throughput: per second in all; "
        "*_us_per_op: CPU µs per unit of work on the measured CPUs; interference%: the share of their time other "
        "programs took. perf-profile rows: cpu-clock samples, self (a function's own) and children (every "
        "sample it is on), as a share of every sample (idle included) and in CPU µs per op. mosbench's "
        "docs/MAIL.md says how to read this mail.",
    )


# Laying out


def _table(mail: Mail) -> list[str]:
    t = mail.findings.table
    lines = [f"{mail.columns[0]:>16} {mail.columns[1]:>27}", "-" * 16 + " " + "-" * 27, *HEADER]
    lines += [row_text(r) for r in t.significant]
    if t.rest:
        lines += ["", *wrap("These did not change significantly (Welch's p >= 0.05, or untested: one trial a "
                            "side):"), *(row_text(r) for r in t.rest)]
    if t.unmatched:
        lines += ["", *wrap("Not compared: " + "; ".join(t.unmatched) + ".")]
    for p in mail.findings.profiles:
        lines += ["", *_profile_intro(p), *(row_text(r) for r in p.rows)]
    if mail.findings.unprofiled:
        points = ", ".join(u.point.text() for u in mail.findings.unprofiled)
        lines += ["", *wrap(f"Not profiled on both sides: {points}. This records the profiles that would say "
                            "why:")]
        for command in mail.findings.profile_commands:
            lines += ["", *command_lines(shlex.split(command))]
    return lines


def _profile_intro(p: ProfileRows) -> list[str]:
    which = f"the {p.shown} of {p.named} that moved most" if p.shown < p.named else f"all {p.named}"
    unit = one_line(p.unit, 40)
    return wrap(f"Profiles of {p.point.text()}, {p.trials[0]} and {p.trials[1]} profiled trials: the functions "
                f"whose time per {unit} moved beyond their trials' spread ({which}), as a share of the samples "
                f"(cpu-clock) and in CPU µs per {unit} (us_per_op):")


def text(mail: Mail) -> str:
    """The mail's body, in the robot's sections and order."""
    out = ["Hello,", "", *wrap(mail.headline), "", "", *mail.commit, "",
           f"testcase: {mail.testcase}", *wrap(f"test machine: {mail.machine}", later="  "), "parameters:", ""]
    out += [f"\t{key}: {value}" for key, value in mail.parameters]
    out += ["", ""]
    for said in mail.found_by:
        out += [*wrap(said), ""]
    if mail.reported_by is not None:
        out += ["", "If you fix the issue, kindly add following tag", f"| Reported-by: {mail.reported_by}", ""]
    out += ["", "Details are as below:", ARROW, "", "", "To reproduce:", "", *wrap(mail.reproduce.how), ""]
    for argv in mail.reproduce.commands:
        out += [*command_lines(argv), ""]
    out += [RULE, f"{mail.parameter_line[0]}:", f"  {mail.parameter_line[1]}", "",
            f"{mail.sides[0]}:", f"  {mail.sides[1]}", f"  {mail.sides[2]}", ""]
    if mail.environment:
        out += ["environment (base → new):"]
        for key, va, vb in mail.environment:
            out += wrap(f"{key}: {va} → {vb}", "  ", "      ")
        out += [""]
    out += [*_table(mail), "", "", ""]
    out += ["Notes:"]
    for note in mail.notes:
        out += [*wrap(note), ""]
    out += ["", "-- ", f"mosbench {mosbench.__version__}", ""]
    return "\n".join(line.rstrip() if line != "-- " else line for line in out)


def as_text(mail: Mail) -> str:
    """--format text: the subject, then the body."""
    return f"Subject: {mail.subject}\n\n{text(mail)}"


def message(mail: Mail, sender: str, to: Sequence[str] = (), cc: Sequence[str] = (),
            in_reply_to: str | None = None, when: datetime | None = None) -> EmailMessage:
    """One message with a single text/plain part (UTF-8, 8bit, as the robot's: `±` is not ASCII); In-Reply-To
    and References thread it under an earlier mail on the same change."""
    when = when or datetime.now().astimezone()
    msg = EmailMessage(policy=email.policy.default)
    msg["From"] = sender
    if to:
        msg["To"] = ", ".join(to)
    if cc:
        msg["Cc"] = ", ".join(cc)
    msg["Subject"] = mail.subject
    msg["Date"] = email.utils.format_datetime(when)
    domain = sender.rpartition("@")[2].rstrip(">").strip() or "localhost"
    msg["Message-ID"] = email.utils.make_msgid("mosbench", domain)
    if in_reply_to:
        msg["In-Reply-To"] = in_reply_to
        msg["References"] = in_reply_to
    msg.set_content(text(mail), charset="utf-8", cte="8bit")
    return msg


def as_mbox(msg: EmailMessage, when: datetime | None = None) -> str:
    """The message as an mbox of one (its `From ` line first, a body line that begins `From ` quoted), which
    `git send-email` takes as it is, and `sendmail -t` too: an MTA reads a leading `From ` line as the
    envelope's (Exim's uucp_from_pattern matches this one), not as a header."""
    when = when or datetime.now().astimezone()
    msg.set_unixfrom(f"From mosbench {when:%a %b %d %H:%M:%S %Y}")
    out = io.BytesIO()  # a str Generator would re-encode the 8bit body as base64
    email.generator.BytesGenerator(out, mangle_from_=True, policy=msg.policy).flatten(msg, unixfrom=True)
    return out.getvalue().decode()
