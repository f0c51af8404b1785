"""Psearchy through the harness: one indexing job per point in both variants, and its corpus cache."""

import json
import sqlite3
import subprocess
import sys
import tarfile

import pytest

from mosbench.errors import UserError
from mosbench.workloads import linuxsrc, psearchy
from tests.conftest import ROOT, mosbench, needs_native

REFERENCE = ROOT / "native" / "psearchy" / "tests" / "reference.py"


@needs_native
def test_jobs_in_both_variants(tmp_path):
    corpus = tmp_path / "corpus"
    subprocess.run([sys.executable, str(REFERENCE), "corpus", str(corpus), "--files", "200"], check=True)
    db = tmp_path / "s.sqlite"
    r = mosbench("run", "psearchy", "--cores", "1..max", "--trials", "1", "-p", f"corpus={corpus}",
                 "-p", "mem_mb=1", "-p", "dblim=500", "--store", str(db))
    assert r.returncode == 0, r.stderr
    rows = sqlite3.connect(db).execute("select variant, cores, status, window_s, metrics from points").fetchall()
    assert {v for v, *_ in rows} == {"threads", "procs"} and all(s == "ok" for _, _, s, *_ in rows)
    metrics = [json.loads(m) for *_, m in rows]
    # Every point indexes the same text: the work does not depend on the variant or the core count.
    assert len({(m["files"], m["bytes"], m["words"]) for m in metrics}) == 1
    assert metrics[0]["files"] == 201 and metrics[0]["words"] > 10000
    for *_, window, metrics_json in rows:
        m = json.loads(metrics_json)
        assert m["job_s"] <= window < m["job_s"] + 0.5
        assert m["dbs"] >= m["entries"] / 500 and m["merge_passes"] >= 1


@needs_native
def test_bad_corpus(tmp_path):
    (tmp_path / "file").write_text("x")
    for params, message in ((["-p", f"corpus={tmp_path / 'none'}"], "is not a readable directory"),
                            (["-p", f"corpus={tmp_path / 'file'}"], "is not a readable directory"),
                            (["-p", f"corpus={tmp_path}", "-p", "subdir=fs"], "give corpus=DIR alone"),
                            (["-p", "subdir=../etc"], "must be a path inside")):
        r = mosbench("run", "psearchy", "--cores", "1", "--trials", "1", *params,
                     "--store", str(tmp_path / "s.sqlite"))
        assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


def _tarball(path, files):
    src = path.parent / "src" / linuxsrc.LINUX_TREE
    for name, text in files.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    with tarfile.open(path, "w:xz") as t:
        t.add(src, arcname=linuxsrc.LINUX_TREE)


def test_linux_tree_unpacked_once(tmp_path, monkeypatch):
    tarball = tmp_path / "linux.tar.xz"
    _tarball(tarball, {"fs/open.c": "int do_sys_open;", "mm/mmap.c": "mmap"})
    monkeypatch.setattr(linuxsrc, "LINUX_TARBALL", tarball)
    cache = tmp_path / "cache"
    tree = linuxsrc.unpack_linux(cache)
    assert (tree / "fs" / "open.c").read_text() == "int do_sys_open;"
    (tree / "marker").write_text("")
    assert linuxsrc.unpack_linux(cache) == tree and (tree / "marker").exists()  # not unpacked again
    assert sorted(p.name for p in cache.iterdir()) == [linuxsrc.LINUX_TREE]  # no partial copy left


def test_broken_tarball_leaves_nothing(tmp_path, monkeypatch):
    tarball = tmp_path / "linux.tar.xz"
    tarball.write_bytes(b"not xz")
    monkeypatch.setattr(linuxsrc, "LINUX_TARBALL", tarball)
    with pytest.raises(UserError, match="cannot unpack"):
        linuxsrc.unpack_linux(tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_subdir_is_checked_before_a_run_exists(tmp_path, monkeypatch):
    """`-p subdir=nosuch` is refused from the tarball's listing, without unpacking 1.4 GB first."""
    tarball = tmp_path / "linux.tar.xz"
    _tarball(tarball, {"fs/ext4/inode.c": "ext4", "mm/mmap.c": "mmap", "README": "Linux"})
    monkeypatch.setattr(linuxsrc, "LINUX_TARBALL", tarball)
    cache = tmp_path / "cache"
    monkeypatch.setattr(linuxsrc, "tree_cache", lambda: cache)
    w = psearchy.Psearchy()
    base = {"corpus": "", "mem_mb": 48, "dblim": 200000}
    for ok in ("fs", "fs/ext4", "mm", ""):
        w.check_params({**base, "subdir": ok})
    for bad in ("nosuch", "fs/ext3", "README", "mm/mmap.c"):
        with pytest.raises(UserError, match=f"psearchy subdir '{bad}' is not a directory of linux-source-6.1"):
            w.check_params({**base, "subdir": bad})
    assert not (cache / linuxsrc.LINUX_TREE).exists()  # listed, not unpacked
    tree = linuxsrc.unpack_linux(cache)  # once unpacked, the tree itself answers
    (tree / "fs" / "new").mkdir()
    w.check_params({**base, "subdir": "fs/new"})
