"""git, read only, in a user's tree: the one way mosbench asks a tree what a revision is (history's
commit order, a built kernel's HEAD, a bisection's ends and steps)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from mosbench.errors import UserError


def git(cwd: Path, *args: str, check: bool = True) -> str:
    """`git -C cwd ARGS`' output, stripped; with check, a UserError naming the command where it fails."""
    done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True)
    if check and done.returncode:
        raise UserError(f"git {' '.join(args)} in {cwd}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def commit_id(tree: Path, rev: str) -> str | None:
    """The commit rev names in tree (a branch, a tag, an abbreviation, HEAD); None where it names none
    or tree is no git tree."""
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                          capture_output=True, text=True)
    return done.stdout.strip() or None if done.returncode == 0 else None
