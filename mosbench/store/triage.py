"""Triage of the lab's alert summaries (analysis/alerts.py), kept in the store: Perfherder's states, a note and
a link, who set them and when; for a summary and for each of its alerts.

A summary is known by a stable integer id. Triage follows the change, not its exact boundary: new runs can
move a change by a run or two (a level's first runs read the other way as noise places them), add a series
to its summary, or name its sides otherwise (a boundary that moved across a release), and what was said of it
stays. `TriageBook.ids` gives each summary the id of the one it continues: the one stored under the same
sides, else the one that shares the most of its alerts (machine and series) with both boundaries within
NEAR_RUNS runs of that machine; a summary that continues none gets a new id. Each id keeps the sides and
alerts it was last seen with, so it follows a change that keeps moving.

The store is below the analysis, so summaries come in as anything with their fields (SummaryLike).
Migration v5 (store/db.py) makes these tables in a store made before them. A database that stops answering
is the store's StoreError here too, as in every Store method (a server's 503).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import sqlalchemy as sa

from mosbench.errors import UserError
from mosbench.store.db import Store, metadata, now, runs

STATES = ("untriaged", "acknowledged", "investigating", "invalid", "fixed", "backed-out", "wontfix")
UNTRIAGED = STATES[0]
# A boundary that new runs moved by this many of its machine's runs or fewer is the same change.
NEAR_RUNS = 2
LONGEST_NOTE = 10_000  # characters: a note says what was found, a page holds it
LONGEST_LINK = 2_000  # a URL's practical limit in browsers
LONGEST_NAME = 200  # who set it: a token's name (the column's width)
LINK_SCHEMES = ("http", "https")  # a bug tracker's page; never javascript: or data: in a page's href

AlertKey = tuple[str, str, str, str]  # (hostname, workload, test, variant): analysis.alerts.Alert.key()

summaries_table = sa.Table(
    "triage_summaries", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("sides", sa.String(400), nullable=False, unique=True),  # the summary's key as last seen: A..B
    # Its alerts as last seen: [hostname, workload, test, variant, before_run, after_run] each.
    sa.Column("alerts", sa.JSON, nullable=False),
    sa.Column("state", sa.String(20), nullable=False),
    sa.Column("note", sa.Text, nullable=False),
    sa.Column("link", sa.Text, nullable=False),
    sa.Column("set_by", sa.String(200)),
    sa.Column("set_at", sa.DateTime(timezone=True)),
    sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),  # when an id was first given to it
)

alerts_table = sa.Table(
    "triage_alerts", metadata,
    sa.Column("summary_id", sa.Integer, sa.ForeignKey("triage_summaries.id", ondelete="CASCADE"), nullable=False),
    sa.Column("hostname", sa.String(200), nullable=False),
    sa.Column("workload", sa.String(100), nullable=False),
    sa.Column("test", sa.String(100), nullable=False),
    sa.Column("variant", sa.String(100), nullable=False),
    sa.Column("state", sa.String(20), nullable=False),
    sa.Column("note", sa.Text, nullable=False),
    sa.Column("set_by", sa.String(200)),
    sa.Column("set_at", sa.DateTime(timezone=True)),
    sa.PrimaryKeyConstraint("summary_id", "hostname", "workload", "test", "variant", name="one_alert_triage"),
)


class AlertLike(Protocol):
    """What triage reads of an alert (analysis.alerts.Alert)."""

    @property
    def hostname(self) -> str: ...
    @property
    def workload(self) -> str: ...
    @property
    def test(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def before_run(self) -> int: ...
    @property
    def after_run(self) -> int: ...


class SummaryLike(Protocol):
    """What triage reads of a summary (analysis.alerts.Summary)."""

    @property
    def key(self) -> str: ...
    @property
    def alerts(self) -> Sequence[AlertLike]: ...


@dataclass(frozen=True)
class AlertTriage:
    state: str
    note: str
    set_by: str | None
    set_at: dt.datetime | None

    def as_json(self) -> dict[str, Any]:
        return {"state": self.state, "note": self.note, "set_by": self.set_by,
                "set_at": self.set_at.isoformat() if self.set_at else None}


@dataclass(frozen=True)
class Triage:
    summary_id: int
    state: str
    note: str
    link: str
    set_by: str | None
    set_at: dt.datetime | None
    alerts: dict[AlertKey, tuple[str, str]]  # Alert.key() -> (state, note), where set for that alert
    alert_details: dict[AlertKey, AlertTriage]  # the same with who set each and when

    def alert_state(self, key: AlertKey) -> str:
        """An alert's state: its own where set, else its summary's."""
        return self.alerts[key][0] if key in self.alerts else self.state

    def as_json(self) -> dict[str, Any]:
        return {"id": self.summary_id, "state": self.state, "note": self.note, "link": self.link,
                "set_by": self.set_by, "set_at": self.set_at.isoformat() if self.set_at else None,
                "alerts": [{"hostname": k[0], "workload": k[1], "test": k[2], "variant": k[3], **t.as_json()}
                           for k, t in sorted(self.alert_details.items())]}


def _utc(t: dt.datetime | None) -> dt.datetime | None:
    """SQLite hands a time back without its zone (mosbench writes only UTC)."""
    return t.replace(tzinfo=dt.UTC) if t is not None and t.tzinfo is None else t


def _alert_rows(s: SummaryLike) -> list[list[Any]]:
    return sorted([a.hostname, a.workload, a.test, a.variant, int(a.before_run), int(a.after_run)]
                  for a in s.alerts)


def check_state(state: str) -> str:
    if state not in STATES:
        raise UserError(f"no triage state {state!r}: one of {', '.join(STATES)}")
    return state


def check_note(note: str) -> str:
    if len(note) > LONGEST_NOTE:
        raise UserError(f"a note of {len(note):,} characters: at most {LONGEST_NOTE:,}")
    return note


def check_link(link: str) -> str:
    """A link is empty (none) or an http(s) URL with a host: a page shows it as a link."""
    if not link:
        return link
    if len(link) > LONGEST_LINK:
        raise UserError(f"a link of {len(link):,} characters: at most {LONGEST_LINK:,}")
    try:
        parts = urlsplit(link)
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in LINK_SCHEMES or not parts.netloc or any(
            c.isspace() for c in link):
        raise UserError(f"a link is an http or https URL (a bug, a mailing-list thread), not {link[:80]!r}")
    return link


class _Positions:
    """Each machine's runs in time order (history's default), to tell how many runs apart two boundaries are."""

    def __init__(self, db: Store) -> None:
        with db._reaching(), db.engine.connect() as conn:
            rows = conn.execute(sa.select(runs.c.id, runs.c.hostname).order_by(runs.c.started_at, runs.c.id)).all()
        self.place: dict[int, tuple[str, int]] = {}
        counts: dict[str, int] = {}
        for run_id, host in rows:
            host = host or "?"
            self.place[run_id] = (host, counts.get(host, 0))
            counts[host] = counts.get(host, 0) + 1

    def apart(self, a: int, b: int) -> int | None:
        """How many runs of their machine lie between runs a and b (0: the same run); None where either is gone
        or they are two machines'."""
        pa, pb = self.place.get(a), self.place.get(b)
        if pa is None or pb is None or pa[0] != pb[0]:
            return None
        return abs(pa[1] - pb[1])


@dataclass
class _Stored:
    id: int
    sides: str
    alerts: list[list[Any]]


def _continues(s: SummaryLike, stored: _Stored, positions: _Positions) -> tuple[int, int] | None:
    """(alerts shared, how far their boundaries moved in all) where `s` continues `stored`: alerts of the same
    machine and series whose boundaries both moved NEAR_RUNS runs or fewer."""
    by_series: dict[tuple[str, str, str, str], list[tuple[int, int]]] = {}
    for host, workload, test, variant, before, after in stored.alerts:
        by_series.setdefault((host, workload, test, variant), []).append((before, after))
    shared = moved = 0
    for a in s.alerts:
        nearest = None
        for before, after in by_series.get((a.hostname, a.workload, a.test, a.variant), []):
            d_before, d_after = positions.apart(a.before_run, before), positions.apart(a.after_run, after)
            if d_before is None or d_after is None or max(d_before, d_after) > NEAR_RUNS:
                continue
            nearest = min(nearest if nearest is not None else d_before + d_after, d_before + d_after)
        if nearest is not None:
            shared += 1
            moved += nearest
    return (shared, moved) if shared else None


class TriageBook:
    """The store's triage: ids for summaries, and what was said of each."""

    def __init__(self, db: Store) -> None:
        self.db = db
        self._lock = threading.Lock()  # one server's threads: ids are made once
        self._known: dict[tuple[tuple[str, tuple[tuple[Any, ...], ...]], ...], dict[str, int]] = {}

    def ids(self, summaries: Sequence[SummaryLike]) -> dict[str, int]:
        """Summary.key -> its stable id, made the first time a summary is seen; a summary that continues a
        stored one (the same sides, or its alerts near the stored one's) gets that one's id."""
        asked = tuple(sorted((s.key, tuple(map(tuple, _alert_rows(s)))) for s in summaries))
        with self._lock:
            if asked in self._known:
                return dict(self._known[asked])
            try:
                found = self._ids(summaries)
            except sa.exc.IntegrityError:
                found = self._ids(summaries)  # another server gave one of these sides an id first: read it
            self._known = {asked: found}  # the newest only: summaries change when runs come, never back
            return dict(found)

    def _ids(self, summaries: Sequence[SummaryLike]) -> dict[str, int]:
        positions = _Positions(self.db)
        with self.db._reaching(), self.db.engine.begin() as conn:
            stored = [_Stored(i, sides, list(alerts)) for i, sides, alerts in conn.execute(
                sa.select(summaries_table.c.id, summaries_table.c.sides, summaries_table.c.alerts))]
            by_sides = {s.sides: s for s in stored}
            claimed: dict[str, _Stored] = {}
            for s in summaries:
                if s.key in by_sides:
                    claimed[s.key] = by_sides[s.key]
            taken = {st.id for st in claimed.values()}
            # The strongest continuations first: a change that split gives its id to the part most like it.
            offers = sorted(((c, s.key, st) for s in summaries if s.key not in claimed for st in stored
                             if st.id not in taken and (c := _continues(s, st, positions)) is not None),
                            key=lambda o: (-o[0][0], o[0][1], o[2].id))
            for _, key, st in offers:
                if key not in claimed and st.id not in taken:
                    claimed[key] = st
                    taken.add(st.id)
            out = {}
            # No two get the same sides: a stored summary under sides that are asked for was claimed by them.
            for s, st in [(s, claimed[s.key]) for s in summaries if s.key in claimed]:
                rows = _alert_rows(s)
                if st.sides != s.key or st.alerts != rows:
                    conn.execute(summaries_table.update().where(summaries_table.c.id == st.id)
                                 .values(sides=s.key, alerts=rows))
                out[s.key] = st.id
            for s in summaries:
                if s.key not in out:
                    out[s.key] = int(conn.execute(summaries_table.insert().values(
                        sides=s.key, alerts=_alert_rows(s), state=UNTRIAGED, note="", link="",
                        seen_at=now())).inserted_primary_key[0])
        return out

    def of(self, summary_id: int) -> Triage:
        """What was said of a summary (untriaged, no note, where nothing was); UserError for an unknown id."""
        found = self.all([summary_id])
        if summary_id not in found:
            raise UserError(f"no alert summary {summary_id}")
        return found[summary_id]

    def all(self, ids: Sequence[int] | None = None) -> dict[int, Triage]:
        """Every summary's triage by id (of `ids` only, where given)."""
        query = sa.select(summaries_table)
        alert_query = sa.select(alerts_table)
        if ids is not None:
            query = query.where(summaries_table.c.id.in_(list(ids)))
            alert_query = alert_query.where(alerts_table.c.summary_id.in_(list(ids)))
        with self.db._reaching(), self.db.engine.connect() as conn:
            heads = conn.execute(query).mappings().all()
            per_alert = conn.execute(alert_query).mappings().all()
        details: dict[int, dict[AlertKey, AlertTriage]] = {}
        for r in per_alert:
            details.setdefault(r["summary_id"], {})[(r["hostname"], r["workload"], r["test"], r["variant"])] = \
                AlertTriage(r["state"], r["note"], r["set_by"], _utc(r["set_at"]))
        out = {}
        for r in heads:
            mine = details.get(r["id"], {})
            out[r["id"]] = Triage(r["id"], r["state"], r["note"], r["link"], r["set_by"], _utc(r["set_at"]),
                                  {k: (t.state, t.note) for k, t in mine.items()}, mine)
        return out

    def set(self, summary_id: int, state: str, note: str | None, link: str | None, by: str,
            alert: AlertKey | None = None) -> Triage:
        """Sets a summary's state (and note, link: None keeps what was there), or one alert's state and note,
        as `by` at this moment. UserError for an unknown state, id or alert, a link that is no http(s) URL, or
        a note or link too long; nothing changes then."""
        check_state(state)
        if note is not None:
            check_note(note)
        if link is not None:
            check_link(link)
        if not by or len(by) > LONGEST_NAME:
            raise UserError(f"triage is set by a name of 1 to {LONGEST_NAME} characters")
        if alert is not None and link:
            raise UserError("a link is the summary's: set it without an alert")
        with self.db._reaching(), self.db.engine.begin() as conn:
            row = conn.execute(sa.select(summaries_table.c.alerts).where(summaries_table.c.id == summary_id)).first()
            if row is None:
                raise UserError(f"no alert summary {summary_id}")
            at = now()
            if alert is None:
                values: dict[str, Any] = {"state": state, "set_by": by, "set_at": at}
                values.update({k: v for k, v in (("note", note), ("link", link)) if v is not None})
                conn.execute(summaries_table.update().where(summaries_table.c.id == summary_id).values(**values))
            else:
                key = tuple(alert)
                if key not in {tuple(a[:4]) for a in row[0]}:
                    raise UserError(f"alert summary {summary_id} has no alert of {'/'.join(key)}")
                where = sa.and_(alerts_table.c.summary_id == summary_id, alerts_table.c.hostname == key[0],
                                alerts_table.c.workload == key[1], alerts_table.c.test == key[2],
                                alerts_table.c.variant == key[3])
                had = conn.execute(sa.select(alerts_table.c.note).where(where)).first()
                if had is None:
                    conn.execute(alerts_table.insert().values(
                        summary_id=summary_id, hostname=key[0], workload=key[1], test=key[2], variant=key[3],
                        state=state, note=note or "", set_by=by, set_at=at))
                else:
                    conn.execute(alerts_table.update().where(where).values(
                        state=state, note=had[0] if note is None else note, set_by=by, set_at=at))
        return self.of(summary_id)
