import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mosbench import native
from mosbench.machine import topology

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def load_topology(tmp_path):
    def load(name: str) -> topology.Topology:
        files = json.loads((FIXTURES / f"topology-{name}.json").read_text())
        return topology.read(topology.materialize(files, tmp_path / name))
    return load


def native_built() -> bool:
    return os.access(native.build_dir() / "mosbench-micro", os.X_OK)


needs_native = pytest.mark.skipif(not native_built(), reason="native/ not built (make -C native)")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for cgroups and hotplug")


def sigint_default() -> None:
    """For a child a test will Ctrl-C: SIGINT back to its default. A suite started in the background
    (`nohup make test &`) hands every child SIGINT ignored, and Python then installs no KeyboardInterrupt
    handler, so the signal the test sends would go unheard."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def mosbench(*args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mosbench", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=kw.pop("timeout", 300), **kw)


def refused(tmp_path: Path, *args: str) -> str:
    """Runs `mosbench ARGS --store …` as a user error: exit 2, one line on stderr, no run stored. The line."""
    db = tmp_path / "refused.sqlite"
    r = mosbench(*args, "--store", str(db))
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("mosbench: "), r.stderr
    if db.exists():
        assert sqlite3.connect(db).execute("select count(*) from runs").fetchone()[0] == 0
    return lines[0]
