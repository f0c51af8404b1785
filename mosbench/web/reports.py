"""Each run's (or pair's) HTML report as `mosbench serve` shows it: drawn by `mosbench report`'s own code
(report/html.page: every figure as SVG, the tests' sections on every CPU) in a process of its own, niced below
the pages, one report at a time; kept gzip-compressed in a private directory (the newest REPORTS_KEPT), which
goes when the server stops. matplotlib's heap is the drawing process', never the server's, and the server's
threads share no GIL with it: the other pages keep their speed while a report is drawn.

A report that takes longer than REPORT_WAIT_S to draw is answered `Drawing` meanwhile (the page says so and
reloads itself); the drawing goes on and is kept. A drawn report is handed out as kept, compressed (`Drawn`): a
browser takes it so (Content-Encoding: gzip), and the server never holds the page itself (9 MB for a run of
200 points) for one that does.

`python -m mosbench.web.reports` is the drawing process: it reads its job (the store's URL, the runs, where to
write) as JSON on stdin, so that no password is on its command line."""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import gzip
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

import mosbench
from mosbench.errors import UserError

log = logging.getLogger("mosbench.web")

# Reports kept drawn (each a few MB of SVG, a fifth of it compressed): the runs a lab looks at this morning.
REPORTS_KEPT = 8
# Reports asked for and not drawn yet, at most; one more is refused (503) until the queue is shorter.
QUEUED_MOST = 4
# A report drawn within this is the answer to the request that asked for it; one that takes longer is said to
# be being drawn (a lab's run, 200 points with a 500-run history: half a minute on two CPUs).
REPORT_WAIT_S = 10.0
# How often the "being drawn" page reloads itself (its Retry-After).
RELOAD_S = 5
# A drawing process still running after this is ended, and its report said to have failed.
DRAW_LIMIT_S = 900.0
# The drawing's niceness: the pages first.
NICENESS = 10
# A drawing that fails on something the user can fix (a run that went away) says so in one line and exits so.
USER_ERROR_EXIT = 2


class DrawFailed(Exception):
    """A report could not be drawn: what to tell the client, in one line."""


class Busy(Exception):
    """QUEUED_MOST reports are waiting to be drawn already."""


@dataclass(frozen=True)
class Drawn:
    """A report drawn: its page, gzip-compressed as it is kept."""

    gzipped: bytes

    def page(self) -> bytes:
        """The page itself, UTF-8."""
        return gzip.decompress(self.gzipped)


@dataclass(frozen=True)
class Drawing:
    """A report asked for and not drawn yet."""

    runs: tuple[int, ...]
    for_s: float  # how long it has been asked for
    ahead: int  # reports to be drawn before it (the one under way among them)
    reload_s: int = RELOAD_S

    @property
    def text(self) -> str:
        which = " and ".join(f"#{r}" for r in self.runs)
        queue = f"; {self.ahead} report{'s' if self.ahead != 1 else ''} before it" if self.ahead else ""
        return (f"The report of run{'s' if len(self.runs) > 1 else ''} {which} is being drawn (asked "
                f"{self.for_s:.0f} s ago{queue}). It is kept once drawn; this page reloads itself every "
                f"{self.reload_s} s until then.")


@dataclass
class _Job:
    runs: tuple[int, ...]
    asked_at: float
    order: int  # its place in the queue
    future: concurrent.futures.Future[bytes] | None = None


class Reports:
    """The served reports: drawn in a process of their own, one at a time, kept compressed on disk."""

    def __init__(self, store_url: str, kept: int = REPORTS_KEPT, queued: int = QUEUED_MOST) -> None:
        self._store_url = store_url
        self._kept, self._queued = kept, queued
        self._folder = tempfile.TemporaryDirectory(prefix="mosbench-serve-reports-")
        self.folder = Path(self._folder.name)
        self._drawn: collections.OrderedDict[Hashable, Path] = collections.OrderedDict()
        self._waiting: dict[Hashable, _Job] = {}  # asked for: queued or being drawn
        self._lock = threading.Lock()
        self._drawer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mosbench-report")
        self._drawing: subprocess.Popen | None = None
        self._numbers = itertools.count(1)
        self._closed = False

    def html(self, key: Hashable, runs: tuple[int, ...], wait_s: float = REPORT_WAIT_S) -> Drawn | Drawing:
        """The report of `runs` as it is at `key` (its runs' states): drawn and kept, or drawn now if it is
        within wait_s, else Drawing. Busy where too many wait already; DrawFailed where it could not be drawn."""
        with self._lock:
            if key in self._drawn:
                self._drawn.move_to_end(key)
                kept = self._drawn[key].read_bytes()  # read before another drawing pushes it out
            else:
                kept = None
                job = self._waiting.get(key)
                if job is None:
                    if len(self._waiting) >= self._queued:
                        raise Busy(f"{len(self._waiting)} reports are being drawn already: ask again in a minute")
                    job = _Job(runs, time.monotonic(), next(self._numbers))
                    job.future = self._drawer.submit(self._draw, key, job)
                    self._waiting[key] = job
                ahead = sum(other.order < job.order for other in self._waiting.values())
        if kept is not None:
            return Drawn(kept)
        assert job.future is not None
        try:
            return Drawn(job.future.result(timeout=wait_s))
        except concurrent.futures.TimeoutError:
            return Drawing(runs, time.monotonic() - job.asked_at, ahead)

    def _draw(self, key: Hashable, job: _Job) -> bytes:
        out = self.folder / f"report-{job.order}.html.gz"
        try:
            self._run_drawing(job.runs, out)
            drawn = out.read_bytes()
        except BaseException:
            out.unlink(missing_ok=True)
            with self._lock:
                self._waiting.pop(key, None)  # asked again, it is drawn again
            raise
        with self._lock:
            self._waiting.pop(key, None)
            self._drawn[key] = out
            while len(self._drawn) > self._kept:
                self._drawn.popitem(last=False)[1].unlink(missing_ok=True)
        return drawn

    def _run_drawing(self, runs: tuple[int, ...], out: Path) -> None:
        """`python -m mosbench.web.reports`, in a session of its own (its pool of workers with it), its
        temporary files in this one's folder; the report gzip-compressed at `out`."""
        said = " and ".join(f"#{r}" for r in runs)
        env = {**os.environ, "TMPDIR": str(self.folder),
               # the mosbench this server runs, wherever it was started from
               "PYTHONPATH": os.pathsep.join(filter(None, (str(Path(mosbench.__file__).parent.parent),
                                                           os.environ.get("PYTHONPATH"))))}
        started = time.monotonic()
        with self._lock:  # close() either sees it, and ends it, or it is never started
            if self._closed:
                raise DrawFailed("the server is stopping")
            proc = subprocess.Popen([sys.executable, "-m", "mosbench.web.reports"], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                    start_new_session=True)
            self._drawing = proc
        try:
            _, err = proc.communicate(json.dumps({"store": self._store_url, "runs": list(runs), "out": str(out)}),
                                      timeout=DRAW_LIMIT_S)
        except subprocess.TimeoutExpired:
            _end(proc)
            raise DrawFailed(f"the report of {said} was not drawn within {DRAW_LIMIT_S:g} s") from None
        finally:
            with self._lock:
                self._drawing = None
        if self._closed:
            raise DrawFailed("the server is stopping")
        if proc.returncode == USER_ERROR_EXIT and err.strip():
            raise DrawFailed(f"the report of {said} could not be drawn: {err.strip().splitlines()[-1]}")
        if proc.returncode != 0:
            log.warning("drawing the report of %s failed (exit %s):\n%s", said, proc.returncode, err.strip())
            raise DrawFailed(f"the report of {said} could not be drawn (the server's log says why)")
        log.info("the report of %s drawn in %.1f s", said, time.monotonic() - started)

    def close(self) -> None:
        """Ends a drawing under way (its session, by its PID) and removes every report kept."""
        with self._lock:
            self._closed = True
            proc = self._drawing
        self._drawer.shutdown(wait=False, cancel_futures=True)
        if proc is not None:
            _end(proc)
        self._drawer.shutdown(wait=True)  # the drawer thread has seen its process end
        self._folder.cleanup()


def _end(proc: subprocess.Popen) -> None:
    """The drawing process and the workers it started (its session, whose id is its PID), killed and reaped."""
    with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def main() -> int:
    """The drawing process: the job from stdin, the report at its `out`, written whole (renamed into place)."""
    job = json.load(sys.stdin)
    os.nice(NICENESS)
    from mosbench.report import html
    from mosbench.store import db as store

    try:
        text = html.page(store.Store(job["store"], create=False), [str(r) for r in job["runs"]])
    except UserError as e:
        print(e, file=sys.stderr)
        return USER_ERROR_EXIT
    out = Path(job["out"])
    partial = out.with_name(out.name + ".partial")
    partial.write_bytes(gzip.compress(text.encode(), compresslevel=6))
    partial.rename(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
