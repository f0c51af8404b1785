"""The many-core check (scripts/check_manycore.py) at this machine's CPUs, against a stand-in will-it-scale:
its phases within their budget, one archive with the store and every table, and a summary that says
what each phase did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time

from mosbench.workloads.scale import lock_par_ns
from tests.conftest import ROOT, needs_native
from tests.test_vs_will_it_scale import stand_in

pytestmark = needs_native


def test_the_check_fits_its_budget_and_leaves_one_archive(tmp_path):
    wis = stand_in(tmp_path, {"getppid1": ["5000000"], "dup1": ["4000000"]})
    out = tmp_path / "out"
    started = time.monotonic()
    r = subprocess.run([sys.executable, "scripts/check_manycore.py", "--wis", str(wis), "--out", str(out),
                        "--budget", "100", "--tests", "2", "--rounds", "2", "--warmup", "0", "--duration", "1"],
                       cwd=ROOT, capture_output=True, text=True, timeout=240)
    took = time.monotonic() - started
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    # The budget holds, with a little for the summary and the archive.
    assert took < 100 + 25, took
    archives = list(out.glob("manycore-*.tar.gz"))
    assert len(archives) == 1 and (out / "summary.md").exists()
    with tarfile.open(archives[0]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        pairs = json.load(tar.extractfile(next(m for m in tar.getmembers() if m.name.endswith("pairs-max.json"))))
    assert {"store.sqlite", "summary.md", "machine.txt", "doctor.txt", "pairs-max.json", "run-scale-lock.txt"} <= names
    assert pairs and {p["test"] for p in pairs} <= {"getppid1", "dup1"}
    assert all(len(p["ours"]) == len(p["theirs"]) == 2 and p["theirs_median"] > 0 for p in pairs)
    summary = (out / "summary.md").read_text()
    assert "micro against will-it-scale at " in summary and "| getppid1 | procs |" in summary
    assert f"scale/lock's par_ns: {lock_par_ns(200, len(os.sched_getaffinity(0)))} ns" in summary
    assert "| phase | seconds | state |" in summary
    # fxmark ran (as far as the budget let it), or the summary says why not.
    assert "run-fxmark.txt" in names or "fxmark skipped: too little of the budget left" in summary


def test_a_missing_will_it_scale_is_one_line(tmp_path):
    r = subprocess.run([sys.executable, "scripts/check_manycore.py", "--wis", str(tmp_path / "none"), "--out",
                        str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "is not a directory" in r.stderr
    assert not (tmp_path / "out").exists()
