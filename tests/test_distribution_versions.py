"""The workloads find the versions scripts/apt.sh installed: Debian 12's where they are, else the newest
(Ubuntu 24.04's postgresql-16 and linux-source-6.8.0, whose tarball is bz2)."""

from __future__ import annotations

import subprocess

from mosbench.workloads import linuxsrc
from mosbench.workloads.postgres import cluster


def _bin(root, major: int, pgbench: bool = True) -> None:
    d = root / str(major) / "bin"
    d.mkdir(parents=True)
    for tool in ("initdb", "postgres", "psql", *(["pgbench"] if pgbench else [])):
        (d / tool).touch()


def test_postgres_binaries_debian_first_else_the_newest_with_pgbench(tmp_path):
    assert cluster.find_bin(tmp_path) == tmp_path / "15" / "bin"  # none: the listed path, for the message
    _bin(tmp_path, 14)
    _bin(tmp_path, 16)
    _bin(tmp_path, 17, pgbench=False)
    assert cluster.find_bin(tmp_path) == tmp_path / "16" / "bin"  # 14 is too old for pgbench.MIN_MAJOR
    _bin(tmp_path, 15)
    assert cluster.find_bin(tmp_path) == tmp_path / "15" / "bin"


def test_linux_source_debian_first_else_the_newest_in_version_order(tmp_path):
    assert linuxsrc.find_tarball(tmp_path) == tmp_path / "linux-source-6.1.tar.xz"
    for name in ("linux-source-6.8.0.tar.bz2", "linux-source-6.11.tar.xz", "linux-source-6.9.tar.bz2"):
        (tmp_path / name).touch()
    newest = linuxsrc.find_tarball(tmp_path)
    assert newest.name == "linux-source-6.11.tar.xz" and linuxsrc.tree_of(newest) == "linux-source-6.11"
    (tmp_path / "linux-source-6.1.tar.xz").touch()
    assert linuxsrc.find_tarball(tmp_path).name == "linux-source-6.1.tar.xz"


def test_a_bz2_tree_is_listed_and_unpacked(tmp_path, monkeypatch):
    """Ubuntu's tarball is bz2: tar is left to tell the compression."""
    src = tmp_path / "src"
    (src / "linux-source-6.8.0" / "fs" / "ext4").mkdir(parents=True)
    (src / "linux-source-6.8.0" / "fs" / "ext4" / "inode.c").write_text("int x;\n")
    tarball = tmp_path / "linux-source-6.8.0.tar.bz2"
    subprocess.run(["tar", "-cjf", str(tarball), "-C", str(src), "linux-source-6.8.0"], check=True)
    monkeypatch.setattr(linuxsrc, "LINUX_TARBALL", tarball)
    monkeypatch.setattr(linuxsrc, "LINUX_TREE", linuxsrc.tree_of(tarball))
    cache = tmp_path / "cache"
    assert linuxsrc.is_linux_dir(cache, "fs/ext4") and not linuxsrc.is_linux_dir(cache, "fs/xfs")
    tree = linuxsrc.unpack_linux(cache)
    assert (tree / "fs" / "ext4" / "inode.c").read_text() == "int x;\n"
