"""The many-core check (scripts/check_manycore.py) at this machine's CPUs, against a stand-in will-it-scale:
its phases within their budget, one archive with the store and every table, and a summary that says
what each phase did; a failing command or will-it-scale program fails its phase, not the check; bad
arguments are one line before anything is measured."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from mosbench.run import willitscale
from mosbench.store.db import Store
from mosbench.workloads.scale import lock_par_ns
from scripts import check_manycore, manycore_summary
from tests.conftest import ROOT, needs_native
from tests.test_vs_will_it_scale import stand_in

# A will-it-scale program that cannot start: it says why and exits 1, printing no count.
BROKEN = "#!/bin/sh\necho 'dup1_processes: cannot set up its tasks' >&2\nexit 1\n"


@needs_native
def test_the_check_fits_its_budget_leaves_one_archive_and_fails_the_pair_whose_program_fails(tmp_path):
    wis = stand_in(tmp_path, {"getppid1": ["5000000"], "dup1": ["4000000"]})
    (wis / "dup1_processes").write_text(BROKEN)
    out = tmp_path / "out"
    started = time.monotonic()
    r = subprocess.run([sys.executable, "scripts/check_manycore.py", "--wis", str(wis), "--out", str(out),
                        "--budget", "100", "--tests", "2", "--rounds", "2", "--warmup", "0", "--duration", "1"],
                       cwd=ROOT, capture_output=True, text=True, timeout=240)
    took = time.monotonic() - started
    tasks = len(os.sched_getaffinity(0))
    # The failed pair fails its phase and the check; every other phase still ran, and the archive was written.
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Traceback" not in r.stdout + r.stderr
    assert r.stderr.strip().splitlines()[-1] == (f"check-manycore: 1 phase failed: micro against will-it-scale at "
                                                 f"{tasks} tasks (summary.md has their last lines)")
    # The budget holds, with a little for the summary and the archive.
    assert took < 100 + 25, took
    archives = list(out.glob("manycore-*.tar.gz"))
    assert len(archives) == 1 and (out / "summary.md").exists()
    with tarfile.open(archives[0]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        pairs = json.load(tar.extractfile(next(m for m in tar.getmembers() if m.name.endswith("pairs-max.json"))))
        tar.extract(next(m for m in tar.getmembers() if m.name.endswith("/store.sqlite")), tmp_path / "x")
    assert {"store.sqlite", "summary.md", "machine.txt", "doctor.txt", "pairs-max.json", "run-scale-lock.txt"} <= names
    assert {(p["test"], p["mode"]) for p in pairs} == {("getppid1", "procs"), ("getppid1", "threads"),
                                                        ("dup1", "threads")}
    assert all(len(p["ours"]) == len(p["theirs"]) == 2 and p["theirs_median"] > 0 for p in pairs)
    summary = (out / "summary.md").read_text()
    assert "micro against will-it-scale at " in summary and "| getppid1 | procs |" in summary
    assert f"scale/lock's par_ns: {lock_par_ns(200, tasks)} ns" in summary
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ")[2].rstrip(" |") for line in summary.splitlines()
            if line.startswith("| ") and line.count(" | ") == 2}
    assert rows[f"micro against will-it-scale at {tasks} tasks"] == (
        f"failed: dup1 procs at {tasks} tasks: will-it-scale dup1_processes gave 0 of 1 samples, exit 1")
    assert "## FAILED: 1 of " in summary and "dup1_processes: cannot set up its tasks" in summary
    # The later phases ran, and ran well: their runs are in the store, whole (not merely begun).
    assert rows["doctor"] == rows["scale/lock, counter, tree at 1..max cores"] == "done", summary
    assert rows["models: prediction intervals and hold-out"] == "done", summary
    runs = {run["label"]: run for run in Store(str(tmp_path / "x" / archives[0].name.removesuffix(".tar.gz")
                                                  / "store.sqlite")).list_runs()}
    for label in ("manycore-lock", "manycore-scale"):
        assert runs[label]["status"] == "complete" and runs[label]["points"] > 0 and not runs[label]["failed"]
    # Metis, pedsort and fxmark ran whole, or were stopped at their deadline (what they measured kept), and
    # failed nowhere; fxmark was begun only with time for a point or two, and the summary says so.
    apps = rows["Metis, pedsort and fxmark at 1 and max cores"]
    assert "failed" not in apps and not runs["manycore-apps"]["failed"], summary
    assert runs["manycore-apps"]["status"] == "complete" or "run-apps stopped at its deadline" in apps, summary
    if "run-fxmark.txt" in names:
        fx = runs["manycore-fxmark"]
        assert not fx["failed"] and (fx["status"] == "complete" or "run-fxmark stopped at its deadline" in apps)
    else:
        assert "fxmark skipped: too little of the budget left" in apps, summary


def _check(tmp_path: Path) -> check_manycore.Check:
    args = argparse.Namespace(budget=60.0, wis=None, tests=1, rounds=1, warmup=0, duration=1)
    work = tmp_path / "work"
    work.mkdir()
    return check_manycore.Check(args, work, {**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_failing_command_fails_its_phase_with_its_last_lines_and_the_next_phase_runs(tmp_path):
    check = _check(tmp_path)
    bad = check.run_phase("first", lambda p: check.mosbench(p, "run-bad", "run", "nosuch"))
    raised = check.run_phase("second", lambda p: 1 / 0)
    fine = check.run_phase("third", lambda p: p.files.append("third.txt"))
    assert bad.state is check_manycore.State.FAILED
    assert bad.describe() == "failed: run-bad exited 2"
    assert bad.failures[0].lines[-1].startswith("mosbench: unknown workload 'nosuch'")
    assert raised.state is check_manycore.State.FAILED
    assert raised.describe() == "failed: the phase raised ZeroDivisionError: division by zero"
    assert fine.state is check_manycore.State.DONE and fine.describe() == "done"
    assert check.failed() == [bad, raised]
    table = manycore_summary.phases_section(check.phases)
    assert table[2] == f"| first | {bad.seconds:.0f} | failed: run-bad exited 2 |"
    assert "## FAILED: 2 of 3 phases" in table
    assert table[table.index("first: run-bad exited 2") + 4].startswith("mosbench: unknown workload 'nosuch'")


def test_a_phase_state_is_the_worst_that_happened_in_it():
    p = check_manycore.Phase("p")
    p.mark(check_manycore.State.DONE, "fxmark skipped: too little of the budget left")
    assert p.state is check_manycore.State.DONE
    p.mark(check_manycore.State.CUT_SHORT, "run-x stopped at its deadline")
    p.failed(check_manycore.Failure("run-y", "exited 3"))
    p.mark(check_manycore.State.SKIPPED, "z")
    assert p.state is check_manycore.State.FAILED
    assert p.describe() == ("failed: fxmark skipped: too little of the budget left; run-x stopped at its deadline; "
                            "run-y exited 3; z")


@pytest.mark.parametrize("args,message", [
    (["--budget", "abc"], "argument --budget: 'abc' is not a number of seconds"),
    (["--budget", "0"], "argument --budget: '0' is not a positive number of seconds"),
    (["--budget", "-1"], "argument --budget: '-1' is not a positive number of seconds"),
    (["--budget", "nan"], "argument --budget: 'nan' is not a positive number of seconds"),
    (["--rounds", "0"], "argument --rounds: '0' is not a whole number of 1 or more"),
    (["--kit", "/nonexistent"], "--kit /nonexistent is not a directory (make manycore-kit makes one)"),
    (["--kit", "{tmp}"], "--kit {tmp} is not a kit: it has no wheels/, lib/ or native/ (make manycore-kit makes one)"),
    (["--wis", "{tmp}/none"], "--wis {tmp}/none is not a directory"),
    (["--out", "/proc/x"], "cannot write to --out /proc/x: No such file or directory"),
    (["--out", "/sys"], "cannot write to --out /sys: Permission denied"),
    (["--out", "/etc/hostname"], "--out /etc/hostname is not a directory"),
])
def test_a_bad_argument_is_one_line_before_anything_is_measured(tmp_path, monkeypatch, capsys, args, message):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    out = [] if "--out" in args else ["--out", str(tmp_path / "out")]
    monkeypatch.setattr(sys, "argv", ["check_manycore.py", *args, *out])
    monkeypatch.setattr(willitscale, "close_inherited_fds", lambda: None)  # pytest's own
    monkeypatch.setattr(check_manycore.Check, "__init__", lambda *_: pytest.fail("the check began"))
    try:
        code = check_manycore.main()
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and err.splitlines() == [f"check-manycore: {message.replace('{tmp}', str(tmp_path))}"]
    assert not (tmp_path / "out").exists()


def test_an_out_that_cannot_take_the_results_keeps_them_and_says_where(tmp_path, monkeypatch, capsys):
    """--out is checked first, but it may fail later (a full disk, a file system gone read-only): the
    results stay in the scratch, which the last line names. The phases here measure nothing."""
    out = tmp_path / "out"
    monkeypatch.setattr(sys, "argv", ["check_manycore.py", "--out", str(out), "--budget", "1"])
    monkeypatch.setattr(willitscale, "close_inherited_fds", lambda: None)
    real = check_manycore.Check.run_phase
    monkeypatch.setattr(check_manycore.Check, "run_phase", lambda self, name, _body: real(self, name, lambda p: None))
    monkeypatch.setattr(check_manycore.shutil, "copy", _read_only)
    code = check_manycore.main()
    err = capsys.readouterr().err.splitlines()
    assert code == 1
    assert err[0] == f"check-manycore: cannot write to --out {out}: Read-only file system"
    kept = Path(err[1].removeprefix("check-manycore: every result so far is kept in "))
    assert (kept / "summary.md").exists() and (kept / "machine.txt").exists()
    assert "| doctor | 0 | done |" in (kept / "summary.md").read_text()
    assert not list(out.iterdir())
    subprocess.run(["rm", "-rf", str(kept.parent)], check=True)


def _read_only(*_args, **_kw):
    raise OSError(30, "Read-only file system")


def test_the_summary_curves_ratio_is_most_cores_over_one_and_none_without_a_one_core_point(tmp_path):
    """The one scaling ratio (cells.scaling_ratio), not most over fewest: a sweep from 2 cores has none."""
    db = Store(str(tmp_path / "store.sqlite"))
    run = db.create_run({"params": {}, "selections": [["micro", "getppid1"]], "cores": [1, 2, 4]}, {"hostname": "h"},
                        "mosbench run micro/getppid1", "night")
    for variant, sweep in (("procs", (1, 2, 4)), ("threads", (2, 4))):
        for cores in sweep:
            per_core = {1: 100.0, 2: 90.0, 4: 60.0}[cores]
            db.add_point(run, workload="micro", test="getppid1", variant=variant, cores=cores, trial=1, status="ok",
                         started_at=db.run(run)["started_at"], cpus="0", unit="op", window_s=1.0,
                         work=per_core * cores, throughput=per_core * cores, user_s=cores, system_s=0.0,
                         idle_s=0.0, steal_s=0.0)
    rows = [line for line in manycore_summary.curves_section(tmp_path / "store.sqlite") if line.startswith("| night")]
    assert rows == ["| night | micro/getppid1 | procs | 1: 100/s | 4: 60/s | 0.60 |",
                    "| night | micro/getppid1 | threads | 2: 90/s | 4: 60/s | – (no 1-core point) |"]
