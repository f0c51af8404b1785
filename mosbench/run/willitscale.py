"""mosbench-micro and will-it-scale measured side by side: same test, same tasks, interleaved rounds.

will-it-scale is not part of mosbench: it is built outside this tree and given as the directory holding
its `<test>_processes` and `<test>_threads`. Both tools run with the same task counts, pinned one task
per CPU in the same order, with files in the same directory (/tmp, will-it-scale's), address-space
randomisation off (will-it-scale's runtest.py uses setarch -R; mosbench-micro turns it off itself) and
no descriptor inherited from the caller (`close_inherited_fds`), and will-it-scale without hwloc's plugins
(`HWLOC_NO_PLUGINS`). Each round runs ours and theirs back
to back, alternating which goes first; each measurement skips the warm-up seconds and averages the next
seconds of per-second counts (will-it-scale prints them as it goes; it is stopped by its process group
once enough have come). analysis/pairs.py judges each pair; report/pairs.py prints them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import subprocess
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from mosbench import native
from mosbench.analysis.pairs import Comparison, FailedPair, Pair, Round

MODES = {"procs": "processes", "threads": "threads"}

# (test, mode, tasks, warmup, duration) -> Round: ours, theirs, or a stand-in a test injects.
Measure = Callable[[str, str, int, int, int], Round]


class ToolFailed(RuntimeError):
    """A tool that did not give a measurement (it exited, or printed too few per-second counts): that
    pair fails, the comparison goes on. `lines`: the last of what it printed, for the reader."""

    def __init__(self, message: str, lines: Sequence[str] = ()):
        super().__init__(message)
        self.lines = list(lines)


# hwloc loads its plugins (gl, opencl, pci, xml_libxml) where the distribution installs them, and
# will-it-scale needs none of them: its CPUs and cores are found by the linux and x86 components built into
# libhwloc. With Debian 12's plugins installed, its process-mode mmap1 and brk1 ran 1.6-1.7x slower than
# without them, every kernel function of the loop alike, and as fast as mosbench-micro's without
# (docs/WORKLOADS.md): a figure that moves with a distribution's plugins is not the kernel's. A
# plugin path that is not a directory loads none.
HWLOC_NO_PLUGINS = {"HWLOC_PLUGINS_PATH": os.devnull}


def theirs(wis: Path, test: str, mode: str, tasks: int, warmup: int, duration: int) -> Round:
    """Runs will-it-scale's test until warm-up plus window per-second lines have come; mean of the window."""
    before = set(Path("/tmp").glob("willitscale.*"))
    # setarch -R: address-space randomisation off, as will-it-scale's runtest.py runs it (ours does it itself).
    program = wis / f"{test}_{MODES[mode]}"
    # Its errors come with its output: a program that fails says why among the last lines kept.
    proc = subprocess.Popen(["setarch", "-R", "stdbuf", "-oL", str(program), "-t", str(tasks)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd="/tmp",
                            env={**os.environ, **HWLOC_NO_PLUGINS}, start_new_session=True)
    totals: list[int] = []
    said: list[str] = []  # the last lines that were not counts
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = re.match(r"min:\d+ max:\d+ total:(\d+)", line)
            if m:
                totals.append(int(m.group(1)))
                if len(totals) >= warmup + duration:
                    break
            elif line.strip():
                said = [*said[-4:], line.rstrip()]
    finally:
        # The group started here: the test's tasks and partners (gone where the program failed early).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        # Tests killed before their cleanup leave their files; remove only the ones this run made.
        for path in set(Path("/tmp").glob("willitscale.*")) - before:
            subprocess.run(["rm", "-rf", str(path)], check=False)
    window = [float(t) for t in totals[warmup:warmup + duration]]
    if len(window) < duration:
        # It ended by itself (SIGKILL, ours, would read -9): its exit status says how.
        ended = f", exit {proc.returncode}" if proc.returncode >= 0 else ""
        raise ToolFailed(f"will-it-scale {program.name} gave {len(totals)} of {warmup + duration} samples{ended}",
                         said)
    return Round(sum(window) / len(window), window)


def ours(test: str, mode: str, tasks: int, warmup: int, duration: int) -> Round:
    """Runs mosbench-micro standalone; the SUMMARY's ops/s and the window's per-second counts.

    mosbench-micro prints `sample N total=T` once a second, T cumulative since the start gate, and its
    SUMMARY averages samples warmup+1 .. warmup+duration: the per-second counts are the differences.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if not 1 <= tasks <= len(cpus):
        # One task per CPU: more tasks than CPUs would silently run fewer on ours than on theirs.
        raise ValueError(f"{tasks} tasks on {len(cpus)} CPUs")
    proc = subprocess.run([str(native.binary("mosbench-micro")), "--test", test, "--mode", mode,
                           "--cpus", ",".join(map(str, cpus[:tasks])), "--warmup", str(warmup),
                           "--duration", str(duration), "--workdir", "/tmp"],
                          capture_output=True, text=True, check=False)
    m = re.search(r"ops_per_sec=(\d+)", proc.stdout)
    if proc.returncode or not m:
        raise ToolFailed(f"mosbench-micro {test} {mode} {tasks}: exit {proc.returncode}{'' if m else ', no SUMMARY'}",
                         proc.stderr.strip().splitlines()[-5:])
    totals = [0] + [int(t) for t in re.findall(r"^sample \d+ total=(\d+)", proc.stdout, re.MULTILINE)]
    per_second = [float(b - a) for a, b in itertools.pairwise(totals)]
    return Round(float(m.group(1)), per_second[warmup:warmup + duration])


def shared_tests(wis: Path) -> list[str]:
    out = subprocess.run([str(native.binary("mosbench-micro")), "--list"], capture_output=True, text=True,
                         check=True).stdout
    mine = {line.split("\t")[0] for line in out.splitlines()}
    return sorted(t for t in mine if (wis / f"{t}_processes").exists())



def cpu_ticks() -> tuple[int, int]:
    """(steal, all) ticks of the machine so far, from /proc/stat's cpu line."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[7], sum(fields[:8])


def high_fds() -> list[int]:
    """Descriptors of this process past the 64 a new process's descriptor table holds."""
    return sorted(fd for fd in (int(n) for n in os.listdir("/proc/self/fd")) if fd >= 64)


def close_inherited_fds() -> None:
    """Closes every descriptor above stderr: a command calls it first, before it opens anything.

    will-it-scale's tasks share the descriptor table of the process `theirs` starts (in thread mode),
    and a forked child's table is sized by the highest descriptor open in its parent; ours get a fresh
    one from their supervisor. Contended descriptor tests swing 2x with the table's size (will-it-scale's
    dup1 at two threads: 2.4M ops/s with an unrelated fd 251 inherited, 4.3M without).
    """
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))


def compare(wis: Path, tests: Sequence[str], modes: Sequence[str], counts: Sequence[int], rounds: int = 5,
            warmup: int = 1, duration: int = 2, same: bool = False, deadline: float | None = None,
            on_pair: Callable[[Pair], None] | None = None, measure_ours: Measure | None = None,
            measure_theirs: Measure | None = None, round_estimate: float | None = None,
            on_failed: Callable[[FailedPair], None] | None = None) -> Comparison:
    """Every test × mode × task count, each a pair of `rounds` interleaved rounds (ours first in even rounds),
    judged as analysis/pairs.py says.

    `deadline` is a time.monotonic() value: a pair starts only when `rounds` times the longest round so far
    (before any, `round_estimate`, by default 2 × (warmup + duration + 0.5) s: both tools' seconds and
    their start) fits before it, and a round only when the longest round does; a pair cut short is
    dropped, never returned half measured, and listed in `not_run` with those never started. SIGINT
    (KeyboardInterrupt) stops the run the same way, returning what was measured with `interrupted`. `on_pair`
    sees each pair as it ends. A tool that fails (ToolFailed: it exited, or gave too few per-second counts)
    fails its pair alone: the pair goes to `failed` (and `on_failed`) and the next one runs.
    `measure_ours`/`measure_theirs` replace the tools (tests); with `same`, will-it-scale runs in both columns.

    Close stray descriptors first (`close_inherited_fds`) unless this process needs its own: a descriptor
    at 64 or above sizes will-it-scale's shared table in thread mode and moves the descriptor tests; the
    result lists any in `high_fds`, with a warning.
    """
    if rounds < 1 or duration < 1 or warmup < 0:
        raise ValueError("rounds and duration must be 1 or more, warmup 0 or more")
    if bad := [m for m in modes if m not in MODES]:
        raise ValueError(f"modes must be {' or '.join(MODES)}, not {', '.join(bad)}")

    def run_theirs(test: str, mode: str, tasks: int, w: int, d: int) -> Round:
        return theirs(wis, test, mode, tasks, w, d)

    tool_b = measure_theirs or run_theirs
    tool_a = tool_b if same else (measure_ours or ours)
    stray = high_fds()
    if stray:
        warnings.warn(f"descriptors {stray} are open: will-it-scale's thread-mode table will be larger than "
                      "ours (close_inherited_fds)", RuntimeWarning, stacklevel=2)
    planned = [(t, m, n) for t in tests for m in modes for n in counts]
    started = time.monotonic()
    steal_before, all_before = cpu_ticks()
    # Until a round is measured: each tool's warm-up and window, and half a second each to start.
    longest_round = round_estimate if round_estimate is not None else 2 * (warmup + duration + 0.5)
    measured_any = False
    pairs: list[Pair] = []

    def fits(seconds: float) -> bool:
        return deadline is None or time.monotonic() + seconds <= deadline

    def measure(test: str, mode: str, n: int) -> Pair | None:
        """The pair, or None where the deadline cut it short."""
        nonlocal longest_round, measured_any
        t0 = time.monotonic()
        a: list[Round] = []
        b: list[Round] = []
        first: list[str] = []
        for r in range(rounds):
            if not fits(longest_round):
                return None
            r0 = time.monotonic()
            order = ("ours", "theirs") if r % 2 == 0 else ("theirs", "ours")
            first.append(order[0])
            for which in order:
                if which == "ours":
                    a.append(tool_a(test, mode, n, warmup, duration))
                else:
                    b.append(tool_b(test, mode, n, warmup, duration))
            took = time.monotonic() - r0
            longest_round = max(longest_round, took) if measured_any else took
            measured_any = True
        return Pair.measured(test, mode, n, a, b, first, time.monotonic() - t0, same)

    interrupted = False
    failed: list[FailedPair] = []
    tried = 0  # pairs run in order: the ones from here on were not run
    try:
        for test, mode, n in planned:
            try:
                pair = measure(test, mode, n) if fits(rounds * longest_round) else None
            except ToolFailed as e:
                failed.append(FailedPair(test, mode, n, str(e), e.lines))
                tried += 1
                if on_failed:
                    on_failed(failed[-1])
                continue
            if pair is None:
                break
            pairs.append(pair)
            tried += 1
            if on_pair:
                on_pair(pair)
    except KeyboardInterrupt:
        # SIGINT ends the run as the deadline does (a caller's way to stop an overrunning run): the pair in
        # flight is dropped, its tools already stopped (theirs kills its group, subprocess.run its child).
        interrupted = True
    steal_after, all_after = cpu_ticks()
    steal = 100 * (steal_after - steal_before) / max(all_after - all_before, 1)
    # Pairs run in order and every one returned is whole: the rest are the planned ones past them.
    not_run = planned[tried:]
    return Comparison(pairs, not_run, steal, time.monotonic() - started, stray, interrupted, failed)


def task_counts(spec: str, ncpu: int) -> list[int]:
    """`1,half,max`: max is every CPU this process may use, half max//2 (at least 1)."""
    counts = []
    for word in spec.split(","):
        word = word.strip()
        n = ncpu if word == "max" else max(1, ncpu // 2) if word == "half" else int(word) if word.isdigit() else 0
        if not 1 <= n <= ncpu:
            raise ValueError(f"--tasks: '{word}' is not max, half or 1..{ncpu}")
        counts.append(n)
    return counts
