"""The guardian: a small process that outlives the harness and undoes its journal the moment it dies.

The harness starts it at the beginning of a run (`start`). It waits on the harness's pidfd and, when the
harness is gone, looks at the journal: a harness that finished cleanly has removed it, and the guardian
just exits; otherwise it kills what the run started, removes its cgroups and scratch, brings offlined
CPUs back and marks the run killed, at once rather than at the next mosbench command.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

from mosbench.machine import journal


def start(journal_path: Path) -> subprocess.Popen:
    """Starts the guardian of this process's run; it ends when we do, or at stop() once the run is clean."""
    return subprocess.Popen(
        [sys.executable, "-m", "mosbench.machine.guardian", str(journal_path), str(os.getpid()),
         str(journal.process_start_time(os.getpid()))],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # not in the harness's session: a terminal's Ctrl-C or hang-up spares it
        close_fds=True,
    )


def stop(guardian: subprocess.Popen) -> None:
    """Ends the guardian of a run that finished cleanly (its journal removed): it would only have waited
    for this process to end, and a process that runs several sweeps (a test session, the guest's suite)
    would gather one per run."""
    guardian.terminate()
    guardian.wait()


def watch(journal_path: Path, owner: int, owner_start: int | None) -> list[str]:
    """Blocks until owner ends, then recovers its journal if it left one; returns what was done."""
    try:
        fd = os.pidfd_open(owner)
    except ProcessLookupError:
        fd = None
    if fd is not None and journal.is_same_process(owner, owner_start):
        select.select([fd], [], [])  # readable when the process has ended
        os.close(fd)
    try:
        data = json.loads(journal_path.read_text())
    except (OSError, ValueError):
        return []  # finished cleanly: the harness removed its journal
    if data.get("owner") != owner:
        return []
    actions = journal.recover(data)
    journal_path.unlink(missing_ok=True)
    return actions


def main() -> None:
    path, owner, start_time = sys.argv[1:4]
    watch(Path(path), int(owner), None if start_time == "None" else int(start_time))


if __name__ == "__main__":
    main()
