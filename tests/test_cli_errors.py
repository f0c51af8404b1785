"""Every user error: one clear line, exit 2, and nothing written to the store."""

from pathlib import Path

import pytest

from mosbench.store.db import Store
from tests.conftest import mosbench, mosbench_here, needs_native, refused

THP = "/sys/kernel/mm/transparent_hugepage/enabled"


def _refused(tmp_path, args, message):
    assert message in refused(tmp_path, *args)


# Refused by the command line itself, before any workload is looked at: no native build needed.
@pytest.mark.parametrize("args,message", [
    (["run", "--duration", "nan"], "'nan' is not a finite number"),
    (["run", "--duration", "inf"], "'inf' is not a finite number"),
    (["run", "--warmup", "-1"], "-1 is below 0"),
    (["run", "--interval", "soon"], "'soon' is not a number"),
    (["run", "--trials", "0"], "--trials 0: give 1 to 100 trials"),
    (["run", "--trials", "auto:1"], "MAX must be 3 to 100"),
    (["run", "--precision", "1", "micro"], "--precision is the target of --trials auto"),
    (["ab", "--kernel", "6.1.0-56-amd64", "micro/getppid1"], "ab compares two kernels"),
    (["ab", "--kernel", "a", "--kernel", "b"], "name what to measure in the guest"),
    (["ab", "--kernel", "a", "--kernel", "b", "micro/getppid1", "--label", "x"], "--label is set by mosbench"),
    (["ab", "--kernel", "a", "--kernel", "b", "micro/getppid1", "--trials", "x"], "--trials x: expected"),
    (["vm", "--suite", "ci", "micro/getppid1"], "give a --suite or SELECTIONS to run, not both"),
    (["bisect", "--tree", "/", "--good", "a", "--bad", "b", "micro/getppid1"], "--tree /: not a git repository"),
    (["run", "--placement", "random"], "'random' is not one of"),
    (["run", "nosuch"], "unknown workload 'nosuch'"),
])
def test_command_line_errors(tmp_path, args, message):
    _refused(tmp_path, args, message)


# A reading command refuses a store that is not there before all else (tests/test_new_user_inputs.py): given one.
@pytest.mark.parametrize("args,message", [
    (["show", "42"], "no run 42"),
    (["report", "x1"], "bad run reference 'x1'"),
])
def test_reading_command_errors(tmp_path, args, message):
    Store(str(tmp_path / "refused.sqlite"))
    _refused(tmp_path, args, message)


@needs_native
@pytest.mark.parametrize("args,message", [
    (["run", "micro/nosuch"], "unknown test 'micro/nosuch'"),
    (["run", "micro/getppid1", "--cores", "1,x"], "malformed core list"),
    (["run", "micro/getppid1", "--cores", "100000"], "online CPUs"),
    (["run", "micro/getppid1", "--variant", "fibers"], "no variant 'fibers'"),
    (["run", "micro/getppid1", "-p", "nosuch=1"], "no selected workload has a parameter"),
    (["run", "micro/open1", "-p", "fsdir=/nonexistent"], "micro fsdir /nonexistent is not a directory"),
    (["run", "micro/open1", "-p", "fsdir=/proc/self"], "micro fsdir /proc/self: cannot make a directory there"),
    (["run", "scale/lock", "-p", "cs_ns=-1"], "scale needs cs_ns >= 0"),
    (["run", "scale/lock", "-p", "cs_ns=2x"], "bad value for cs_ns: '2x'"),
])
def test_workload_errors(tmp_path, args, message):
    _refused(tmp_path, args, message)


# Each fails fast on a kernel or tree that does not exist where the check it follows is missing: never a boot.
GUEST_COMMANDS = [["vm", "--kernel", "nosuch-k"], ["ab", "--kernel", "nosuch-a", "--kernel", "nosuch-b"],
                  ["bisect", "--tree", "/", "--good", "a", "--bad", "b"]]


@needs_native
@pytest.mark.parametrize("command", GUEST_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("selection,param,message", [
    ("scale/lock", "cs_ns=-1", "scale needs cs_ns >= 0 (got -1)"),
    ("postgres/read-only", "rows=0", "postgres rows must be 1.."),
    ("micro/open1", "fsdir=/nonexistent", "micro fsdir /nonexistent is not a directory"),
])
def test_a_guest_s_run_is_checked_as_run_checks_it_before_any_kernel_or_guest(tmp_path, command, selection, param,
                                                                              message):
    """A workload's own parameter checks (start.check_request, as `run` makes them) refuse before a kernel is looked
    for, a tree read or a guest booted: the kernels and the tree named here do not exist."""
    if not _available(selection.split("/")[0]):
        pytest.skip(f"{selection} is not available here")
    assert message in refused(tmp_path, *command, selection, "-p", param)


def test_bad_store_url():
    """As a separate process (`python -m mosbench`, as a user's shell runs it): the launcher's exit status is
    2 and stderr holds the one line, no traceback. The other refusals here run in this process."""
    r = mosbench("runs", "--store", "nosuchdb://nowhere")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == ["mosbench: bad store URL 'nosuchdb://nowhere': Can't load plugin: "
                                             "sqlalchemy.dialects:nosuchdb"]


def test_store_that_is_not_a_database(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("these are my notes, not a database\n" * 100)
    r = mosbench_here("runs", "--store", str(junk))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a mosbench results store" in lines[0] and "file is not a database" in lines[0]
    assert junk.read_text().startswith("these are my notes")  # left as it was


def test_list():
    r = mosbench_here("list")
    assert r.returncode == 0 and "micro" in r.stdout


@pytest.mark.skipif(not Path(THP).exists(), reason="no transparent huge pages on this kernel")
def test_doctor_shows_what_sysfs_says():
    """sysfs brackets the chosen mode ("always [madvise] never"): shown as it is, not read as markup."""
    r = mosbench_here("doctor")
    assert r.returncode == 0
    assert f"THP {Path(THP).read_text().strip()}" in " ".join(r.stdout.split())


def _available(workload: str) -> bool:
    from mosbench.errors import UserError
    from mosbench.workloads import registry

    try:
        registry.get(workload).check_available()
    except UserError:
        return False
    return True


@needs_native
@pytest.mark.parametrize("workload", ["apache", "exim"])
def test_a_taken_port_is_refused_before_the_run(tmp_path, workload):
    """Refused while nothing exists, not by the server at every point (a port taken after the checks
    still fails its points: the workloads' own tests)."""
    if not _available(workload):
        pytest.skip(f"{workload} is not available here")
    from tests.servers import taken_port

    with taken_port() as port:
        line = refused(tmp_path, "run", workload, "--cores", "1", "-p", f"port={port}")
    assert f"{workload} port {port} is taken on 127.0.0.1" in line


@needs_native
def test_server_parameters_are_refused_with_their_range(tmp_path):
    if not _available("apache"):
        pytest.skip("apache is not available here")
    line = refused(tmp_path, "run", "apache", "--cores", "1,2", "-p", "port=65535")
    assert "apache port 65535: 2 cores need ports 65535..65536, past 65535" in line
    line = refused(tmp_path, "run", "apache", "-p", "client_cpus=65")
    assert "apache client_cpus must be above 0 and at most 64, not 65" in line


MARKUP = "[bold]x[/] :abc:"


@pytest.mark.parametrize("args,message", [
    (["run", "micro/getppid1", "--trials", "auto:abc"], "--trials auto:abc: expected"),
    (["run", "micro/getppid1", "-p", f"fsdir=/nonexistent/{MARKUP}"], f"/nonexistent/{MARKUP} is not a directory"),
    (["run", "micro/getppid1", "-p", f"micro.{MARKUP}=1"], f"{MARKUP}"),
    (["report", "1", "-o", f"/proc/{MARKUP}/r.html"], f"cannot write the report to /proc/{MARKUP}/r.html"),
    (["report", "1", "-o", "/proc/nope.html"], "cannot write the report to /proc/nope.html"),
    (["report", "1", "-o", "/tmp"], "'/tmp' is a directory"),
])
def test_what_a_user_typed_is_printed_as_typed(tmp_path, args, message):
    """Rich reads "[bold]" as markup and ":abc:" as an emoji code unless told not to: neither may happen to
    a label, a parameter, a path."""
    Store(str(tmp_path / "s.sqlite"))  # report reads a store that is there
    r = mosbench_here(*args, "--store", str(tmp_path / "s.sqlite"))
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "🔤" not in r.stderr


@needs_native
def test_a_label_is_shown_as_typed(tmp_path):
    db = str(tmp_path / "s.sqlite")
    r = mosbench("run", "micro/getppid1", "--variant", "procs", "--cores", "1", "--trials", "1", "--warmup", "0",
                 "--duration", "0.2", "--label", MARKUP, "--store", db)
    assert r.returncode == 0, r.stderr
    listed = mosbench_here("runs", "--store", db).stdout + mosbench_here("show", "1", "--store", db).stdout
    assert MARKUP in listed and "🔤" not in listed


@needs_native
@pytest.mark.parametrize("args,message", [
    (["run", "apache/baseline", "--cores", "2"],
     "apache/baseline has no point at cores 2: it is measured at 1 core only"),
    (["run", "commute/open-open/diffname-threads", "--variant", "pair", "--cores", "1"],
     "commute/open-open/diffname-threads has no point at cores 1: it is measured from 2 cores on"),
])
def test_a_selection_with_no_point_is_refused(tmp_path, args, message):
    _refused(tmp_path, args, message)
