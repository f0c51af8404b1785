import json
import os
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


def mosbench(*args: str, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mosbench", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=kw.pop("timeout", 300), **kw)
