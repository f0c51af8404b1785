"""The registry imports a workload's module when asked for it, so it must name each one rightly."""

import subprocess
import sys

import pytest

from mosbench.errors import UserError
from mosbench.workloads import registry


@pytest.mark.parametrize("name", list(registry.WHERE))
def test_each_name_finds_the_workload_of_that_name(name):
    assert registry.get(name).name == name


def test_an_unknown_name_is_one_clear_error_naming_the_known_ones():
    with pytest.raises(UserError, match=r"unknown workload 'nginx' .*micro.*postgres"):
        registry.get("nginx")


def test_importing_the_command_line_imports_no_workload():
    code = "import sys, mosbench.cli; print(' '.join(sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert not {module for module, _ in registry.WHERE.values()} & set(done.stdout.split())
