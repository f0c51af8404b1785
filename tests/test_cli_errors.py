"""Every user error: one clear line, a non-zero exit, and nothing half-written to the store."""

import sqlite3

import pytest

from tests.conftest import mosbench, needs_native


@needs_native
@pytest.mark.parametrize("args,message", [
    (["run", "nosuch"], "unknown workload 'nosuch'"),
    (["run", "micro/nosuch"], "unknown test 'micro/nosuch'"),
    (["run", "micro/getppid1", "--cores", "1,x"], "malformed core list"),
    (["run", "micro/getppid1", "--cores", "100000"], "online CPUs"),
    (["run", "micro/getppid1", "--variant", "fibers"], "no variant 'fibers'"),
    (["run", "micro/getppid1", "-p", "nosuch=1"], "no selected workload has a parameter"),
    (["show", "42"], "no run 42"),
])
def test_user_errors(tmp_path, args, message):
    db = tmp_path / "s.sqlite"
    r = mosbench(*args, "--store", str(db))
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.stderr
    if db.exists():
        assert sqlite3.connect(db).execute("select count(*) from runs").fetchone()[0] == 0


def test_bad_store_url():
    r = mosbench("runs", "--store", "nosuchdb://nowhere")
    assert r.returncode == 2 and "bad store URL" in r.stderr and "Traceback" not in r.stderr


def test_bad_flag():
    r = mosbench("run", "--trials", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_list():
    r = mosbench("list")
    assert r.returncode == 0 and "micro" in r.stdout
