#!/usr/bin/env python3
"""The many-core check: what a lent machine of 8 or more CPUs can tell in one short command.

    python3 scripts/check_manycore.py --wis DIR --out DIR [--kit DIR] [--budget 420]

In this order, each phase given what its share of the budget allows (a phase that would not fit is
skipped and the summary says so; a phase that overruns is stopped with SIGINT, which keeps every point
already measured):
  1. mosbench's micro tests against will-it-scale's at the machine's largest task count, both modes,
     3 interleaved rounds with bootstrap intervals and bimodality per tool (mosbench/run/willitscale.py);
  2. scale/lock (2 trials), scale/counter and scale/tree (1 trial) at 1..max cores, par_ns chosen for
     the run (the ticket lock saturating near half the cores);
  3. the models on them: the lock model and Amdahl/USL, each with its prediction interval and its
     hold-out error (fitted without the largest core count, predicting it);
  4. Metis and pedsort at their defaults at 1 and max cores (pedsort over /usr/include where Debian's
     Linux source is not there), and fxmark's DWOM and MWCM on tmpfs and every file system the machine
     has a mkfs for;
  5. the pairs again at half the task count, as time allows.
Everything goes into one archive under --out (the store, every command's output, the JSON of the pairs
and the models) beside a one-page summary.md, because a lent machine returns a few files only.

A phase whose command fails (or whose will-it-scale program does: that pair alone) is marked failed with
the command's last lines, the later phases still run, and the summary says so. Exit status: 0 when every
phase did what it could within the budget; 1 when a phase failed, or the results could not be written
to --out (they are then kept in the scratch directory, which the last line names); 2 for a bad argument,
said in one line before anything is measured (--out is written to first, to be sure it can be).

The machine runs the system's Python (3.11 or later) with numpy, scipy, matplotlib, click, rich and
jinja2; what it lacks comes in --kit (made by `make manycore-kit`): wheels installed into a private
directory (SQLAlchemy), shared libraries (liburcu, libdb) and the native programs. It runs at any CPU
count: at 2 CPUs, here, that is its test (tests/test_check_manycore.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    # A lent machine runs this with its system Python, the checkout uninstalled: the checkout is the package.
    # Its modules are imported where used, after the arguments are checked: a refusal needs no numpy.
    sys.path.insert(0, str(ROOT))

# How a phase went, which the summary reads too: a module of its own, so each imports it and neither the other.
from scripts.manycore_phases import Failure, Phase, State  # noqa: E402

MICRO_TESTS = ("getppid1", "page_fault1", "mmap1", "open1", "dup1", "context_switch1", "lseek1", "brk1",
               "read1", "write1", "signal1", "sched_yield")
SCALE = ("scale/lock", "scale/counter", "scale/tree")
# Seconds each phase needs beyond its measurements (starting Python, a run's setup, the models' bootstrap).
OVERHEAD_S = 8.0
# Seconds the fxmark run needs to measure anything: a file system made and mounted, a window, unmounted.
FXMARK_LEAST_S = 15.0
# A failed command's last lines of output kept in the summary: enough for its error and what led to it.
LAST_LINES = 8


class Check:
    def __init__(self, args: argparse.Namespace, work: Path, env: dict[str, str]):
        self.args = args
        self.work = work
        self.env = env
        self.started = time.monotonic()
        self.deadline = self.started + args.budget
        self.phases: list[Phase] = []
        self.cpus = len(os.sched_getaffinity(0))

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def mosbench(self, phase: Phase, name: str, *argv: str, until: float | None = None) -> int:
        """One mosbench command, its output kept in name.txt; interrupted (SIGINT: the run keeps what it
        measured and cleans up) at `until`, which cuts the phase short. A command that exits non-zero by
        itself fails the phase, with its last lines."""
        out = self.work / f"{name}.txt"
        phase.files.append(out.name)
        with out.open("w") as f:
            f.write(f"$ mosbench {' '.join(argv)}\n")
            f.flush()
            proc = subprocess.Popen([sys.executable, "-m", "mosbench", *argv], stdout=f, stderr=subprocess.STDOUT,
                                    env=self.env, cwd=ROOT, preexec_fn=_hears_sigint)
            try:
                rc = proc.wait(timeout=None if until is None else max(1.0, until - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)
                phase.mark(State.CUT_SHORT, f"{name} stopped at its deadline")
                try:
                    return proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    return proc.wait()
        if rc:
            phase.failed(Failure(name, f"exited {rc}", last_lines(out)))
        return rc

    def run_phase(self, name: str, body: Callable[[Phase], None]) -> Phase:
        """A phase: `body` does its work into the Phase. Whatever it raises fails this phase alone, so
        the later phases still run and the summary is still written."""
        p = Phase(name, time.monotonic())
        self.phases.append(p)
        print(f"[{time.monotonic() - self.started:5.0f} s] {name} ({self.left():.0f} s of the budget left)",
              flush=True)
        try:
            body(p)
        except Exception as e:
            p.failed(Failure("the phase", f"raised {type(e).__name__}: {e}",
                             "".join(traceback.format_exception(e)).splitlines()[-LAST_LINES:]))
        p.seconds = time.monotonic() - p.started
        if p.state is State.FAILED:
            for failure in p.failures:
                print(f"    FAILED: {failure.what} {failure.how}", *(f"      {x}" for x in failure.lines),
                      sep="\n", flush=True)
        return p

    def failed(self) -> list[Phase]:
        return [p for p in self.phases if p.state is State.FAILED]


def last_lines(path: Path, n: int = LAST_LINES) -> list[str]:
    """The last n non-blank lines of a command's output."""
    try:
        return [line.rstrip() for line in path.read_text(errors="replace").splitlines() if line.strip()][-n:]
    except OSError:
        return []


def _hears_sigint() -> None:
    """SIGINT back to its default in a phase's command: a check started in the background (nohup, a CI
    job) hands its children SIGINT ignored, and a phase stopped at its deadline would run on until killed,
    30 s later and without its cleanup."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def kit_environment(kit: Path | None, work: Path) -> dict[str, str]:
    """The environment every command runs in: the kit's wheels, libraries and native programs."""
    env = dict(os.environ)
    paths = [str(ROOT)]
    if kit:
        wheels = sorted((kit / "wheels").glob("*.whl"))
        if wheels and importlib.util.find_spec("sqlalchemy") is None:
            site = work.parent / "site"
            done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                                   "--disable-pip-version-check", "--target", str(site), *map(str, wheels)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"check-manycore: the kit's wheels do not install on Python "
                                 f"{platform.python_version()} (make it with KIT_PYTHON={sys.version_info.major}."
                                 f"{sys.version_info.minor} make manycore-kit): {done.stderr.strip().splitlines()[-1]}")
            paths.append(str(site))
            # The summary reads the store in this process, with the SQLAlchemy the kit just installed.
            sys.path.insert(0, str(site))
        if (kit / "lib").is_dir():
            env["LD_LIBRARY_PATH"] = ":".join(filter(None, [str(kit / "lib"), env.get("LD_LIBRARY_PATH", "")]))
        if (kit / "native").is_dir():
            env["MOSBENCH_NATIVE"] = str(kit / "native")
    env["PYTHONPATH"] = ":".join(filter(None, [*paths, env.get("PYTHONPATH", "")]))
    env.setdefault("COLUMNS", "120")
    return env


def shared_micro_tests(wis: Path, native: Path, wanted: int) -> list[str]:
    listed = subprocess.run([str(native / "mosbench-micro"), "--list"], capture_output=True, text=True,
                            check=True).stdout
    ours = {line.split("\t")[0] for line in listed.splitlines()}
    both = [t for t in MICRO_TESTS if t in ours and (wis / f"{t}_processes").exists()]
    rest = sorted(t for t in ours if (wis / f"{t}_processes").exists() and t not in both)
    return (both + rest)[:wanted]


def pairs(check: Check, p: Phase, tasks: int, label: str, until: float) -> None:
    """Phase 1 or 5: the interleaved comparison at `tasks`, in this process (mosbench.run.willitscale),
    stopping before a pair that would pass `until`. A pair whose tool fails fails the phase; the other
    pairs are still measured."""
    from mosbench.report.pairs import format_failed, format_pair, format_totals, header
    from mosbench.run import willitscale

    native = Path(check.env.get("MOSBENCH_NATIVE", ROOT / "native" / "build"))
    tests = shared_micro_tests(check.args.wis, native, check.args.tests)
    if not tests:
        p.mark(State.SKIPPED, f"no test both tools have in {check.args.wis}")
        return
    out = check.work / f"pairs-{label}.txt"
    p.files += [out.name, f"pairs-{label}.json"]
    with out.open("w") as f:
        def show(line: str) -> None:
            f.write(line + "\n")
            f.flush()
            print("   ", line, flush=True)

        f.write(header(check.args.rounds) + "\n")
        os.environ["MOSBENCH_NATIVE"] = str(native)
        found = willitscale.compare(check.args.wis, tests, ["procs", "threads"], [tasks], check.args.rounds,
                                    check.args.warmup, check.args.duration, deadline=until,
                                    on_pair=lambda pair: show(format_pair(pair)),
                                    on_failed=lambda failed: show(format_failed(failed)))
        f.write(format_totals(found) + "\n")
    (check.work / f"pairs-{label}.json").write_text(json.dumps([x.to_json() for x in found], indent=1))
    for failed in found.failed:
        p.failed(Failure(f"{failed.test} {failed.mode} at {failed.tasks} tasks:", failed.reason, failed.lines))
    if found.not_run:
        p.mark(State.CUT_SHORT, f"{len(found.not_run)} of {len(tests) * 2} pairs left for its deadline")


def doctor(check: Check, p: Phase) -> None:
    check.mosbench(p, "doctor", "doctor")


def scale(check: Check, p: Phase, until: float) -> None:
    store = str(check.work / "store.sqlite")
    common = ("--cores", "1..max", "--warmup", "0.3", "--duration", "0.7", "--store", store)
    half = (until + time.monotonic()) / 2 + 10  # the lock gets a little over half: it has twice the trials
    check.mosbench(p, "run-scale-lock", "run", "scale/lock", "--trials", "2", *common, "--label", "manycore-lock",
                   until=half)
    check.mosbench(p, "run-scale-other", "run", "scale/counter", "scale/tree", "--trials", "1", *common,
                   "--label", "manycore-scale", until=until)


def models(check: Check, p: Phase) -> None:
    store = str(check.work / "store.sqlite")
    runs = run_ids(store)
    if not runs:
        p.mark(State.SKIPPED, "no scale run was stored")
        return
    far = str(max(64, 4 * check.cpus))
    if "manycore-lock" in runs:
        rid = runs["manycore-lock"]
        check.mosbench(p, "model-lock", "model", "lock", rid, "--cores", far, "--store", store)
        check.mosbench(p, "model-lock-json", "model", "lock", rid, "--cores", far, "--json", "--store", store)
    for label, name in (("manycore-lock", "lock"), ("manycore-scale", "scale")):
        if label in runs:
            check.mosbench(p, f"model-scaling-{name}", "model", "scaling", runs[label], "--cores", far, "--store",
                           store)
            check.mosbench(p, f"model-scaling-{name}-json", "model", "scaling", runs[label], "--cores", far,
                           "--json", "--store", store)
    for rid in runs.values():
        check.mosbench(p, f"show-{rid}", "show", rid, "--store", store)


def apps(check: Check, p: Phase, until: float) -> None:
    store = str(check.work / "store.sqlite")
    extra: list[str] = []
    if not any(Path("/usr/src").glob("linux-source-*.tar.*")):
        extra = ["-p", "psearchy.corpus=/usr/include"]  # Debian's Linux source is the default corpus
    check.mosbench(p, "run-apps", "run", "metis/invindex", "psearchy", "--cores", f"1,{check.cpus}", "--trials",
                   "1", "--warmup", "0", "--duration", "1", "--label", "manycore-apps", "--store", store, *extra,
                   until=until)
    # FxMark's shared-file write and shared-directory create on whatever file systems the machine can make;
    # not begun without time for a point or two (a run stopped while it makes a file system finishes that).
    if until - time.monotonic() < FXMARK_LEAST_S:
        p.mark(State.DONE, "fxmark skipped: too little of the budget left")
        return
    file_systems = ["tmpfs", *(fs for fs in ("ext4", "xfs", "btrfs") if shutil.which(f"mkfs.{fs}"))]
    check.mosbench(p, "run-fxmark", "run", "fxmark/DWOM", "fxmark/MWCM", "--variant", ",".join(file_systems),
                   "--cores", f"1,{check.cpus}", "--trials", "1", "--warmup", "0.3", "--duration", "1",
                   "--label", "manycore-fxmark", "--store", store, until=until)


def run_ids(store: str) -> dict[str, str]:
    """{label: id} of the runs in the check's store."""
    if not Path(store).exists():
        return {}
    from mosbench.store.db import Store  # after kit_environment: SQLAlchemy may be the kit's

    return {r["label"]: str(r["id"]) for r in Store(store).list_runs()}


def summary(check: Check) -> str:
    """One page: the machine, each phase, the pairs, the lock curves and models, the applications. A
    summary that cannot be drawn (a store the phases left broken) is the phases' table and why."""
    # Imported here: it reads the store, through the SQLAlchemy that kit_environment may have just installed.
    from scripts import manycore_summary

    elapsed = time.monotonic() - check.started
    try:
        return manycore_summary.page(check.work, check.phases, check.cpus, elapsed, check.args.budget)
    except Exception as e:
        return "\n".join([*manycore_summary.phases_section(check.phases),
                          "", f"The rest of the summary failed: {type(e).__name__}: {e}"]) + "\n"


class Parser(argparse.ArgumentParser):
    """A bad argument is one line and exit 2, as every mosbench command says it; -h has the usage."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"check-manycore: {message}\n")


def seconds(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return x


def at_least(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not text.strip().isdigit() or int(text) < least:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of {least} or more")
        return int(text)
    return parse


def refusal(args: argparse.Namespace) -> str | None:
    """What is wrong with the places given, in one line; None when the check can start. --out is made
    and written to here: a check that measured for its whole budget must not find at the end that its
    results have nowhere to go."""
    if args.wis is not None and not args.wis.is_dir():
        return f"--wis {args.wis} is not a directory"
    if args.kit is not None:
        if not args.kit.is_dir():
            return f"--kit {args.kit} is not a directory (make manycore-kit makes one)"
        if not any((args.kit / part).is_dir() for part in ("wheels", "lib", "native")):
            return f"--kit {args.kit} is not a kit: it has no wheels/, lib/ or native/ (make manycore-kit makes one)"
    if args.out.exists() and not args.out.is_dir():
        return f"--out {args.out} is not a directory"
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=args.out, prefix=".check-manycore."):
            pass
    except OSError as e:
        return f"cannot write to --out {args.out}: {e.strerror or e}"
    return None


def main() -> int:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wis", type=Path, help="a directory of built will-it-scale programs (<test>_processes, …)")
    ap.add_argument("--out", type=Path, required=True, help="where the archive and summary.md go")
    ap.add_argument("--kit", type=Path, help="wheels/, lib/ and native/ for a machine that lacks them")
    ap.add_argument("--budget", type=seconds, default=420, help="seconds for the whole check (default 7 minutes)")
    ap.add_argument("--tests", type=at_least(1), default=8, help="micro tests to compare (default 8)")
    ap.add_argument("--rounds", type=at_least(1), default=3)
    ap.add_argument("--warmup", type=at_least(0), default=1, help="seconds skipped in each measurement")
    ap.add_argument("--duration", type=at_least(1), default=1, help="seconds averaged in each measurement")
    args = ap.parse_args()
    if why := refusal(args):  # it leaves no descriptor open
        print(f"check-manycore: {why}", file=sys.stderr)
        return 2
    from mosbench.run import willitscale

    # First, before this script opens anything: a descriptor inherited from whatever started it would size
    # will-it-scale's shared descriptor table and move its contended tests (close_inherited_fds says how much).
    willitscale.close_inherited_fds()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    scratch = Path(tempfile.mkdtemp(prefix="mosbench-manycore-"))
    work = scratch / f"manycore-{platform.node()}-{stamp}"
    work.mkdir()
    measured = written = False
    try:
        check = Check(args, work, kit_environment(args.kit, work))
        if args.kit and (args.kit / "native").is_dir():
            os.environ["MOSBENCH_NATIVE"] = str(args.kit / "native")
        (work / "machine.txt").write_text(machine_facts(check))
        measured = True
        check.run_phase("doctor", lambda p: doctor(check, p))
        budget = args.budget
        if args.wis:
            check.run_phase(f"micro against will-it-scale at {check.cpus} tasks",
                            lambda p: pairs(check, p, check.cpus, "max", check.started + 0.45 * budget))
        else:
            check.phases.append(Phase("micro against will-it-scale", state=State.SKIPPED, notes=["no --wis given"]))
        check.run_phase("scale/lock, counter, tree at 1..max cores",
                        lambda p: scale(check, p, check.started + 0.75 * budget))
        check.run_phase("models: prediction intervals and hold-out", lambda p: models(check, p))
        check.run_phase("Metis, pedsort and fxmark at 1 and max cores",
                        lambda p: apps(check, p, check.started + 0.9 * budget))
        half = max(1, check.cpus // 2)
        if args.wis and check.cpus // 2 >= 1 and check.left() > OVERHEAD_S * 2:
            check.run_phase(f"micro against will-it-scale at {half} tasks",
                            lambda p: pairs(check, p, half, "half", check.deadline - OVERHEAD_S))
        text = summary(check)
        (work / "summary.md").write_text(text)
        print(text)
        archive = args.out / f"{work.name}.tar.gz"
        try:
            shutil.copy(work / "summary.md", args.out / "summary.md")
            with tarfile.open(archive, "w:gz") as tar:
                tar.add(work, arcname=work.name)
        except OSError as e:
            archive.unlink(missing_ok=True)
            print(f"check-manycore: cannot write to --out {args.out}: {e.strerror or e}", file=sys.stderr)
            return 1
        written = True
        print(f"wrote {archive} and {args.out / 'summary.md'} in {time.monotonic() - check.started:.0f} s")
        if failed := check.failed():
            print(f"check-manycore: {len(failed)} phase{'s' if len(failed) > 1 else ''} failed: "
                  f"{', '.join(p.name for p in failed)} (summary.md has their last lines)", file=sys.stderr)
            return 1
        return 0
    finally:
        if written or not measured:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            # Whatever stopped it (an --out gone unwritable, Ctrl-C, a bug), the results stay.
            print(f"check-manycore: every result so far is kept in {work}", file=sys.stderr)


def machine_facts(check: Check) -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    return (f"host {platform.node()}\nkernel {platform.release()}\ncpus {check.cpus}\nmodel {model}\n"
            f"python {platform.python_version()}\n")


if __name__ == "__main__":
    sys.exit(main())
