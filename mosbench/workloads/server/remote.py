"""Load generators on other machines (`--clients`), reached with the user's OpenSSH.

The paper drove its servers from 22 to 25 client machines through a NIC; over loopback every
request's receive path runs on the client's CPU instead. With `--clients HOST[,HOST…]` each host runs
the workload's native generator, pinned to CPUs of its own, and the servers listen on the address the
clients reach (`--server-address`).

SSH is OpenSSH's client with connection sharing: one master connection per host for the run (the
user's keys, agent, config and known_hosts, host keys checked, BatchMode so nothing waits for a
password), every command over it. The generator travels with each point: the session makes a private
directory on the host, reads the binary from its standard input, runs it and removes the directory
when the generator ends. The generator then reads its commands from the same input (control.h): the
window opens and closes on every host by message, its clock is read over the channel for the offset,
and when the session ends for any reason the input ends and the generator stops, so nothing stays on a
host after a point, a crash or a lost connection.
"""

from __future__ import annotations

import contextlib
import json
import platform
import queue
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosbench import cpulist
from mosbench.errors import PointFailed, UserError
from mosbench.launch.processes import Launcher, how_it_ended
from mosbench.machine.isolation import Group
from mosbench.workloads.server.histogram import Histogram
from mosbench.workloads.server.loadgen import AFTER, COUNTERS, WINDOW

# A name ssh takes as a host (an alias of the user's config, host, user@host, an address); never an option.
_HOST = re.compile(r"^[A-Za-z0-9_.@%:\[\]-]+$")
CONNECT_TIMEOUT = 10
# A clock this far off ours is named with the point: the window opens by message, not by clock, so it
# does not skew the counts, but the host's timestamps (its logs, its window stamps) are that far off.
CLOCK_SKEW_NOTE_S = 0.5
# Hosts whose windows opened further apart than this did not measure the same interval.
WINDOW_SPREAD_NOTE_S = 0.05
COMMAND_TIMEOUT = 10.0
# The window's ends as commands to a host and the kind of its reply.
PHASE_COMMANDS = {WINDOW: ("w", "W"), AFTER: ("a", "A")}
# A generator's result figures beside COUNTERS that are counts: every host's add up (httpload's answers
# judged good and tolerable, the connections, contexts or sessions each opened).
ADDED = ("good", "tolerable", "connections", "contexts", "sessions")
REMOTE_LIMIT_MARGIN = 30  # the generator's own stop, past the harness's, if nothing tells it to stop


@dataclass(frozen=True)
class ClientHost:
    name: str  # as ssh takes it
    cpus: tuple[int, ...] | None = None  # the generator's CPUs there; None: chosen from its online CPUs

    def label(self) -> str:
        return self.name


def parse_clients(text: str) -> tuple[ClientHost, ...]:
    """`--clients` (`-p client_hosts=`): HOST[,HOST…], or @FILE with a host a line and optionally its CPUs (`c3 0-15`);
    empty: the clients run on this machine."""
    text = text.strip()
    if not text:
        return ()
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            lines = path.read_text().splitlines()
        except OSError as e:
            raise UserError(f"--clients {text}: cannot read {path}: {e.strerror}") from None
        hosts = []
        for number, line in enumerate(lines, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) > 2:
                raise UserError(f"{path}:{number}: expected HOST [CPUS], got {line.strip()!r}")
            cpus = None
            if len(words) == 2:
                try:
                    cpus = tuple(cpulist.parse(words[1]))
                except ValueError:
                    raise UserError(f"{path}:{number}: {words[1]!r} is not a CPU list (0-15,32)") from None
            hosts.append(ClientHost(_checked_host(words[0], f"{path}:{number}"), cpus))
    else:
        hosts = [ClientHost(_checked_host(h.strip(), "--clients")) for h in text.split(",") if h.strip()]
    if not hosts:
        raise UserError(f"--clients {text}: no host named")
    names = [h.name for h in hosts]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"--clients names {twice[0]} twice: one generator a host (give it more CPUs instead)")
    return tuple(hosts)


def _checked_host(name: str, where: str) -> str:
    if not name or name.startswith("-") or not _HOST.match(name):
        raise UserError(f"{where}: {name!r} is not a host name ssh takes")
    return name


def ssh_base(config: str, control_path: Path | None = None) -> list[str]:
    """ssh with nothing interactive: no password prompt, no unknown host accepted unasked."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
            "-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR"]
    if config:
        argv += ["-F", config]
    if control_path is not None:
        argv += ["-o", f"ControlPath={control_path}"]
    return argv


def _ssh_words(stderr: str) -> str:
    """ssh's own reason, one line."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


@dataclass(frozen=True)
class HostFacts:
    """What a client host is, read once per run and kept with it."""

    host: str
    hostname: str
    arch: str
    kernel: str
    online: tuple[int, ...]
    route: str  # `ip route get` to the server's address: the device and source the clients use

    def as_fact(self) -> dict[str, Any]:
        return {"hostname": self.hostname, "arch": self.arch, "kernel": self.kernel,
                "cpus": cpulist.format(self.online), "route": self.route}


PROBE = ("uname -m; uname -r; hostname; cat /sys/devices/system/cpu/online; "
         "ip -o route get {addr} 2>/dev/null | head -1 || echo none")


def run(host: ClientHost, config: str, command: str, control_path: Path | None = None) -> str:
    """One command on the host, its output; UserError naming the host and ssh's reason if it cannot be
    reached or the command fails."""
    argv = [*ssh_base(config, control_path), host.name, command]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=CONNECT_TIMEOUT + 20)
    except subprocess.TimeoutExpired:
        raise UserError(f"client host {host.name}: no answer over ssh in {CONNECT_TIMEOUT + 20} s") from None
    if out.returncode:
        words = _ssh_words(out.stderr)
        hint = ""
        if "Permission denied" in words or "verification failed" in words or "known_hosts" in words:
            hint = (f" (`ssh -o BatchMode=yes {host.name} true` must work: a key the agent or config offers, "
                    "the host's key in known_hosts)")
        raise UserError(f"client host {host.name}: {words}{hint}")
    return out.stdout


def probe(host: ClientHost, config: str, server_address: str, control_path: Path | None = None) -> HostFacts:
    """One command on the host: its architecture, kernel, name, CPUs and route to the server; UserError
    naming the host and ssh's reason if it cannot be reached."""
    lines = run(host, config, PROBE.format(addr=shlex.quote(server_address)), control_path).splitlines()
    if len(lines) < 5:
        raise UserError(f"client host {host.name}: unexpected answer to the probe: {chr(10).join(lines)!r}")
    try:
        online = tuple(cpulist.parse(lines[3].strip()))
    except ValueError:
        raise UserError(f"client host {host.name}: online CPUs {lines[3]!r} unreadable") from None
    route = re.sub(r"\s+", " ", lines[4].replace("\\", " ")).strip()
    return HostFacts(host.name, lines[2].strip(), lines[0].strip(), lines[1].strip(), online, route)


def check_host(facts: HostFacts, host: ClientHost, cpus_wanted: int) -> None:
    """A host the run cannot use, refused before anything is measured, with the fix."""
    here = platform.machine()
    if facts.arch != here:
        raise UserError(f"client host {host.name} is {facts.arch} and this machine {here}: the generators are "
                        f"copied built for {here} (build native/ on a {here} client, or use one)")
    if host.cpus is not None and not set(host.cpus) <= set(facts.online):
        raise UserError(f"client host {host.name}: CPUs {cpulist.format(host.cpus)} asked, "
                        f"{cpulist.format(facts.online)} online")
    if host.cpus is None and cpus_wanted > len(facts.online):
        raise UserError(f"client host {host.name} has {len(facts.online)} CPUs and a point wants "
                        f"{cpus_wanted} there: lower client_cpus or add hosts")
    if facts.route.startswith("none") or " dev " not in f" {facts.route}":
        raise UserError(f"client host {host.name} has no route to the server's address ({facts.route})")


def share(total: int, host: int, hosts: int) -> int:
    """Host `host`'s part of `total` units shared by `hosts`: contiguous, sizes within one of each other."""
    return total * (host + 1) // hosts - total * host // hosts


def slot_share(ports: list[int], per_port: int, host: int, hosts: int) -> tuple[list[int], int] | None:
    """The ports a host's generator sends to and its contexts (or connections) on each, so that over
    all hosts every port gets exactly `per_port`: with as many ports as hosts or more each host takes
    every n-th port whole; with fewer, the hosts on a port share its `per_port`. None: the host has no
    share (more hosts on a port than it has contexts)."""
    if len(ports) >= hosts:
        return ports[host::hosts], per_port
    port = host % len(ports)
    sharing = len(range(port, hosts, len(ports)))
    count = share(per_port, host // len(ports), sharing)
    return ([ports[port]], count) if count else None


def host_cpus(host: ClientHost, facts: HostFacts, count: int) -> tuple[int, ...]:
    """The generator's CPUs on a host: the ones given, else `count` of its online CPUs from the top (a
    host that is also the server's machine, as in tests, keeps clear of the server's from CPU 0)."""
    if host.cpus is not None:
        return host.cpus
    return tuple(sorted(facts.online[-count:]))


class Master:
    """The run's shared SSH connection to one host: every later command rides on it."""

    def __init__(self, launcher: Launcher, group: Group, host: ClientHost, index: int, config: str,
                 control_dir: Path):
        self.host = host
        self.config = config
        self.launcher = launcher
        # ControlPath must stay short (a Unix socket path of at most 107 bytes): the run's scratch, a number.
        self.path = control_dir / f"ssh-{index}"
        self.name = f"ssh-master-{re.sub(r'[^A-Za-z0-9_.-]', '_', host.name)}"
        self.proc = launcher.spawn(self.name, [
            *ssh_base(config, self.path), "-M", "-N", "-o", "ControlPersist=no", host.name], group)
        deadline = time.monotonic() + CONNECT_TIMEOUT + 10
        while True:
            if self.proc.poll() is not None:
                words = launcher.last_error(self.name) or how_it_ended(self.proc)
                raise PointFailed(f"client host {host.name}: {words}")
            check = subprocess.run([*ssh_base(config, self.path), "-O", "check", host.name],
                                   capture_output=True, text=True)
            if check.returncode == 0:
                return
            if time.monotonic() > deadline:
                self.close()
                raise PointFailed(f"client host {host.name}: no SSH connection after {CONNECT_TIMEOUT + 10} s")
            time.sleep(0.1)

    def argv(self, command: str) -> list[str]:
        return [*ssh_base(self.config, self.path), "-o", "ControlMaster=no", self.host.name, command]

    def close(self) -> None:
        self.launcher.stop(self.proc)
        with contextlib.suppress(OSError):
            self.path.unlink()


def remote_command(sizes: list[int], args: list[str], files: list[Path], outputs: list[Path] = ()) -> str:
    """The shell line a session runs on the host: a private directory, the binary and the files it reads
    taken from standard input (exactly their sizes: what follows is the generator's commands), the
    generator run with the files' paths there, then the files it wrote (outputs, named in args) printed
    after it, each between `OUTPUT i` and `END i` lines, and the directory removed when it ends."""
    reads = [f'head -c {sizes[0]} > "$d/g" && chmod 700 "$d/g"']
    reads += [f'head -c {size} > "$d/f{i}"' for i, size in enumerate(sizes[1:])]
    local = {str(f): f'"$d/f{i}"' for i, f in enumerate(files)}
    local.update({str(f): f'"$d/o{i}"' for i, f in enumerate(outputs)})
    words = [local.get(a, shlex.quote(a)) for a in args]
    run = '"$d/g" ' + " ".join(words)
    if outputs:
        prints = "; ".join(f'echo "OUTPUT {i}"; cat "$d/o{i}" 2>/dev/null; echo; echo "END {i}"'
                           for i in range(len(outputs)))
        run = "{ " + run + "; s=$?; " + prints + "; exit $s; }"
    return ("d=$(mktemp -d /tmp/mosbench-client.XXXXXX) || exit 1; trap 'rm -rf \"$d\"' EXIT; "
            "trap 'exit 129' HUP INT TERM; " + " && ".join(reads) + " && " + run)


def split_outputs(lines: list[str]) -> tuple[list[str], dict[int, str]]:
    """A session's lines after RESULT: the result's own, and each output's text by its number."""
    result: list[str] = []
    outputs: dict[int, str] = {}
    current: list[str] | None = None
    for line in lines:
        if current is None and line.startswith("OUTPUT ") and line[7:].isdigit():
            current = []
            number = int(line[7:])
        elif current is not None and line == f"END {number}":
            outputs[number] = "\n".join(current)
            current = None
        elif current is not None:
            current.append(line)
        else:
            result.append(line)
    return result, outputs


@dataclass
class Reply:
    kind: str
    words: list[str]
    at: float  # our monotonic clock when read


class RemoteSession:
    """A program on a host, over a session of the host's master: what it needs sent down the session's
    standard input (payload), then commands in and replies out, a line each. Its first reply is READY;
    a line `F <words>` is its failure; after `RESULT` come its final lines."""

    def __init__(self, launcher: Launcher, master: Master, group: Group, name: str, command: str, payload: bytes):
        self.launcher = launcher
        self.master = master
        self.host = master.host.name
        self.name = name
        self.replies: queue.Queue[Reply] = queue.Queue()
        self.failure_words: str | None = None
        self._result_lines: list[str] = []
        self.proc: subprocess.Popen = launcher.spawn(name, master.argv(command), group, piped=True)
        self._reader = threading.Thread(target=self._read, name=f"{name}-reader", daemon=True)
        self._reader.start()
        try:
            self._send_raw(payload)
            ready = self._wait("READY", 30)
            if ready is None:
                raise PointFailed(self.failure())
            self.offset_s, self.offset_error_s = self._clock_offset()
        except BaseException:
            self.end()
            raise

    def _read(self) -> None:
        assert self.proc.stdout is not None
        in_result = False
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if in_result:
                self._result_lines.append(line)
                continue
            kind, _, rest = line.partition(" ")
            if kind == "RESULT":
                in_result = True
            elif kind == "F":
                self.failure_words = rest
            self.seen(kind, rest)
            self.replies.put(Reply(kind, rest.split(), time.monotonic()))
        self.replies.put(Reply("EOF", [], time.monotonic()))

    def seen(self, kind: str, rest: str) -> None:
        """Every reply as it is read (for a subclass to keep the ones that come unasked)."""

    def _send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise PointFailed(self.failure()) from None

    def send(self, command: str) -> None:
        self._send_raw(command.encode() + b"\n")

    def _wait(self, kind: str, timeout: float = COMMAND_TIMEOUT) -> Reply | None:
        """The next reply of that kind (earlier ones of other kinds dropped); None at the end of output."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                reply = self.replies.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise PointFailed(f"client host {self.host}: no {kind} reply in {timeout:.0f} s") from None
            if reply.kind == kind:
                return reply
            if reply.kind in ("EOF", "F", "RESULT"):
                return None

    def expect(self, kind: str) -> Reply:
        """The reply of that kind to a command sent; PointFailed with the host's words if it ended instead."""
        reply = self._wait(kind)
        if reply is None:
            raise PointFailed(self.failure())
        return reply

    def ask(self, command: str, kind: str) -> Reply:
        self.send(command)
        return self.expect(kind)

    def _clock_offset(self) -> tuple[float, float]:
        def read_clock() -> tuple[int, float]:
            reply = self.ask("t", "T")
            return int(reply.words[0]), reply.at

        offset = clock_offset(read_clock)
        assert offset is not None  # ask() raises rather than answer nothing
        return offset

    def failure(self) -> str:
        if self.failure_words:
            return f"client host {self.host}: {self.failure_words}"
        tail = [ln for ln in self.launcher.stderr_lines(self.name) if ln.strip()]
        if tail:
            return f"client host {self.host}: {tail[-1].strip()}"
        return f"client host {self.host}: its {self.name} {how_it_ended(self.proc)} without a message"

    def check(self) -> None:
        if self.failure_words is not None or self.proc.poll() is not None:
            raise PointFailed(self.failure())

    def end(self, wait: float = COMMAND_TIMEOUT) -> list[str]:
        """Asks it to stop (`q`), waits up to `wait` seconds for the session to end, ends it if not, and
        returns the lines it printed after RESULT."""
        with contextlib.suppress(PointFailed):
            self.send("q")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(wait)
        self.launcher.stop(self.proc)
        self._reader.join(5)
        return self._result_lines


class RemoteGenerator(RemoteSession):
    """One host's native generator (control.h), with the files it reads sent along and the ones it
    writes (outputs) brought back."""

    def __init__(self, launcher: Launcher, master: Master, group: Group, name: str, binary: Path,
                 args: list[str], cpus: tuple[int, ...], limit: float, files: tuple[Path, ...] = (),
                 outputs: tuple[Path, ...] = ()):
        self.cpus = cpus
        self._result: dict[str, Any] | None = None
        self.output_paths = outputs
        self.outputs: dict[Path, str] = {}  # what the generator wrote there, once it has ended
        payload = [binary.read_bytes(), *(f.read_bytes() for f in files)]
        args = [*args, "--cpus", cpulist.format(cpus), "--control", "--limit", str(int(limit) + REMOTE_LIMIT_MARGIN)]
        command = remote_command([len(p) for p in payload], args, list(files), list(outputs))
        super().__init__(launcher, master, group, name, command, b"".join(payload))

    def counters(self) -> dict[str, int]:
        reply = self.ask("s", "S")
        values = [int(w) for w in reply.words[1:1 + len(COUNTERS)]]
        return dict(zip(COUNTERS, values, strict=True))

    def stop(self) -> dict[str, Any]:
        """Asks it to stop and reads its window's result; {} if it had none."""
        if self._result is None:
            lines, outputs = split_outputs(self.end())
            self.outputs = {path: outputs[i] for i, path in enumerate(self.output_paths) if i in outputs}
            try:
                self._result = json.loads("\n".join(lines)) if lines else {}
            except ValueError:
                self._result = {}
        return self._result


@dataclass(frozen=True)
class HostResult:
    """One host's window, as stored with the point."""

    host: str
    counts: dict[str, int]
    latency: dict[str, int]
    cpus: int
    cpu_s: float  # the generator's own user + system time over the window
    busy: float | None  # its CPUs' busy share over the window, from the host's /proc/stat
    offset_s: float
    offset_error_s: float
    window_open_s: float | None  # the host's window opening, on our clock (its stamp less its offset)

    def as_metrics(self) -> dict[str, Any]:
        done = self.counts.get("done", 0)
        return {
            "host": self.host, **{k: self.counts.get(k, 0) for k in ("sent", "done", "lost", "errors")},
            "latency_p50_us": round(self.latency.get("p50", 0) / 1000, 1),
            "latency_p99_us": round(self.latency.get("p99", 0) / 1000, 1),
            "cpus": self.cpus, "cpu_us_per_request": round(self.cpu_s / done * 1e6, 3) if done else None,
            "busy": None if self.busy is None else round(self.busy, 4),
            "clock_offset_ms": round(self.offset_s * 1000, 3),
            "clock_offset_error_ms": round(self.offset_error_s * 1000, 3),
        }


def merge(generators: list[RemoteGenerator], results: list[dict[str, Any]]) -> dict[str, Any]:
    """Every host's window result as one: counts added, histograms added bucket by bucket, the hosts
    kept one by one, the spread of their window openings on our clock."""
    total: dict[str, Any] = {k: 0 for k in COUNTERS}
    total["flows"] = []
    merged = Histogram()
    hosts: list[HostResult] = []
    windows: list[float] = []
    for gen, result in zip(generators, results, strict=True):
        if not result:
            continue
        for k in COUNTERS:
            total[k] += int(result.get(k, 0))
        for k in ADDED:
            if k in result:
                total[k] = total.get(k, 0) + int(result[k])
        total["flows"] += result.get("flows") or []
        hist = Histogram.from_result(result.get("hist") or {"sub_bits": 7})
        merged.add(hist)
        usage = result.get("usage") or {}
        window_s = float(result.get("window_s") or 0.0)
        windows.append(window_s)
        cpus_total = usage.get("cpus_busy_s", 0.0) + usage.get("cpus_idle_s", 0.0)
        opened = usage.get("window_open_ns")
        hosts.append(HostResult(
            gen.host, {k: int(result.get(k, 0)) for k in COUNTERS}, hist.summary(), len(gen.cpus),
            usage.get("user_s", 0.0) + usage.get("system_s", 0.0),
            usage["cpus_busy_s"] / cpus_total if cpus_total > 0 else None,
            gen.offset_s, gen.offset_error_s, opened / 1e9 - gen.offset_s if opened else None))
    if not hosts:
        return {}
    total["window_s"] = max(windows)
    total["latency_ns"] = merged.summary()
    total["host_results"] = hosts
    opens = [h.window_open_s for h in hosts if h.window_open_s is not None]
    total["window_spread_s"] = max(opens) - min(opens) if len(opens) > 1 else 0.0
    return total


class RemoteClients:
    """A point's generators on every client host, as one `Client`."""

    def __init__(self, name: str, generators: list[RemoteGenerator]):
        self.name = name
        self.generators = generators
        self._result: dict[str, Any] | None = None

    def counters(self) -> dict[str, int]:
        totals = {k: 0 for k in COUNTERS}
        for g in self.generators:
            for k, v in g.counters().items():
                totals[k] += v
        return totals

    def done(self) -> float:
        return float(self.counters()["done"])

    def outputs(self, path: Path) -> list[str | None]:
        """What every host's generator wrote to its copy of `path`, in host order (after stop()); None
        for a host whose generator wrote nothing."""
        return [g.outputs.get(path) for g in self.generators]

    def set_phase(self, phase: int) -> None:
        tell_all(self.generators, *PHASE_COMMANDS[phase])

    def check(self) -> None:
        for g in self.generators:
            g.check()

    def stop(self) -> dict[str, Any]:
        if self._result is None:
            results = [g.stop() for g in self.generators]
            self._result = merge(self.generators, results)
        return self._result

    def logs(self) -> str:
        return "\n".join(g.launcher.log_tail(g.name, 20) for g in self.generators)


def host_notes(metrics: dict[str, Any]) -> list[str]:
    """What a remote-client point must say: a host's clock far off ours, windows that did not open together."""
    notes = []
    for h in metrics.get("client_hosts") or []:
        if abs(h.get("clock_offset_ms") or 0.0) >= CLOCK_SKEW_NOTE_S * 1000:
            notes.append(f"client host {h['host']}'s clock is {h['clock_offset_ms'] / 1000:+.3f} s off ours "
                         f"(±{h['clock_offset_error_ms']:.1f} ms): the window opened by message, so its counts "
                         "hold; its own timestamps are shifted by that")
    spread = metrics.get("client_window_spread_ms")
    if spread is not None and spread >= WINDOW_SPREAD_NOTE_S * 1000:
        notes.append(f"CLIENT WINDOWS APART: the hosts' windows opened up to {spread:.0f} ms apart")
    return notes


def clock_offset(read_clock: Callable[[], tuple[int, float] | None], probes: int = 7) -> tuple[float, float] | None:
    """A host's realtime clock minus ours, from the read with the shortest round trip (NTP's rule), and
    its uncertainty: half that round trip. read_clock asks once and returns the host's clock (ns) and our
    monotonic time its answer came, or None if none came; None if no read was answered."""
    best: tuple[float, float] | None = None
    for _ in range(probes):
        sent_real, sent = time.time(), time.monotonic()
        answer = read_clock()
        if answer is None:
            break
        host_ns, at = answer
        half = (at - sent) / 2
        offset = host_ns / 1e9 - (sent_real + half)
        if best is None or half < best[1]:
            best = (offset, half)
    return best


def tell_all(sessions: Sequence[RemoteSession], command: str, kind: str) -> list[Reply]:
    """Every host told first, the replies read after, so the hosts act within one send of each other
    rather than one round trip."""
    for s in sessions:
        s.send(command)
    return [s.expect(kind) for s in sessions]


def clock_offset_over_ssh(host: ClientHost, config: str, probes: int = 7) -> tuple[float, float]:
    """The host's clock minus ours and its uncertainty, from one session answering `probes` reads of its
    clock (the shortest round trip wins, as in NTP): no connection set-up inside a measured trip."""
    script = f"for i in $(seq {probes}); do read x || exit 0; date +%s%N; done"
    proc = subprocess.Popen([*ssh_base(config), host.name, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def read_clock() -> tuple[int, float] | None:
        stdin.write("\n")
        stdin.flush()
        line = stdout.readline()
        return (int(line), time.monotonic()) if line.strip() else None

    try:
        best = clock_offset(read_clock, probes)
    finally:
        proc.kill()
        proc.wait()
    if best is None:
        raise UserError(f"client host {host.name}: its clock could not be read")
    return best


def generator_runs(host: ClientHost, config: str, binary: Path) -> str | None:
    """None if our generator runs on the host (copied as a point copies it); else its words."""
    data = binary.read_bytes()
    out = subprocess.run([*ssh_base(config), host.name, remote_command([len(data)], ["--help"], [])], input=data,
                         capture_output=True, timeout=CONNECT_TIMEOUT + 20)
    if out.returncode == 0:
        return None
    return _ssh_words(out.stderr.decode(errors="replace")) or f"exit {out.returncode}"


def doctor_rows(hosts: tuple[ClientHost, ...], config: str, server_address: str,
                binaries: list[Path]) -> list[tuple[str, str, bool]]:
    """`mosbench doctor --clients`: each host's reach, CPUs, route to the server, clock and generators."""
    rows: list[tuple[str, str, bool]] = []
    for host in hosts:
        try:
            facts = probe(host, config, server_address)
        except UserError as e:
            rows.append((f"client {host.name}", str(e), False))
            continue
        here = platform.machine()
        rows.append((f"client {host.name}", f"{facts.hostname}: {facts.arch}, kernel {facts.kernel}, CPUs "
                     f"{cpulist.format(facts.online)} ({len(facts.online)})", facts.arch == here))
        routed = " dev " in f" {facts.route}"
        rows.append((f"  route to {server_address}", facts.route, routed))
        offset, error = clock_offset_over_ssh(host, config)
        rows.append(("  clock offset", f"{offset * 1000:+.3f} ms ± {error * 1000:.3f} ms",
                     abs(offset) < CLOCK_SKEW_NOTE_S))
        for binary in binaries:
            words = generator_runs(host, config, binary) if facts.arch == here else f"built for {here}"
            rows.append((f"  {binary.name}", "runs there (copied with each point)" if words is None else words,
                         words is None))
    return rows
