"""A point's native load generators on its client hosts (`--clients`), as one `Generator`.

A generator travels with each point: a session of its host's master (ssh.py) makes a private
directory there, reads the binary and the files it reads from its standard input, runs it pinned to
the host's CPUs and removes the directory when it ends. The generator then reads its commands from
the same input (control.h): the window opens and closes on every host by message, its clock is read
over the channel for the offset, and when the session ends for any reason the input ends and the
generator stops, so nothing stays on a host after a point, a crash or a lost connection. The files it
writes come back after it (Exim's ledger), and the hosts' windows are merged into one result with
each host's kept beside it (hostresult.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from mosbench import cpulist
from mosbench.workloads.server.histogram import Histogram
from mosbench.workloads.server.hostresult import ClientSide, HostResult
from mosbench.workloads.server.loadgen import ADDED, COUNTERS, ClientResult
from mosbench.workloads.server.runhosts import RunHost
from mosbench.workloads.server.ssh import PHASE_COMMANDS, RemoteSession, remote_command, split_outputs, tell_all

REMOTE_LIMIT_MARGIN = 30  # the generator's own stop, past the harness's, if nothing tells it to stop


class RemoteGenerator(RemoteSession):
    """One host's native generator (control.h), with the files it reads sent along and the ones it
    writes (outputs) brought back."""

    def __init__(self, host: RunHost, name: str, binary: Path, args: list[str], cpus: tuple[int, ...],
                 limit: float, files: tuple[Path, ...] = (), outputs: tuple[Path, ...] = ()):
        self.cpus = cpus
        self._result: dict[str, Any] | None = None
        self.output_paths = outputs
        self.outputs: dict[Path, str] = {}  # what the generator wrote there, once it has ended
        payload = [binary.read_bytes(), *(f.read_bytes() for f in files)]
        args = [*args, "--cpus", cpulist.format(cpus), "--control", "--limit", str(int(limit) + REMOTE_LIMIT_MARGIN)]
        command = remote_command([len(p) for p in payload], args, list(files), list(outputs))
        super().__init__(host.master, name, command, b"".join(payload))

    def counters(self) -> dict[str, int]:
        reply = self.ask("s", "S")
        values = [int(w) for w in reply.words[1:1 + len(COUNTERS)]]
        return dict(zip(COUNTERS, values, strict=True))

    def finish(self) -> dict[str, Any]:
        """Asks it to stop and reads its window's result as it wrote it; {} if it had none. Idempotent."""
        if self._result is None:
            lines, outputs = split_outputs(self.end())
            self.outputs = {path: outputs[i] for i, path in enumerate(self.output_paths) if i in outputs}
            try:
                self._result = json.loads("\n".join(lines)) if lines else {}
            except ValueError:
                self._result = {}
        return self._result


class Measured(Protocol):
    """What merge reads of a host's generator beside its result."""

    host: str
    cpus: tuple[int, ...]
    offset_s: float
    offset_error_s: float


def merge(generators: Sequence[Measured], results: Sequence[dict[str, Any]]) -> ClientResult | None:
    """Every host's window result as one: counts added, histograms added bucket by bucket, the hosts
    kept one by one (with the spread of their window openings on our clock); None if no host had one."""
    parts: list[ClientResult] = []
    hosts: list[HostResult] = []
    merged = Histogram()
    for gen, raw in zip(generators, results, strict=True):
        if not raw:
            continue
        part = ClientResult.parse(raw)
        parts.append(part)
        hist = Histogram.from_result(raw.get("hist") or {"sub_bits": 7})
        merged.add(hist)
        usage = raw.get("usage") or {}
        hosts.append(HostResult.of_window(
            gen.host, part.sent or 0, part.done or 0, part.lost or 0, part.errors or 0, hist.summary(),
            len(gen.cpus), usage.get("user_s", 0.0) + usage.get("system_s", 0.0), usage.get("cpus_busy_s", 0.0),
            usage.get("cpus_idle_s", 0.0), gen.offset_s, gen.offset_error_s, usage.get("window_open_ns")))
    if not parts:
        return None
    added = {k: [v for p in parts if (v := getattr(p, k)) is not None] for k in ADDED}
    return ClientResult(
        **{k: sum(getattr(p, k) or 0 for p in parts) for k in COUNTERS},
        **{k: sum(values) for k, values in added.items() if values},
        latency_ns=merged.summary(), window_s=max(p.window_s or 0.0 for p in parts),
        flows=tuple(f for p in parts for f in p.flows), hosts=ClientSide.of(hosts))


class RemoteClients:
    """A point's generators on every client host, as one `Generator`."""

    def __init__(self, name: str, generators: list[RemoteGenerator]):
        self.name = name
        self.generators = generators
        self._stopped = False
        self._result: ClientResult | None = None

    def counters(self) -> dict[str, int]:
        totals = dict.fromkeys(COUNTERS, 0)
        for g in self.generators:
            for k, v in g.counters().items():
                totals[k] += v
        return totals

    def done(self) -> float:
        return float(self.counters()["done"])

    def outputs(self, path: Path) -> list[str | None]:
        return [g.outputs.get(path) for g in self.generators]

    def set_phase(self, phase: int) -> None:
        tell_all(self.generators, *PHASE_COMMANDS[phase])

    def check(self) -> None:
        for g in self.generators:
            g.check()

    def stop(self) -> ClientResult | None:
        if not self._stopped:
            self._stopped = True
            self._result = merge(self.generators, [g.finish() for g in self.generators])
        return self._result

    def logs(self) -> str:
        return "\n".join(g.launcher.log_tail(g.name, 20) for g in self.generators)
