"""What the pages read, kept for the server's life: the store, the alert summaries computed from it (kept
and recomputed per machine only when its newest run changes: analysis/alerts), the triage book, and each
run's HTML report once drawn. Every page's record is built here under a deadline, so a store that stops
answering costs a page a 503 after STORE_TIMEOUT_S, never the server its threads."""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa

from mosbench.analysis.alerts import AlertIndex
from mosbench.errors import UserError
from mosbench.store import db as store
from mosbench.store.triage import TriageBook

log = logging.getLogger("mosbench.web")

# A page whose record is not built by then is answered 503: long enough for a machine's alerts to be
# recomputed after its new run (seconds), short enough that a client waiting on a dead database hears so.
STORE_TIMEOUT_S = 20.0
# A PostgreSQL that does not accept a connection in this long is taken as down (libpq's connect_timeout).
CONNECT_TIMEOUT_S = 5
# Records built at once, each on a thread of its own; a request past them waits, under the same deadline.
BUILDERS = 16
# Reports kept drawn (each a few MB of SVG): the runs a lab looks at this morning.
REPORTS_KEPT = 8
# Figures kept of machines' histories (a few per machine): the overview's cells, the graphs' series.
FIGURES_KEPT = 512

T = TypeVar("T")


class Unavailable(Exception):
    """The store did not answer (in time, or at all): the page is a 503."""


class NotFound(UserError):
    """A run, machine, summary or series the store does not hold: the page is a 404."""


def bounded_url(url: str) -> str:
    """The store's URL with libpq's connect_timeout where it is a PostgreSQL one that sets none: a database
    host that went away must not hold a page for TCP's minutes."""
    if "://" not in url:
        return url
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "postgresql" or "connect_timeout" in parsed.query:
        return url
    return parsed.update_query_dict({"connect_timeout": str(CONNECT_TIMEOUT_S)}).render_as_string(
        hide_password=False)


class Reports:
    """Each run's (or pair's) HTML report as `mosbench report` writes it, drawn once per state of its runs.
    matplotlib's pyplot is one state per process: reports are drawn one at a time."""

    def __init__(self, kept: int = REPORTS_KEPT) -> None:
        self._drawn: collections.OrderedDict[tuple, str] = collections.OrderedDict()
        self._kept = kept
        self._lock = threading.Lock()

    def html(self, db: store.Store, runs: list[dict[str, Any]]) -> str:
        from mosbench.report import html as report_html  # matplotlib: only when a report is asked for

        key = tuple((r["id"], r["status"], r["finished_at"], _points(db, r["id"])) for r in runs)
        with self._lock:
            if key in self._drawn:
                self._drawn.move_to_end(key)
                return self._drawn[key]
            with tempfile.TemporaryDirectory(prefix="mosbench-serve-") as where:
                output = report_html.write(db, [str(r["id"]) for r in runs], Path(where) / "report.html",
                                           parallel=False)
                drawn = output.read_text()
            self._drawn[key] = drawn
            while len(self._drawn) > self._kept:
                self._drawn.popitem(last=False)
            return drawn


def _points(db: store.Store, run_id: int) -> int:
    """How many points a run holds (a running run's report grows with them)."""
    with db.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).where(store.points.c.run_id == run_id)).scalar_one())


class Lab:
    """The store and what is kept of it, for the app's threads."""

    def __init__(self, store_url: str, tree: Path | None = None, timeout_s: float = STORE_TIMEOUT_S) -> None:
        self.db = store.Store(bounded_url(store_url), create=False)
        self.alerts = AlertIndex(self.db)
        self.triage = TriageBook(self.db)
        self.reports = Reports()
        self.tree = tree
        self.timeout_s = timeout_s
        self.warming = False
        self._builders = concurrent.futures.ThreadPoolExecutor(BUILDERS, thread_name_prefix="mosbench-page")
        self._kept: collections.OrderedDict[tuple[str, int], tuple[Any, Any]] = collections.OrderedDict()
        self._kept_lock = threading.Lock()

    def kept(self, what: str, history: Any, compute: Callable[[Any], T]) -> T:
        """compute(history), kept for as long as the alert index hands out this History (the machine's newest
        run unchanged): a lab's machine holds 500 runs × 200 series, and a page must not walk them all."""
        key = (what, id(history))
        with self._kept_lock:
            found = self._kept.get(key)
            if found is not None and found[0] is history:  # the History itself is held: its id is not reused
                self._kept.move_to_end(key)
                return found[1]
        value = compute(history)
        with self._kept_lock:
            self._kept[key] = (history, value)
            while len(self._kept) > FIGURES_KEPT:
                self._kept.popitem(last=False)
        return value

    def answer(self, build: Callable[..., T], *args: Any, slow: str | None = None) -> T:
        """build(self, *args) on a builder thread, within the deadline; Unavailable when the store does not
        answer, in time or at all. slow: what to say when the deadline passes on work that is long by nature
        (it goes on, and keeps what it makes)."""
        future = self._builders.submit(build, self, *args)
        try:
            return future.result(timeout=self.timeout_s)
        except concurrent.futures.TimeoutError:
            log.warning("%s: no answer within %g s", getattr(build, "__name__", build), self.timeout_s)
            if slow is not None:
                raise Unavailable(slow) from None
            if self.warming:
                raise Unavailable("the lab's alerts are being computed for the first time (every machine's "
                                  "history): try again in a minute") from None
            raise Unavailable(f"the results store did not answer within {self.timeout_s:g} s") from None
        except store.StoreError as e:
            log.warning("%s", e)
            raise Unavailable("the results store is not answering") from None
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as e:
            log.warning("the results store failed: %s", e.orig)
            raise Unavailable("the results store is not answering") from None

    def run(self, run_id: int) -> dict[str, Any]:
        """A stored run by id; NotFound in this layer's words (the store's name the store's URL)."""
        try:
            return self.db.run(run_id)
        except store.StoreError:
            raise
        except UserError:
            raise NotFound(f"no run {run_id} in the store") from None

    def warm(self) -> None:
        """Computes every machine's alerts once, so that the first visitor does not wait for them all."""
        self.warming = True
        try:
            self.alerts.summaries()
        except Exception as e:  # the pages will say it when asked; the server goes on
            log.warning("the alerts could not be computed ahead: %s", e)
        finally:
            self.warming = False

    def close(self) -> None:
        self._builders.shutdown(wait=False, cancel_futures=True)
        self.db.engine.dispose()
