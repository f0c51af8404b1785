import json
import os
import signal
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from mosbench import native
from mosbench.machine import topology

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parent.parent

# CI (.ci/run) draws the same examples every time, so that what it decides is the change's doing; a developer's
# `make test` draws new ones each run, and finds what those miss (as it found scipy's deep F tail 1.8e-9 off).
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("MOSBENCH_HYPOTHESIS", "default"))


@pytest.fixture
def load_topology(tmp_path):
    def load(name: str) -> topology.Topology:
        files = json.loads((FIXTURES / f"topology-{name}.json").read_text())
        return topology.read(topology.materialize(files, tmp_path / name))
    return load


@pytest.fixture(scope="session")
def cache_home(tmp_path_factory) -> Path:
    """A HOME for the whole test run: its ~/.cache/mosbench (workloads.base.cache_root) is where a workload
    keeps what it prepares once for a machine, PostgreSQL's initialised and loaded database above all (initdb
    and the table's load: seconds a test). Shared, that is done once per test run, as once per machine on a
    user's, rather than once per test; no test changes it (each point runs on a copy)."""
    return tmp_path_factory.mktemp("home")


def workload_cache(home: Path) -> Path:
    """HOME's cache of the workloads, as a run started with that HOME finds it."""
    return home / ".cache" / "mosbench"


def native_built() -> bool:
    return os.access(native.build_dir() / "mosbench-micro", os.X_OK)


needs_native = pytest.mark.skipif(not native_built(), reason="native/ not built (make -C native)")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for cgroups and hotplug")


def sigint_default() -> None:
    """For a child a test will Ctrl-C: SIGINT back to its default. A suite started in the background
    (`nohup make test &`) hands every child SIGINT ignored, and Python then installs no KeyboardInterrupt
    handler, so the signal the test sends would go unheard."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def empty_commits(tree: Path, subjects: list[str]) -> list[str]:
    """A git tree at `tree` (made if missing) of one empty commit per subject, in order: their ids."""
    tree.mkdir(parents=True, exist_ok=True)

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                              check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    ids = []
    for subject in subjects:
        git("commit", "-q", "--allow-empty", "-m", subject)
        ids.append(git("rev-parse", "HEAD"))
    return ids


def mosbench(*args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mosbench", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=kw.pop("timeout", 300), **kw)


@dataclass(frozen=True)
class Ran:
    """What `mosbench ARGS` did, as a finished process says it."""
    returncode: int
    stdout: str
    stderr: str


def mosbench_here(*args: str, env: dict | None = None) -> Ran:
    """Runs `mosbench ARGS` in this process, through the same main() as `python -m mosbench`, its output as
    into a pipe: what a refusal says and its exit status, without an interpreter's start and imports (a
    second a command). A run that gets past its checks would measure in here: use mosbench() for those."""
    from click.testing import CliRunner

    from mosbench import cli
    from mosbench.report import terminal

    consoles = (terminal.console, terminal.err_console)
    saved = (terminal.stdout.stream, terminal.stderr.stream, sys.argv, *(c._color_system for c in consoles))
    with CliRunner().isolation(env=env) as (out, err, _):
        terminal.stdout.stream, terminal.stderr.stream, sys.argv = sys.stdout, sys.stderr, ["mosbench", *args]
        # Each console chose its colours when imported, on a terminal under `pytest -s`: here, a pipe's.
        for c in consoles:
            c._color_system = None
        try:
            cli.main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else int(e.code is not None)
        finally:
            terminal.stdout.stream, terminal.stderr.stream, sys.argv = saved[:3]
            for c, system in zip(consoles, saved[3:], strict=True):
                c._color_system = system
        sys.stdout.flush()
        sys.stderr.flush()
        return Ran(code, out.getvalue().decode(), err.getvalue().decode())


def refused(tmp_path: Path, *args: str) -> str:
    """Runs `mosbench ARGS --store …` (in this process) as a user error: exit 2, one line on stderr, no run
    stored. The line."""
    db = tmp_path / "refused.sqlite"
    r = mosbench_here(*args, "--store", str(db))
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("mosbench: "), r.stderr
    if db.exists():
        assert sqlite3.connect(db).execute("select count(*) from runs").fetchone()[0] == 0
    return lines[0]
