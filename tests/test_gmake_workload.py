"""gmake: the serial-fraction estimate, the checks before a run, and real builds of a small part of the tree."""

import time
from pathlib import Path

import pytest

from mosbench.errors import PointFailed, UserError
from mosbench.workloads import gmake, linuxsrc
from tests.conftest import needs_root, refused
from tests.servers import run_points
from tests.test_run_system import _leftovers


def test_serial_fraction_is_cpu_time_while_one_thing_ran():
    # 1 s at one CPU, 2 s at four, 0.5 s at one: 1.5 of 9.5 CPU-seconds were serial.
    timeline = [(0.5, 1.0), (1.0, 1.0), (2.0, 4.0), (3.0, 4.0), (3.5, 1.0)]
    p = gmake.serial_profile(timeline, cpus=4)
    assert p["serial_fraction"] == pytest.approx(1.5 / 9.5, abs=1e-4)
    assert p["amdahl_limit"] == pytest.approx(9.5 / 1.5, abs=0.05)
    assert p["serial_start_s"] == pytest.approx(1.0) and p["tail_s"] == pytest.approx(0.5)
    assert gmake.serial_profile(timeline, cpus=1) == {}  # one CPU cannot tell serial from parallel


def test_every_job_must_build_what_the_first_built():
    extra: dict = {}
    gmake.same_work(extra, 13)
    gmake.same_work(extra, 13)
    with pytest.raises(PointFailed, match="make built 12 objects, the run's first job 13"):
        gmake.same_work(extra, 12)


def test_targets_are_make_targets_only():
    w = gmake.Gmake()
    assert gmake.targets_of("mm/, fs/proc/ kernel/") == ["mm/", "fs/proc/", "kernel/"]
    w.check_params({"targets": "vmlinux, security/keys/ mm/slub.o arch/x86/kernel/ lib/crc-t10dif.o"})
    with pytest.raises(UserError, match="at least one make target"):
        w.check_params({"targets": " , "})
    for bad in ("-k", "CC=clang", "../x", "mm/;rm", "mm/:x", "$(shell id)", "%.o", "/etc/", "mm/ #x", "a|b",
                "mm/*", "'mm/'"):
        with pytest.raises(UserError, match="is not a make target of the kernel tree"):
            w.check_params({"targets": bad})


def _gmake_available() -> bool:
    try:
        gmake.Gmake().check_available()
    except UserError:
        return False
    return True


@pytest.mark.skipif(not _gmake_available(), reason="gmake needs make, the kernel source and its tools")
def test_a_target_make_would_read_as_its_syntax_is_refused_before_the_run(tmp_path):
    line = refused(tmp_path, "run", "gmake", "-p", "targets=mm/;rm")
    assert "gmake target 'mm/;rm' is not a make target of the kernel tree" in line


def test_more_jobs_than_memory_is_refused_before_the_run(monkeypatch):
    monkeypatch.setattr(gmake, "mem_available_mb", lambda: 24 * 1024.0)
    monkeypatch.setattr(linuxsrc, "tree_cache", lambda: linuxsrc.Path("/nonexistent"))
    w = gmake.Gmake()
    w.check_cores({"targets": "mm/"}, 2)
    with pytest.raises(UserError, match=r"gmake at 256 cores runs make -j512: about 126\.5 GB .* 24\.0 GB available"):
        w.check_cores({"targets": "mm/"}, 256)


def builds(test):
    """Real builds: root (cgroups) and the Linux source package, unpacked once into the shared cache."""
    for mark in (needs_root, pytest.mark.skipif(not linuxsrc.LINUX_TARBALL.is_file(), reason="no linux-source-6.1")):
        test = mark(test)
    return test


@builds
def test_builds_the_same_objects_at_every_core_count(tmp_path, monkeypatch):
    points = run_points(tmp_path, monkeypatch, "gmake", cores=[1, 2], targets="lib/math/")
    assert [p["status"] for p in points] == ["ok", "ok"], [p.get("reason") for p in points]
    objects = {p["metrics"]["objects"] for p in points}
    assert len(objects) == 1 and objects.pop() > 0
    two = next(p for p in points if p["cores"] == 2)
    assert two["metrics"]["jobs"] == 4 and 0 < two["metrics"]["serial_fraction"] <= 1


@builds
def test_a_build_error_fails_the_point_with_makes_words(tmp_path, monkeypatch):
    (p,) = run_points(tmp_path, monkeypatch, "gmake", targets="lib/math/nosuch.o")
    assert p["status"] == "failed"
    assert "make exited with status 2" in p["reason"] and "No rule to make target" in p["reason"]


@builds
def test_targets_defconfig_does_not_build_fail_the_point(tmp_path, monkeypatch):
    (p,) = run_points(tmp_path, monkeypatch, "gmake", targets="fs/ext2/")
    assert p["status"] == "failed" and "make built no objects for fs/ext2/" in p["reason"]


@builds
def test_make_killed_mid_build_fails_the_point_and_leaves_no_compiler(tmp_path, monkeypatch):
    began = gmake.GmakeInstance.begin
    temporaries: list[Path] = []

    def begin_then_kill(self):
        began(self)
        time.sleep(1.5)  # the compilers are running by now
        environ = Path(f"/proc/{self.proc.pid}/environ").read_bytes().split(b"\0")
        tmpdir = Path(next(v for v in environ if v.startswith(b"TMPDIR=")).decode().removeprefix("TMPDIR="))
        temporaries.append(tmpdir)
        self.proc.kill()

    monkeypatch.setattr(gmake.GmakeInstance, "begin", begin_then_kill)
    (p,) = run_points(tmp_path, monkeypatch, "gmake", targets="security/keys/")  # checks nothing is left
    assert p["status"] == "failed" and "make exited with status -9" in p["reason"]
    assert not [line for line in _leftovers("cc1") if "security/keys" in line]
    # A killed cc1 leaves its .s where TMPDIR says: the point's scratch, removed with it, not the user's /tmp.
    (tmpdir,) = temporaries
    assert tmpdir.name == "tmp" and tmpdir.parent.name.startswith("point-") and not tmpdir.exists()


def test_missing_kernel_source_is_one_clear_line(monkeypatch):
    monkeypatch.setattr(linuxsrc, "LINUX_TARBALL", linuxsrc.Path("/nonexistent/linux-source-6.1.tar.xz"))
    with pytest.raises(UserError, match=r"linux-source-6\.1\.tar\.xz is missing \(`make deps` installs "
                                        r"linux-source-6\.1\)"):
        gmake.Gmake().check_available()
