"""Kernels side by side: naming a kernel, deciding with more trials, A B B A rounds, and a bisection
replayed on a small git history (the real end-to-end runs are `make ab-rt` and `make bisect-demo`)."""

import hashlib
import itertools
import random
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from mosbench import cli
from mosbench.analysis.cells import PointKey
from mosbench.analysis.decide import State, decide
from mosbench.errors import UserError
from mosbench.guest import ab, bisect, kernels
from mosbench.guest.host import Shape
from mosbench.guest.kernels import Kernel
from mosbench.report import rows
from mosbench.store.db import Store, now
from tests.conftest import empty_commits

NINE_P = "kernel/fs/9p/9p.ko"


def _image(path: Path, release: str, decoy: str | None = None) -> Path:
    """A file laid out as an x86 boot image: the setup header's magic at 0x202 and the version pointer;
    `decoy`, a version string earlier in the file that the pointer does not point to."""
    data = bytearray(0x1000)
    data[0x202:0x206] = b"HdrS"
    data[0x20E:0x210] = (0x400 - 0x200).to_bytes(2, "little")
    if decoy is not None:
        other = f"{decoy} (not the pointer's)".encode()
        data[0x300:0x300 + len(other)] = other
    text = f"{release} (builder@host) #1 SMP".encode()
    data[0x400:0x400 + len(text)] = text
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(data))
    return path


def _modules(root: Path, release: str, nine_p: bool = True) -> None:
    d = root / release
    d.mkdir(parents=True)
    if nine_p:
        (d / NINE_P).parent.mkdir(parents=True)
        (d / NINE_P).write_bytes(b"")


def test_an_image_says_its_release(tmp_path):
    """Without a setup header the release is the image's own text, its first "N.N.N… (", whatever the
    file is called; a file that is missing or says none has no release."""
    image = tmp_path / "vmlinuz-9.9.9-the-name"
    image.write_bytes(b"\x7fELF" + bytes(300) + b"Linux version 6.1.0-9-from-the-bytes (debian-kernel@lists) "
                      b"#1 SMP\x00 and later 5.10.0-second (x)")
    assert kernels.image_release(image) == "6.1.0-9-from-the-bytes"
    assert kernels.image_release(tmp_path / "nonexistent") is None
    (tmp_path / "vmlinuz-6.1.0-9-amd64").write_bytes(b"no version here")
    assert kernels.image_release(tmp_path / "vmlinuz-6.1.0-9-amd64") is None


def test_an_image_s_release_is_read_from_its_setup_header(tmp_path):
    # The header's pointer is followed past an earlier version string the file holds.
    image = _image(tmp_path / "bzImage", "6.1.0-rc1-demo+", decoy="5.10.0-earlier")
    assert kernels.image_release(image) == "6.1.0-rc1-demo+"
    (tmp_path / "text").write_bytes(b"no version here")
    assert kernels.image_release(tmp_path / "text") is None


def test_an_image_bisect_kept_boots_by_the_config_beside_it(tmp_path):
    """`mosbench bisect` keeps each commit's bzImage with its `config` beside it, and prints (as `mail` does)
    the `mosbench ab --kernel …/bzImage` command that profiles a step: that command must boot it."""
    kept = tmp_path / "images" / ("f4083f537e3c" + "0" * 28)
    image = _image(kept / "bzImage", "6.1.192+")
    with pytest.raises(UserError, match="nor a config with 9p"):
        kernels.resolve(str(image), tmp_path / "boot", tmp_path / "modules")
    (kept / "config").write_text("CONFIG_9P_FS=y\nCONFIG_NET_9P=y\nCONFIG_NET_9P_VIRTIO=y\n")
    k = kernels.resolve(str(image), tmp_path / "boot", tmp_path / "modules")
    assert (k.origin, k.release, k.config) == ("image", "6.1.192+", kept / "config")
    assert k.commit == "f4083f537e3c" + "0" * 28  # the folder bisect named by it: ab's sides carry their commits
    elsewhere = _image(tmp_path / "mine" / "bzImage", "6.1.192+")
    (elsewhere.parent / ".config").write_text((kept / "config").read_text())
    assert kernels.resolve(str(elsewhere), tmp_path / "boot", tmp_path / "modules").commit is None


def test_an_installed_kernel_by_version(tmp_path):
    boot, mods = tmp_path / "boot", tmp_path / "modules"
    _image(boot / "vmlinuz-6.1.0-9-amd64", "6.1.0-9-amd64")
    (boot / "config-6.1.0-9-amd64").write_text("CONFIG_PREEMPT_VOLUNTARY=y\n")
    _modules(mods, "6.1.0-9-amd64")
    k = kernels.resolve("6.1.0-9-amd64", boot, mods)
    assert (k.origin, k.release, k.image.name) == ("installed", "6.1.0-9-amd64", "vmlinuz-6.1.0-9-amd64")
    assert k.config == boot / "config-6.1.0-9-amd64"
    _image(boot / "vmlinuz-6.1.0-9-cloud-amd64", "6.1.0-9-cloud-amd64")
    _modules(mods, "6.1.0-9-cloud-amd64", nine_p=False)
    with pytest.raises(UserError, match="its modules have no 9p"):
        kernels.resolve("6.1.0-9-cloud-amd64", boot, mods)


def _installed_state() -> tuple[str, tuple[str, ...]]:
    """What installing a kernel package changes: dpkg's status database and /boot."""
    status = Path("/var/lib/dpkg/status")
    digest = hashlib.sha256(status.read_bytes()).hexdigest() if status.is_file() else ""
    boot = Path("/boot")
    return digest, tuple(sorted(p.name for p in boot.iterdir())) if boot.is_dir() else ()


@pytest.mark.skipif(not shutil.which("dpkg-deb"), reason="no dpkg-deb")
def test_a_package_is_unpacked_into_the_cache_never_installed(tmp_path, monkeypatch):
    monkeypatch.setattr(kernels, "cache_root", lambda: tmp_path / "cache")
    root = tmp_path / "pkg"
    _image(root / "boot/vmlinuz-6.1.0-9-rt-amd64", "6.1.0-9-rt-amd64")
    (root / "boot/config-6.1.0-9-rt-amd64").write_text("CONFIG_PREEMPT_RT=y\n")
    _modules(root / "lib/modules", "6.1.0-9-rt-amd64")
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN/control").write_text("Package: linux-image-6.1.0-9-rt-amd64\nVersion: 1\nArchitecture: amd64\n"
                                         "Maintainer: test <t@invalid>\nDescription: test\n")
    # Named for nothing in it: the release must come from what the package holds.
    deb = tmp_path / "a-kernel.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root), str(deb)], check=True, capture_output=True)

    # Every command resolve runs is recorded; only dpkg-deb's extraction into the cache is let run, so a
    # resolve that tried to install (dpkg -i, apt) is caught before it could touch this machine.
    real_run = subprocess.run
    commands: list[list[str]] = []

    def run(args, *a, **kw):
        commands.append([str(x) for x in args])
        if list(args[:2]) == ["dpkg-deb", "-x"] and Path(args[3]).is_relative_to(tmp_path / "cache"):
            return real_run(args, *a, **kw)
        return subprocess.CompletedProcess(args, 1, "", "not run by the test")

    monkeypatch.setattr(kernels.subprocess, "run", run)
    before = _installed_state()
    k = kernels.resolve(str(deb))
    assert (k.origin, k.release) == ("package", "6.1.0-9-rt-amd64")
    assert k.image.is_relative_to(tmp_path / "cache" / "kernels")
    assert k.image.read_bytes() == (root / "boot/vmlinuz-6.1.0-9-rt-amd64").read_bytes()
    assert kernels.read_config(k.config) == {"CONFIG_PREEMPT_RT": "y"}
    assert kernels.resolve(str(deb)).image == k.image
    # unpacked once, and nothing else run
    assert [c[:3] for c in commands] == [["dpkg-deb", "-x", str(deb.resolve())]], commands
    assert _installed_state() == before
    monkeypatch.undo()
    if shutil.which("dpkg-query"):
        known = subprocess.run(["dpkg-query", "-W", "linux-image-6.1.0-9-rt-amd64"], capture_output=True, text=True)
        assert known.returncode != 0 and not known.stdout, known.stdout


def test_a_built_tree_and_what_a_tree_lacks(tmp_path):
    tree = tmp_path / "linux"
    tree.mkdir()
    with pytest.raises(UserError, match="no built kernel tree"):
        kernels.resolve(str(tree))
    _image(tree / kernels.IMAGE_IN_TREE, "6.1.0-demo")
    (tree / ".config").write_text("CONFIG_9P_FS=y\n")
    with pytest.raises(UserError, match="lacks 9p over virtio"):
        kernels.resolve(str(tree))
    (tree / ".config").write_text("CONFIG_9P_FS=y\nCONFIG_NET_9P_VIRTIO=y\n")
    k = kernels.resolve(str(tree))
    assert (k.origin, k.release) == ("tree", "6.1.0-demo")
    assert k.commit is None and "kernel_commit" not in k.facts()  # not a git tree
    [head] = empty_commits(tree, ["v6.1-demo"])
    # What history orders a guest's runs by: the tree's HEAD, recorded with the kernel's facts.
    assert kernels.resolve(str(tree)).facts()["kernel_commit"] == head


def test_an_unknown_kernel_is_one_line(tmp_path):
    with pytest.raises(UserError, match="not an installed kernel"):
        kernels.resolve("9.9.9-none", tmp_path, tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(UserError, match="not a Linux kernel image"):
        kernels.resolve(str(tmp_path / "notes.txt"))


def test_config_differences_put_preemption_first(tmp_path):
    (tmp_path / "a").write_text("CONFIG_A=y\nCONFIG_PREEMPT_VOLUNTARY=y\n# CONFIG_PREEMPT_RT is not set\n"
                                "CONFIG_HZ=250\n")
    (tmp_path / "b").write_text("CONFIG_A=y\nCONFIG_PREEMPT_RT=y\nCONFIG_HZ=1000\nCONFIG_ZZ=m\n")
    a = Kernel("a", tmp_path / "a", "a", "image", tmp_path / "a")
    b = Kernel("b", tmp_path / "b", "b", "image", tmp_path / "b")
    assert kernels.config_differences(a, b) == [
        ("CONFIG_PREEMPT_RT", "n", "y"), ("CONFIG_PREEMPT_VOLUNTARY", "y", "–"), ("CONFIG_HZ", "250", "1000"),
        ("CONFIG_ZZ", "–", "m")]
    assert kernels.config_differences(a, Kernel("c", tmp_path / "c", "c", "image", None)) == []


def test_decisions():
    k = PointKey("micro", "getppid1", "procs", 2)
    assert decide(k, [100, 101, 99, 100], [80, 81, 79, 80], 0.02).state == State.DIFFER
    assert decide(k, [100, 100.2, 99.9, 100.1], [100, 100.1, 99.8, 100.2], 0.02).state == State.SAME
    assert decide(k, [100, 110, 90], [100, 112, 95], 0.02).state == State.UNSURE
    assert decide(k, [100], [], 0.02).state == State.UNSURE
    assert decide(k, [100], [], 0.02).name == "micro/getppid1 procs at 2 cores"


def test_a_candidate_is_judged_against_both_ends():
    k = PointKey("micro", "getppid1", "procs", 2)
    good, bad = {k: [100, 101, 99, 100]}, {k: [80, 81, 79, 80]}
    assert bisect.classify([k], good, bad, {k: [80.5, 80, 79.5, 81]}, 0.02).verdict == bisect.Verdict.BAD
    assert bisect.classify([k], good, bad, {k: [100.5, 100, 99.5, 101]}, 0.02).verdict == bisect.Verdict.GOOD
    between = bisect.classify([k], good, bad, {k: [90, 91, 89, 90]}, 0.02)
    assert between.verdict is None and between.why.startswith("between the ends: micro/getppid1 procs at 2 cores")
    assert [d.state for d in (*between.against_good, *between.against_bad)] == [State.DIFFER, State.DIFFER]


def test_rounds_alternate_a_b_b_a():
    assert "".join("AB"[ab.side_of(i)] for i in range(8)) == "ABBAABBA"


class FakeBooter(ab.Booter):
    """Each boot stores a run whose points' throughput the test chooses, per kernel."""

    def __init__(self, db: Store, rate, trials: int = 2):
        super().__init__(db, Shape(1, 2, 1, 1, 1024), 2, ["micro/getppid1", "--cores", "1,2"], 90,
                         lambda line, t: None)
        self.rate = rate
        self.trials = trials
        self.booted: list[str] = []

    def measure(self, kernel: Kernel, label: str, **facts) -> int:
        self.booted.append(kernel.spec)
        self.boots += 1
        self.boot_seconds.append(1.0)
        run_id = self.db.create_run({"trials": self.trials}, {"hostname": "guest", "virtual_machine": kernel.facts(),
                                                              **facts}, "test", label)
        for trial in range(1, self.trials + 1):
            self.db.add_point(run_id, workload="micro", test="getppid1", variant="procs", cores=2, trial=trial,
                              started_at=now(), cpus="0-1", unit="op", status="ok", throughput=2 * self.rate(kernel),
                              work=1.0, user_s=0.5, system_s=1.5, idle_s=0.0, interfered=False)
        self.db.finish_run(run_id, "complete")
        return run_id


def _kernel(name: str) -> Kernel:
    return Kernel(name, Path(f"/k/{name}"), name, "image", None)


def test_ab_decides_after_the_first_rounds_and_merges_each_side(tmp_path):
    db = Store(str(tmp_path / "s.sqlite"))
    rng = random.Random(1)
    booter = FakeBooter(db, lambda k: (100 if k.spec == "a" else 80) * rng.uniform(0.99, 1.01))
    out = ab.run(booter, _kernel("a"), _kernel("b"), 4, 12, 0.02, lambda s: None)
    assert booter.booted == ["a", "b", "b", "a"]
    assert out.decided and [d.state for d in out.decisions] == ["differ"]
    assert out.decisions[0].ratio == pytest.approx(0.8, rel=0.03)
    merged = [db.points(r) for r in out.merged]
    assert [p["trial"] for p in merged[0]] == [1, 2, 3, 4]  # two boots of two trials, numbered on
    assert db.run(out.merged[1])["environment"]["ab"]["rounds"] == 2
    command = db.run(out.merged[0])["command"]
    assert command == ("mosbench ab --kernel a --kernel b --shape 1x2x1 --rounds 4 --max-rounds 12 --precision 2 "
                       "--boot-timeout 1.5 micro/getppid1 --cores 1,2")
    # ... and `mosbench ab` takes it back with the same choices
    again = cli.ab.make_context("ab", shlex.split(command)[2:]).params
    assert (again["kernel_specs"], again["shape"], again["first_rounds"], again["max_rounds"], again["precision"],
            again["boot_timeout_min"], again["run_args"]) == (("a", "b"), "1x2x1", 4, 12, 2.0, 1.5,
                                                               ("micro/getppid1", "--cores", "1,2"))


def test_ab_adds_rounds_until_the_budget_and_says_so(tmp_path):
    db = Store(str(tmp_path / "s.sqlite"))
    spread = itertools.cycle([70.0, 130.0])  # the same mean on both sides, far too wide to call the same
    booter = FakeBooter(db, lambda k: next(spread))
    out = ab.run(booter, _kernel("a"), _kernel("b"), 4, 8, 0.01, lambda s: None)
    assert booter.booted == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert out.rounds == 8 and not out.decided


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture()
def history(tmp_path):
    """Six commits; the fourth adds the file `slow` (the regression)."""
    repo = tmp_path / "tree"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@invalid")
    _git(repo, "config", "user.name", "t")
    for n in range(6):
        (repo / ("slow" if n == 3 else f"file{n}")).write_text(str(n))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"commit {n}")
    commits = _git(repo, "rev-list", "--reverse", "HEAD").split()
    return repo, commits


class ReplayBuilder(bisect.Builder):
    """The work clone is real; the kernel of a commit is its name (no build)."""

    def build(self, commit, say):
        return None if commit in self.broken else Kernel(commit, Path("/k"), commit[:12], "tree", None)


def test_bisection_names_the_commit_and_leaves_the_user_s_tree_alone(history, tmp_path):
    repo, commits = history
    before = (_git(repo, "status", "--porcelain"), _git(repo, "for-each-ref"), _git(repo, "rev-parse", "HEAD"))
    builder = ReplayBuilder(repo, tmp_path / "work", 2)
    builder.broken = set()
    db = Store(str(tmp_path / "s.sqlite"))
    rng = random.Random(3)

    def rate(k: Kernel) -> float:
        regressed = subprocess.run(["git", "-C", str(builder.src), "cat-file", "-e", f"{k.spec}:slow"]).returncode == 0
        return (80 if regressed else 100) * rng.uniform(0.99, 1.01)

    out = bisect.run(FakeBooter(db, rate), builder, commits[0], commits[-1], 4, 12, 4, 0.02, lambda s: None)
    assert out.first_bad == commits[3]
    assert {s.verdict for s in out.steps} <= {"good", "bad"}
    assert all(len(s.runs) == 2 for s in out.steps)  # decided on the first two boots
    steps = rows.bisect_table(out.steps)
    assert steps.column("commit") == [s.commit[:12] for s in out.steps]
    assert steps.column("verdict") == [str(s.verdict) for s in out.steps]
    assert steps.column("boots") == ["2"] * len(out.steps)
    assert (_git(repo, "status", "--porcelain"), _git(repo, "for-each-ref"), _git(repo, "rev-parse", "HEAD")) == before
    assert not (repo / ".git" / "BISECT_LOG").exists()
    assert not (builder.src / ".git" / "BISECT_LOG").exists()  # the clone's bisection is reset too


def test_a_candidate_that_does_not_build_is_skipped(history, tmp_path):
    repo, commits = history
    builder = ReplayBuilder(repo, tmp_path / "work", 2)
    builder.broken = {commits[3]}
    db = Store(str(tmp_path / "s.sqlite"))

    def rate(k: Kernel) -> float:
        slow = subprocess.run(["git", "-C", str(builder.src), "cat-file", "-e", f"{k.spec}:slow"]).returncode == 0
        return 80.0 + 0.1 * random.random() if slow else 100.0 + 0.1 * random.random()

    out = bisect.run(FakeBooter(db, rate), builder, commits[0], commits[-1], 4, 12, 4, 0.02, lambda s: None)
    assert commits[3] in [s.commit for s in out.steps if s.verdict == "skip"]
    assert out.first_bad is None and "skip" in out.message


def test_ends_that_do_not_differ_are_refused_before_any_step(history, tmp_path):
    repo, commits = history
    builder = ReplayBuilder(repo, tmp_path / "work", 2)
    builder.broken = set()
    # Seeded as the others: unseeded, it failed at random (twice running here), noise that Welch's test at
    # 5% calls a difference.
    rng = random.Random(2)
    booter = FakeBooter(Store(str(tmp_path / "s.sqlite")), lambda k: 100 * rng.uniform(0.999, 1.001))
    with pytest.raises(UserError, match="good and bad do not differ significantly"):
        bisect.run(booter, builder, commits[0], commits[-1], 4, 4, 4, 0.02, lambda s: None)
    assert len(booter.booted) == 4


def test_revisions_are_checked_in_the_user_s_tree(history, tmp_path):
    repo, commits = history
    assert bisect.resolve_revisions(repo, "HEAD~5", "main") == (commits[0], commits[-1])
    for good, bad, said in (("nosuch", "main", "--good nosuch: no such commit"),
                            ("main", "main", "the same commit"),
                            ("main", "HEAD~2", "is not an ancestor")):
        with pytest.raises(UserError, match=said):
            bisect.resolve_revisions(repo, good, bad)
