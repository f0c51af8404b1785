"""Client hosts over the user's OpenSSH: one command, the run's master connection to a host, and a
program run in a session of it.

ssh is OpenSSH's client with nothing interactive (BatchMode: no password asked, no unknown host key
taken) and connection sharing: one master connection per host for the run (the user's keys, agent,
config and known_hosts), every command over it. A session's shell (`private_dir`) makes a private
directory on the host and removes it however it ends; the program's files come down the session's
standard input, then its commands, a line each, and its replies come back a line each. Files it
writes are printed after it between `OUTPUT i` and `END i` lines (`print_output`, read back by
`split_outputs`). When the session ends for any reason its input ends, which stops the program.
"""

from __future__ import annotations

import contextlib
import queue
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mosbench.errors import PointFailed, UserError
from mosbench.filenames import file_stem
from mosbench.launch.processes import Launcher, how_it_ended
from mosbench.machine.isolation import Group
from mosbench.workloads.server.loadgen import AFTER, WINDOW

CONNECT_TIMEOUT = 10
COMMAND_TIMEOUT = 10.0
# The window's ends as commands to a session's program and the kind of its reply (control.h).
PHASE_COMMANDS = {WINDOW: ("w", "W"), AFTER: ("a", "A")}


def ssh_base(config: str, control_path: Path | None = None) -> list[str]:
    """ssh with nothing interactive: no password prompt, no unknown host accepted unasked."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
            "-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3", "-o", "LogLevel=ERROR"]
    if config:
        argv += ["-F", config]
    if control_path is not None:
        argv += ["-o", f"ControlPath={control_path}"]
    return argv


def ssh_words(stderr: str) -> str:
    """ssh's own reason, one line."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


def run(host: str, config: str, command: str, control_path: Path | None = None) -> str:
    """One command on the host, its output; UserError naming the host and ssh's reason if it cannot be
    reached or the command fails."""
    argv = [*ssh_base(config, control_path), host, command]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=CONNECT_TIMEOUT + 20)
    except subprocess.TimeoutExpired:
        raise UserError(f"client host {host}: no answer over ssh in {CONNECT_TIMEOUT + 20} s") from None
    if out.returncode:
        words = ssh_words(out.stderr)
        hint = ""
        if "Permission denied" in words or "verification failed" in words or "known_hosts" in words:
            hint = (f" (`ssh -o BatchMode=yes {host} true` must work: a key the agent or config offers, "
                    "the host's key in known_hosts)")
        raise UserError(f"client host {host}: {words}{hint}")
    return out.stdout


class Master:
    """The run's shared SSH connection to one host: every later command rides on it, and every session
    of it runs in the group the master was started in."""

    def __init__(self, launcher: Launcher, group: Group, host: str, index: int, config: str, control_dir: Path):
        self.host = host
        self.config = config
        self.launcher = launcher
        self.group = group
        # ControlPath must stay short (a Unix socket path of at most 107 bytes): the run's scratch, a number.
        self.path = control_dir / f"ssh-{index}"
        self.name = f"ssh-master-{file_stem(host)}"
        self.proc = launcher.spawn(self.name, [
            *ssh_base(config, self.path), "-M", "-N", "-o", "ControlPersist=no", host], group)
        deadline = time.monotonic() + CONNECT_TIMEOUT + 10
        while True:
            if self.proc.poll() is not None:
                words = launcher.last_error(self.name) or how_it_ended(self.proc)
                raise PointFailed(f"client host {host}: {words}")
            check = subprocess.run([*ssh_base(config, self.path), "-O", "check", host],
                                   capture_output=True, text=True)
            if check.returncode == 0:
                return
            if time.monotonic() > deadline:
                self.close()
                raise PointFailed(f"client host {host}: no SSH connection after {CONNECT_TIMEOUT + 10} s")
            time.sleep(0.1)

    def argv(self, command: str) -> list[str]:
        return [*ssh_base(self.config, self.path), "-o", "ControlMaster=no", self.host, command]

    def close(self) -> None:
        self.launcher.stop(self.proc)
        with contextlib.suppress(OSError):
            self.path.unlink()


# --- the shell a session runs -----------------------------------------------------------------------------

def private_dir(on_signal: str = "") -> str:
    """A session's first line: a private directory `$d` on the host, removed however the shell ends
    (on_signal: what to end first when the session is hung up on)."""
    return ("d=$(mktemp -d /tmp/mosbench-client.XXXXXX) || exit 1; trap 'rm -rf \"$d\"' EXIT; "
            f"trap '{on_signal}exit 129' HUP INT TERM")


def receive(size: int, name: str) -> str:
    """Exactly `size` bytes of the session's input into `$d/name`: what follows is the program's."""
    return f'head -c {size} > "$d/{name}"'


def print_output(number: int, files: str) -> str:
    """Files a program wrote, printed after it between markers `split_outputs` reads (files: shell words)."""
    return f'echo "OUTPUT {number}"; cat {files} 2>/dev/null; echo; echo "END {number}"'


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


def remote_command(sizes: list[int], args: list[str], files: list[Path], outputs: Sequence[Path] = ()) -> str:
    """The shell line that runs a program carried to the host: the binary and the files it reads taken
    from standard input (exactly their sizes), the program run with the files' paths there, then the
    files it wrote (outputs, named in args) printed after it."""
    reads = [f'{receive(sizes[0], "g")} && chmod 700 "$d/g"']
    reads += [receive(size, f"f{i}") for i, size in enumerate(sizes[1:])]
    local = {str(f): f'"$d/f{i}"' for i, f in enumerate(files)}
    local.update({str(f): f'"$d/o{i}"' for i, f in enumerate(outputs)})
    words = [local.get(a, shlex.quote(a)) for a in args]
    command = '"$d/g" ' + " ".join(words)
    if outputs:
        prints = "; ".join(print_output(i, f'"$d/o{i}"') for i in range(len(outputs)))
        command = "{ " + command + "; s=$?; " + prints + "; exit $s; }"
    return private_dir() + "; " + " && ".join(reads) + " && " + command


# --- a program in a session -------------------------------------------------------------------------------

@dataclass
class Reply:
    kind: str
    words: list[str]
    at: float  # our monotonic clock when read


class RemoteSession:
    """A program on a host, over a session of the host's master: what it needs sent down the session's
    standard input (payload), then commands in and replies out, a line each. Its first reply is READY;
    a line `F <words>` is its failure; after `RESULT` come its final lines."""

    def __init__(self, master: Master, name: str, command: str, payload: bytes):
        self.launcher = master.launcher
        self.master = master
        self.host = master.host
        self.name = name
        self.replies: queue.Queue[Reply] = queue.Queue()
        self.failure_words: str | None = None
        self._result_lines: list[str] = []
        self.proc: subprocess.Popen = self.launcher.spawn(name, master.argv(command), master.group, piped=True)
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
        """Why the session failed or ended, in the host's words where it said any."""
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
