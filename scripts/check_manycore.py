#!/usr/bin/env python3
"""The many-core check: what a lent machine of 8 or more CPUs can tell in one short command.

    python3 scripts/check_manycore.py --wis DIR --out DIR [--kit DIR] [--budget 420]

In this order, each phase given what its share of the budget allows (a phase that would not fit is
skipped and the summary says so; a phase that overruns is stopped with SIGINT, which keeps every point
already measured):
  1. mosbench's micro tests against will-it-scale's at the machine's largest task count, both modes,
     3 interleaved rounds with bootstrap intervals and bimodality per tool (benchmarks/vs_will_it_scale.py);
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

The machine runs the system's Python (3.11 or later) with numpy, scipy, matplotlib, click, rich and
jinja2; what it lacks comes in --kit (made by `make manycore-kit`): wheels installed into a private
directory (SQLAlchemy), shared libraries (liburcu, libdb) and the native programs. It runs at any CPU
count: at 2 CPUs, here, that is its test (tests/test_check_manycore.py).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MICRO_TESTS = ("getppid1", "page_fault1", "mmap1", "open1", "dup1", "context_switch1", "lseek1", "brk1",
               "read1", "write1", "signal1", "sched_yield")
SCALE = ("scale/lock", "scale/counter", "scale/tree")
# Seconds each phase needs beyond its measurements (starting Python, a run's setup, the models' bootstrap).
OVERHEAD_S = 8.0
# Seconds the fxmark run needs to measure anything: a file system made and mounted, a window, unmounted.
FXMARK_LEAST_S = 15.0


@dataclass
class Phase:
    name: str
    started: float = 0.0
    seconds: float = 0.0
    state: str = "not run"  # done, skipped (why), stopped at the deadline, failed (why)
    files: list[str] = field(default_factory=list)


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
        measured and cleans up) at `until`."""
        out = self.work / f"{name}.txt"
        phase.files.append(out.name)
        with out.open("w") as f:
            f.write(f"$ mosbench {' '.join(argv)}\n")
            f.flush()
            proc = subprocess.Popen([sys.executable, "-m", "mosbench", *argv], stdout=f, stderr=subprocess.STDOUT,
                                    env=self.env, cwd=ROOT, preexec_fn=_hears_sigint)
            try:
                return proc.wait(timeout=None if until is None else max(1.0, until - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)
                phase.state = "stopped at its deadline"
                try:
                    return proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    return proc.wait()

    def phase(self, name: str) -> Phase:
        p = Phase(name, time.monotonic())
        self.phases.append(p)
        print(f"[{time.monotonic() - self.started:5.0f} s] {name} ({self.left():.0f} s of the budget left)",
              flush=True)
        return p

    def end(self, p: Phase, state: str = "done") -> None:
        p.seconds = time.monotonic() - p.started
        if p.state == "not run":
            p.state = state


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
            sys.path.insert(0, str(site))  # the summary reads the store in this process
        if (kit / "lib").is_dir():
            env["LD_LIBRARY_PATH"] = ":".join(filter(None, [str(kit / "lib"), env.get("LD_LIBRARY_PATH", "")]))
        if (kit / "native").is_dir():
            env["MOSBENCH_NATIVE"] = str(kit / "native")
    sys.path.insert(0, str(ROOT))
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


def pairs(check: Check, tasks: int, label: str, until: float) -> Phase:
    """Phase 1 or 5: the interleaved comparison at `tasks`, in this process (the benchmark as a library),
    stopping before a pair that would pass `until`."""
    p = check.phase(f"micro against will-it-scale at {tasks} tasks")
    import vs_will_it_scale as vs

    native = Path(check.env.get("MOSBENCH_NATIVE", ROOT / "native" / "build"))
    tests = shared_micro_tests(check.args.wis, native, check.args.tests)
    if not tests:
        check.end(p, f"skipped: no test both tools have in {check.args.wis}")
        return p
    out = check.work / f"pairs-{label}.txt"
    p.files += [out.name, f"pairs-{label}.json"]
    found = []
    with out.open("w") as f:
        def show(pair) -> None:
            line = vs.format_pair(pair)
            f.write(line + "\n")
            f.flush()
            print("   ", line, flush=True)

        f.write(vs.HEADER.format(rounds=check.args.rounds) + "\n")
        os.environ["MOSBENCH_NATIVE"] = str(native)
        found = vs.compare(check.args.wis, tests, ["procs", "threads"], [tasks], check.args.rounds,
                           check.args.warmup, check.args.duration, deadline=until, on_pair=show)
        f.write(vs.format_totals(found) + "\n")
    (check.work / f"pairs-{label}.json").write_text(json.dumps([vs.pair_json(x) for x in found], indent=1))
    wanted = len(tests) * 2
    check.end(p, "done" if len(found) == wanted else f"{len(found)} of {wanted} pairs before its deadline")
    return p


def scale(check: Check, until: float) -> Phase:
    p = check.phase("scale/lock, counter, tree at 1..max cores")
    store = str(check.work / "store.sqlite")
    common = ("--cores", "1..max", "--warmup", "0.3", "--duration", "0.7", "--store", store)
    half = (until + time.monotonic()) / 2 + 10  # the lock gets a little over half: it has twice the trials
    check.mosbench(p, "run-scale-lock", "run", "scale/lock", "--trials", "2", *common, "--label", "manycore-lock",
                   until=half)
    check.mosbench(p, "run-scale-other", "run", "scale/counter", "scale/tree", "--trials", "1", *common,
                   "--label", "manycore-scale", until=until)
    check.end(p)
    return p


def models(check: Check) -> Phase:
    p = check.phase("models: prediction intervals and hold-out")
    store = str(check.work / "store.sqlite")
    runs = run_ids(store)
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
    check.end(p, "done" if runs else "skipped: no scale run was stored")
    return p


def apps(check: Check, until: float) -> Phase:
    p = check.phase("Metis, pedsort and fxmark at 1 and max cores")
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
        p.state = f"{'done' if p.state == 'not run' else p.state}; fxmark skipped: too little of the budget left"
        check.end(p)
        return p
    file_systems = ["tmpfs", *(fs for fs in ("ext4", "xfs", "btrfs") if shutil.which(f"mkfs.{fs}"))]
    check.mosbench(p, "run-fxmark", "run", "fxmark/DWOM", "fxmark/MWCM", "--variant", ",".join(file_systems),
                   "--cores", f"1,{check.cpus}", "--trials", "1", "--warmup", "0.3", "--duration", "1",
                   "-p", "fxmark.files=1000", "--label", "manycore-fxmark", "--store", store, until=until)
    check.end(p)
    return p


def run_ids(store: str) -> dict[str, str]:
    """{label: id} of the runs in the check's store."""
    if not Path(store).exists():
        return {}
    from mosbench.store.db import Store  # this process has the kit's site on its path (kit_environment)

    return {r["label"]: str(r["id"]) for r in Store(store).list_runs()}


def summary(check: Check) -> str:
    """One page: the machine, each phase, the pairs, the lock curves and models, the applications."""
    from manycore_summary import page  # reads what the phases left in the work directory

    return page(check.work, check.phases, check.cpus, time.monotonic() - check.started, check.args.budget)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wis", type=Path, help="a directory of built will-it-scale programs (<test>_processes, …)")
    ap.add_argument("--out", type=Path, required=True, help="where the archive and summary.md go")
    ap.add_argument("--kit", type=Path, help="wheels/, lib/ and native/ for a machine that lacks them")
    ap.add_argument("--budget", type=float, default=420, help="seconds for the whole check (default 7 minutes)")
    ap.add_argument("--tests", type=int, default=8, help="micro tests to compare (default 8)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="seconds skipped in each measurement")
    ap.add_argument("--duration", type=int, default=1, help="seconds averaged in each measurement")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import vs_will_it_scale as vs

    # First, before this script opens anything: a descriptor inherited from whatever started it would size
    # will-it-scale's shared descriptor table and move its contended tests (vs_will_it_scale says how much).
    vs.close_inherited_fds()
    if args.wis is not None and not args.wis.is_dir():
        print(f"check-manycore: --wis {args.wis} is not a directory", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    scratch = Path(tempfile.mkdtemp(prefix="mosbench-manycore-"))
    work = scratch / f"manycore-{platform.node()}-{stamp}"
    work.mkdir()
    try:
        check = Check(args, work, kit_environment(args.kit, work))
        if args.kit and (args.kit / "native").is_dir():
            os.environ["MOSBENCH_NATIVE"] = str(args.kit / "native")
        (work / "machine.txt").write_text(machine_facts(check))
        check.mosbench(Phase("doctor"), "doctor", "doctor")
        budget = args.budget
        if args.wis:
            pairs(check, check.cpus, "max", check.started + 0.45 * budget)
        else:
            check.phases.append(Phase("micro against will-it-scale", state="skipped: no --wis given"))
        scale(check, check.started + 0.75 * budget)
        models(check)
        apps(check, check.started + 0.9 * budget)
        if args.wis and check.cpus // 2 >= 1 and check.left() > OVERHEAD_S * 2:
            pairs(check, max(1, check.cpus // 2), "half", check.deadline - OVERHEAD_S)
        sys.path.insert(0, str(ROOT / "scripts"))
        text = summary(check)
        (work / "summary.md").write_text(text)
        shutil.copy(work / "summary.md", args.out / "summary.md")
        archive = args.out / f"{work.name}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(work, arcname=work.name)
        print(text)
        print(f"wrote {archive} and {args.out / 'summary.md'} in {time.monotonic() - check.started:.0f} s")
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def machine_facts(check: Check) -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    return (f"host {platform.node()}\nkernel {platform.release()}\ncpus {check.cpus}\nmodel {model}\n"
            f"python {platform.python_version()}\n")


if __name__ == "__main__":
    sys.exit(main())
