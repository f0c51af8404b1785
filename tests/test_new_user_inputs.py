"""What a new user met (issue 45), in-process through the command line's own entry point (cli._main: its
one-line errors and exit codes): a commit that is not one, a reader that leaves the pipe, a name history
does not know, reading commands given no store or a file that is not one, a dead run's leftovers met by
any command, a killed run shown, and show's tables in 80 columns."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from mosbench import cli
from mosbench.commands import options
from mosbench.machine import journal
from mosbench.report import terminal
from mosbench.run.plan import stored_selections
from mosbench.store import db as store
from tests.conftest import ROOT, needs_native
from tests.test_commute import _situation


@dataclass
class Said:
    code: int
    out: str
    err: list[str]  # stderr's lines that are not blank


class ClosedPipe(io.StringIO):
    """stdout whose reader has left (`| head -c0`)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.fixture(autouse=True)
def _own_state(tmp_path, monkeypatch):
    """The journal directory every command recovers from: this test's own, empty unless it writes one."""
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("MOSBENCH_STATE", str(state))
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("MOSBENCH_STORE", raising=False)
    return state


def mosbench(monkeypatch, *args: str, out: io.StringIO | None = None) -> Said:
    """`mosbench ARGS` in this process: its exit code and what it printed."""
    out = out if out is not None else io.StringIO()
    err = io.StringIO()
    for pipe, stream in ((terminal.stdout, out), (terminal.stderr, err)):
        monkeypatch.setattr(pipe, "stream", stream)
        monkeypatch.setattr(pipe, "broken", False)
    monkeypatch.setattr(sys, "argv", ["mosbench", *args])
    try:
        cli._main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
    text = "" if isinstance(out, ClosedPipe) else out.getvalue()
    return Said(code, text, [line for line in err.getvalue().splitlines() if line.strip()])


def _micro_point(cores: int, trial: int, per_core: float) -> dict:
    return {"workload": "micro", "test": "getppid1", "variant": "procs", "cores": cores, "trial": trial,
            "status": "ok", "unit": "op", "cpus": "0", "work": per_core * cores, "throughput": per_core * cores,
            "window_s": 1.0, "user_s": 0.1, "system_s": 0.9, "idle_s": 0.0, "steal_s": 0.0, "samples": [],
            "metrics": {}}


def _store(path: Path, runs: list[list[dict]], status: str = "complete") -> Path:
    db = store.Store(str(path))
    for points in runs:
        run = db.create_run({"params": {}, "selections": [], "cores": [1]},
                            {"hostname": "h", "kernel": "6.1.0-test", "kernel_version": "6.1.0"}, "mosbench run",
                            "a run")
        for p in points:
            db.add_point(run, started_at=store.now(), **p)
        if status == "killed":
            db.mark_killed(run)
        else:
            db.finish_run(run, status)
    return path


def _history_store(tmp_path: Path) -> Path:
    return _store(tmp_path / "h.sqlite", [[_micro_point(1, t, 1e6 + 1e3 * (r + t)) for t in (1, 2, 3)]
                                          for r in range(4)])


# ---- --commit ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("commit", ["", "not hex; $(id)", "abc1234\nrm -rf /", "abc12", "g" * 7, "a" * 41])
def test_a_commit_that_is_not_a_commit_id_is_refused_before_anything_is_made(tmp_path, monkeypatch, commit):
    db = tmp_path / "nowhere" / "s.sqlite"
    # More cores than any machine has: were the commit let through, the run would be refused, never measured.
    said = mosbench(monkeypatch, "run", "micro/getppid1", "--cores", "100000", "--commit", commit,
                    "--store", str(db))
    assert said.code == 2 and said.err == [f"mosbench: --commit {commit!r} is not a commit id: give its 7 to 40 "
                                           "hex digits (`git -C TREE rev-parse REV` prints them)"]
    assert not db.parent.exists()


def test_a_commit_id_is_kept_as_git_prints_it():
    assert options.commit_id(None, None, "ABCDEF1234567") == "abcdef1234567"
    assert options.commit_id(None, None, "0" * 40) == "0" * 40
    assert options.commit_id(None, None, None) is None


# ---- a reader that leaves -------------------------------------------------------------------------------

@pytest.mark.parametrize("gate", [[], ["--fail-on-change", "50"]], ids=["json", "gate"])
def test_a_closed_pipe_is_not_a_change(tmp_path, monkeypatch, gate):
    db = _history_store(tmp_path)
    shown = mosbench(monkeypatch, "history", "--json", *gate, "--store", str(db))
    assert shown.code == 0 and json.loads(shown.out)
    said = mosbench(monkeypatch, "history", "--json", *gate, "--store", str(db), out=ClosedPipe())
    assert (said.code, said.err) == (0, [])


def test_a_closed_pipe_as_a_shell_makes_it(tmp_path):
    """`mosbench history --json | head -c0`: the reader gone before the first write, in a real process (the
    interpreter's own last flush included)."""
    db = _history_store(tmp_path)
    read, write = os.pipe()
    os.close(read)
    try:
        r = subprocess.run([sys.executable, "-m", "mosbench", "history", "--json", "--fail-on-change", "50",
                            "--store", str(db)], stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                           env={**os.environ, "MOSBENCH_STATE": str(tmp_path / "state")}, timeout=120)
    finally:
        os.close(write)
    assert (r.returncode, r.stderr) == (0, "")


# ---- names history does not know ------------------------------------------------------------------------

@pytest.mark.parametrize("name,message", [
    ("nosuch", "unknown workload 'nosuch' (known: "),
    pytest.param("micro/nosuch", "unknown test 'micro/nosuch' (see `mosbench list micro`)", marks=needs_native),
    pytest.param("fxmark/dwom", "unknown test 'fxmark/dwom' (see `mosbench list fxmark`)", marks=needs_native),
])
def test_history_says_a_name_is_unknown_as_run_does(tmp_path, monkeypatch, name, message):
    db = _history_store(tmp_path)
    said = mosbench(monkeypatch, "history", name, "--store", str(db))
    assert said.code == 2 and len(said.err) == 1 and said.err[0].startswith(f"mosbench: {message}")
    ran = mosbench(monkeypatch, "run", name, "--store", str(tmp_path / "r.sqlite"))
    assert ran.err[0].split(" (")[0] == said.err[0].split(" (")[0]


@needs_native
def test_history_selects_what_run_selects():
    """A leading part of a test's name is every test it leads, as `run` measures them."""
    open_open = stored_selections(["commute/open-open"])
    assert len(open_open) > 1 and all(s.startswith("commute/open-open/") for s in open_open)
    assert stored_selections(["micro", "micro/getppid1", "micro/getppid1"]) == ["micro", "micro/getppid1"]


def test_history_still_finds_a_known_test(tmp_path, monkeypatch):
    said = mosbench(monkeypatch, "history", "micro/getppid1", "--store", str(_history_store(tmp_path)))
    assert said.code == 0 and "micro/getppid1" in said.out


# ---- commands that only read ----------------------------------------------------------------------------

READERS = [["history"], ["show"], ["compare", "1", "2"], ["report", "-o", "{tmp}/rep/report.html"], ["export"],
           ["model", "lock"], ["model", "scaling"], ["runs"]]


@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c[:2]))
def test_a_reading_command_makes_no_store_where_there_is_none(tmp_path, monkeypatch, command):
    missing = tmp_path / "nosuchdir" / "missing.sqlite"
    said = mosbench(monkeypatch, *(a.replace("{tmp}", str(tmp_path)) for a in command), "--store", str(missing))
    assert said.code == 2 and said.err == [f"mosbench: no results store at {missing} (`mosbench run` makes one; "
                                           "--store or MOSBENCH_STORE names another)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state"]  # no folder, no store, no report folder


@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("kind", ["empty", "text", "another program's database"])
def test_a_reading_command_leaves_a_file_that_is_not_a_store_as_it_was(tmp_path, monkeypatch, command, kind):
    path = tmp_path / "not-a-store"
    if kind == "another program's database":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE notes (text TEXT)")
        conn.commit()
        conn.close()
    else:
        path.write_text("" if kind == "empty" else "hello\n")
    before = path.read_bytes()
    said = mosbench(monkeypatch, *(a.replace("{tmp}", str(tmp_path)) for a in command), "--store", str(path))
    expected = {"empty": f"store {path} is an empty file, not a mosbench results store",
                "text": f"store {path} is not a mosbench results store: file is not a database",
                "another program's database": f"store {path} is not a mosbench results store (it has no "
                                              "schema_version table)"}[kind]
    assert said.code == 2 and said.err == [f"mosbench: {expected}"]
    assert path.read_bytes() == before
    assert not (tmp_path / "rep").exists()


def test_a_writing_command_still_makes_its_store(tmp_path):
    db = store.Store(str(tmp_path / "new" / "s.sqlite"))
    assert db.list_runs() == [] and (tmp_path / "new" / "s.sqlite").stat().st_size > 0


# ---- a dead run's leftovers, from every command ---------------------------------------------------------

def _dead_run_journal(state: Path, tmp_path: Path) -> Path:
    """A journal whose owner has exited (its guardian too), listing a scratch directory it left."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    scratch = tmp_path / f"{journal.SCRATCH_PREFIX}-dead"
    scratch.mkdir()
    (state / f"run-{gone.pid}.json").write_text(
        f'{{"owner": {gone.pid}, "owner_start": 1, "dirs": ["{scratch}"]}}')
    return scratch


@pytest.mark.parametrize("command", [["list", "micro"], ["runs", "--store", "{db}"], ["history", "--store", "{db}"],
                                     ["show", "--store", "{db}"], ["export", "--store", "{db}"],
                                     ["model", "scaling", "--store", "{db}"], ["doctor"]],
                         ids=lambda c: " ".join(c[:2]))
def test_every_command_recovers_a_dead_run_first(tmp_path, monkeypatch, _own_state, command):
    db = _history_store(tmp_path)
    scratch = _dead_run_journal(_own_state, tmp_path)
    said = mosbench(monkeypatch, *(a.replace("{db}", str(db)) for a in command))
    assert said.code == 0, said.err
    assert said.err[0] == f"mosbench: cleaned up after an earlier run: removed scratch directory {scratch}"
    assert not scratch.exists() and not list(_own_state.iterdir())


def test_a_killed_run_shown_says_how_to_finish_it(tmp_path, monkeypatch):
    db = _store(tmp_path / "k.sqlite", [[]], status="killed")
    said = mosbench(monkeypatch, "show", "--store", str(db))
    assert said.code == 0
    assert said.out.splitlines()[1] == (f"run #1 was killed before it finished (its harness died) with 0 points "
                                        f"stored: `mosbench run --resume 1 --store {db}` measures the rest")


# ---- width ----------------------------------------------------------------------------------------------

def _apache_point(variant: str, cores: int) -> dict:
    steps = [{"connections": n, "kilobytes_per_s": 2217320.4 * n / 64, "good_share": 0.999, "tolerable_share": 1.0,
              "latency_p99_us": 12345.0, "server_us_per_kilobyte": 0.4321} for n in (16, 32, 64)]
    return {"workload": "apache", "test": "files", "variant": variant, "cores": cores, "trial": 1, "status": "ok",
            "unit": "kilobyte", "cpus": "0", "work": 2217320.0, "throughput": 2217320.0 * cores, "window_s": 1.0,
            "user_s": 0.1, "system_s": 0.9, "idle_s": 0.0, "steal_s": 0.0, "samples": [],
            "metrics": {"qos_connections": 64, "qos_steps": steps}}


def test_show_fits_the_commutativity_and_baseline_tables_in_80_columns(tmp_path, monkeypatch):
    commute = [{k: v for k, v in p.items() if k not in ("interference", "interfered")}
               for p in (*_situation("mmap-mmap/overlapping-fixed-procs", (1234567, 2345678), (1100000, 2000000)),
                         *_situation("open-unlink/samename", (1000, 400), (500, 200), commutes=False))]
    db = _store(tmp_path / "w.sqlite", [[*commute, _apache_point("per-core", 1), _apache_point("per-core", 2)]])
    said = mosbench(monkeypatch, "show", "--store", str(db))
    assert said.code == 0, said.err
    lines = said.out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Each side's rate beside the other"))
    assert "mmap-mmap/overlapping-fixed-procs  commute" in said.out
    qos = next(i for i, line in enumerate(lines) if line.startswith("the search for the most load"))
    assert "2.22M" in said.out and "2217320" not in said.out  # kB/s in three figures, as every other table
    wide = [line for line in lines[start:] + lines[qos:] if len(line) > 80]
    assert not wide, "\n".join(wide)
    every = mosbench(monkeypatch, "show", "--wide", "--store", str(db))
    assert "alone/s" in every.out  # the rates alone, left out at 80 columns, are there with --wide
