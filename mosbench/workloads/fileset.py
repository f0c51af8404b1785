"""The downloads of SPECweb2005's Support workload, as Veal & Foong served them (paper 002, section 3.3).

Support's file set is made of directories of 16 downloads in six size classes. Each request picks a
class by its share of downloads, then a file of the class by the file's own probability: the
`CLASS_n_DIST`, `CLASS_n_FILE_SIZE` and `CLASS_n_FILE_DIST` values of SPECweb2005's Support
configuration (SPECweb_Support.config, as Sun's Faban kit reproduces it). Each class's size entry is
two numbers, the first file's bytes and a step, and file i of a class is read here as
first + i * step: a reading, since the configuration does not say. Directories are alike and equally
popular (the benchmark scales their number with its sessions; DIRSCALING). A directory is 68.5 MB, the
mean download 6.9 MB.

The files are written in full on the point's tmpfs (no holes: a hole would be served from the zero
page, not the page cache), then read through once, as the paper warmed its file cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DownloadClass:
    share: float  # of all downloads (CLASS_n_DIST)
    first_bytes: int  # the class's first file (CLASS_n_FILE_SIZE, first number)
    step_bytes: int  # each next file is this much larger (second number)
    popularity: tuple[float, ...]  # each file's share of the class's downloads (CLASS_n_FILE_DIST)


CLASSES = (
    DownloadClass(0.1366, 104858, 104858, (0.273, 0.091, 0.165, 0.186, 0.285)),
    DownloadClass(0.1261, 629146, 125829, (0.579, 0.178, 0.243)),
    DownloadClass(0.2840, 1048576, 492831, (0.275, 0.170, 0.170, 0.385)),
    DownloadClass(0.2232, 4194304, 1352663, (0.667, 0.333)),
    DownloadClass(0.1250, 9992929, 0, (1.0,)),
    DownloadClass(0.1051, 37748736, 0, (1.0,)),
)
FILES_PER_DIR = sum(len(c.popularity) for c in CLASSES)  # 16, SPECweb2005's DOWNLOADS_PER_DIR


@dataclass(frozen=True)
class Download:
    path: str  # under the document root: "/support/dir00/class3_1"
    bytes: int
    weight: float  # its share of all requests


def downloads(dirs: int) -> list[Download]:
    """Every file of a set of `dirs` directories, with its size and share of requests (summing to 1)."""
    out = []
    for d in range(dirs):
        for n, cls in enumerate(CLASSES):
            for i, p in enumerate(cls.popularity):
                out.append(Download(f"/support/dir{d:02d}/class{n}_{i}", cls.first_bytes + i * cls.step_bytes,
                                    cls.share * p / dirs))
    return out


def mean_bytes() -> float:
    return sum(d.bytes * d.weight for d in downloads(1))


def directory_bytes() -> int:
    return sum(d.bytes for d in downloads(1))


def write(docroot: Path, dirs: int) -> Path:
    """The set's files under docroot, read through once, and the client's list ("WEIGHT BYTES PATH" a
    line, mosbench-httpload --files) beside docroot; returns the list's path."""
    block = bytes(range(256)) * 4096  # 1 MiB that no filesystem can store as a hole
    files = downloads(dirs)
    for f in files:
        path = docroot / f.path.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            whole, rest = divmod(f.bytes, len(block))
            for _ in range(whole):
                out.write(block)
            out.write(block[:rest])
        path.chmod(0o644)
    for f in files:  # the paper's warm-up of the file cache: every file read once
        with open(docroot / f.path.lstrip("/"), "rb") as src:
            while src.read(1 << 20):
                pass
    listing = docroot.parent / "files.list"
    listing.write_text("".join(f"{f.weight:.9g} {f.bytes} {f.path}\n" for f in files))
    return listing
