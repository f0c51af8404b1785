"""What a command that reads no store imports to start: `--help`, `list`, `doctor` and a shell's completion
run the CLI's module on every call, and SQLAlchemy and numpy were half a second of it."""

import subprocess
import sys

CODE = """
import sys
from click.testing import CliRunner
from mosbench.cli import cli
done = CliRunner().invoke(cli, {args!r})
assert done.exit_code == 0, done.output
print(sorted({{m.split(".")[0] for m in sys.modules}} & {{"numpy", "sqlalchemy", "scipy", "matplotlib"}}))
"""


def _imported(*args: str) -> str:
    done = subprocess.run([sys.executable, "-c", CODE.format(args=list(args))], capture_output=True, text=True,
                          check=True)
    return done.stdout.strip().splitlines()[-1]


def test_help_and_list_start_without_sqlalchemy_numpy_or_scipy():
    assert _imported("--help") == "[]"
    assert _imported("history", "--help") == "[]"
    assert _imported("list", "micro") == "[]"


def test_the_commands_that_read_the_store_still_open_it(tmp_path):
    """The store is imported where a command opens it: one that reads refuses a store that is not there,
    in one line; one that is there is read."""
    from mosbench.store.db import Store

    missing = subprocess.run([sys.executable, "-m", "mosbench", "runs", "--store", str(tmp_path / "none.sqlite")],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and missing.stderr.startswith("mosbench: no results store at ")
    Store(str(tmp_path / "s.sqlite"))
    there = subprocess.run([sys.executable, "-m", "mosbench", "runs", "--store", str(tmp_path / "s.sqlite")],
                           capture_output=True, text=True)
    assert there.returncode == 0, there.stderr
