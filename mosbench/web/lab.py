"""What the pages read, kept for the server's life: the store, the alert summaries computed from it (kept
and recomputed per machine only when its newest run changes: analysis/alerts), the triage book, and each
run's HTML report once drawn (reports.py: in a process of its own). Every page's record is built here under a
deadline, so a store that stops answering costs a page a 503 after STORE_TIMEOUT_S, never the server its
threads."""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa

from mosbench.analysis.alerts import AlertIndex
from mosbench.errors import UserError
from mosbench.store import db as store
from mosbench.store.triage import TriageBook
from mosbench.web.deadline import STORE_TIMEOUT_S
from mosbench.web.reports import REPORT_WAIT_S, Busy, Drawing, Drawn, Reports

log = logging.getLogger("mosbench.web")

# A PostgreSQL that does not accept a connection in this long is taken as down (libpq's connect_timeout).
CONNECT_TIMEOUT_S = 5
# Records built at once, each on a thread of its own; a request past them waits, under the same deadline.
BUILDERS = 16
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


def points_of(db: store.Store, run_id: int) -> int:
    """How many points a run holds (a running run's report grows with them)."""
    with db.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).where(store.points.c.run_id == run_id)).scalar_one())


class Lab:
    """The store and what is kept of it, for the app's threads."""

    def __init__(self, store_url: str, tree: Path | None = None, timeout_s: float = STORE_TIMEOUT_S) -> None:
        self.db = store.Store(bounded_url(store_url), create=False)
        self.alerts = AlertIndex(self.db)
        self.triage = TriageBook(self.db)
        self.reports = Reports(bounded_url(store_url))
        self.tree = tree
        self.timeout_s = timeout_s
        # A report drawn within this is the answer; one that takes longer is said to be drawn, well before the
        # deadline passes.
        self.report_wait_s = min(REPORT_WAIT_S, timeout_s / 2)
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

    def answer(self, build: Callable[..., T], *args: Any) -> T:
        """build(self, *args) on a builder thread, within the deadline; Unavailable when the store does not
        answer, in time or at all."""
        future = self._builders.submit(build, self, *args)
        try:
            return future.result(timeout=self.timeout_s)
        except concurrent.futures.TimeoutError:
            log.warning("%s: no answer within %g s", getattr(build, "__name__", build), self.timeout_s)
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

    def report(self, run_ids: tuple[int, ...]) -> Drawn | Drawing:
        """The report of these runs as they are now (each one's status, end and points), drawn and kept once per
        such state; Drawing while it is drawn past report_wait_s."""
        found = [self.run(i) for i in run_ids]
        state = tuple((r["id"], r["status"], r["finished_at"], points_of(self.db, r["id"])) for r in found)
        try:
            return self.reports.html(state, run_ids, self.report_wait_s)
        except Busy as e:
            raise Unavailable(str(e)) from None

    def warm_in_background(self) -> None:
        """warm() on a thread of its own, `warming` set before any request can come: the overview answers
        meanwhile with what is computed so far (overview.py)."""
        self.warming = True
        threading.Thread(target=self.warm, name="mosbench-warm", daemon=True).start()

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
        self.reports.close()
        self.db.engine.dispose()
