"""Exim: the paper's section 5.2, mail delivered over SMTP by a private Exim daemon on loopback.

Debian's exim4 runs as a daemon of its own: its configuration, spool, logs and mailboxes in the
point's tmpfs, its own port, DNS and ident lookups off, every recipient a line of a lookup file (no
system accounts), local delivery appending to the recipient's mailbox file as the Exim user. The
configuration's path is listed in Exim's trusted-configuration list for the daemon's life, journaled,
so that Exim keeps root and runs as installed; nothing else of the machine's Exim is read or touched.

`stock` is Exim as installed: one spool directory and, after each message, an exec of Exim to regain
root for its delivery. `tuned` makes the paper's two changes: 62 split spool directories and
`deliver_drop_privilege` (no exec). The client is mosbench-smtpload (native/loadgen/smtp.c): a fixed
number of sessions (the paper's 96 client processes), each sending 10 messages per connection to its
own user. Work is messages delivered, counted from Exim's log as it writes them; at the end of the
point every message the client saw accepted must be in its user's mailbox exactly once. From client
hosts (`--clients`) each host's generator mails its own contiguous share of the users, and its ledger
comes back over its SSH session after it ends, to be checked here against the mailboxes the same way.
"""

from __future__ import annotations

import bisect
import json
import os
import pwd
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from mosbench import native
from mosbench.errors import PointFailed, UserError
from mosbench.workloads.base import Instance, Param, PointContext, PointNote, Sample, Variant, open_path_to
from mosbench.workloads.server.base import ServerInstance, ServerWorkload
from mosbench.workloads.server.loadgen import Generator
from mosbench.workloads.server.servers import Server
from mosbench.workloads.server.shares import share

EXIM = Path("/usr/sbin/exim4")
TRUSTED = Path("/etc/exim4/trusted_configs")  # Debian's TRUSTED_CONFIG_LIST
EXIM_USER = "Debian-exim"
DOMAIN = "mosbench.test"
MESSAGES_PER_CONNECTION = 10  # the paper's
DRAIN_S = 30.0  # how long accepted messages may take to be delivered once the client stops
# A queue that grows by more than this share of the window's deliveries is deliveries lagging acceptances.
LAG_SHARE = 0.05
BODY = re.compile(rb"^(\d{5})\.(\d{14})\r?$", re.M)


def config(root: Path, host: str, port: int, tuned: bool) -> str:
    """The daemon's whole configuration; Exim reads nothing else."""
    users = root / "users"
    main = [
        f"primary_hostname = {DOMAIN}", f"domainlist local_domains = {DOMAIN}",
        f"local_interfaces = <; {host}", f"daemon_smtp_ports = {port}", "disable_ipv6 = true",
        f"spool_directory = {root}/spool", f"log_file_path = {root}/log/%slog",
        "host_lookup =", "rfc1413_hosts =", "tls_advertise_hosts =", "keep_environment =",
        # Without these the daemon, not the kernel, would be the limit at many cores: every connection
        # accepted at once, each message delivered at once (after 10 a connection's are only queued).
        "smtp_accept_max = 0", "smtp_accept_queue_per_connection = 0", "smtp_connect_backlog = 4096",
        "acl_smtp_rcpt = check_rcpt",
        "daemon_startup_retries = 0",  # a port in use fails at once, not after 9 retries 30 s apart
    ]
    if tuned:
        main += ["split_spool_directory = true", "deliver_drop_privilege = true"]
    # The mailbox path comes from the lookup's result, not from $local_part: Exim 4.94+ refuses a
    # file name built from tainted input.
    return "\n".join([
        *main,
        "begin acl", "check_rcpt:",
        f"  accept domains = +local_domains\n         local_parts = lsearch;{users}",
        "  deny message = unknown recipient",
        "begin routers", "mailbox:", "  driver = accept", "  domains = +local_domains",
        f"  local_parts = lsearch;{users}", "  transport = mailbox",
        "begin transports", "mailbox:", "  driver = appendfile",
        f"  file = {root}/mail/${{lookup{{$local_part}}lsearch{{{users}}}}}",
        f"  user = {EXIM_USER}", f"  group = {EXIM_USER}", "  use_lockfile = false",  # fcntl locks, as the paper's
        "  delivery_date_add", "  envelope_to_add", "  return_path_add", "  file_must_exist = true",
        "begin retry", "*  *  F,1h,1m",
    ]) + "\n"


def session_share(sessions: int, host: int, hosts: int) -> list[str] | None:
    """smtpload's sessions for host `host` of `hosts`: a contiguous share of the users, sizes within one;
    None for a host with none."""
    count = share(sessions, host, hosts)
    return ["--sessions", str(count), "--first-session", str(sessions * host // hosts)] if count else None


def merge_ledgers(texts: list[str]) -> dict[str, Any]:
    """Every host's ledger as one: each names its own sessions' users."""
    return {"sessions": [s for text in texts for s in json.loads(text)["sessions"]]}


def user_name(session: int) -> str:
    return f"u{session:05d}"


class DeliveryLog:
    """Counts deliveries in Exim's main log as it grows, and keeps its first failed or deferred one."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.partial = b""
        self.delivered = 0
        self.failure = ""

    def count(self) -> int:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return self.delivered
        self.offset += len(data)
        data, _, self.partial = (self.partial + data).rpartition(b"\n")
        self.delivered += data.count(b" => ")
        if not self.failure:
            for mark in (b" ** ", b" == "):  # failed, deferred
                at = data.find(mark)
                if at >= 0:
                    start = data.rfind(b"\n", 0, at) + 1
                    end = data.find(b"\n", at)
                    self.failure = data[start:end if end >= 0 else len(data)].decode(errors="replace")
                    break
        return self.delivered


def check_mailboxes(mail: Path, ledger: dict[str, Any]) -> tuple[int, list[str]]:
    """Every accepted message in its session's mailbox exactly once: (messages found, the problems)."""
    found = 0
    missing = twice = strangers = unsent = 0
    for session in ledger["sessions"]:
        user = session["user"]
        sid = int(user[1:])
        try:
            data = (mail / user).read_bytes()
        except OSError as e:
            return found, [f"mailbox {user}: {e.strerror}"]
        seen: Counter[int] = Counter()
        for m in BODY.finditer(data):
            if int(m[1]) != sid:
                strangers += 1
            seen[int(m[2])] += 1
        found += sum(seen.values())
        twice += sum(1 for n in seen.values() if n > 1)
        for start, end in session["accepted"]:
            missing += sum(1 for n in range(start, end) if n not in seen)
        uncertain = set(session["uncertain"])
        starts = [a for a, _ in session["accepted"]]
        ends = [b for _, b in session["accepted"]]
        for n in seen:
            i = bisect.bisect_right(starts, n) - 1
            if n not in uncertain and not (i >= 0 and n < ends[i]):
                unsent += 1
    problems = []
    if missing:
        problems.append(f"{missing} accepted messages are in no mailbox")
    if twice:
        problems.append(f"{twice} messages were delivered twice")
    if strangers:
        problems.append(f"{strangers} messages reached another session's mailbox")
    if unsent:
        problems.append(f"{unsent} delivered messages were never accepted")
    return found, problems


def _exim_uid() -> tuple[int, int]:
    try:
        pw = pwd.getpwnam(EXIM_USER)
    except KeyError:
        raise UserError(f"user {EXIM_USER} is missing (Debian's exim4 makes it: apt-get install "
                        "exim4-daemon-light)") from None
    return pw.pw_uid, pw.pw_gid


class EximInstance(ServerInstance):
    client: Generator | None
    def __init__(self, ctx: PointContext):
        super().__init__(ctx, 1)
        self.root = ctx.scratch / "exim"
        self.conf = self.root / "exim.conf"
        self.trusted = False
        self._stopped: dict[str, Any] | None = None
        self._window: list[tuple[int, int]] = []  # (accepted, delivered) as the window opened and closed
        sessions = ctx.params["clients"]
        uid, gid = _exim_uid()
        try:
            for d in ("spool", "log", "mail"):
                (self.root / d).mkdir(parents=True)
                os.chown(self.root / d, uid, gid)
            (self.root / "users").write_text("".join(f"{user_name(i)}: {user_name(i)}\n" for i in range(sessions)))
            for i in range(sessions):
                box = self.root / "mail" / user_name(i)
                box.touch(mode=0o600)
                os.chown(box, uid, gid)
            self.conf.write_text(config(self.root, self.host, self.ports[0], ctx.variant == "tuned"))
            os.chmod(self.conf, 0o644)  # Exim trusts only a file no one but root may write
            open_path_to(self.root / "spool", ctx.run.scratch.parent)
            self.log = DeliveryLog(self.root / "log" / "mainlog")
            ctx.launcher.journal.add_line(TRUSTED, str(self.conf), mode=0o644)  # Exim's rule: root's, 0644
            self.trusted = True
            self.servers.append(Server(
                ctx.launcher, "exim", [str(EXIM), "-C", str(self.conf), "-bdf", "-oP", str(self.root / "exim.pid")],
                ctx.group, self.ports[0], last_words=self._cause, host=self.host))
            self.wait_servers()
            self.ledger_path = ctx.scratch / "smtpload.ledger"
            self.start_client("smtpload", [
                str(native.binary("mosbench-smtpload")), "--ports", str(self.ports[0]),
                "--messages-per-connection", str(MESSAGES_PER_CONNECTION), "--domain", DOMAIN,
                "--ledger", str(self.ledger_path),
            ], for_host=lambda i, n, _source: session_share(sessions, i, n), outputs=(self.ledger_path,))
        except BaseException:
            self.stop()
            raise

    def _cause(self) -> str:
        """Exim's own words: its panic log's last line, else the first error it printed."""
        try:
            lines = (self.root / "log" / "paniclog").read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        return lines[-1] if lines else self.ctx.launcher.first_error("exim")

    def sample(self) -> Sample:
        return Sample(float(self.log.count()))

    def check(self) -> None:
        super().check()
        self._check_deliveries()

    def _check_deliveries(self) -> None:
        """PointFailed with Exim's line for the first delivery its log says failed or was deferred."""
        if self.log.failure:
            raise PointFailed(f"exim could not deliver: {self.log.failure}")

    def _accepted_delivered(self) -> tuple[int, int]:
        assert self.client is not None
        return self.client.counters()["done"], self.log.count()

    def window_opened(self) -> None:
        self._window = [self._accepted_delivered()]
        super().window_opened()

    def window_closed(self) -> None:
        super().window_closed()
        self._window.append(self._accepted_delivered())

    def _ledger(self) -> dict[str, Any] | None:
        """The client's ledger (every host's, from client hosts); None if a generator wrote none (it
        never ran)."""
        texts = self.client.outputs(self.ledger_path) if self.client else [None]
        if None in texts:
            return None
        try:
            return merge_ledgers([t for t in texts if t is not None])
        except (ValueError, KeyError):
            raise PointFailed("the client's ledger is unreadable") from None

    def window_work(self) -> float | None:
        # Work is deliveries, sampled from Exim's log here, whoever the client is.
        return None

    def _queued(self) -> int:
        """Messages in Exim's spool: received, not yet delivered (a message's -H file goes last)."""
        return sum(1 for _ in (self.root / "spool" / "input").rglob("*-H"))

    def _drain(self) -> None:
        """Waits for Exim to deliver everything it accepted (its spool empty); PointFailed if it does not."""
        deadline = time.monotonic() + DRAIN_S
        while queued := self._queued():
            for server in self.servers:  # the client has ended by now: only the server can fail
                server.check()
            self.log.count()  # a deferral stays queued: its log line is the reason, not the time-out
            self._check_deliveries()
            if time.monotonic() > deadline:
                raise PointFailed(f"exim still had {queued} messages queued {DRAIN_S:.0f} s after the client "
                                  "ended")
            time.sleep(0.05)

    def stop(self) -> dict[str, Any]:
        if self._stopped is not None:
            return self._stopped
        self._stopped = {}
        try:
            result = self.client.stop() if self.client else None
            ledger = self._ledger()
            if ledger is not None and all(s.alive() for s in self.servers):
                self._drain()
        finally:
            self.stop_servers()
            if self.trusted:
                self.ctx.launcher.journal.remove_line(TRUSTED, str(self.conf))
                self.trusted = False
        metrics = self.metrics(result)
        if ledger is None:
            return metrics
        found, problems = check_mailboxes(self.root / "mail", ledger)
        if problems:
            raise PointFailed("mailboxes: " + "; ".join(problems))
        metrics["messages_checked"] = found
        conn = result.connection_ns if result is not None else {}
        for k in ("p50", "p99"):
            if k in conn:
                metrics[f"connection_{k}_us"] = round(conn[k] / 1000, 1)
        if len(self._window) == 2:
            (a0, d0), (a1, d1) = self._window
            growth = (a1 - d1) - (a0 - d0)
            metrics["queue_growth"] = growth
            # Every session may have a message between acceptance and delivery at either end of the
            # window: growth within that is noise, not a trend.
            metrics["deliveries_lag"] = growth > max(self.ctx.params["clients"], LAG_SHARE * (d1 - d0))
        self._stopped = metrics
        return metrics

    def logs(self) -> str:
        parts = [super().logs()]
        for name in ("paniclog", "mainlog"):
            log = self.root / "log" / name
            if log.exists():
                parts.append("\n".join(log.read_text(errors="replace").splitlines()[-10:]))
        return "\n".join(p for p in parts if p)


class Exim(ServerWorkload):
    name = "exim"
    unit = "message"
    description = "mail over SMTP to a private Exim daemon, delivered to mailbox files (process creation, " \
                  "small files, the spool directory)"
    variants = (
        Variant("stock", "Exim as installed: one spool directory, an exec of Exim per delivery"),
        Variant("tuned", "the paper's changes: 62 split spool directories, deliver_drop_privilege (no exec)"),
    )
    params = (
        Param("clients", 96, "SMTP sessions of the client, whatever the core count (the paper: 96)"),
        *ServerWorkload.client_params,
    )
    paper = "section 5.2 and Figure 4: fork and exec, small-file creation and deletion, the vfsmount table, dentries"
    metrics_shown_apart = ("deliveries_lag",)

    def point_notes(self, metrics: dict[str, Any]) -> list[PointNote]:
        """A daemon that accepts mail faster than it delivers it: a throughput it could not keep."""
        notes = super().point_notes(metrics)
        if metrics.get("deliveries_lag"):
            notes.append(PointNote("queue grew",
                                   f"DELIVERIES LAG (the queue grew by {metrics['queue_growth']} in the window)"))
        return notes

    def check_available(self) -> None:
        if not EXIM.exists():
            raise UserError("exim4 is not installed (Debian: apt-get install exim4-daemon-light)")
        if os.geteuid() != 0:
            raise UserError("the exim workload needs root: its daemon's configuration is listed in "
                            f"{TRUSTED} while it runs, so that Exim keeps root as installed")
        if not TRUSTED.parent.is_dir():
            raise UserError(f"{TRUSTED.parent} is missing (Debian: apt-get install exim4-daemon-light)")
        _exim_uid()
        native.binary("mosbench-smtpload")

    def check_params(self, params: dict[str, Any]) -> None:
        if not 1 <= params["clients"] <= 65536:
            raise UserError("exim clients must be 1..65536")
        super().check_params(params)

    def ports_at(self, cores: int) -> int:
        return 1  # one daemon, whatever the cores

    def start(self, ctx: PointContext) -> Instance:
        if not EXIM.exists():
            raise PointFailed("exim4 is not installed")
        return EximInstance(ctx)
