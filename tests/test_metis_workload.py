"""Metis through the harness: one job per point, timed by the harness, with the workload's own metrics."""

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import mosbench, needs_native, refused

pytestmark = needs_native


def test_jobs_metrics_and_huge_pages(tmp_path):
    db = tmp_path / "s.sqlite"
    r = mosbench("run", "metis/invindex", "--cores", "1..max", "--trials", "1", "-p", "size_mb=16",
                 "--store", str(db), env={"HOME": str(tmp_path)})  # the generated input is cached under HOME
    assert r.returncode == 0, r.stderr
    rows = sqlite3.connect(db).execute("select variant, cores, status, window_s, metrics from points").fetchall()
    assert {v for v, *_ in rows} == {"4k", "2m"} and all(s == "ok" for _, _, s, *_ in rows)
    for variant, _, _, window, metrics in rows:
        m = json.loads(metrics)
        assert m["keys"] > 1000 and m["job_s"] > 0 and m["stream_triad_bytes_per_s"] > 0
        # The harness times the job itself, give or take its start signal and exit.
        assert m["job_s"] <= window < m["job_s"] + 0.5
        assert m["pages"] == "4k" if variant == "4k" else m["pages"].startswith("2m")
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp.exists() and "[never]" not in thp.read_text():
        faults = {v: json.loads(m)["minor_faults"] for v, c, _, _, m in rows if c == 1}
        assert faults["2m"] * 4 < faults["4k"], faults
    assert list((tmp_path / ".cache" / "mosbench" / "metis").glob("zipf-16mb-*.txt"))


def test_bad_input_file(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    for path, message in ((tmp_path / "none.txt", "not a readable file"), (empty, "is empty")):
        assert message in refused(tmp_path, "run", "metis/wordcount", "--cores", "1", "--trials", "1", "-p",
                                  f"input={path}")


@pytest.mark.parametrize("param,message", [
    ("partitions=-1", "metis partitions must be 0..4294967295, not -1"),
    ("partitions=4294967296", "metis partitions must be 0..4294967295, not 4294967296"),
    ("vocab=0", "metis vocab must be 1..4294967295, not 0"),
    ("vocab=4294967296", "metis vocab must be 1..4294967295, not 4294967296"),
    ("seed=-1", "metis seed must be 0..18446744073709551615, not -1"),
    ("size_mb=-1", "metis size_mb must be 0..17592186044415, not -1"),
])
def test_a_number_the_program_would_refuse_is_refused_before_the_run(tmp_path, param, message):
    """mosbench-metis parses these into unsigned ranges (native/metis/apps/main.c): refused by the workload
    first, not by the program at every point."""
    assert message in refused(tmp_path, "run", "metis", "-p", param)
