"""Which commit made it slower: `git bisect` over a kernel tree, each candidate built, booted in a guest
and measured, and called good, bad or skip by a test of significance against both ends.

The user's tree is only read: mosbench clones it (a local clone, hard-linked objects) into a work
directory of its own, bisects and builds there, and keeps that directory so the next step's build is
incremental and a later bisection of the same tree starts warm. The ends are measured first, in
A B B A rounds (guest/ab.py); where they do not differ significantly there is nothing to find, and the
bisection refuses before building anything else.

A candidate is measured two boots at a time, then one more until it is decided or its budget ends:
on every point where the ends differ, it is bad where it differs from good (the same way bad does)
and not from bad, good where it differs from bad and not from good. A candidate that stays between
is skipped (`git bisect skip`), as is one that does not build.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from mosbench.analysis import explain
from mosbench.analysis.cells import PointKey, counted_by_point
from mosbench.analysis.compare import Change
from mosbench.analysis.decide import Decision, State, decide
from mosbench.analysis.significance import welch
from mosbench.errors import UserError
from mosbench.gitrepo import commit_id, git
from mosbench.guest import ab
from mosbench.guest.kernels import IMAGE_IN_TREE, Kernel
from mosbench.store.db import Store
from mosbench.workloads.base import cache_root


def resolve_revisions(tree: Path, good: str, bad: str) -> tuple[str, str]:
    """Both revisions as commit ids, read from the user's tree (nothing there is written), good an
    ancestor of bad."""
    if not (tree / ".git").exists() and git(tree, "rev-parse", "--is-inside-work-tree", check=False) != "true":
        raise UserError(f"--tree {tree}: not a git repository")
    ids = []
    for name, rev in (("--good", good), ("--bad", bad)):
        found = commit_id(tree, rev)
        if found is None:
            raise UserError(f"{name} {rev}: no such commit in {tree}")
        ids.append(found)
    if ids[0] == ids[1]:
        raise UserError("--good and --bad name the same commit")
    if subprocess.run(["git", "-C", str(tree), "merge-base", "--is-ancestor", ids[0], ids[1]]).returncode:
        raise UserError(f"--good {good} is not an ancestor of --bad {bad}")
    return ids[0], ids[1]


BUILD_TOOLS = ("make", "gcc", "flex", "bison", "bc")


def check_build_tools() -> None:
    for tool in BUILD_TOOLS:
        if not shutil.which(tool):
            raise UserError(f"building kernels needs {tool} (scripts/install-deps installs the build tools)")


def default_work(tree: Path) -> Path:
    return cache_root() / "bisect" / hashlib.sha256(str(tree.resolve()).encode()).hexdigest()[:12]


@dataclass
class Builder:
    """Kernels built from the work clone with virtme-ng's configuration; each commit's image kept."""

    tree: Path
    work: Path
    jobs: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))
    build_seconds: list[float] = field(default_factory=list)

    @property
    def src(self) -> Path:
        return self.work / "src"

    def prepare(self) -> None:
        """The work clone, made once and brought up to the user's tree's commits after that."""
        if not (self.src / ".git").is_dir():
            shutil.rmtree(self.src, ignore_errors=True)
            self.src.parent.mkdir(parents=True, exist_ok=True)
            git(self.src.parent, "clone", "--quiet", "--no-checkout", str(self.tree.resolve()), self.src.name)
        else:
            git(self.src, "bisect", "reset", check=False)  # a bisection that was killed
            git(self.src, "fetch", "--quiet", "--tags", str(self.tree.resolve()), "+refs/heads/*:refs/remotes/origin/*")

    def image_dir(self, commit: str) -> Path:
        return self.work / "images" / commit

    def build(self, commit: str, say: Callable[[str], None]) -> Kernel | None:
        """The kernel of `commit` (built now, or kept from before); None where it does not build."""
        kept = self.image_dir(commit)
        if (kept / "bzImage").is_file():
            return self._kernel(commit, kept)
        git(self.src, "checkout", "--quiet", "--force", "--detach", commit)
        eta = (f" (the last took {self.build_seconds[-1] / 60:.1f} min)" if self.build_seconds else
               "" if (self.src / "vmlinux").is_file() else
               " (a first build is a whole kernel: about 17 min on 2 CPUs, later ones are incremental)")
        say(f"building {commit[:12]} {self.subject(commit)} with {self.jobs} jobs{eta}")
        log = self.work / f"build-{commit[:12]}.log"
        start = time.monotonic()
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        steps = [["make", "olddefconfig"], ["make", f"-j{self.jobs}", "bzImage"]]
        if not (self.src / ".config").is_file():
            steps.insert(0, ["vng", "--kconfig"])  # virtme-ng's minimal config: 9p and virtio built in
        with log.open("w") as out:
            for argv in steps:
                if subprocess.run(argv, cwd=self.src, stdout=out, stderr=subprocess.STDOUT, env=env).returncode:
                    say(f"{commit[:12]} does not build ({' '.join(argv)}; see {log})")
                    return None
        self.build_seconds.append(time.monotonic() - start)
        kept.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.src / IMAGE_IN_TREE, kept / "bzImage.part")
        shutil.copyfile(self.src / ".config", kept / "config")
        (kept / "release").write_text((self.src / "include/config/kernel.release").read_text())
        os.replace(kept / "bzImage.part", kept / "bzImage")
        say(f"built {commit[:12]} in {self.build_seconds[-1] / 60:.1f} min")
        return self._kernel(commit, kept)

    def _kernel(self, commit: str, kept: Path) -> Kernel:
        return Kernel(commit[:12], kept / "bzImage", (kept / "release").read_text().strip(), "tree", kept / "config",
                      commit)

    def subject(self, commit: str) -> str:
        return git(self.src, "log", "-1", "--format=%s", commit)

    def parent(self, commit: str) -> str:
        return git(self.src, "rev-parse", f"{commit}^")


class Verdict(StrEnum):
    """What a step tells `git bisect`, in its words."""

    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


@dataclass(frozen=True)
class Judgement:
    """A candidate against both ends: good, bad or None (not yet sure), with why, and the decisions it
    rests on (per point the ends differ on)."""

    verdict: Verdict | None
    why: str
    against_good: list[Decision]
    against_bad: list[Decision]


@dataclass(frozen=True)
class Step:
    commit: str
    subject: str
    verdict: Verdict
    why: str
    runs: list[int]
    against_good: list[Decision]  # per point the ends differ on: candidate vs good
    against_bad: list[Decision]


@dataclass
class Outcome:
    ends: ab.Outcome
    points: list[PointKey]  # where good and bad differ
    steps: list[Step]
    first_bad: str | None
    message: str  # git bisect's last word


def classify(points: list[PointKey], good: dict[PointKey, list[float]], bad: dict[PointKey, list[float]],
             candidate: dict[PointKey, list[float]], precision: float) -> Judgement:
    vs_good = [decide(k, good.get(k, []), candidate.get(k, []), precision) for k in points]
    vs_bad = [decide(k, bad.get(k, []), candidate.get(k, []), precision) for k in points]
    says = []
    for k, g, b in zip(points, vs_good, vs_bad, strict=True):
        bad_way = (decide(k, good.get(k, []), bad.get(k, []), precision).ratio or 1.0) - 1
        if g.state == State.DIFFER and b.state != State.DIFFER and ((g.ratio or 1.0) - 1) * bad_way > 0:
            says.append(Verdict.BAD)
        elif b.state == State.DIFFER and g.state != State.DIFFER:
            says.append(Verdict.GOOD)
        else:
            says.append(None)
    if says and all(s == Verdict.BAD for s in says):
        return Judgement(Verdict.BAD, "differs from good as bad does, not from bad", vs_good, vs_bad)
    if says and all(s == Verdict.GOOD for s in says):
        return Judgement(Verdict.GOOD, "differs from bad, not from good", vs_good, vs_bad)
    return Judgement(None, "between the ends: " + ", ".join(f"{d.name} {d.text()} against good" for d in vs_good),
                     vs_good, vs_bad)


def run(booter: ab.Booter, builder: Builder, good: str, bad: str, first_rounds: int, max_rounds: int,
        step_rounds: int, precision: float, say: Callable[[str], None]) -> Outcome:
    builder.prepare()
    kernels = []
    for commit in (good, bad):
        k = builder.build(commit, say)
        if k is None:
            raise UserError(f"{commit[:12]} ({'--good' if commit == good else '--bad'}) does not build: "
                            f"see {builder.work}/build-{commit[:12]}.log")
        kernels.append(k)
    say("measuring the ends: good and bad in A B B A rounds")
    ends = ab.run(booter, kernels[0], kernels[1], first_rounds, max_rounds, precision, say, merge=False,
                  names=("good", "bad"))
    differing = [d for d in ends.decisions if d.state == State.DIFFER]
    if not differing:
        raise UserError("good and bad do not differ significantly after "
                        f"{ends.rounds} rounds ({'; '.join(f'{d.name}: {d.text()}' for d in ends.decisions)}): "
                        "nothing to bisect")
    points = [d.point for d in differing]
    good_s, bad_s = booter.samples(ends.sides[0].runs), booter.samples(ends.sides[1].runs)
    say("good and bad differ: " + "; ".join(f"{d.name} {d.text()}" for d in differing))
    said = git(builder.src, "bisect", "start", bad, good)  # prepare() reset any bisection a killed run left
    steps: list[Step] = []
    try:
        while True:
            say(said.splitlines()[0] if said else "bisecting")
            commit = git(builder.src, "rev-parse", "HEAD")
            subject = builder.subject(commit)
            kernel = builder.build(commit, say)
            runs: list[int] = []
            judged = Judgement(None, "does not build", [], [])
            while kernel is not None and len(runs) < step_rounds:
                runs.append(booter.measure(kernel, f"bisect {commit[:12]} {subject}",
                                           bisect={"commit": commit, "subject": subject}))
                if len(runs) < 2:
                    continue
                judged = classify(points, good_s, bad_s, booter.samples(runs), precision)
                if judged.verdict:
                    break
            final = judged.verdict or Verdict.SKIP
            steps.append(Step(commit, subject, final, judged.why, runs, judged.against_good, judged.against_bad))
            say(f"{commit[:12]} {subject}: {final.upper()} ({judged.why})")
            # git bisect skip exits 2 where only skipped commits are left: that is an answer too
            done = subprocess.run(["git", "-C", str(builder.src), "bisect", final], capture_output=True, text=True)
            said = (done.stdout + done.stderr).strip()
            if "is the first bad commit" in said:
                return Outcome(ends, points, steps, said.split()[0], said.splitlines()[0])
            if re.search(r"only 'skip'ped commits left|cannot bisect more", said):
                return Outcome(ends, points, steps, None, " ".join(said.splitlines()))
            if done.returncode:
                raise UserError(f"git bisect {final} in {builder.src}: {said}")
    finally:
        git(builder.src, "bisect", "reset", check=False)


def measured(outcome: Outcome) -> dict[str, list[int]]:
    """Each commit the bisection booted (the ends and every step) and its boots' runs."""
    out: dict[str, list[int]] = {}
    for side in outcome.ends.sides:
        if side.kernel.commit:
            out.setdefault(side.kernel.commit, []).extend(side.runs)
    for step in outcome.steps:
        out.setdefault(step.commit, []).extend(step.runs)
    return out


def explained(db: Store, outcome: Outcome, builder: Builder) -> list[explain.Explained]:
    """The first bad commit against its parent, on each point where the ends differ: their boots' profiles
    set against each other (every boot's profiled trials replicates, with --profile among the run options),
    or the `mosbench ab` between their two kernels that would profile them. Nothing where there is no first
    bad commit, or its parent was never booted (git bisect named it from a merge's other side)."""
    if outcome.first_bad is None:
        return []
    bad = outcome.first_bad
    parent = builder.parent(bad)
    booted = measured(outcome)
    if not (booted.get(parent) and booted.get(bad)):
        return []
    run_ids = (booted[parent], booted[bad])
    rows = tuple([r for run_id in side for r in db.points(run_id, with_profiles=True, with_samples=False)]
                 for side in run_ids)
    samples = [counted_by_point(side) for side in rows]
    runs = (db.run(run_ids[0][-1]), db.run(run_ids[1][-1]))
    kernels = (str(builder.image_dir(parent) / "bzImage"), str(builder.image_dir(bad) / "bzImage"))
    labels = (parent[:12], bad[:12])
    out = []
    for key in outcome.points:
        base, other = samples[0].get(key), samples[1].get(key)
        if not (base and other):
            continue
        change = Change(key, tuple(base), tuple(other), welch(base, other))
        out.append(explain.Explained(change, explain.point(key, runs, rows, labels, kernels=kernels)))
    return out
