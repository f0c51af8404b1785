"""pgbench, a PostgreSQL point's client: on this machine, or one on every client host (`--clients`).

pgbench cannot be told when the harness's window opens: it is told its duration up front (-T), its
per-second progress lines (-P 1, epoch-stamped) sample it while it runs, and once it has ended its
transaction log (-l) gives the window's exact count and latencies, cut at the window's two ends.

On a client host pgbench runs in a session of the host's SSH master under a small shell loop: the
batch script comes down the session's input, pgbench runs pinned to the host's CPUs in a private
directory, and the loop answers the harness's clock reads (t) and marks the window's ends (w, a) with
the host's clock, pgbench's own CPU time and the host's /proc/stat, so each host's CPU per query and
busy share are over the window as a native generator's are. When pgbench ends the loop says `E
<status>`; after `q` it prints pgbench's summary and its transaction logs and removes the directory.
A lost session ends the loop's input, which stops pgbench. Everything the host stamps is on its clock:
progress and transaction ends are moved onto ours by the offset measured over the session.
"""

from __future__ import annotations

import contextlib
import math
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from mosbench import cpulist
from mosbench.errors import PointFailed
from mosbench.launch.processes import how_it_ended
from mosbench.machine import accounting
from mosbench.machine.accounting import parse_proc_stat
from mosbench.workloads.base import PointContext
from mosbench.workloads.postgres import cluster as pgcluster
from mosbench.workloads.server.hostresult import ClientSide, HostResult
from mosbench.workloads.server.loadgen import AFTER, WINDOW, Client, ClientResult
from mosbench.workloads.server.runhosts import RunHost
from mosbench.workloads.server.ssh import (
    PHASE_COMMANDS,
    RemoteSession,
    print_output,
    private_dir,
    receive,
    split_outputs,
    tell_all,
)

# pgbench must still be running when the harness's window closes: it runs this much longer and the
# point waits for it to end by itself.
TAIL_S = 1.0
PROGRESS = re.compile(r"^progress: ([0-9.]+) s, ([0-9.]+) tps, .*?(\d+) failed")
# The first pgbench whose progress lines count failed transactions and whose summary says how many.
MIN_MAJOR = 15
SCRIPT_WORD = "@script"  # where a host's copy of the batch script goes in its arguments
LOG_WORD = "@log"  # and its transaction log's prefix


def pgbench_argv(host: str, port: int, clients: int, threads: int, seconds: int, protocol: str, script: Path | str,
                 rows: int, log_prefix: Path | str, rate: float | None = None,
                 binary: str = str(pgcluster.BIN / "pgbench")) -> list[str]:
    """pgbench's command; with rate, its own open loop (-R, transactions per second in all)."""
    return [binary, "--no-vacuum", "-h", host, "-p", str(port), "-U", pgcluster.USER,
            "-c", str(clients), "-j", str(threads), "-T", str(seconds), "-M", protocol, "-f", str(script),
            *(["-R", f"{rate:g}"] if rate else []),
            "-D", f"rows={rows}", "-P", "1", "--progress-timestamp", "-l", "--log-prefix", str(log_prefix),
            "postgres"]


def summary_counts(out: str) -> tuple[int, int]:
    """(transactions processed, transactions failed) from pgbench's summary."""
    done = re.search(r"number of transactions actually processed: (\d+)", out)
    failed = re.search(r"number of failed transactions: (\d+)", out)
    if not done:
        raise PointFailed("pgbench printed no summary")
    return int(done[1]), int(failed[1]) if failed else 0


def parse_transaction_logs(texts: Iterable[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every transaction's end (epoch seconds), latency (µs) and, under -R, schedule lag (µs; else 0)
    from pgbench's per-thread logs ("client transaction latency_us script epoch_s epoch_us [lag_us]")."""
    ends: list[float] = []
    latencies: list[float] = []
    lags: list[float] = []
    for text in texts:
        for line in text.splitlines():
            fields = line.split()
            if len(fields) < 6:
                continue
            ends.append(int(fields[4]) + int(fields[5]) / 1e6)
            latencies.append(float(fields[2]) if fields[2].isdigit() else math.nan)
            lags.append(float(fields[6]) if len(fields) > 6 and fields[6].isdigit() else 0.0)
    return np.array(ends), np.array(latencies), np.array(lags)


def read_transaction_logs(prefix_dir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return parse_transaction_logs(path.read_text() for path in sorted(prefix_dir.iterdir()))


def queries_between(ends: np.ndarray, latencies_us: np.ndarray, t0: float, t1: float, batch: int) -> float:
    """Queries done between t0 and t1: each transaction's batch shared out by the part of its run
    inside the interval (its queries run one after another through it), so a transaction that
    straddles an end counts for the part it ran inside, not all or nothing."""
    if not len(ends):
        return 0.0
    durations = np.maximum(np.nan_to_num(latencies_us) / 1e6, 1e-9)
    starts = ends - durations
    overlap = np.clip(np.minimum(ends, t1) - np.maximum(starts, t0), 0.0, None)
    return float((overlap / durations).sum() * batch)


@dataclass
class Transactions:
    """A pgbench's transactions once it has ended: ends on our clock, latencies and lags in µs."""

    ends: np.ndarray
    latencies: np.ndarray
    lags: np.ndarray

    @staticmethod
    def of(parts: list[Transactions]) -> Transactions:
        if not parts:
            return Transactions(np.array([]), np.array([]), np.array([]))
        return Transactions(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("ends", "latencies", "lags")))

    def latency_ns(self, t0: float, t1: float) -> dict[str, float]:
        """Percentiles of the transactions that ended in [t0, t1]; under -R a latency counts from the
        transaction's scheduled start, as pgbench's own summary does."""
        inside = (self.ends >= t0) & (self.ends <= t1)
        if not inside.any():
            return {}
        scheduled = self.latencies[inside] + self.lags[inside]
        return {name: float(np.percentile(scheduled, q)) * 1000
                for name, q in (("p50", 50), ("p90", 90), ("p99", 99), ("max", 100))}


class Progress:
    """pgbench's progress lines from its stderr log, as cumulative transactions by time on our clock."""

    def __init__(self, path: Path, offset_s: float = 0.0):
        self.path = path
        self.offset_s = offset_s  # the writer's clock minus ours
        self._last: tuple[float, float] | None = None  # (time, transactions so far)
        self._rate = 0.0
        self._read = 0
        self.failed = 0

    def read(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._read)
                chunk = f.read()
        except OSError:
            return
        end = chunk.rfind(b"\n") + 1  # whole lines only; the rest is read next time
        self._read += end
        for line in chunk[:end].decode(errors="replace").splitlines():
            m = PROGRESS.match(line)
            if not m:
                continue
            t, tps, failed = float(m[1]) - self.offset_s, float(m[2]), int(m[3])
            last_t, total = self._last or (t - 1.0, 0.0)
            self._last = (t, total + tps * (t - last_t))
            self._rate = tps
            self.failed += failed

    def transactions(self) -> float:
        """Transactions so far, the last line's count carried to now at its second's rate."""
        self.read()
        if not self._last:
            return 0.0
        t, total = self._last
        return total + self._rate * min(max(time.time() - t, 0.0), 1.0)


class PgbenchClient(Client, Protocol):
    """pgbench as a PostgreSQL point drives it, here (Pgbench) or on every client host (PgbenchHosts):
    a Client whose window is cut from its transaction log once it has ended."""

    opened: float | None  # the window's ends, on our clock
    closed: float | None

    def ended(self) -> bool:
        """Whether pgbench has ended (on any host)."""

    def reason(self, what: str) -> str:
        """A point's failure reason: `what` went wrong, with pgbench's own words where it said any."""

    def kill(self) -> None:
        """Ends it now, without waiting for its result."""

    def queries(self, t0: float, t1: float) -> float:
        """Queries done between t0 and t1 on our clock, from the transaction log (after stop())."""


def first_error(lines: list[str]) -> str:
    """pgbench's first error line (the cause, "connection to server ... failed: ..."), where its last is
    a summary ("could not create connection for setup")."""
    lines = [line for line in lines if not PROGRESS.match(line)]
    errors = [line.strip() for line in lines if "error:" in line or "FATAL:" in line]
    return errors[0] if errors else (lines[-1].strip() if lines else "")


class Pgbench:
    """pgbench on this machine's load-generator CPUs, as a server point's client (loadgen.Client)."""

    name = "pgbench"

    def __init__(self, ctx: PointContext, argv: list[str], txn_logs: Path, batch: int,
                 enter: Callable[[], None] | None = None):
        if not ctx.loadgen_group:
            raise PointFailed("pgbench needs a load generator group")
        self.launcher = ctx.launcher
        self.txn_logs = txn_logs
        self.batch = batch
        self.opened: float | None = None
        self.closed: float | None = None
        self.progress = Progress(self.launcher.logdir / f"{self.name}.err")
        self.transactions = Transactions.of([])
        self._stopped = False
        self._result: ClientResult | None = None
        self.proc: subprocess.Popen = ctx.launcher.spawn(self.name, argv, ctx.loadgen_group, env=pgcluster.ENV,
                                                         enter=enter)

    def done(self) -> float:
        """Queries so far, from the progress lines (the window's exact count comes from the transaction
        log once pgbench has ended)."""
        return self.progress.transactions() * self.batch

    def set_phase(self, phase: int) -> None:
        # pgbench cannot be told: the window's ends are kept to cut its transaction log at them.
        if phase == WINDOW:
            self.opened = time.time()
        elif phase == AFTER:
            self.closed = time.time()

    def ended(self) -> bool:
        return self.proc.poll() is not None

    def check(self) -> None:
        self.progress.read()
        if self.progress.failed:
            raise PointFailed(self.reason(f"{self.progress.failed} transactions failed"))
        if self.proc.poll() is not None and self.closed is None:
            raise PointFailed(self.reason(f"pgbench {how_it_ended(self.proc)} before the window closed"))

    def reason(self, what: str) -> str:
        said = first_error(self.launcher.stderr_lines(self.name))
        return f"{what}: {said}" if said else what

    def kill(self) -> None:
        self.launcher.stop(self.proc)

    def stop(self) -> ClientResult | None:
        """Once the window has closed: waits for pgbench to end by itself (its duration ends TAIL_S
        after the window; it finishes its transactions and says how it went) and returns the window's
        result, its transactions in all beside; before that, ends it and returns None. Idempotent."""
        if not self._stopped:
            self._stopped = True
            if self.closed is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(TAIL_S + 60)
            self.launcher.stop(self.proc)
            if self.closed is not None:
                self._result = self._read_result()
        return self._result

    def _read_result(self) -> ClientResult:
        assert self.opened is not None and self.closed is not None
        if self.proc.returncode != 0:
            raise PointFailed(self.reason(f"pgbench exited with status {self.proc.returncode}"))
        out = (self.launcher.logdir / f"{self.name}.out").read_text(errors="replace")
        self.transactions = checked_transactions(out, read_transaction_logs(self.txn_logs), 0.0)
        return ClientResult(errors=0, latency_ns=self.transactions.latency_ns(self.opened, self.closed),
                            transactions=len(self.transactions.ends))

    def queries(self, t0: float, t1: float) -> float:
        return queries_between(self.transactions.ends, self.transactions.latencies, t0, t1, self.batch)

    def logs(self) -> str:
        return self.launcher.log_tail(self.name, 20)


def checked_transactions(summary: str, logged: tuple[np.ndarray, np.ndarray, np.ndarray],
                         offset_s: float, host: str = "") -> Transactions:
    """The transactions of a pgbench that ended, its summary held against its log: none failed, every
    one counted logged; ends moved onto our clock."""
    where = f"client host {host}: " if host else ""
    done, failed = summary_counts(summary)
    if failed:
        raise PointFailed(f"{where}pgbench: {failed} transactions failed")
    ends, latencies, lags = logged
    if len(ends) != done:
        raise PointFailed(f"{where}pgbench's transaction log holds {len(ends)} transactions, its summary {done}")
    return Transactions(ends - offset_s, latencies, lags)


# --- on client hosts --------------------------------------------------------------------------------------

def host_command(script_size: int, args: list[str], cpus: tuple[int, ...]) -> str:
    """The shell a host's session runs: pgbench (args after its name, SCRIPT_WORD and LOG_WORD standing
    for the host's copies) under the loop the module's docstring describes."""
    local = {SCRIPT_WORD: '"$d/s.sql"', LOG_WORD: '"$d/txn"'}
    words = " ".join(local.get(a, shlex.quote(a)) for a in args)
    stamp = ('stamp() { echo "$1 $(date +%s%N) $(cut -d" " -f14,15 /proc/$(cat "$d/pid" 2>/dev/null)/stat '
             '2>/dev/null || echo 0 0) $(getconf CLK_TCK) $(grep "^cpu[0-9]" /proc/stat | tr "\\n" ";")"; }')
    return "\n".join([
        private_dir(on_signal='[ -f "$d/pid" ] && kill $(cat "$d/pid") 2>/dev/null; '),
        f'{receive(script_size, "s.sql")} || exit 1',
        'command -v pgbench >/dev/null || { echo "F pgbench is not installed (Debian: apt-get install '
        'postgresql-client)"; exit 1; }',
        stamp,
        # The pid file goes once pgbench has ended: nothing kills a number another process may have by then.
        f'{{ taskset -c {cpulist.format(cpus)} pgbench {words} > "$d/out" & echo $! > "$d/pid"; wait $!; s=$?; '
        'rm -f "$d/pid"; echo "E $s"; } &',
        "echo READY",
        'while read c; do case $c in t) echo "T $(date +%s%N)";; w) stamp W;; a) stamp A;; q) break;; esac; done',
        '[ -f "$d/pid" ] && kill $(cat "$d/pid") 2>/dev/null',
        "wait",
        "echo RESULT",
        'cat "$d/out"',
        print_output(0, '"$d"/txn*'),
    ])


@dataclass(frozen=True)
class Stamp:
    """A window end as the host marked it: its clock, pgbench's CPU time, its CPUs' times."""

    real_ns: int
    cpu_s: float
    cpus: dict[int, accounting.CpuTimes]

    @staticmethod
    def parse(words: list[str]) -> Stamp:
        hz = int(words[3])
        cpus = parse_proc_stat(" ".join(words[4:]).replace(";", "\n"), hz)
        return Stamp(int(words[0]), (int(words[1]) + int(words[2])) / hz, cpus)


class HostPgbench(RemoteSession):
    """One client host's pgbench."""

    def __init__(self, host: RunHost, name: str, args: list[str], script: bytes, cpus: tuple[int, ...]):
        self.cpus = cpus
        self.status: int | None = None  # pgbench's exit status, once the host says it ended
        self.stamps: dict[str, Stamp] = {}
        super().__init__(host.master, name, host_command(len(script), args, cpus), script)
        self.progress = Progress(self.launcher.logdir / f"{name}.err", self.offset_s)

    def seen(self, kind: str, rest: str) -> None:
        if kind == "E":
            self.status = int(rest)

    def ended(self) -> bool:
        return self.status is not None or self.proc.poll() is not None

    def failure(self) -> str:
        said = first_error(self.launcher.stderr_lines(self.name))
        if said and not self.failure_words:
            return f"client host {self.host}: {said}"
        return super().failure()

    def finish(self, wait_s: float) -> tuple[str, str]:
        """Waits up to wait_s for pgbench to end by itself, ends the session, and returns pgbench's
        summary and its transaction logs."""
        deadline = time.monotonic() + wait_s
        while self.status is None and self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        lines, outputs = split_outputs(self.end())
        return "\n".join(lines), outputs.get(0, "")

    def window(self, opened: float, closed: float, batch: int, tx: Transactions) -> HostResult:
        """Its window as the host marked it: the queries of its transactions inside [opened, closed] on
        our clock, pgbench's CPU time and its CPUs' busy share between its stamps."""
        w, a = self.stamps.get("W"), self.stamps.get("A")
        done = round(queries_between(tx.ends, tx.latencies, opened, closed, batch))
        u = accounting.usage(w.cpus, a.cpus, self.cpus) if w and a else None
        latency = {k: int(v) for k, v in tx.latency_ns(opened, closed).items()}
        return HostResult.of_window(
            self.host, done, done, 0, 0, latency, len(self.cpus), a.cpu_s - w.cpu_s if w and a else 0.0,
            u.user + u.system if u else 0.0, u.idle if u else 0.0, self.offset_s, self.offset_error_s,
            w.real_ns if w else None)


class PgbenchHosts:
    """Every client host's pgbench as one client, shaped as Pgbench."""

    name = "pgbench"

    def __init__(self, hosts: list[HostPgbench], batch: int):
        self.hosts = hosts
        self.batch = batch
        self.opened: float | None = None
        self.closed: float | None = None
        self.transactions = Transactions.of([])
        self._stopped = False
        self._result: ClientResult | None = None

    def done(self) -> float:
        return sum(h.progress.transactions() for h in self.hosts) * self.batch

    def set_phase(self, phase: int) -> None:
        if phase == WINDOW:
            self.opened = time.time()
        kind = PHASE_COMMANDS[phase][1]
        replies = tell_all(self.hosts, *PHASE_COMMANDS[phase])
        if phase == AFTER:
            self.closed = time.time()
        for h, reply in zip(self.hosts, replies, strict=True):
            h.stamps[kind] = Stamp.parse(reply.words)

    def ended(self) -> bool:
        return any(h.ended() for h in self.hosts)

    def check(self) -> None:
        for h in self.hosts:
            h.progress.read()
            if h.progress.failed:
                raise PointFailed(f"client host {h.host}: {h.progress.failed} transactions failed")
            if h.failure_words is not None or (h.ended() and self.closed is None):
                raise PointFailed(h.failure())

    def reason(self, what: str) -> str:
        said = [h.failure() for h in self.hosts if h.ended() or h.failure_words]
        return f"{what}: {said[0]}" if said else what

    def kill(self) -> None:
        for h in self.hosts:
            h.end(0)

    def stop(self) -> ClientResult | None:
        """As Pgbench.stop, for every host, with each host's window kept (ClientResult.hosts)."""
        if self._stopped:
            return self._result
        self._stopped = True
        if self.closed is None:
            self.kill()
            return None
        assert self.opened is not None
        ended = [(h, *h.finish(TAIL_S + 60)) for h in self.hosts]
        parts = []
        windows = []
        for h, summary, logs in ended:
            if h.status != 0:
                raise PointFailed(h.failure() if h.status is None else
                                  f"client host {h.host}: pgbench exited with status {h.status}")
            tx = checked_transactions(summary, parse_transaction_logs([logs]), h.offset_s, h.host)
            parts.append(tx)
            windows.append(h.window(self.opened, self.closed, self.batch, tx))
        self.transactions = Transactions.of(parts)
        self._result = ClientResult(errors=0, done=sum(w.done for w in windows),
                                    latency_ns=self.transactions.latency_ns(self.opened, self.closed),
                                    hosts=ClientSide.of(windows), transactions=len(self.transactions.ends))
        return self._result

    def queries(self, t0: float, t1: float) -> float:
        return queries_between(self.transactions.ends, self.transactions.latencies, t0, t1, self.batch)

    def logs(self) -> str:
        return "\n".join(h.launcher.log_tail(h.name, 20) for h in self.hosts)


def check_version(words: str, host: str) -> str | None:
    """None if `pgbench --version`'s answer is one mosbench reads; else why not."""
    m = re.search(r"\(PostgreSQL\) (\d+)", words)
    if not m:
        return f"client host {host}: pgbench is not installed (Debian: apt-get install postgresql-client)"
    if int(m[1]) < MIN_MAJOR:
        return (f"client host {host} has pgbench {m[1]}; mosbench reads the failed-transaction counts of "
                f"pgbench {MIN_MAJOR} or later")
    return None
