"""Triage of the lab's alert summaries in the store (store/triage.py): states, notes, links and who set them,
following a change whose boundary new runs moved; migration v5 of a store made before it."""

from __future__ import annotations

import datetime as dt
import os

import pytest
import sqlalchemy as sa

from mosbench.analysis import alerts
from mosbench.errors import UserError
from mosbench.store import db as store
from mosbench.store import triage
from mosbench.store.db import Store
from mosbench.testing.history_stores import fill, fill_lab


def _alert(host: str, test: str, before: int, after: int) -> alerts.Alert:
    return alerts.Alert(host, "micro", test, "procs", 8, 0.8, 0.75, 0.85, 0.001, "every core", "step", "regression",
                        before, after, ((8, 0.8, 0.75, 0.85),), ())


def _summary(*found: alerts.Alert, key: str | None = None) -> alerts.Summary:
    """Sides named by their runs, as a change on one kernel is."""
    key = key or f"#{found[0].before_run}..#{found[0].after_run}"
    before, after = key.split("..")
    return alerts.Summary(key, before, after, alerts.SIDE_BY_RUN, found, (), None, dt.datetime.now(dt.UTC))


@pytest.fixture
def runs(tmp_path) -> tuple[Store, list[int], list[int]]:
    """Two machines' runs: big's and small's ids, oldest first."""
    db = Store(str(tmp_path / "t.sqlite"))
    big = fill(db, 12, [], seed=1, tests=1, host="big")
    small = fill(db, 12, [], seed=2, tests=1, host="small", start=dt.datetime(2026, 1, 1, 1, tzinfo=dt.UTC))
    return db, big, small


def test_a_summary_keeps_its_id_and_what_was_said_of_it(runs):
    db, big, _ = runs
    book = triage.TriageBook(db)
    s = _summary(_alert("big", "t0", big[5], big[6]))
    (sid,) = book.ids([s]).values()
    assert book.ids([s]) == {s.key: sid}
    fresh = book.of(sid)
    assert (fresh.state, fresh.note, fresh.link, fresh.set_by, fresh.set_at) == ("untriaged", "", "", None, None)
    before = dt.datetime.now(dt.UTC)
    said = book.set(sid, "investigating", "bisecting on big", "https://bugzilla.kernel.org/show_bug.cgi?id=1", "ann")
    assert (said.state, said.note, said.link, said.set_by) == ("investigating", "bisecting on big",
                                                              "https://bugzilla.kernel.org/show_bug.cgi?id=1", "ann")
    assert before <= said.set_at <= dt.datetime.now(dt.UTC)
    # None keeps the note and the link; one alert's state is its own.
    assert book.set(sid, "fixed", None, None, "bob").note == "bisecting on big"
    one = book.set(sid, "invalid", "noise on big", None, "cy", alert=("big", "micro", "t0", "procs"))
    assert one.state == "fixed" and one.alerts == {("big", "micro", "t0", "procs"): ("invalid", "noise on big")}
    assert one.alert_details[("big", "micro", "t0", "procs")].set_by == "cy"
    assert one.alert_state(("big", "micro", "t0", "procs")) == "invalid"
    assert triage.TriageBook(db).all()[sid] == one  # kept in the store, not the book


def test_a_bad_state_id_alert_link_or_note_is_refused_and_nothing_changes(runs):
    db, big, _ = runs
    book = triage.TriageBook(db)
    (sid,) = book.ids([_summary(_alert("big", "t0", big[5], big[6]))]).values()
    book.set(sid, "acknowledged", "seen", "https://example.org/1", "ann")
    kept = book.all()
    for args, kwargs, said in [
        ((sid, "closed", "x", None, "ann"), {}, "no triage state 'closed'"),
        ((sid + 1, "fixed", "x", None, "ann"), {}, f"no alert summary {sid + 1}"),
        ((sid, "fixed", "x", None, "ann"), {"alert": ("small", "micro", "t0", "procs")}, "has no alert of small"),
        ((sid, "fixed", "x", "javascript:alert(1)", "ann"), {}, "http or https URL"),
        ((sid, "fixed", "x", "https://", "ann"), {}, "http or https URL"),
        ((sid, "fixed", "x" * 10_001, None, "ann"), {}, "at most 10,000"),
        ((sid, "fixed", "x", "https://a.org/x", "ann"), {"alert": ("big", "micro", "t0", "procs")}, "link is the"),
        ((sid, "fixed", "x", None, ""), {}, "set by a name"),
    ]:
        with pytest.raises(UserError, match=said):
            book.set(*args, **kwargs)
    assert book.all() == kept
    with pytest.raises(UserError, match=f"no alert summary {sid + 1}"):
        book.of(sid + 1)


def test_triage_follows_a_boundary_moved_by_one_run_and_a_series_added(runs):
    db, big, small = runs
    book = triage.TriageBook(db)
    first = _summary(_alert("big", "t0", big[5], big[6]))
    (sid,) = book.ids([first]).values()
    book.set(sid, "investigating", "bisecting", None, "ann")
    # New runs put the boundary a run later, and t1 moved there too: the same change, what was said of it kept.
    moved = _summary(_alert("big", "t0", big[6], big[7]), _alert("big", "t1", big[6], big[7]))
    assert book.ids([moved]) == {moved.key: sid}
    assert (book.of(sid).state, book.of(sid).note) == ("investigating", "bisecting")
    # It goes on following: back a run, then two further.
    back = _summary(_alert("big", "t0", big[5], big[6]))
    assert book.ids([back]) == {back.key: sid}
    on = _summary(_alert("big", "t0", big[7], big[8]))
    assert book.ids([on]) == {on.key: sid}
    # Beyond NEAR_RUNS, another machine, or another series: another change.
    far = _summary(_alert("big", "t0", big[10], big[11]))
    assert book.ids([far])[far.key] != sid and book.of(book.ids([far])[far.key]).state == "untriaged"
    other_host = _summary(_alert("small", "t0", small[7], small[8]))
    other_series = _summary(_alert("big", "t3", big[7], big[8]), key="6.1..t3")
    found = book.ids([on, other_host, other_series])
    assert found[on.key] == sid and len({*found.values(), book.ids([far])[far.key]}) == 4


def test_a_change_that_split_gives_its_id_to_the_part_most_like_it(runs):
    db, big, _ = runs
    book = triage.TriageBook(db)
    whole = _summary(*(_alert("big", t, big[5], big[6]) for t in ("t0", "t1", "t2")))
    (sid,) = book.ids([whole]).values()
    most = _summary(*(_alert("big", t, big[6], big[7]) for t in ("t0", "t1")))
    rest = _summary(_alert("big", "t2", big[4], big[5]))
    found = book.ids([rest, most])
    assert found[most.key] == sid and found[rest.key] != sid


def test_ids_of_a_lab_stay_when_a_run_comes_that_moves_nothing(tmp_path):
    db = Store(str(tmp_path / "lab.sqlite"))
    fill_lab(db)
    index, book = alerts.AlertIndex(db), triage.TriageBook(db)
    ids = book.ids(index.summaries())
    assert len(set(ids.values())) == 3
    fill(db, 1, [], seed=9, host="small2s", start=dt.datetime(2026, 3, 1, tzinfo=dt.UTC))
    again = index.summaries()
    assert triage.TriageBook(db).ids(again) == ids


def _v4_store(url: str, monkeypatch) -> None:
    """A store as today's mosbench (schema v4) makes it, with a lab's runs in it."""
    with monkeypatch.context() as m:
        m.setattr(store, "MIGRATIONS", store.MIGRATIONS[:4])
        m.setattr(store, "SCHEMA_VERSION", 4)
        old = Store(url)
        fill_lab(old)
        with old.engine.connect() as conn:
            assert conn.execute(sa.select(store.schema_version.c.version)).scalar() == 4
            assert not sa.inspect(conn).has_table("triage_summaries")
        old.engine.dispose()


def _migrated_and_used(url: str) -> None:
    db = Store(url, create=False)
    with db.engine.connect() as conn:
        assert conn.execute(sa.select(store.schema_version.c.version)).scalar() == store.SCHEMA_VERSION == 5
        inspector = sa.inspect(conn)
        for table in (triage.summaries_table, triage.alerts_table):  # v5 made what triage.py reads
            made = {c["name"]: c["nullable"] for c in inspector.get_columns(table.name)}
            assert made == {c.name: c.nullable for c in table.columns}, table.name
            assert (inspector.get_pk_constraint(table.name)["constrained_columns"]
                    == [c.name for c in table.primary_key.columns])
    assert len(db.list_runs()) == 18 * 3 + 14 * 2 + 24  # every run kept
    summaries = alerts.AlertIndex(db).summaries()
    book = triage.TriageBook(db)
    ids = book.ids(summaries)
    sid = ids["6.1.0-21..6.1.0-22"]
    book.set(sid, "backed-out", "reverted in 6.1.0-23", "https://lore.kernel.org/x", "ann")
    book.set(sid, "wontfix", "arm is fine with it", None, "bob", alert=("arm", "micro", "t1", "procs"))
    reopened = triage.TriageBook(Store(url, create=False))
    assert reopened.ids(summaries) == ids
    t = reopened.of(sid)
    assert (t.state, t.link, t.alerts) == ("backed-out", "https://lore.kernel.org/x",
                                           {("arm", "micro", "t1", "procs"): ("wontfix", "arm is fine with it")})


def test_a_store_of_todays_schema_is_migrated_in_place(tmp_path, monkeypatch):
    path = str(tmp_path / "v4.sqlite")
    _v4_store(path, monkeypatch)
    _migrated_and_used(path)


@pytest.fixture(scope="module")
def postgres():
    from mosbench.workloads.postgres import cluster as pgcluster
    from tests.pgcluster import private

    if os.geteuid() != 0 or not (pgcluster.BIN / "initdb").exists():
        pytest.skip("PostgreSQL 15 and root needed")
    with private() as c:
        yield c


def test_a_postgresql_store_of_todays_schema_is_migrated_in_place(postgres, monkeypatch):
    _v4_store(postgres.url(), monkeypatch)
    _migrated_and_used(postgres.url())
