"""`mosbench mail`: a regression report in the kernel test robot's form, of two stored runs or of the changes a
history confirms (analysis/mailrows decides what it says, report/mail lays it out; docs/MAIL.md)."""

from __future__ import annotations

import getpass
import re
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from email.headerregistry import Address
from email.utils import getaddresses
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mosbench.commands.options import open_store, store_option
from mosbench.errors import UserError
from mosbench.printable import one_line

if TYPE_CHECKING:  # imported where used: the command line starts without SQLAlchemy and numpy
    from mosbench.analysis.mailrows import Boundary, Side
    from mosbench.store.db import Store

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

    def bodies() -> Iterator[tuple[str, str]]:
        """Each mail's name (its new side's) and text, composed as it is asked for: inside the output's
        writing, so that a refusal on the way leaves nothing made for it."""
        db = open_store(store_url, create=False)
        pairs = _history_pairs(db, chosen, hostname, every) if from_history else [_runs_pair(db, args)]
        for pair in pairs:
            composed = mailing.compose(pair.base, pair.new, mailrows.findings(pair.base, pair.new, pair.labels),
                                       sender, tree, pair.boundary, pair.history_of)
            if fmt == "mbox":
                yield composed.columns[1], mailing.as_mbox(mailing.message(composed, sender, to, cc, in_reply_to))
            else:
                yield composed.columns[1], mailing.as_text(composed)

    _write(bodies(), output, directory, fmt)


@dataclass(frozen=True)
class _Pair:
    """One mail's two sides, and how the change was found where a history found it."""

    base: Side
    new: Side
    boundary: Boundary | None = None
    history_of: str | None = None  # the machine whose history confirmed the change

    @property
    def labels(self) -> tuple[str, str]:
        return self.base.ids, self.new.ids


def _runs_pair(db: Store, refs: tuple[str, ...]) -> _Pair:
    from mosbench.analysis import mailrows

    a, b = (db.run(ref) for ref in refs)
    mailrows.check_pair(a, b)
    return _Pair(mailrows.load_side(db, [a], a), mailrows.load_side(db, [b], b))


def _history_pairs(db: Store, chosen: list[str], hostname: str | None, every: bool) -> list[_Pair]:
    """The newest boundary the history confirms a change at (every: each, oldest first), its levels' runs
    nearest it pooled a side."""
    from mosbench.analysis import history as hist
    from mosbench.analysis import mailrows

    stored = {r["id"]: r for r in db.list_runs()}
    found = hist.build(list(stored.values()), db.history_points, chosen, hostname, hist.Order.TIME, None)
    changes = mailrows.boundaries(found)
    if not changes:
        raise UserError(f"the history of {one_line(found.machine.describe(), 120)} ({len(found.runs)} runs) "
                        "holds no confirmed change: there is nothing to mail")
    pairs = []
    for boundary in changes if every else changes[-1:]:
        before = [stored[r.id] for r in boundary.before]
        after = [stored[r.id] for r in boundary.after]
        pairs.append(_Pair(mailrows.load_side(db, before, before[-1], chosen),
                           mailrows.load_side(db, after, after[0], chosen), boundary, found.machine.describe()))
    return pairs


def _write(bodies: Iterator[tuple[str, str]], output: Path | None, directory: Path | None, fmt: str) -> None:
    """The mails where the user asked: --dir a file each, all moved in once every one is written; -o checked
    before any is composed and written whole; else standard output. Nothing is left of a mail that could
    not be written, nor of a folder made for it."""
    from mosbench import outfile
    from mosbench.filenames import file_stem
    from mosbench.report.terminal import say, stdout

    if directory is not None:
        names = []
        with outfile.files_into(directory, "the mails") as staged:
            for i, (name, body) in enumerate(bodies, start=1):
                names.append(f"{i:03d}-{file_stem(name)}.{'mbox' if fmt == 'mbox' else 'txt'}")
                (staged / names[-1]).write_text(body)
        for name in names:
            say(f"wrote {directory / name}")
        return
    if output is None:
        for _, body in bodies:
            stdout.write(body)
        return
    target = outfile.target(output, "the mail")
    with target.writing():
        target.write_text("".join(body for _, body in bodies))
