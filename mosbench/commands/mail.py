"""`mosbench mail`: a regression report in the kernel test robot's form, of two stored runs or of the changes a
history confirms (analysis/mailrows decides what it says, report/mail lays it out; docs/MAIL.md)."""

from __future__ import annotations

import getpass
import re
import socket
from email.headerregistry import Address
from email.utils import getaddresses
from pathlib import Path

import click

from mosbench.commands.options import open_store, store_option
from mosbench.errors import UserError
from mosbench.printable import one_line

_MSGID = re.compile(r"<?([^<>\s@]+@[^<>\s@]+)>?")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")


def _address(option: str, value: str) -> str:
    """A mail address as a header takes it ("Name <a@b>" or "a@b"), or one line saying why not."""
    found = getaddresses([value])
    if _UNSAFE.search(value) or len(found) != 1 or "@" not in found[0][1] or " " in found[0][1]:
        raise UserError(f"{option} {one_line(value, 100)!r} is not one mail address (NAME <USER@HOST> or USER@HOST)")
    name, addr = found[0]
    user, _, domain = addr.rpartition("@")
    try:
        return str(Address(name, user, domain))
    except ValueError:  # the parser's HeaderParseError too
        raise UserError(f"{option} {one_line(value, 100)!r} is not one mail address") from None


def _message_id(value: str) -> str:
    found = _MSGID.fullmatch(value.strip())
    if found is None or _UNSAFE.search(value):
        raise UserError(f"--in-reply-to {one_line(value, 100)!r} is not a Message-ID (<ID@HOST>, as the mail it "
                        "answers has it)")
    return f"<{found.group(1)}>"


def _default_sender() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        user = "mosbench"
    return _address("--from", f"mosbench <{user}@{socket.gethostname() or 'localhost'}>")


@click.command()
@click.argument("args", nargs=-1, metavar="RUN_A RUN_B | --history [SELECTIONS]")
@click.option("--history", "from_history", is_flag=True,
              help="Report the newest change `mosbench history` confirms on a machine (SELECTIONS: its tests).")
@click.option("--host", "hostname", default=None, help="With --history: the machine (its hostname).")
@click.option("--all", "every", is_flag=True, help="With --history: every confirmed change, a file each in --dir.")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="With --all: where the files go (made if missing).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the mail here (default: stdout).")
@click.option("--format", "fmt", type=click.Choice(["text", "mbox"]), default="text", show_default=True,
              help="text: the subject and the body; mbox: one RFC 5322 message (git send-email, sendmail -t).")
@click.option("--from", "sender", default=None, metavar="ADDR",
              help="The From: address, and the Reported-by tag (default: mosbench <USER@HOST>).")
@click.option("--to", multiple=True, metavar="ADDR", help="A To: address (repeat for more).")
@click.option("--cc", multiple=True, metavar="ADDR", help="A Cc: address (repeat for more).")
@click.option("--in-reply-to", "in_reply_to", default=None, metavar="MSGID",
              help="The Message-ID this mail follows up (threads it under a report of the same change).")
@click.option("--tree", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="The kernel git tree (only read) the commits' subjects are read from.")
@store_option
def mail(args, from_history, hostname, every, directory, output, fmt, sender, to, cc, in_reply_to, tree,
         store_url) -> None:
    """What changed between two stored runs of one machine (RUN is an id or 'latest'), as the kernel test
    robot reports a regression to the kernel's lists: the subject names the significant change that moved
    most, then the commit, the machine, the parameters, the commands to reproduce, the environment's
    differences and a table of every metric of every point, the significant rows first and the profiles'
    rows last. A report, not a gate: exit 0 when written."""
    from mosbench.analysis import history as hist
    from mosbench.analysis import mailrows
    from mosbench.report import mail as mailing
    from mosbench.run.plan import stored_selections

    if every and not from_history:
        raise UserError("--all mails every change a history confirms: give --history too")
    if every and (directory is None or output is not None):
        raise UserError("--all writes one file per change into --dir DIR (not -o)")
    if directory is not None and not every:
        raise UserError("--dir goes with --history --all (one file per change)")
    if not from_history and hostname is not None:
        raise UserError("--host goes with --history")
    if not from_history and len(args) != 2:
        raise UserError("mail compares two runs: mosbench mail RUN_A RUN_B (or mosbench mail --history)")
    sender = _address("--from", sender) if sender else _default_sender()
    to = [_address("--to", a) for a in to]
    cc = [_address("--cc", a) for a in cc]
    in_reply_to = _message_id(in_reply_to) if in_reply_to else None
    chosen = stored_selections(list(args)) if from_history else []
    db = open_store(store_url, create=False)

    # (the mail's sides, how the change was found, the history's machine)
    pairs: list[tuple[mailrows.Side, mailrows.Side, mailrows.Boundary | None, str | None]] = []
    if from_history:
        found = hist.build(db.list_runs(), db.history_points, chosen, hostname, hist.Order.TIME, None)
        changes = mailrows.boundaries(found)
        if not changes:
            raise UserError(f"the history of {one_line(found.machine.describe(), 120)} ({len(found.runs)} runs) "
                            "holds no confirmed change: there is nothing to mail")
        stored = {r["id"]: r for r in db.list_runs()}
        for boundary in changes if every else changes[-1:]:
            before = [stored[r.id] for r in boundary.before]
            after = [stored[r.id] for r in boundary.after]
            pairs.append((mailrows.load_side(db, before, before[-1], chosen),
                          mailrows.load_side(db, after, after[0], chosen), boundary, found.machine.describe()))
    else:
        runs = [db.run(ref) for ref in args]
        mailrows.check_pair(*runs)
        pairs.append((mailrows.load_side(db, [runs[0]], runs[0]), mailrows.load_side(db, [runs[1]], runs[1]),
                      None, None))

    written = []
    for a, b, boundary, machine in pairs:
        found_rows = mailrows.findings(a, b, (a.ids, b.ids))
        composed = mailing.compose(a, b, found_rows, sender, tree, boundary, machine)
        if fmt == "mbox":
            body = mailing.as_mbox(mailing.message(composed, sender, to, cc, in_reply_to))
        else:
            body = mailing.as_text(composed)
        written.append((composed.columns[1], body))
    _write(written, output, directory, fmt)


def _write(written: list[tuple[str, str]], output: Path | None, directory: Path | None, fmt: str) -> None:
    from mosbench import outfile
    from mosbench.filenames import file_stem
    from mosbench.report.terminal import say, stdout

    if directory is not None:
        for i, (name, body) in enumerate(written, start=1):
            path = directory / f"{i:03d}-{file_stem(name)}.{'mbox' if fmt == 'mbox' else 'txt'}"
            target = outfile.target(path, "the mail")
            with target.writing():
                target.write_text(body)
            say(f"wrote {path}")
        return
    [(_, body)] = written
    if output is None:
        stdout.write(body)
        return
    target = outfile.target(output, "the mail")
    with target.writing():
        target.write_text(body)
