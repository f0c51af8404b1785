"""Where a point's CPU time went: perf's samples over the window, folded into stacks, per unit of work.

`perf record -e cpu-clock -F 499 -g -C <the point's CPUs>` samples every task on the measured CPUs
(kernel and user frames, idle included) and is enabled over exactly the measurement window through
its control FIFO, never the warm-up. Each sample stands for one sampling period of CPU time on one
CPU (cpu-clock is a timer: the same meaning on a VM without a PMU and on bare metal). The samples
are folded (`comm;outermost;…;innermost`, kernel frames marked `_[k]` as Brendan Gregg's
stackcollapse-perf does, an unresolved user frame named by its binary) and stored with the point,
so a run is analysed again from the store alone, without perf or the machine.

Normalised by the window's work, a stack's samples become CPU µs per unit of work: one core and N
cores compare directly, and what grew from one to the other is where the per-core loss went.
Hardware counters (cycles, instructions, cache misses) are read beside the samples where the
machine has a PMU, and `perf c2c` samples the cache lines that moved between cores (run/c2c.py); where
it has none they are recorded as absent with the reason, never as zero.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

from mosbench import cpulist
from mosbench.analysis.profiles import KERNEL
from mosbench.launch.perfctl import PerfControl
from mosbench.launch.processes import Launcher
from mosbench.machine.isolation import Group
from mosbench.run import c2c

EVENT = "cpu-clock"
FREQUENCY = 499  # Hz a CPU (997 cost a 250 ns system call 6%); prime, so it never runs in step with a timer
# Samples a point may take: past it the frequency falls (256 CPUs over a 5 s window: 390 Hz), so that
# perf script folds any point in seconds. Never below MIN_FREQUENCY.
SAMPLE_BUDGET = 500_000
MIN_FREQUENCY = 49
JOB_SECONDS = 60.0  # a job's length for its sampling frequency (its window is not known before it ends)
# Without BPF program events perf starts in 0.2 s instead of 1.2 s; mosbench samples no BPF code.
RECORD_OPTIONS = ("--no-bpf-event",)
MAX_STACKS = 4000  # distinct stacks kept per point (most samples first); the rest fold into "[other]"
MAX_DEPTH = 128
# The last-level cache and data TLB misses are Veal & Foong's Figure 13 (their L2 was the last level); perf's
# generic names, which a PMU may lack one by one: those are left out, never counted as zero.
PMU_EVENTS = ("cycles", "instructions", "cache-misses", "LLC-load-misses", "dTLB-load-misses")
PMU_REQUIRED = ("cycles", "instructions")
HEADER = re.compile(r"^(\S.*?)\s+(\d+)\s+(\d+)\s*$")  # comm, pid, period (perf script -F comm,pid,period,…)
MAX_LOCKS = 20
# perf lock contention's rows: "contended  total wait  max wait  avg wait  type  caller", waits with units.
LOCK_ROW = re.compile(r"^\s*(\d+)\s+([\d.]+ [mun]?s)\s+([\d.]+ [mun]?s)\s+([\d.]+ [mun]?s)\s+(.+?)\s{2,}(\S.*?)\s*$")
LOCK_FRAME = re.compile(r"^\s+0x[0-9a-f]+\s+(\S+)")
UNIT_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
# A kernel built with CONFIG_LOCK_STAT: where the lock tracepoints are missing (before Linux 5.19) its
# per-class statistics stand in, cleared as the warm-up starts and read as it ends (machine-wide).
LOCK_STAT = Path("/proc/lock_stat")
LOCK_STAT_ON = Path("/proc/sys/kernel/lock_stat")
# "class name: con-bounces contentions waittime-min -max -total -avg acq-bounces acquisitions ..." (µs)
LOCK_STAT_ROW = re.compile(r"^\s*(\S.*?):\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                           r"\s+(\d+)\s+(\d+)")
LOCK_STAT_SITE = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+\[<[0-9a-f]+>\]\s+(\S+)")


def _refusal(argv: list[str], what: str) -> str | None:
    """Runs a short perf probe: None where it worked, else what perf said (one line)."""
    if not shutil.which("perf"):
        return "perf is not installed (Debian: linux-perf)"
    try:
        probe = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        # An emulated guest's perf lock set-up (every lock tracepoint) ran past a minute: absent, not a failure
        return f"{what}: perf's probe took more than 60 s"
    if probe.returncode == 0:
        return None
    said = [line for line in probe.stderr.strip().splitlines() if line.strip()]
    return f"{what}: {said[-1] if said else f'status {probe.returncode}'}"


@functools.cache
def unavailable() -> str | None:
    """Why this machine cannot be profiled, or None."""
    return _refusal(["perf", "record", *RECORD_OPTIONS, "-e", EVENT, "-F", str(FREQUENCY), "-g", "-a",
                     "-o", os.devnull, "--", "true"], "perf record cannot sample the CPUs")


@functools.cache
def locks_unavailable() -> str | None:
    """Why kernel lock contention cannot be traced here (perf lock needs the lock:contention_begin
    tracepoints, Linux 5.19 on), or None."""
    return _refusal(["perf", "lock", "record", *RECORD_OPTIONS, "-a", "-o", os.devnull, "--", "true"],
                    "perf lock cannot trace lock contention")


@functools.cache
def pmu_unavailable() -> str | None:
    """Why hardware counters cannot be read here (a VM without a virtual PMU), or None."""
    if not shutil.which("perf"):
        return "perf is not installed"
    missing = _missing_events()
    required = [e for e in missing or [] if e in PMU_REQUIRED]
    if missing is None or required:
        return f"no hardware counters ({', '.join(required or ['perf stat failed'])} not supported: no PMU here)"
    return None


@functools.cache
def _missing_events() -> list[str] | None:
    """The PMU events perf cannot count here; None when perf stat itself failed."""
    try:
        probe = subprocess.run(["perf", "stat", "-x,", "-e", ",".join(PMU_EVENTS), "-a", "--", "true"],
                               capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None
    if probe.returncode != 0:
        return None
    return [f.split(",")[2] for f in probe.stderr.splitlines()
            if f.count(",") >= 2 and f.split(",")[0].startswith("<not")]


def pmu_events() -> tuple[str, ...]:
    """The PMU events counted with a profile: those this machine's PMU has."""
    missing = _missing_events() or []
    return tuple(e for e in PMU_EVENTS if e not in missing)


USER_BRACKETED = ("[unknown]", "[vdso]", "[vsyscall]", "[heap]", "[stack]", "[anon]")


def frequency_for(cpus: int, window_s: float) -> int:
    """The sampling frequency for a point: FREQUENCY, lowered to keep its samples within SAMPLE_BUDGET."""
    return max(MIN_FREQUENCY, min(FREQUENCY, int(SAMPLE_BUDGET / max(cpus * window_s, 1e-9))))


def describe() -> dict[str, Any]:
    """How a run's profiles were taken, for its environment."""
    return {"event": EVENT, "frequency_hz": FREQUENCY, "call_graph": "fp", "perf": _perf_version(),
            "hardware_counters": pmu_unavailable() or ", ".join(pmu_events())}


def _perf_version() -> str | None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(["perf", "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    return None


def frame_name(symbol: str, dso: str) -> str:
    """A frame as the folded stack names it: kernel ones (the kernel image, a module) marked, an
    unresolved user one named by its binary."""
    kernel = dso.startswith("[") and dso not in USER_BRACKETED
    if symbol in ("[unknown]", ""):
        symbol = f"[{os.path.basename(dso.strip('[]')) or 'unknown'}]"
    symbol = symbol.replace(";", ":")  # the separator of folded stacks
    return symbol + KERNEL if kernel else symbol


def fold(script: str, max_depth: int = MAX_DEPTH) -> tuple[Counter[str], int]:
    """perf script's text (-F comm,pid,period,ip,sym,dso) as folded stacks with their sample counts,
    and the sampling period in ns (the most common one: cpu-clock's is 1/frequency)."""
    stacks: Counter[str] = Counter()
    periods: Counter[int] = Counter()
    comm: str | None = None
    frames: list[str] = []

    def flush() -> None:
        if comm is not None:
            stacks[";".join([comm, *reversed(frames[:max_depth])])] += 1

    for line in script.splitlines():
        if not line.strip():
            flush()
            comm, frames = None, []
        elif line[0] in " \t":
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                sym, _, dso = parts[1].rpartition(" (")
                frames.append(frame_name(sym.strip(), dso.removesuffix(")")))
        elif m := HEADER.match(line):
            flush()
            comm, frames = m[1].strip().replace(";", ":"), []
            periods[int(m[3])] += 1
    flush()
    return stacks, periods.most_common(1)[0][0] if periods else 0


def trim(stacks: Counter[str], keep: int = MAX_STACKS) -> dict[str, int]:
    """The most sampled stacks; the others folded into one "[other]" stack under their command."""
    if len(stacks) <= keep:
        return dict(stacks)
    kept = dict(stacks.most_common(keep))
    for stack, n in stacks.items():
        if stack not in kept:
            other = stack.split(";", 1)[0] + ";[other stacks]"
            kept[other] = kept.get(other, 0) + n
    return kept


def _us(text: str) -> float:
    value, unit = text.split()
    return float(value) * UNIT_US[unit]


def parse_locks(text: str, keep: int = MAX_LOCKS) -> list[dict[str, Any]]:
    """perf lock contention -v: each contended lock site (its caller), its counts and call path."""
    locks: list[dict[str, Any]] = []
    for line in text.splitlines():
        if m := LOCK_ROW.match(line):
            locks.append({"caller": m[6], "type": m[5].strip(), "contended": int(m[1]), "wait_total_us": _us(m[2]),
                          "wait_max_us": _us(m[3]), "stack": []})
        elif locks and (f := LOCK_FRAME.match(line)):
            locks[-1]["stack"].append(f[1])
        elif line.startswith("==="):
            break  # perf's debug summary follows the table
    return sorted(locks, key=lambda lock: lock["wait_total_us"], reverse=True)[:keep]


def parse_lock_stat(text: str, keep: int = MAX_LOCKS) -> list[dict[str, Any]]:
    """/proc/lock_stat: each lock class that was contended, with its waits and the call sites that
    contended it (its site lines name the lock without the -R/-W suffix), as perf lock's records are."""
    def base(name: str) -> str:
        return name.removesuffix("-R").removesuffix("-W")

    locks: list[dict[str, Any]] = []
    group: list[dict[str, Any]] = []  # a class's rows (its -W and -R), which the site lines after them share
    for line in text.splitlines():
        if m := LOCK_STAT_ROW.match(line):
            row = {"caller": m[1].strip(), "type": "lock_stat", "contended": int(m[3]),
                   "wait_total_us": float(m[6]), "wait_max_us": float(m[5]), "stack": []}
            group = [*group, row] if group and base(group[-1]["caller"]) == base(row["caller"]) else [row]
            locks.append(row)
        elif group and (site := LOCK_STAT_SITE.match(line)) and site[1].strip() == base(group[-1]["caller"]):
            for row in group:
                row["stack"].append(site[3])
    contended = [lock for lock in locks if lock["contended"]]
    return sorted(contended, key=lambda lock: lock["wait_total_us"], reverse=True)[:keep]


def lock_stat_usable() -> bool:
    """/proc/lock_stat is there and collecting (mosbench never switches kernel.lock_stat on itself)."""
    with contextlib.suppress(OSError):
        return LOCK_STAT.exists() and LOCK_STAT_ON.read_text().strip() == "1"
    return False


def parse_pmu(text: str) -> dict[str, float]:
    """perf stat -x, counts by event; a counter perf could not read is left out."""
    counts = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) >= 3 and fields[2] in PMU_EVENTS:
            with contextlib.suppress(ValueError):
                counts[fields[2]] = float(fields[0])
    return counts


class Recorder:
    """perf on the point's CPUs: samples (and, with a PMU, counts) over the window, kernel lock
    contention over the warm-up."""

    def __init__(self, launcher: Launcher, group: Group, cpus: tuple[int, ...], workdir: Path, window_s: float):
        self.launcher = launcher
        self.group = group  # the run's group, not the point's: perf's own work is never charged to the point
        self.failed: str | None = None
        self.c2c_failed: str | None = None
        self._warmup_work: float | None = None
        self.locks_work = 0.0  # the warm-up's work, over which the locks were traced
        self.data = workdir / "perf.data"
        self.pmu_out = workdir / "perf-pmu.csv"
        cpus_arg = cpulist.format(cpus)
        self.frequency = frequency_for(len(cpus), window_s)
        self.record = PerfControl(launcher, group, ["perf", "record", *RECORD_OPTIONS, "-e", EVENT, "-F",
                                                    str(self.frequency), "-g", "-C", cpus_arg, "-o", str(self.data)],
                                  workdir, "perf-record")
        self.locks_data = workdir / "perf-lock.data"
        self.lock: PerfControl | None = None
        self.locks_absent = locks_unavailable()
        self.lock_stat = self.locks_absent is not None and lock_stat_usable()
        self._lock_stat_text: str | None = None
        if not self.locks_absent:
            try:
                self.lock = PerfControl(launcher, group, ["perf", "lock", "record", *RECORD_OPTIONS, "-C", cpus_arg,
                                                          "-o", str(self.locks_data)], workdir, "perf-lock")
            except OSError as e:
                self.locks_absent = str(e)
        self.stat: PerfControl | None = None
        self.pmu_absent = pmu_unavailable()
        if not self.pmu_absent:
            try:
                self.stat = PerfControl(launcher, group, ["perf", "stat", "-x,", "-e", ",".join(pmu_events()),
                                                          "-C", cpus_arg, "-o", str(self.pmu_out)],
                                        workdir, "perf-pmu")
            except OSError as e:
                self.pmu_absent = str(e)
        self.c2c_data = workdir / "perf-c2c.data"
        self.c2c: PerfControl | None = None
        self.c2c_absent = c2c.unavailable()
        if not self.c2c_absent:
            try:
                # perf c2c record hands the options it does not know (-C, -o, -D, --control) to perf record.
                self.c2c = PerfControl(launcher, group, ["perf", "c2c", "record", *RECORD_OPTIONS, "-C", cpus_arg,
                                                         "-o", str(self.c2c_data)], workdir, "perf-c2c")
            except OSError as e:
                self.c2c_absent = f"perf c2c record did not start: {e}"

    def _switch(self, perf: PerfControl | None, word: str) -> None:
        """A perf that stops answering loses the profile, never the point's measurement."""
        if perf is not None and self.failed is None:
            try:
                getattr(perf, word)()
            except OSError as e:
                self.failed = str(e)

    def _switch_c2c(self, word: str) -> None:
        """A perf c2c that stops answering loses the shared-line part only, never the profile."""
        if self.c2c is not None and self.c2c_failed is None:
            try:
                getattr(self.c2c, word)()
            except OSError as e:
                self.c2c_failed = f"perf c2c record did not {word}: {e}"

    def warmup_begins(self, work: float) -> None:
        """Kernel locks are traced over the warm-up, never the window: every contention the
        tracepoints see costs the contending task a perf event (dup1 at two threads lost three
        quarters of its throughput to them here), and contentions per unit are a property of the
        code path, the same in both."""
        self._switch(self.lock, "enable")
        if self.lock is None and self.lock_stat:
            try:
                LOCK_STAT.write_text("0\n")  # clears every class's statistics
            except OSError as e:
                self.lock_stat, self.locks_absent = False, f"cannot clear {LOCK_STAT}: {e}"
        self._warmup_work = work

    def window_begins(self, work: float) -> None:
        if (self.lock is not None or self.lock_stat) and self._warmup_work is not None:
            self._switch(self.lock, "disable")
            self.locks_work = work - self._warmup_work
        if self.lock is None and self.lock_stat and self._warmup_work is not None:
            with contextlib.suppress(OSError):
                self._lock_stat_text = LOCK_STAT.read_text(errors="replace")
        if self.lock is not None:
            # Gone before the window: even disabled, armed tracepoints slow every contention, and perf
            # writing its file at exit (reading kallsyms) took 7% of two CPUs' window here.
            self.lock.close()
        self._switch(self.record, "enable")
        self._switch(self.stat, "enable")
        self._switch_c2c("enable")

    def window_ends(self) -> None:
        self._switch(self.record, "disable")
        self._switch(self.stat, "disable")
        self._switch_c2c("disable")

    def finish(self, window_s: float) -> dict[str, Any]:
        """Ends perf and folds what it sampled over the window, and the locks it traced over the
        warm-up: the point's stored profile."""
        self.abandon()
        if self.failed:
            raise OSError(self.failed)
        status = self.launcher.run("perf-script", ["perf", "script", "-i", str(self.data), "--no-inline",
                                                   "-F", "comm,pid,period,ip,sym,dso"],
                                   self.group, timeout=600)
        if status != 0:
            raise OSError(f"perf script failed: {self.launcher.last_error('perf-script')}")
        stacks, period = fold((self.launcher.logdir / "perf-script.out").read_text(errors="replace"))
        (self.launcher.logdir / "perf-script.out").unlink(missing_ok=True)  # folded now; it can be large
        profile: dict[str, Any] = {"event": EVENT, "frequency": self.frequency, "period_ns": period,
                                   "window_s": window_s, "samples": sum(stacks.values()), "stacks": trim(stacks)}
        if self.stat is not None:
            profile["pmu"] = parse_pmu(self.pmu_out.read_text() if self.pmu_out.exists() else "")
        else:
            profile["pmu_absent"] = self.pmu_absent
        profile.update(self._locks())
        profile.update(self._c2c())
        return profile

    def _locks(self) -> dict[str, Any]:
        if self.lock is None and self._lock_stat_text is not None and self.locks_work > 0:
            return {"locks": parse_lock_stat(self._lock_stat_text), "locks_work": self.locks_work,
                    "locks_source": f"{LOCK_STAT} (machine-wide, the warm-up)"}
        if self.lock is None:
            return {"locks_absent": self.locks_absent}
        if self.locks_work <= 0:
            return {"locks_absent": "no work in a warm-up to trace the locks over (give --warmup; a job has none)"}
        status = self.launcher.run("perf-lock-report", ["perf", "lock", "contention", "-i", str(self.locks_data),
                                                        "-v", "-E", str(MAX_LOCKS), "--max-stack", "12"],
                                   self.group, timeout=600)
        if status != 0:
            return {"locks_absent": f"perf lock contention failed: {self.launcher.last_error('perf-lock-report')}"}
        # perf lock contention writes its table to stderr.
        report = "".join((self.launcher.logdir / f"perf-lock-report.{ext}").read_text(errors="replace")
                         for ext in ("out", "err"))
        return {"locks": parse_locks(report),
                "locks_work": self.locks_work}

    def _c2c(self) -> dict[str, Any]:
        """The window's shared cache lines, or why there are none: a failure here loses this part only."""
        if self.c2c is None:
            return {"c2c_absent": self.c2c_absent}
        if self.c2c_failed:
            return {"c2c_absent": self.c2c_failed}
        try:
            status = self.launcher.run("perf-c2c-report", ["perf", "c2c", "report", "-i", str(self.c2c_data),
                                                           "--stdio", "--full-symbols"], self.group, timeout=600)
            out = self.launcher.logdir / "perf-c2c-report.out"
            if status != 0:
                return {"c2c_absent": f"perf c2c report failed: {self.launcher.last_error('perf-c2c-report')}"}
            report = c2c.parse_report(out.read_text(errors="replace"))
            out.unlink(missing_ok=True)  # parsed now; it can be large
        except (OSError, subprocess.SubprocessError) as e:
            return {"c2c_absent": f"perf c2c report failed: {e}"}
        return {"c2c": report}

    def abandon(self) -> None:
        for p in (self.record, self.lock, self.stat, self.c2c):
            if p is not None:
                with contextlib.suppress(Exception):
                    p.close()
