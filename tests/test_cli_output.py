"""What the commands print where a person reads it: through a pipe, and after Ctrl-C."""

import signal
import sqlite3
import subprocess
import sys

from mosbench.store import db as store
from tests.conftest import ROOT, mosbench_here, needs_native, sigint_default

LONG_COMMAND = ("mosbench run micro/getppid1 micro/page_fault1 micro/mmap1 micro/open1 micro/context_switch1 "
                "micro/dup1 scale metis/invindex psearchy gmake memcached apache/close exim postgres/read-only "
                "-p psearchy.subdir=arch -p gmake.targets=security/keys/ --profile micro/dup1 --cores 1..max "
                "--trials 2 --warmup 0.5 --duration 1.5 --label quick")


def test_runs_in_an_80_column_pipe_is_a_line_a_run_with_the_command_whole(tmp_path):
    db = tmp_path / "s.sqlite"
    s = store.Store(str(db))
    env = {"hostname": "bench-host-01.example.org", "kernel": "6.1.0-18-amd64"}
    s.create_run({}, env, LONG_COMMAND, "quick")
    s.create_run({}, env, "mosbench run micro/getppid1 --cores 1,2")
    r = mosbench_here("runs", "--store", str(db), env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    header, *rows = r.stdout.splitlines()
    assert header.split() == ["id", "label", "status", "started", "host", "kernel", "points", "failed", "command"]
    assert len(rows) == 2
    assert rows[0].startswith("1 ") and rows[0].endswith(LONG_COMMAND)
    assert rows[1].startswith("2 ") and rows[1].endswith("mosbench run micro/getppid1 --cores 1,2")
    # Aligned: every command starts under the header's.
    assert {row.index("mosbench run") for row in rows} == {header.index("command")}


def test_list_takes_several_workloads_and_refuses_an_unknown_one_alone():
    r = mosbench_here("list", "apache", "exim")
    assert r.returncode == 0, r.stderr
    named = [line.split(":")[0] for line in r.stdout.splitlines() if not line.startswith(" ")]
    assert named == ["apache", "exim"]
    r = mosbench_here("list", "apache", "nosuch")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "mosbench: unknown workload 'nosuch' (known: apache, commute, exim, fxmark, gmake, memcached, metis, micro, "
        "postgres, psearchy, scale)"]


@needs_native
def test_ctrl_c_mid_run_names_the_run_to_resume(tmp_path):
    db = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "mosbench", "run", "micro/getppid1", "--cores", "1", "--trials",
                             "3", "--warmup", "0", "--duration", "2", "--store", str(db)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    said = []
    # Interrupted once its first point is stored, inside the second: measuring, with points to keep.
    for line in proc.stderr:
        said.append(line)
        if "micro/getppid1 " in line and " trial 1 cpus " in line:  # the first point's line
            break
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    err = "".join(said) + rest
    assert proc.returncode == 130, err
    (run_id, status), = sqlite3.connect(db).execute("select id, status from runs").fetchall()
    assert status == "incomplete"
    assert f"run #{run_id}: 6 points" in err
    assert (f"mosbench: interrupted; run #{run_id}'s finished points are kept "
            f"(`mosbench run --resume {run_id} --store {db}` measures the rest)") in err
