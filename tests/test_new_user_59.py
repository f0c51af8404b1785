"""What a new user met (issue 59), in-process through the command line's entry point (cli._main): results
written where they cannot go (a full disk, /dev/full, a pipe), a label's terminal escapes, a store that never
answers, a row with an impossible date, a 100 KB name in an error, history at 80 columns, and the shared
data's place."""

from __future__ import annotations

import ast
import errno
import io
import json
import os
import re
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from rich.console import Console

from mosbench import outfile
from mosbench.analysis import history as hist
from mosbench.printable import error_line, printable
from mosbench.report import history as history_report
from mosbench.report import table, terminal
from mosbench.report.rows import TableModel
from mosbench.store import db as store
from mosbench.testing.history_stores import Planted, fill
from tests.conftest import ROOT, needs_native
from tests.test_new_user_inputs import _micro_point, _own_state, mosbench  # noqa: F401 (_own_state: autouse)

ESCAPES = "\x1b[31mred\x1b[0m\x1b]0;title\x07\u202e"  # a colour, the window's title, a bidi override
SHOWN = printable(ESCAPES)  # \x1b[31mred\x1b[0m\x1b]0;title\x07\u202e, as text


def _store(path: Path, runs: int = 1, label: str = "a run", host: str = "h", kernel: str = "6.1.0-test",
           command: str = "mosbench run micro/getppid1") -> Path:
    db = store.Store(str(path))
    for _ in range(runs):
        run = db.create_run({"params": {}, "selections": [], "cores": [1, 2]},
                            {"hostname": host, "kernel": kernel, "kernel_version": "6.1.0"}, command, label)
        for cores in (1, 2):
            for trial in (1, 2, 3):
                db.add_point(run, started_at=store.now(), **_micro_point(cores, trial, 1e6 + 1e3 * trial))
        db.finish_run(run, "complete")
    db.engine.dispose()
    return path


@pytest.fixture
def small(tmp_path) -> Path:
    """A run's store, in a folder of its own (SQLite's -wal and -shm files beside it)."""
    (tmp_path / "db").mkdir()
    return _store(tmp_path / "db" / "s.sqlite")


# ---- where results go ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_an_export_to_dev_full_says_one_line(small, monkeypatch, fmt):
    said = mosbench(monkeypatch, "export", "1", "--format", fmt, "-o", "/dev/full", "--store", str(small))
    assert (said.code, said.err) == (
        2, [f"mosbench: cannot write the {fmt.upper()} export to /dev/full: No space left on device"])
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)  # written in place, never replaced


def test_a_report_to_dev_full_says_one_line_and_leaves_nothing(small, monkeypatch):
    had = Path("/dev/full_files").exists()
    said = mosbench(monkeypatch, "report", "1", "-o", "/dev/full", "--store", str(small))
    assert (said.code, said.err) == (2, ["mosbench: cannot write the report to /dev/full: No space left on device"])
    assert Path("/dev/full_files").exists() == had  # no figures beside a device


class FullOutput(io.StringIO):
    """Standard output on a full disk (`> /dev/full`)."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("command", [["export", "1"], ["export", "1", "--format", "json"], ["runs"],
                                     ["history", "--json"], ["show", "1"]], ids=" ".join)
def test_standard_output_on_a_full_disk_says_one_line(small, monkeypatch, command):
    said = mosbench(monkeypatch, *command, "--store", str(small), out=FullOutput())
    assert (said.code, said.err) == (2, ["mosbench: cannot write to standard output: No space left on device"])


def test_standard_output_on_dev_full_as_a_shell_makes_it(small, tmp_path):
    """`mosbench export 1 > /dev/full` in a real process: the interpreter's own last flush included."""
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "mosbench", "export", "1", "--store", str(small)], stdout=full,
                           stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120,
                           env={**os.environ, "MOSBENCH_STATE": str(tmp_path / "state")})
    assert (r.returncode, r.stderr.splitlines()) == (
        2, ["mosbench: cannot write to standard output: No space left on device"])


@pytest.fixture
def full_fs(tmp_path):
    """A 128 KB tmpfs of this test's own, unmounted however the test ends."""
    where = tmp_path / "full"
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(where)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (root and mount needed); see the ENOSPC test for the same path")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(where: Path) -> None:
    """The file system filled to its last block (an empty file still fits: it takes no block)."""
    with open(where / "filler", "wb", buffering=0) as f, pytest.raises(OSError):
        while True:
            f.write(b"\0" * 4096)


def test_a_report_on_a_full_file_system_leaves_the_last_one_as_it_was(small, monkeypatch, full_fs):
    said = mosbench(monkeypatch, "report", "1", "-o", str(full_fs / "new" / "r.html"), "--store", str(small))
    assert (said.code, said.err) == (
        2, [f"mosbench: cannot write the report to {full_fs}/new/r.html: No space left on device"])
    assert list(full_fs.iterdir()) == []  # not the page, not its figures, not the folder made for them
    (full_fs / "r.html").write_text("the last report")
    (full_fs / "r_files").mkdir()
    (full_fs / "r_files" / "summary.svg").write_text("<svg/>")
    said = mosbench(monkeypatch, "report", "1", "-o", str(full_fs / "r.html"), "--store", str(small))
    assert said.code == 2 and len(said.err) == 1 and "No space left on device" in said.err[0]
    assert sorted(p.name for p in full_fs.rglob("*")) == ["r.html", "r_files", "summary.svg"]
    assert (full_fs / "r.html").read_text() == "the last report"
    assert (full_fs / "r_files" / "summary.svg").read_text() == "<svg/>"


def test_an_export_on_a_full_file_system_leaves_the_last_one_as_it_was(small, monkeypatch, full_fs):
    (full_fs / "e.json").write_text("the last export")
    _fill(full_fs)
    said = mosbench(monkeypatch, "export", "1", "--format", "json", "-o", str(full_fs / "e.json"),
                    "--store", str(small))
    assert (said.code, said.err) == (
        2, [f"mosbench: cannot write the JSON export to {full_fs}/e.json: No space left on device"])
    assert sorted(p.name for p in full_fs.iterdir()) == ["e.json", "filler"]
    assert (full_fs / "e.json").read_text() == "the last export"


def test_a_write_that_fails_leaves_nothing_where_no_file_system_can_be_filled(small, monkeypatch, tmp_path):
    """The same path without a mount: the disk fills as the new file is made durable."""
    def full(_fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(outfile.os, "fsync", full)
    said = mosbench(monkeypatch, "export", "1", "-o", str(tmp_path / "out" / "e.csv"), "--store", str(small))
    assert (said.code, said.err) == (
        2, [f"mosbench: cannot write the CSV export to {tmp_path}/out/e.csv: No space left on device"])
    assert not (tmp_path / "out").exists()


def test_an_export_replaces_a_file_whole_keeping_its_mode(small, monkeypatch, tmp_path):
    old = tmp_path / "e.csv"
    old.write_text("old")
    old.chmod(0o640)
    assert mosbench(monkeypatch, "export", "1", "-o", str(old), "--store", str(small)).code == 0
    assert old.read_text().startswith("id,run_id,workload") and stat.S_IMODE(old.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db", "e.csv", "state"]


def test_a_report_into_a_pipe_is_written_there_not_replaced(small, monkeypatch, tmp_path):
    fifo = tmp_path / "page"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    said = mosbench(monkeypatch, "report", "1", "-o", str(fifo), "--store", str(small))
    reader.join(timeout=60)
    assert said.code == 0, said.err
    assert said.err == [f"wrote {fifo}"] and said.out == ""  # the page may be standard output: said on stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode) and got[0].lstrip().lower().startswith(b"<!doctype html>")
    assert b"Figures are also in" not in got[0]  # the page holds every figure
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db", "page", "state"]


def test_a_report_replaces_the_last_one_and_its_figures(small, monkeypatch, tmp_path):
    (tmp_path / "r_files").mkdir()
    (tmp_path / "r_files" / "gone.svg").write_text("<svg/>")
    said = mosbench(monkeypatch, "report", "1", "-o", str(tmp_path / "r.html"), "--store", str(small))
    assert said.code == 0, said.err
    figures = sorted(p.name for p in (tmp_path / "r_files").iterdir())
    assert "summary.svg" in figures and "gone.svg" not in figures
    assert sorted(p.name for p in tmp_path.iterdir()) == ["db", "r.html", "r_files", "state"]
    assert stat.S_IMODE((tmp_path / "r_files").stat().st_mode) == 0o777 & ~outfile._umask()


def test_a_lock_model_figure_is_checked_before_it_is_fitted(monkeypatch, tmp_path):
    said = mosbench(monkeypatch, "model", "lock", "--s", "100", "--c", "10", "-o", str(tmp_path / "lock.txt"))
    assert said.code == 2 and len(said.err) == 1 and said.err[0].startswith(
        f"mosbench: -o {tmp_path}/lock.txt: name a figure by what it is drawn as (")
    said = mosbench(monkeypatch, "model", "lock", "--s", "100", "--c", "10", "-o", "/dev/full")
    assert said.code == 2 and len(said.err) == 1 and said.err[0].startswith("mosbench: -o /dev/full: name a figure")
    said = mosbench(monkeypatch, "model", "lock", "--s", "100", "--c", "10", "--json", "-o",
                    str(tmp_path / "lock.svg"))
    assert said.code == 0 and (tmp_path / "lock.svg").read_text().lstrip().startswith("<?xml")


# ---- text from the store reaching a terminal ---------------------------------------------------------------

@pytest.fixture
def escapes(tmp_path) -> Path:
    return _store(tmp_path / "e.sqlite", runs=2, label=ESCAPES, host=f"host{ESCAPES}", kernel=f"6.1{ESCAPES}",
                  command=f"mosbench run {ESCAPES}")


def _shown_escaped(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert SHOWN in text


@pytest.mark.parametrize("command", [["runs"], ["show", "1"], ["compare", "1", "2"], ["history"],
                                     ["compare", "1", "2", "--wide"]], ids=" ".join)
def test_a_command_prints_store_text_escaped(escapes, monkeypatch, command):
    said = mosbench(monkeypatch, *command, "--store", str(escapes))
    assert said.code == 0, said.err
    _shown_escaped(said.out)
    assert store.Store(str(escapes), create=False).run(1)["label"] == ESCAPES  # stored as given


def test_runs_shows_each_run_on_one_line_whatever_its_label(tmp_path, monkeypatch):
    db = _store(tmp_path / "n.sqlite", label="two\nlines", command="mosbench run\rhidden")
    said = mosbench(monkeypatch, "runs", "--store", str(db))
    assert said.code == 0 and len(said.out.splitlines()) == 2
    assert "two\\x0alines" in said.out and "mosbench run\\x0dhidden" in said.out


@pytest.mark.parametrize("command", [["runs"], ["show", "1"], ["compare", "1", "2"], ["history"]], ids=" ".join)
def test_a_stored_line_break_never_starts_a_line(tmp_path, monkeypatch, command):
    """A label, hostname or kernel holding a line break would print a line of the store's choosing under
    mosbench's own: each is shown as its escape, as an escape sequence is."""
    db = _store(tmp_path / "n.sqlite", runs=2, label="two\nFAKE", host="h\nFAKE", kernel="6.1\nFAKE")
    said = mosbench(monkeypatch, *command, "--store", str(db))
    assert said.code == 0, said.err
    assert "\\x0aFAKE" in said.out and not [line for line in said.out.splitlines() if "FAKE" in line.split("\\x0a")[0]]


def test_an_error_echoing_store_text_prints_it_escaped(escapes, monkeypatch):
    said = mosbench(monkeypatch, "history", "--host", "nowhere", "--store", str(escapes))
    assert said.code == 2 and len(said.err) == 1
    _shown_escaped(said.err[0])


def test_a_terminal_gets_store_text_escaped_as_a_pipe_does():
    """On a terminal rich writes its own colours; the label's escapes are shown as text, never obeyed."""
    out = io.StringIO()
    tty = terminal.EscapingConsole(file=out, force_terminal=True, color_system="standard", width=80)
    tty.print(f"run on {ESCAPES}", style="red")
    model = TableModel(f"title {ESCAPES}", [table.Column("label", left=True)], note=f"note {ESCAPES}")
    model.add([ESCAPES])
    tty.print(table.render(model), crop=False)
    text = out.getvalue()
    assert "\x1b[31mred" not in text and "\x1b]0;" not in text and "\x07" not in text and "\u202e" not in text
    assert re.sub("\x1b\\[[0-9;]*m", "", text).count(SHOWN) == 4  # rich's own colours aside


def test_the_html_report_carries_no_raw_escape(escapes, monkeypatch, tmp_path):
    said = mosbench(monkeypatch, "report", "1", "2", "-o", str(tmp_path / "r.html"), "--store", str(escapes))
    assert said.code == 0, said.err
    page = (tmp_path / "r.html").read_text()
    assert "\x1b" not in page and "\x07" not in page and "\u202e" not in page and SHOWN in page
    for svg in (tmp_path / "r_files").glob("*.svg"):
        assert "\x1b" not in svg.read_text(), svg


def test_export_keeps_the_data_as_stored(escapes, monkeypatch):
    """An export is data for other programs: the label as it was stored (JSON writes ESC as \\u001b)."""
    said = mosbench(monkeypatch, "export", "1", "--format", "json", "--store", str(escapes))
    assert said.code == 0 and json.loads(said.out)["run"]["label"] == ESCAPES and "\x1b" not in said.out


# ---- a store that answers slowly or never ------------------------------------------------------------------

@pytest.fixture
def silent_server():
    """A port on 127.0.0.1 that accepts connections and never answers them."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []

    def accept() -> None:
        try:
            while True:
                held.append(listener.accept()[0])
        except OSError:
            pass  # closed below

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        for s in held:
            s.close()


def test_a_store_that_never_answers_is_refused_when_its_connect_timeout_ends(silent_server, monkeypatch):
    pytest.importorskip("psycopg")
    url = f"postgresql+psycopg://u:secret@127.0.0.1:{silent_server}/db?connect_timeout=2"
    started = time.monotonic()
    said = mosbench(monkeypatch, "runs", "--store", url)
    took = time.monotonic() - started
    assert (said.code, said.err) == (2, [
        f"mosbench: cannot open store postgresql+psycopg://u:***@127.0.0.1:{silent_server}/db?connect_timeout=2: "
        "timed out: no answer within 2 s (connect_timeout; the URL sets another as ?connect_timeout=N)"])
    assert took < 8


def test_a_postgresql_store_waits_10_s_for_a_connection_unless_its_url_says(monkeypatch):
    assert store.libpq_settings("postgresql+psycopg://u@db.example/lab")["connect_timeout"] == "10"
    assert "connect_timeout" not in store.libpq_settings("postgresql+psycopg://u@db.example/lab?connect_timeout=3")
    assert store.libpq_settings("postgresql+psycopg://u@h/lab?keepalives_idle=60")["tcp_user_timeout"] == "30000"
    assert store.libpq_settings("sqlite:///x.sqlite") == {}
    given = {}

    def engine(url, **kwargs):
        given.update(kwargs["connect_args"])
        raise sa.exc.ArgumentError("stop here")

    monkeypatch.setattr(store.sa, "create_engine", engine)
    with pytest.raises(store.UserError):
        store.Store("postgresql+psycopg://u@db.example/lab")
    assert given == store.LIBPQ_DEFAULTS


# ---- a row another program wrote ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", [["runs"], ["show", "2"], ["compare", "1", "2"], ["history"], ["export", "1"],
                                     ["report", "1", "-o", "{tmp}/rep/r.html"], ["model", "scaling", "1"]],
                         ids=lambda c: " ".join(c[:2]))
def test_an_impossible_date_in_the_store_is_one_line_naming_its_run(tmp_path, monkeypatch, command):
    db = _store(tmp_path / "d.sqlite", runs=2)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET started_at = '2026-11-31 10:00:00.000000' WHERE id = 1")
    said = mosbench(monkeypatch, *(a.replace("{tmp}", str(tmp_path)) for a in command), "--store", str(db))
    assert (said.code, said.err) == (2, [
        f"mosbench: the results store sqlite:///{db} holds run #1 with a started_at that cannot be read: "
        "'2026-11-31 10:00:00.000000' (day is out of range for month); mend or remove that row"])
    assert not (tmp_path / "rep").exists()


def test_an_impossible_date_of_a_point_names_the_point(tmp_path, monkeypatch):
    db = _store(tmp_path / "d.sqlite")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE points SET started_at = '2026-02-30 01:00:00' WHERE cores = 2 AND trial = 3")
    said = mosbench(monkeypatch, "show", "1", "--store", str(db))
    assert said.code == 2 and said.err == [
        f"mosbench: the results store sqlite:///{db} holds run #1's point micro/getppid1 procs at 2 cores, trial 3 "
        "with a started_at that cannot be read: '2026-02-30 01:00:00' (day is out of range for month); mend or "
        "remove that row"]


# ---- long names in errors ----------------------------------------------------------------------------------

LONG = "a" * 100_000


@pytest.mark.parametrize("command", [
    pytest.param(["run", f"micro/{LONG}"], marks=needs_native), ["run", LONG], ["list", LONG],
    pytest.param(["run", "micro/getppid1", "--variant", LONG], marks=needs_native),
    pytest.param(["run", "micro/getppid1", "-p", f"{LONG}=1"], marks=needs_native),
    pytest.param(["run", "micro/getppid1", "-p", f"micro.fsdir=/{LONG}"], marks=needs_native),
    pytest.param(["run", "scale/lock", "-p", f"scale.par_ns={LONG}"], marks=needs_native),
    pytest.param(["run", "micro/getppid1", "--profile", LONG], marks=needs_native),
    ["run", "micro/getppid1", "--cores", LONG], ["run", "micro/getppid1", "--placement", LONG],
    ["run", "micro/getppid1", "--trials", LONG], ["show", LONG, "--store", "{db}"],
    ["history", "--host", LONG, "--store", "{db}"], ["history", f"micro/{LONG}", "--store", "{db}"],
], ids=lambda c: " ".join(a[:12] for a in c[:3]))
def test_a_100_kb_name_is_cut_in_its_error(small, monkeypatch, command):
    said = mosbench(monkeypatch, *(a.replace("{db}", str(small)) for a in command))
    assert said.code == 2 and len(said.err) == 1
    assert len(said.err[0]) < 700 and "more characters)" in said.err[0], said.err[0][:300]


def test_an_error_line_cuts_names_and_keeps_the_rest():
    said = error_line(f"unknown workload '{LONG}' (known: micro, scale)")
    assert said == f"unknown workload '{'a' * 200}… (99800 more characters)' (known: micro, scale)"
    assert error_line("two\nlines and \x1b[2J") == "two\\x0alines and \\x1b[2J"


# ---- history at 80 columns ---------------------------------------------------------------------------------

@pytest.mark.parametrize("prefix", ["dup", "context_switch"])
def test_history_keeps_each_rows_cells_on_one_line_at_80_columns(tmp_path, prefix):
    db = store.Store(str(tmp_path / "h.sqlite"))
    stepped = (f"{prefix}1",)
    fill(db, 24, [Planted(8, 0.87, tests=stepped), Planted(13, 1 / 0.87, tests=stepped)], seed=3, tests=2,
         noise=0.02, prefix=prefix)
    found = hist.build(db.list_runs(), db.history_points, [], None, hist.Order.TIME, None)
    model = history_report.series_table(found)
    changes = [r.cells[2] for r in model.rows if "%" in r.cells[2]]
    assert changes == ["-13% #8 → #9", "+15% #13 → #14"] * 2  # down and back up, at one core and at 8
    bare = TableModel("", model.columns, model.rows)
    out = io.StringIO()
    Console(file=out, width=80, emoji=False, markup=False).print(table.render(bare), crop=False)
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    assert len(lines) == len(model.rows) + 2, "\n".join(lines)  # the titles and their rule, then a line a row
    assert all(len(line) <= 80 for line in lines)
    assert any(line.startswith(f"micro/{prefix}1 procs ") and "│" in line for line in lines)


# ---- the shared data, and the many-core scripts ------------------------------------------------------------

def test_no_absolute_path_to_the_shared_data():
    shared = re.compile("(?<![\\w.])/" + "(?:work/)?shared/data|/work/" + "shared")
    found = [f"{path.relative_to(ROOT)}:{n}" for top in ("tests", "benchmarks", "scripts", "mosbench")
             for path in (ROOT / top).rglob("*") if path.is_file() and path.suffix in (".py", ".sh", ".md", "")
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if shared.search(line)]
    assert found == []


def test_the_fixture_maker_finds_the_shared_data_beside_the_repository():
    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    try:
        import make_manycore16_store as maker
    finally:
        sys.path.remove(str(ROOT / "tests" / "fixtures"))
    assert ROOT.parent / "shared" / "data" / "manycore-16" / "store.sqlite" == maker.RECORDED


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.module if isinstance(n, ast.ImportFrom) else a.name for n in ast.walk(tree)
            if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names} | {
        f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module for a in n.names}


def test_the_many_core_scripts_import_in_one_direction():
    check, summary = ROOT / "scripts" / "check_manycore.py", ROOT / "scripts" / "manycore_summary.py"
    assert "scripts.manycore_summary" in _imports(check)
    assert not {m for m in _imports(summary) if "check_manycore" in m}
