"""The results store: SQLite by default, PostgreSQL by URL, through SQLAlchemy Core.

Every point is committed the moment it is measured. The schema is versioned: `MIGRATIONS[i]` takes a
store from version i to i+1, and opening a store applies whatever it lacks. A command that only reads
opens with create=False: a store that is not there, or a file that is not a store, is refused in one
line and nothing is made.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from mosbench.errors import UserError
from mosbench.printable import quoted
from mosbench.store.location import DEFAULT_PATH


class StoreError(UserError):
    """The store stopped answering after it was opened (a database server that went away)."""

metadata = sa.MetaData()

schema_version = sa.Table("schema_version", metadata, sa.Column("version", sa.Integer, nullable=False))

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("label", sa.String(200)),
    # running, complete, incomplete (interrupted, resumable), killed (its harness died; resumable)
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
    sa.Column("hostname", sa.String(200)),
    sa.Column("command", sa.Text),
    sa.Column("plan", sa.JSON, nullable=False),
    sa.Column("environment", sa.JSON, nullable=False),
)

points = sa.Table(
    "points", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("workload", sa.String(100), nullable=False),
    sa.Column("test", sa.String(100), nullable=False),
    sa.Column("variant", sa.String(100), nullable=False),
    sa.Column("cores", sa.Integer, nullable=False),
    sa.Column("trial", sa.Integer, nullable=False),
    sa.Column("status", sa.String(20), nullable=False),  # ok, failed
    sa.Column("reason", sa.Text),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("cpus", sa.Text, nullable=False),
    sa.Column("loadgen_cpus", sa.Text),
    sa.Column("loadgen_shared", sa.Boolean),
    sa.Column("unit", sa.String(50)),
    sa.Column("window_s", sa.Float),
    sa.Column("work", sa.Float),
    sa.Column("throughput", sa.Float),  # units of work per second, all cores
    sa.Column("user_s", sa.Float),  # /proc/stat over the measured CPUs, the window
    sa.Column("system_s", sa.Float),
    sa.Column("idle_s", sa.Float),
    sa.Column("steal_s", sa.Float),
    sa.Column("cgroup_user_s", sa.Float),  # the workload's own tree, where the cgroup keeps it
    sa.Column("cgroup_system_s", sa.Float),
    sa.Column("loadgen_user_s", sa.Float),  # the load generator's own group (v2)
    sa.Column("loadgen_system_s", sa.Float),
    sa.Column("metrics", sa.JSON),
    sa.Column("samples", sa.JSON),
    sa.Column("logs", sa.Text),
    sa.Column("profile", sa.JSON),  # --profile: folded stacks of the window (run/profiler.py)
    # The share of the measured CPUs' time over the window that programs outside the point took (and
    # steal), machine/interference.py; interfered: above the run's --max-interference.
    sa.Column("interference", sa.Float),
    sa.Column("interfered", sa.Boolean),
    sa.UniqueConstraint("run_id", "workload", "test", "variant", "cores", "trial", name="one_point"),
)
sa.Index("points_by_run", points.c.run_id)


class PointRow(NamedTuple):
    """Which point a stored trial is of, in the store's terms (it lies below analysis' cells.PointKey)."""

    workload: str
    test: str
    variant: str
    cores: int


class TrialRow(NamedTuple):
    """One stored trial's key, as a resumed run skips it (run/plan's TrialKey is made from it)."""

    workload: str
    test: str
    variant: str
    cores: int
    trial: int


class HistoryRow(NamedTuple):
    """One trial as history reads it: no metrics, samples or logs."""

    run_id: int
    workload: str
    test: str
    variant: str
    cores: int
    throughput: float | None  # all cores'
    ok: bool  # its status "ok"
    interfered: bool


def _v1(conn: Connection) -> None:
    metadata.create_all(conn, tables=[runs, points])


def _v2(conn: Connection) -> None:
    """The load generator's CPU time, accounted apart from the server's."""
    have = {c["name"] for c in sa.inspect(conn).get_columns("points")}
    for name in ("loadgen_user_s", "loadgen_system_s"):
        if name not in have:  # a store made at v1 by an older mosbench; a new one has them from create_all
            conn.execute(sa.text(f"ALTER TABLE points ADD COLUMN {name} FLOAT"))


def _v3(conn: Connection) -> None:
    """Each point's profile (folded stacks of its window), with --profile."""
    if "profile" not in {c["name"] for c in sa.inspect(conn).get_columns("points")}:
        conn.execute(sa.text("ALTER TABLE points ADD COLUMN profile JSON"))


def _v4(conn: Connection) -> None:
    """What else ran on a point's CPUs during its window, and whether that was too much."""
    have = {c["name"] for c in sa.inspect(conn).get_columns("points")}
    for name, kind in (("interference", "FLOAT"), ("interfered", "BOOLEAN")):
        if name not in have:
            conn.execute(sa.text(f"ALTER TABLE points ADD COLUMN {name} {kind}"))


def _v5(conn: Connection) -> None:
    """Triage of the lab's alert summaries, as v5 made its tables (store/triage.py defines them on `metadata`
    and reads them; it imports this module, so this step states them itself, as an Alembic step would)."""
    v5 = sa.MetaData()
    sa.Table("triage_summaries", v5,
             sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
             sa.Column("sides", sa.String(400), nullable=False, unique=True),
             sa.Column("alerts", sa.JSON, nullable=False),
             sa.Column("state", sa.String(20), nullable=False), sa.Column("note", sa.Text, nullable=False),
             sa.Column("link", sa.Text, nullable=False), sa.Column("set_by", sa.String(200)),
             sa.Column("set_at", sa.DateTime(timezone=True)),
             sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False))
    sa.Table("triage_alerts", v5,
             sa.Column("summary_id", sa.Integer, sa.ForeignKey("triage_summaries.id", ondelete="CASCADE"),
                       nullable=False),
             *(sa.Column(name, sa.String(width), nullable=False) for name, width in
               (("hostname", 200), ("workload", 100), ("test", 100), ("variant", 100), ("state", 20))),
             sa.Column("note", sa.Text, nullable=False), sa.Column("set_by", sa.String(200)),
             sa.Column("set_at", sa.DateTime(timezone=True)),
             sa.PrimaryKeyConstraint("summary_id", "hostname", "workload", "test", "variant", name="one_alert_triage"))
    v5.create_all(conn)


MIGRATIONS: list[Callable[[Connection], None]] = [_v1, _v2, _v3, _v4, _v5]
SCHEMA_VERSION = len(MIGRATIONS)


def url_from(store: str | None, create: bool = True) -> str:
    """The store's URL; with create, an SQLite file's folder is made."""
    store = store or os.environ.get("MOSBENCH_STORE")
    if store and "://" in store:
        return store
    path = store or str(DEFAULT_PATH)  # a plain path means an SQLite file
    if create:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


# libpq's settings for a PostgreSQL store's connections, each where the URL leaves it out (a URL sets its own as
# libpq reads them: ?connect_timeout=3). A server that does not answer a new connection within connect_timeout
# seconds is refused, and said to be. One that stops answering once connected (its machine gone, the network
# cut) is found by TCP itself: keepalive probes after keepalives_idle seconds of silence,
# and tcp_user_timeout ends the connection once what was sent or probed has gone unacknowledged 30 s, so a
# command waiting on it fails within about that, its committed points kept. Not statement_timeout: the server
# enforces it, so it cannot end a wait on a server that is gone, and it would cut a long legitimate query (the
# history of every night of a large lab, a big run imported), which the server's kernel keeps acknowledging.
LIBPQ_DEFAULTS = {"connect_timeout": "10", "keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5",
                  "keepalives_count": "4", "tcp_user_timeout": "30000"}
_LIBPQ_DRIVERS = ("psycopg", "psycopg2")  # the drivers over libpq, which read these settings


def libpq_settings(url: str) -> dict[str, str]:
    """What LIBPQ_DEFAULTS adds to the connections of the store at `url`: the settings its URL leaves out;
    none for SQLite or a driver other than libpq's."""
    u = sa.engine.make_url(url)
    if u.get_backend_name() != "postgresql" or u.get_driver_name() not in _LIBPQ_DRIVERS:
        return {}
    return {k: v for k, v in LIBPQ_DEFAULTS.items() if k not in u.query}


def _sqlite_path(url: str) -> Path | None:
    """The file of an SQLite store's URL; None for another database or one in memory."""
    try:
        u = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        return None  # said by create_engine, in its own words
    return Path(u.database) if u.get_backend_name() == "sqlite" and u.database not in (None, "", ":memory:") else None


def _check_sqlite_store(path: Path) -> None:
    """An SQLite store that a reading command may open: there, and a mosbench store, found without
    writing to it (opening it as a store would set its journal mode: a write)."""
    if not path.exists():
        raise UserError(f"no results store at {path} (`mosbench run` makes one; --store or MOSBENCH_STORE "
                        "names another)")
    if path.is_dir():
        raise UserError(f"store {path} is a directory, not a mosbench results store")
    if path.stat().st_size == 0:
        raise UserError(f"store {path} is an empty file, not a mosbench results store")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
                                 ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error as e:
        raise UserError(f"store {path} is not a mosbench results store: {e}") from None
    if found is None:
        raise UserError(f"store {path} is not a mosbench results store (it has no schema_version table)")


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=10000")
    cur.close()


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _row(mapping) -> dict[str, Any]:
    """A row as a dict, its times in UTC whatever the backend: SQLite hands back what it was given
    without the zone (mosbench writes only UTC), PostgreSQL with it."""
    return {k: v.replace(tzinfo=dt.UTC) if isinstance(v, dt.datetime) and v.tzinfo is None else v
            for k, v in mapping.items()}


@contextlib.contextmanager
def _no_cycle_collection():
    """Python's cycle collector paused while rows are decoded: JSON makes no cycles, and a run's
    hundreds of thousands of new dicts and lists set off full collections that walked the whole
    growing heap (a quarter of `show`'s time at 5,000 points)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Stacks:
    """Profiles decoded with one string per distinct folded stack: a test's trials and core counts
    sample the same stacks, each a few hundred characters, and a run's thousand profiles of a few
    thousand stacks each took gigabytes as separate copies."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}

    def decode(self, text: str | None) -> dict[str, Any] | None:
        if text is None:
            return None
        profile = json.loads(text)
        if isinstance(profile, dict) and isinstance(profile.get("stacks"), dict):
            seen = self.seen
            profile["stacks"] = {seen.setdefault(stack, stack): n for stack, n in profile["stacks"].items()}
        return profile


class Store:
    def __init__(self, url: str | None = None, create: bool = True):
        """The store at url (an SQLite path or a SQLAlchemy URL; by default MOSBENCH_STORE, else
        DEFAULT_PATH), made where it is not there. create=False, for the commands that only read: one
        that is not there, or is not a mosbench store, is a UserError and nothing is made."""
        self.url = url_from(url, create)
        file = None if create else _sqlite_path(self.url)
        if file is not None:
            _check_sqlite_store(file)
        try:
            self.engine: Engine = sa.create_engine(self.url, future=True, connect_args=libpq_settings(self.url))
            if self.engine.dialect.name == "sqlite":
                event.listen(self.engine, "connect", _sqlite_pragmas)
            if not create and file is None:
                self._check_store()
            self._migrate()
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as e:
            raise UserError(f"bad store URL {quoted(self.url)}: {e}") from None
        except sa.exc.OperationalError as e:
            raise UserError(f"cannot open store {self.shown_url}: {self._refusal(e.orig)}") from None
        except sa.exc.DatabaseError as e:
            raise UserError(f"store {self.shown_url} is not a mosbench results store: {e.orig}") from None
        except ModuleNotFoundError as e:
            raise UserError(f"store {self.shown_url} needs the Python module {e.name!r}") from None

    def _refusal(self, said: BaseException | None) -> str:
        """Why a connection was refused, its first line; a timeout as the setting that gave up waiting."""
        lines = str(said).strip().splitlines()
        first = lines[0] if lines else type(said).__name__
        if "timeout" not in first.lower():
            return first
        u = sa.engine.make_url(self.url)
        wait = u.query.get("connect_timeout", LIBPQ_DEFAULTS["connect_timeout"])
        return (f"timed out: no answer within {wait} s (connect_timeout; the URL sets another as "
                "?connect_timeout=N)")

    @property
    def shown_url(self) -> str:
        """The URL as a person may see it: a password is hidden."""
        return sa.engine.make_url(self.url).render_as_string(hide_password=True)

    @contextlib.contextmanager
    def _reaching(self):
        try:
            yield
        except (sa.exc.OperationalError, sa.exc.InterfaceError) as e:  # lost, not refused: a constraint is a bug
            said = str(e.orig).strip().splitlines()
            reason = said[0] if said else type(e.orig).__name__
            raise StoreError(f"the results store {self.shown_url} failed: {reason}") from None
        except ValueError:
            # A row this mosbench cannot read back, which another program (or a bad restore) wrote: a date
            # of 2026-11-31 stored as text in SQLite.
            if (said := self._unreadable()) is None:
                raise
            raise UserError(said) from None

    def _unreadable(self) -> str | None:
        """The first stored value that cannot be read back as its column's type, said as one line naming its
        run (and point) and column; None where every value reads. Looked for only once a read has failed."""
        with self.engine.connect() as conn:
            dialect = conn.dialect
            for table, column in _DECODED:
                decode = column.type.dialect_impl(dialect).result_processor(dialect, None)
                if decode is None:  # the driver hands back the type itself (PostgreSQL's dates, JSON)
                    continue
                keys = [table.c.id] if table is runs else [table.c[k] for k in ("run_id", *PointRow._fields,
                                                                                  "trial")]
                found = conn.execute(sa.select(*keys, sa.cast(column, sa.Text)).where(column.is_not(None)))
                for *key, text in found:
                    try:
                        decode(text)
                    except ValueError as e:
                        where = (f"run #{key[0]}" if table is runs else
                                 f"run #{key[0]}'s point {key[1]}/{key[2]} {key[3]} at {key[4]} cores, trial {key[5]}")
                        return (f"the results store {self.shown_url} holds {where} with a {column.name} that "
                                f"cannot be read: {quoted(text, 60)} ({e}); mend or remove that row")
        return None

    def _check_store(self) -> None:
        """A database server's store, for a reading command: it holds mosbench's tables."""
        with self.engine.connect() as conn:
            if not sa.inspect(conn).has_table(schema_version.name):
                raise UserError(f"store {self.shown_url} is not a mosbench results store (it has no "
                                "schema_version table)")

    def _migrate(self) -> None:
        with self.engine.begin() as conn:
            schema_version.create(conn, checkfirst=True)
            current = conn.execute(sa.select(schema_version.c.version)).scalar()
            if current is None:
                conn.execute(schema_version.insert().values(version=0))
                current = 0
            if current > SCHEMA_VERSION:
                raise UserError(f"store schema v{current} is newer than this mosbench (v{SCHEMA_VERSION})")
            for version in range(current, SCHEMA_VERSION):
                MIGRATIONS[version](conn)
                conn.execute(schema_version.update().values(version=version + 1))

    # Runs

    def create_run(self, plan: dict, environment: dict, command: str, label: str | None = None) -> int:
        with self._reaching(), self.engine.begin() as conn:
            result = conn.execute(runs.insert().values(
                label=label, status="running", started_at=now(), hostname=environment.get("hostname"),
                command=command, plan=plan, environment=environment,
            ))
            return int(result.inserted_primary_key[0])

    def finish_run(self, run_id: int, status: str) -> None:
        with self._reaching(), self.engine.begin() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(status=status, finished_at=now()))

    def note_environment(self, run_id: int, **facts: Any) -> None:
        """Adds facts learnt once the run has started (a resumed run keeps each, per resumption, as a list)."""
        with self._reaching(), self.engine.begin() as conn:
            env = dict(conn.execute(sa.select(runs.c.environment).where(runs.c.id == run_id)).scalar_one())
            for key, value in facts.items():
                if key in env and env[key] != value:
                    value = [*(env[key] if isinstance(env[key], list) else [env[key]]), value]
                env[key] = value
            conn.execute(runs.update().where(runs.c.id == run_id).values(environment=env))

    def mark_killed(self, run_id: int) -> bool:
        """A run whose harness died without finishing it: marked "killed" if still "running"."""
        with self._reaching(), self.engine.begin() as conn:
            result = conn.execute(runs.update().where(runs.c.id == run_id, runs.c.status == "running")
                                  .values(status="killed", finished_at=now()))
            return result.rowcount > 0

    def reopen_run(self, run_id: int) -> None:
        with self._reaching(), self.engine.begin() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(status="running", finished_at=None))

    def run(self, ref: str | int) -> dict[str, Any]:
        """A run by id, or "latest"."""
        with self._reaching(), self.engine.connect() as conn:
            if str(ref) == "latest":
                row = conn.execute(sa.select(runs).order_by(runs.c.id.desc()).limit(1)).mappings().first()
            else:
                try:
                    run_id = int(ref)
                except ValueError:
                    raise UserError(f"bad run reference {quoted(ref)}: give a run id or 'latest'") from None
                row = conn.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().first()
        if row is None:
            raise UserError(f"no run {ref} in {self.shown_url}")
        return _row(row)

    def list_runs(self, with_counts: bool = True) -> list[dict[str, Any]]:
        """Every run, by id; with_counts: each one's points and failed points too (a count over the points
        table per run, which history does not need)."""
        columns: list[Any] = [runs]
        if with_counts:
            count = sa.select(sa.func.count()).where(points.c.run_id == runs.c.id).scalar_subquery()
            failed = (sa.select(sa.func.count())
                      .where(points.c.run_id == runs.c.id, points.c.status == "failed").scalar_subquery())
            columns += [count.label("points"), failed.label("failed")]
        with self._reaching(), self.engine.connect() as conn:
            rows = conn.execute(sa.select(*columns).order_by(runs.c.id)).mappings().all()
        return [_row(r) for r in rows]

    def import_run(self, source: Store, run_id: int, **environment: Any) -> int:
        """Copies run_id of another store (a guest's) into this one as a new run, every column of its
        points kept; environment adds facts to the copy's (where it ran)."""
        run = source.run(run_id)
        env = {**run["environment"], **environment}
        with self._reaching(), self.engine.begin() as conn:
            new_id = int(conn.execute(runs.insert().values(
                label=run["label"], status=run["status"], started_at=run["started_at"],
                finished_at=run["finished_at"], hostname=run["hostname"], command=run["command"],
                plan=run["plan"], environment=env)).inserted_primary_key[0])
            for p in source.points(run_id, with_logs=True, with_profiles=True):
                conn.execute(points.insert().values(**{**{k: v for k, v in p.items() if k != "id"},
                                                       "run_id": new_id}))
        return new_id

    def merge_runs(self, run_ids: list[int], label: str, command: str, **environment: Any) -> int:
        """One run made of several (the rounds an A/B comparison measured of one kernel): the first's
        plan and environment with `environment` added, every point copied, each point's trials numbered
        on across the runs in their order."""
        first = self.run(run_ids[0])
        env = {**first["environment"], **environment, "merged_from": list(run_ids)}
        statuses = {self.run(r)["status"] for r in run_ids}
        with self._reaching(), self.engine.begin() as conn:
            new_id = int(conn.execute(runs.insert().values(
                label=label, status="complete" if statuses == {"complete"} else "incomplete",
                started_at=first["started_at"], finished_at=now(), hostname=first["hostname"], command=command,
                plan=first["plan"], environment=env)).inserted_primary_key[0])
            trials: dict[PointRow, int] = {}
            for run_id in run_ids:
                for p in self.points(run_id, with_logs=True, with_profiles=True):
                    key = PointRow(p["workload"], p["test"], p["variant"], p["cores"])
                    trials[key] = trials.get(key, 0) + 1
                    conn.execute(points.insert().values(**{**{k: v for k, v in p.items() if k != "id"},
                                                           "run_id": new_id, "trial": trials[key]}))
        return new_id

    # Points

    def add_point(self, run_id: int, **values: Any) -> None:
        with self._reaching(), self.engine.begin() as conn:
            conn.execute(points.insert().values(run_id=run_id, **values))

    def points(self, run_id: int, with_logs: bool = False, with_profiles: bool = False,
               with_samples: bool = True) -> list[dict[str, Any]]:
        """A run's points; their logs and profiles (large) only when asked for, their per-second
        samples (a list of every task's rate each second: 256 CPUs' worth) unless told not to.

        Rows are decoded as they are read, a few at a time: fetched all at once, a 5,000-point run's
        JSON text was held whole beside what it decodes to. Profiles are decoded here (`_Stacks`)."""
        left_out = {name for name, wanted in (("logs", with_logs), ("profile", with_profiles),
                                              ("samples", with_samples)) if not wanted}
        cols = [sa.cast(c, sa.Text).label(c.name) if c.name == "profile" else c for c in points.c
                if c.name not in left_out]
        stacks = _Stacks()
        out = []
        with self._reaching(), _no_cycle_collection(), self.engine.connect() as conn:
            rows = conn.execution_options(yield_per=200).execute(
                sa.select(*cols).where(points.c.run_id == run_id)
                .order_by(points.c.workload, points.c.test, points.c.variant, points.c.cores, points.c.trial))
            for r in rows.mappings():
                row = _row(r)
                if with_profiles:
                    row["profile"] = stacks.decode(row["profile"])
                out.append(row)
        return out

    def history_points(self, run_ids: list[int]) -> list[HistoryRow]:
        """Every trial of the runs as history reads it, and nothing else. A store of 500 runs × 200 points is
        100,000 rows: decoding their metrics and samples would take most of `history`'s time, and the
        database decides `ok` and `interfered` (never None) so that each row is made in C."""
        wanted = sorted(set(run_ids))
        with self._reaching(), self.engine.connect() as conn:
            rows = conn.execute(sa.select(points.c.run_id, points.c.workload, points.c.test, points.c.variant,
                                          points.c.cores, points.c.throughput, points.c.status == "ok",
                                          sa.func.coalesce(points.c.interfered, sa.false()))
                                .where(points.c.run_id.in_(wanted)).order_by(points.c.run_id, points.c.trial))
            return list(map(HistoryRow._make, rows))

    def done_keys(self, run_id: int) -> set[TrialRow]:
        with self._reaching(), self.engine.connect() as conn:
            rows = conn.execute(sa.select(points.c.workload, points.c.test, points.c.variant,
                                          points.c.cores, points.c.trial).where(points.c.run_id == run_id))
            return set(map(TrialRow._make, rows))


# What _unreadable looks through, the small columns first: every column that is decoded as it is read.
_DECODED = tuple((c.table, c) for c in (runs.c.started_at, runs.c.finished_at, runs.c.plan, runs.c.environment,
                                        points.c.started_at, points.c.metrics, points.c.samples, points.c.profile))


def to_jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value


def dumps(rows: list[dict[str, Any]]) -> str:
    return json.dumps([{k: to_jsonable(v) for k, v in r.items()} for r in rows], indent=1)
