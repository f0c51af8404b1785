"""The installer's choice of packages (scripts/apt.sh's choose_packages) against the package names of Debian 12
and Ubuntu 24.04 (tests/fixtures/apt/): Debian 12 keeps scripts/apt-packages.txt's names, Ubuntu gets its own
versions, and a name with no counterpart gets one line (a stop, unless the workload needing it can go)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "apt"
DEBIAN12 = FIXTURES / "debian12-pkgnames.txt"
UBUNTU2404 = FIXTURES / "ubuntu24.04-pkgnames.txt"
LISTED = [line.split()[0] for line in (ROOT / "scripts" / "apt-packages.txt").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
UBUNTU_KERNEL = "6.8.0-31-generic"
# What Ubuntu 24.04 installs for Debian 12's names; the rest are the same names.
UBUNTU_FOR = {"postgresql-15": ["postgresql-16"], "linux-source-6.1": ["linux-source-6.8.0"],
              "linux-perf": ["linux-tools-common", f"linux-tools-{UBUNTU_KERNEL}"],
              "chromium": [], "chromium-driver": []}
# Ubuntu has Chromium as a snap only: the browser tests skip there, and the installer says so and goes on.
UBUNTU_NO_BROWSER = [f"mosbench: this distribution has no {name}: mosbench serve's browser tests will be skipped"
                     for name in ("chromium", "chromium-driver")]


def choose(tmp_path: Path, available: Path | list[str], kernel: str, names: Sequence[str] = LISTED,
           installed: Sequence[str] = (), perf_works: bool = False) -> tuple[list[str], list[str], int]:
    """(chosen packages, the lines said, status) of choose_packages."""
    if isinstance(available, list):
        (tmp_path / "available").write_text("".join(f"{n}\n" for n in available))
        available = tmp_path / "available"
    (tmp_path / "installed").write_text("".join(f"{n}\n" for n in installed))
    r = subprocess.run(["bash", "-c", 'set -euo pipefail; source scripts/apt.sh; choose_packages "$@"', "choose",
                        str(available), str(tmp_path / "installed"), kernel, "1" if perf_works else "0", *names],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    return r.stdout.split(), r.stderr.splitlines(), r.returncode


def names_of(fixture: Path) -> list[str]:
    return fixture.read_text().split()


def test_debian12_keeps_the_listed_names(tmp_path):
    # bookworm-security has linux-source-6.12 beside linux-source-6.1: Debian 12 keeps 6.1 all the same.
    assert "linux-source-6.12" in names_of(DEBIAN12)
    assert choose(tmp_path, DEBIAN12, "6.1.0-35-amd64") == (LISTED, [], 0)
    assert choose(tmp_path, DEBIAN12, "6.1.0-35-amd64", installed=LISTED) == (LISTED, [], 0)
    # Everything installed: no package list needed (the installer then asks apt nothing).
    assert choose(tmp_path, [], "6.1.0-35-amd64", installed=LISTED) == (LISTED, [], 0)


def test_ubuntu2404_gets_its_versions(tmp_path):
    want = [p for n in LISTED for p in UBUNTU_FOR.get(n, [n])]
    assert choose(tmp_path, UBUNTU2404, UBUNTU_KERNEL) == (want, UBUNTU_NO_BROWSER, 0)
    # The same once installed (the installed list holds the chosen names, not Debian 12's).
    assert choose(tmp_path, [], UBUNTU_KERNEL, installed=want) == (want, UBUNTU_NO_BROWSER, 0)


def test_perf_for_a_kernel_ubuntu_has_no_tools_for(tmp_path):
    chosen, said, status = choose(tmp_path, UBUNTU2404, "6.18.1-custom")
    assert status == 1 and not any(p.startswith("linux-tools") for p in chosen)
    assert said == ["mosbench: this distribution has no linux-perf, nor linux-tools-6.18.1-custom (perf for the "
                    "running kernel 6.18.1-custom): `make bench` profiles with perf", *UBUNTU_NO_BROWSER]
    # A perf that runs already (built by hand) will do.
    chosen, said, status = choose(tmp_path, UBUNTU2404, "6.18.1-custom", perf_works=True)
    assert (said, status) == (UBUNTU_NO_BROWSER, 0) and "postgresql-16" in chosen


def test_a_missing_postgresql_stops_with_one_line(tmp_path):
    available = [n for n in names_of(UBUNTU2404) if n != "postgresql-16"]
    chosen, said, status = choose(tmp_path, available, UBUNTU_KERNEL)
    assert status == 1 and "postgresql-16" not in chosen and "linux-source-6.8.0" in chosen
    assert said == ["mosbench: this distribution has no postgresql-N, N >= 15 (Debian 12: postgresql-15): "
                    "the postgres workload needs its server, psql and pgbench", *UBUNTU_NO_BROWSER]


def test_a_missing_linux_source_and_plain_name_each_get_a_line(tmp_path):
    available = [n for n in names_of(UBUNTU2404) if not n.startswith("linux-source") and n != "libck-dev"]
    chosen, said, status = choose(tmp_path, available, UBUNTU_KERNEL)
    assert status == 1 and "libck-dev" not in chosen
    # In scripts/apt-packages.txt's order.
    assert said == ["mosbench: this distribution has no libck-dev (scripts/apt-packages.txt says what needs it)",
                    "mosbench: this distribution has no linux-source-X.Y (Debian 12: linux-source-6.1): psearchy's "
                    "corpus and gmake's kernel tree are its tarball", *UBUNTU_NO_BROWSER]


def test_a_missing_exim_is_said_and_skipped(tmp_path):
    available = [n for n in names_of(UBUNTU2404) if n != "exim4-daemon-light"]
    chosen, said, status = choose(tmp_path, available, UBUNTU_KERNEL)
    assert status == 0 and "exim4-daemon-light" not in chosen and "postgresql-16" in chosen
    assert said == ["mosbench: this distribution has no exim4-daemon-light: the exim workload will be unavailable",
                    *UBUNTU_NO_BROWSER]


def test_the_newest_version_and_an_installed_one_first(tmp_path):
    pg = ["postgresql-13", "postgresql-14", "postgresql-16", "postgresql-17", "postgresql-17-pgvector",
          "linux-source-5.15.0", "linux-source-6.8.0", "linux-source-6.11", "linux-source-6.8.0-extra"]
    names = ["postgresql-15", "linux-source-6.1"]
    assert choose(tmp_path, pg, "x", names=names) == (["postgresql-17", "linux-source-6.11"], [], 0)
    # One installed already is kept, not joined by a newer one.
    assert choose(tmp_path, pg, "x", names=names, installed=["postgresql-16", "linux-source-6.8.0"])[0] == \
        ["postgresql-16", "linux-source-6.8.0"]
    # Where the listed version is there (PGDG's postgresql-15 on Ubuntu), it is the one: as on Debian 12.
    assert choose(tmp_path, [*pg, "postgresql-15"], "x", names=names, installed=["postgresql-16"])[0][0] == \
        "postgresql-15"


def test_a_postgresql_older_than_15_will_not_do(tmp_path):
    # mosbench reads the failed-transaction counts of pgbench 15 on, and pgbench N comes with postgresql-N: Ubuntu
    # 22.04's postgresql-14 (and one installed already) is no counterpart.
    chosen, said, status = choose(tmp_path, ["postgresql-12", "postgresql-14", "postgresql-client-14"], "x",
                                  names=["postgresql-15"], installed=["postgresql-12"])
    assert (chosen, status) == ([], 1) and len(said) == 1 and "N >= 15" in said[0]


def test_the_installer_glue_asks_apt_only_when_something_is_missing(tmp_path):
    """distribution_packages with stand-ins for dpkg-query, apt-cache, apt-get, uname and perf: Ubuntu 24.04
    with nothing installed, then with everything installed (apt-cache not run)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "log"
    stand_ins = {
        "dpkg-query": f'echo dpkg-query >> {log}; [ -f {tmp_path}/inst ] && sed "s/$/ install ok installed/" '
                      f'{tmp_path}/inst; exit 0',
        "apt-cache": f"echo apt-cache >> {log}; cat {UBUNTU2404}",
        "apt-get": f'echo "apt-get $*" >> {log}',
        "uname": f"echo {UBUNTU_KERNEL}",
        "perf": "exit 2",
    }
    for name, body in stand_ins.items():
        (bin_ / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_ / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}"}
    script = 'set -euo pipefail; source scripts/apt.sh; distribution_packages "$@"; printf "%s\\n" "${APT_CHOSEN[@]}"'
    want = [p for n in LISTED for p in UBUNTU_FOR.get(n, [n])]
    r = subprocess.run(["bash", "-c", script, "glue", *LISTED], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stderr.splitlines(), r.stdout.split()) == (0, UBUNTU_NO_BROWSER, want)
    # A package it cannot have (Ubuntu's chromium) sends root to the package lists once more, after an update.
    again = ["apt-get", "update", "-qq", "apt-cache"] if os.geteuid() == 0 else []
    assert log.read_text().split() == ["dpkg-query", "apt-cache", *again]
    log.unlink()
    (tmp_path / "inst").write_text("\n".join(LISTED) + "\n")
    r = subprocess.run(["bash", "-c", script, "glue", *LISTED], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=60)
    assert (r.returncode, r.stderr, r.stdout.split()) == (0, "", LISTED)
    assert log.read_text().split() == ["dpkg-query"]
