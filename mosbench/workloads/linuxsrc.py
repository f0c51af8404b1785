"""The Linux source tree from the distribution's linux-source package (Debian 12's linux-source-6.1;
elsewhere the version scripts/apt.sh chose, Ubuntu 24.04's linux-source-6.8.0): unpacked once into a
tmpfs cache, shared by the workloads that read it (psearchy indexes it, gmake builds it), so the machine
holds one copy.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

from mosbench.errors import UserError

LISTED_TREE = "linux-source-6.1"  # scripts/apt-packages.txt's, Debian 12's


def find_tarball(src: Path = Path("/usr/src")) -> Path:
    """The listed tarball where it is installed, else the newest linux-source-X.Y's (the rule
    scripts/apt.sh installs by); the listed path where there is none, for the message that says so."""
    listed = src / f"{LISTED_TREE}.tar.xz"
    if listed.is_file():
        return listed
    found = [p for p in src.glob("linux-source-*.tar.*") if p.is_file()]
    return max(found, key=lambda p: version_key(tree_of(p))) if found else listed


def tree_of(tarball: Path) -> str:
    """The tree's top directory, as the package names it: linux-source-6.8.0.tar.bz2 holds linux-source-6.8.0/."""
    return tarball.name.split(".tar")[0]


def version_key(tree: str) -> tuple[int, ...]:
    """6.11 after 6.8.0: the numbers in the name, in version order, not text order."""
    return tuple(int(n) for n in re.findall(r"\d+", tree))


LINUX_TARBALL = find_tarball()
LINUX_TREE = tree_of(LINUX_TARBALL)


def tree_cache() -> Path:
    """Where the tree is unpacked: in memory (/dev/shm) where there is one, as the paper's inputs were."""
    shm = Path("/dev/shm")
    if not shm.is_dir():
        from mosbench.workloads.base import cache_root  # here: the workloads import this module

        return cache_root() / "linux-source"
    base = shm / f"mosbench-cache-{os.getuid()}"
    cache, before = base / "linux-source", base / "psearchy"  # where it was when only psearchy read it
    if before.is_dir() and not cache.exists():
        before.rename(cache)
    return cache


# Runs a program to its end: (name, argv) -> (exit status, its last line on stderr).
Run = Callable[[str, list[str]], tuple[int, str]]


def run_here(name: str, argv: list[str]) -> tuple[int, str]:
    r = subprocess.run(argv, capture_output=True, text=True)
    return r.returncode, (r.stderr.strip().splitlines() or [""])[-1]


def is_linux_dir(cache: Path, subdir: str) -> bool:
    """Whether subdir is a directory of the Linux tree: looked up in the tree if it is unpacked, else in
    the tarball's listing, kept beside the cache (listing takes ~20 s once, unpacking a minute)."""
    tree = cache / LINUX_TREE
    if tree.is_dir():
        return (tree / subdir).is_dir()
    listing = cache / f"{LINUX_TREE}.dirs"
    if not listing.exists():
        r = subprocess.run(["tar", "-tf", str(LINUX_TARBALL)], capture_output=True, text=True)
        if r.returncode != 0:
            raise UserError(f"cannot read {LINUX_TARBALL}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        dirs: set[str] = set()
        for member in r.stdout.splitlines():
            parts = PurePosixPath(member).parts[1:]  # below linux-source-X.Y/
            dirs.update("/".join(parts[:n]) for n in range(1, len(parts)))  # every parent of the member
        cache.mkdir(parents=True, exist_ok=True)
        partial = listing.with_suffix(".partial")
        partial.write_text("\n".join(sorted(dirs)) + "\n")
        partial.replace(listing)
    return str(PurePosixPath(subdir)) in set(listing.read_text().splitlines())


def unpack_linux(cache: Path, run: Run = run_here) -> Path:
    """The Linux tree, unpacked once: into a temporary directory renamed into place when complete."""
    tree = cache / LINUX_TREE
    if tree.is_dir():
        return tree
    cache.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{LINUX_TREE}.partial-", dir=cache))
    try:
        print(f"mosbench: unpacking {LINUX_TARBALL} into {cache} (once; about 1.4 GB)", file=sys.stderr)
        # No -J: tar tells the compression from the file (Debian's is xz, Ubuntu's bz2).
        status, last = run("linux-unpack", ["tar", "-xf", str(LINUX_TARBALL), "-C", str(partial)])
        if status != 0:
            raise UserError(f"cannot unpack {LINUX_TARBALL}: {last or f'tar exited with status {status}'}")
        try:
            (partial / LINUX_TREE).rename(tree)
        except OSError:
            if not tree.is_dir():  # not another run's copy that landed first
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return tree
