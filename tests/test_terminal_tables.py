"""Tables a terminal can hold: every table `show`, `compare` and `model` print fits 80 columns with
realistic content (a micro test, server tests with client and limit columns, Exim's milliseconds of CPU
per message, the scaling and lock models, compare's changes, the summary and the verdicts), no number
is cut, folded or written with an exponent, and --wide shows the columns left out."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from mosbench.analysis import cells as analysis
from mosbench.analysis import compare, models, verdict
from mosbench.analysis.lockmodel import LockParams
from mosbench.report import network, rows, table
from mosbench.report.rows import Column, TableModel
from mosbench.store import db as store
from mosbench.units import cpu_time, latency, plain, si
from tests.conftest import mosbench_here

EXPONENT = re.compile(r"\d[eE][+-]?\d")
# A model's coherency of a few millionths is written 3.4e-06 (two figures of a fitted parameter, as the
# report has always written it); no number is ever written with a positive exponent.
POSITIVE_EXPONENT = re.compile(r"\d[eE]\+?\d")


def _printed(renderables, width: int = 80) -> str:
    """As a terminal of `width` columns shows them: nothing cropped, so a table drawn wider shows."""
    console = Console(file=io.StringIO(), width=width, record=True, soft_wrap=True, color_system=None)
    for r in renderables:
        console.print(r, crop=False)
    return console.export_text()


def _shown(c: Column, wide: bool) -> bool:
    return wide or (c.essential and not c.wide)


def _numbers(model: TableModel, wide: bool = False) -> list[str]:
    """The number cells a terminal shows of a model (right-aligned, not folding text)."""
    return [r.cells[i] for i, c in enumerate(model.columns) if _shown(c, wide) and not c.left and not c.wraps
            for r in model.rows]


def _assert_fits(text: str, width: int = 80, parameters: bool = False) -> None:
    """Every line in `width`, nothing cut with "…", no exponent (with the models' parameters, no "e+")."""
    lines = text.splitlines()
    widest = max(lines, key=lambda line: cell_len(line.rstrip()))
    assert cell_len(widest.rstrip()) <= width, widest
    assert "…" not in text
    exponent = (POSITIVE_EXPONENT if parameters else EXPONENT).search(text)
    assert not exponent, exponent


def _assert_whole(models: list[TableModel], text: str, wide: bool = False) -> None:
    """Each number a model's shown columns hold is on one line of the output, as the model wrote it."""
    lines = text.splitlines()
    for m in models:
        for cell in _numbers(m, wide):
            assert "…" not in cell and not POSITIVE_EXPONENT.search(cell), (m.title, cell)
            assert any(cell in line for line in lines), (m.title, cell)


def _run(db: store.Store, env: dict | None = None) -> int:
    return db.create_run({"params": {"scale": {"cs_ns": 200, "par_ns": 9800}}},
                         {"hostname": "bench-host-01.example.org", "kernel": "6.1.0-18-amd64",
                          "topology": {"cpus": [{}] * 48}, "topology_summary": "48 CPUs: 4 socket(s)", **(env or {})},
                         "mosbench run …")


def _micro(db: store.Store, run: int, scale: float = 1.0) -> None:
    for cores in (1, 2, 4, 8):
        for variant, loss in (("procs", 0.01), ("threads", 0.09)):
            for trial in (1, 2, 3):
                tp = 9.76e6 * cores * (1 - loss) ** cores * (1 - 0.003 * trial) * scale
                db.add_point(run, workload="micro", test="getppid1", variant=variant, cores=cores, trial=trial,
                             status="ok", started_at=store.now(), cpus=f"0-{cores - 1}", unit="op", window_s=1.0,
                             work=tp, throughput=tp, user_s=0.05 * cores, system_s=0.93 * cores,
                             idle_s=0.02 * cores, steal_s=0.0, samples=[])


def _servers(db: store.Store, run: int) -> None:
    """Apache driven from CPUs of its own (one trial client bound), Exim at 2.4 ms of CPU per message whose
    queue grew, and a 48-core point that failed with a long reason."""
    for cores in (1, 4, 16, 24):
        for trial in (1, 2, 3):
            w = 201_000 * cores * (1 - 0.004 * cores) * (1 - 0.01 * trial)
            db.add_point(run, workload="apache", test="", variant="per-core", cores=cores, trial=trial, status="ok",
                         started_at=store.now(), cpus=f"0-{cores - 1}", loadgen_cpus=f"{cores}-{2 * cores - 1}",
                         loadgen_shared=False, unit="request", window_s=1.0, work=w, throughput=w,
                         user_s=0.3 * cores, system_s=0.6 * cores, idle_s=0.1 * cores, steal_s=0.01 * cores,
                         cgroup_user_s=0.3 * cores, cgroup_system_s=0.6 * cores, loadgen_user_s=0.2 * cores,
                         loadgen_system_s=0.5 * cores, samples=[],
                         metrics={"client_bound": trial == 1 and cores == 24,
                                  "client_evidence": "client CPUs 100% busy", "latency_p99_us": 5830.0 * cores,
                                  "busy_spread": 0.12, "bytes_per_s": 5.1e8})
            m = 1_180 * cores * (1 - 0.01 * cores) * (1 - 0.01 * trial)
            db.add_point(run, workload="exim", test="", variant="stock", cores=cores, trial=trial, status="ok",
                         started_at=store.now(), cpus=f"0-{cores - 1}", loadgen_cpus=f"{cores}-{cores + 1}",
                         loadgen_shared=True, unit="message", window_s=1.0, work=m, throughput=m,
                         user_s=0.9 * cores, system_s=2.8 * cores, idle_s=0.02 * cores, steal_s=0.0,
                         cgroup_user_s=2.79 * cores, cgroup_system_s=0.9 * cores, loadgen_user_s=0.05,
                         loadgen_system_s=0.04, samples=[],
                         metrics={"client_bound": False, "latency_p99_us": 48_300.0,
                                  "deliveries_lag": cores >= 16, "queue_growth": 120 * cores})
    db.add_point(run, workload="exim", test="", variant="stock", cores=48, trial=1, status="failed",
                 reason="exim4 refused connections: too many concurrent SMTP connections", started_at=store.now(),
                 cpus="0-47", unit="message", window_s=1.0, samples=[])


def _locks(db: store.Store, run: int) -> None:
    for cores in (1, 2, 4, 8, 16):
        for variant, p in (("stock", LockParams(9800, 220, 35, "ticket")),
                           ("scalable", LockParams(9800, 240, 45, "scalable"))):
            for trial in (1, 2):
                tp = p.throughput(cores) * (1 - 0.01 * trial)
                db.add_point(run, workload="scale", test="lock", variant=variant, cores=cores, trial=trial,
                             status="ok", started_at=store.now(), cpus=f"0-{cores - 1}", unit="acquisition",
                             window_s=1.0, work=tp, throughput=tp, user_s=cores * 1.0, system_s=0.01, idle_s=0.0,
                             steal_s=0.0, samples=[])


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """Run 1: micro, servers and the lock; run 2: micro again, 30% faster."""
    path = tmp_path_factory.mktemp("terminal") / "s.sqlite"
    db = store.Store(str(path))
    first = _run(db)
    _micro(db, first)
    _servers(db, first)
    _locks(db, first)
    db.finish_run(first, "complete")
    second = _run(db, {"kernel": "6.8.0-31-generic"})
    _micro(db, second, 1.3)
    db.finish_run(second, "complete")
    return path


def _series(path: Path, run: int = 1) -> list[analysis.Series]:
    return analysis.build_series(store.Store(str(path)).points(run, with_samples=False))


# Numbers as a person reads them


@pytest.mark.parametrize("x", [1.234e-7, 5.35e-5, 0.000535, 0.0157, 2.0, 10.1, 601, 999.7, 2360.4, 12_345,
                               999_999, 1.23e9, 4.5e12, 1e18])
def test_no_number_is_written_with_an_exponent(x):
    for text in (plain(x), plain(-x), plain(x, 2), si(x), si(x, 2), cpu_time(x), latency(x)):
        assert not EXPONENT.search(text), text


def test_the_rule_three_figures_and_thousands():
    assert [plain(x) for x in (2360.4, 0.0157, 2.0, 0.35, 12_345, 999.7)] == [
        "2,360", "0.0157", "2", "0.35", "12,300", "1,000"]
    assert [si(x) for x in (999_999, 63.6e6, 98_765, 0)] == ["1M", "63.6M", "98.8k", "0"]
    assert si(99_600, 2) == "100k" and si(31_234, 2) == "31k"
    assert [cpu_time(x) for x in (2360.0, 0.17, 4.14e6)] == ["2.36 ms", "0.17 µs", "4.14 s"]


# Each table kind at 80 columns, in process


def test_a_micro_tests_cell_table_fits_80_columns(stored):
    (model,) = rows.cell_tables([s for s in _series(stored) if s.workload == "micro"])
    text = _printed([table.render(model)])
    _assert_fits(text)
    _assert_whole([model], text)
    header = next(line for line in text.splitlines() if line.startswith("variant"))
    for title in ("cores", "best /sec/core", "n", "±95%", "user µs", "sys µs", "idle"):
        assert title in header, header
    for title in ("cpus", "median", "min–max", "steal"):
        assert title not in header.split("  "), header


def test_server_tables_with_client_and_limit_columns_fit_80_columns(stored):
    series = [s for s in _series(stored) if s.workload in ("apache", "exim")]
    models = rows.cell_tables(series)
    text = _printed([table.render(m) for m in models])
    _assert_fits(text)
    _assert_whole(models, text)
    apache, exim = (m for m in models if m.title.startswith(("apache", "exim")))
    assert "client 1/3" in text and "limit" in text and "failed" in text
    # Exim's CPU per message in µs, as written out: thousands, not 2.41e+03.
    assert exim.column("user µs")[:4] == ["2,410", "2,490", "2,840", "3,140"] and exim.column("sys µs")[3] == "1,010"
    assert apache.column("client p99")[0] == "5.83 ms"


def test_the_network_tables_fit_80_columns(stored, tmp_path):
    from tests.test_report_network import _networked, _point

    db = store.Store(str(tmp_path / "n.sqlite"))
    run = _run(db)
    _point(db, run, 4, 1, 1e5, _networked((40000, 10000)))
    _point(db, run, 4, 2, 2e5, _networked((150000, 50000)))
    series = _series(tmp_path / "n.sqlite", run)
    models = [*rows.cell_tables(series), *network.tables(series)]
    text = _printed(table.series_tables(series))
    _assert_fits(text)
    _assert_whole(models, text)


def test_the_summary_and_verdict_tables_fit_80_columns(stored):
    series = _series(stored)
    summary = rows.summary_table(series)
    verdicts = rows.verdict_table(verdict.judge_all(series, {}, None))
    text = _printed([table.render(summary), table.render(verdicts)])
    _assert_fits(text)
    _assert_whole([summary, verdicts], text)
    assert "getppid1" in text and "Figure 12" in text


def test_the_scaling_and_lock_model_tables_fit_80_columns(stored):
    (lock,) = [g for name, g in analysis.group_by_test(_series(stored)).items() if name == "scale/lock"]
    fits = models.series_fits(lock, {"cs_ns": 200, "par_ns": 9800})
    parts = rows.scaling_tables(lock, fits, 256)
    own = {s.variant: f for s in lock if (f := models.own_fits(s, {"cs_ns": 200, "par_ns": 9800}).get("lock"))}
    lock_parts = rows.lock_model_tables(own, 256)
    text = _printed([table.render(m) for m in (*parts, *lock_parts)])
    _assert_fits(text, parameters=True)
    _assert_whole([*parts, *lock_parts], text)
    # Two counts past the 16 measured by default (48 and 256), 96 and the parameters' intervals with --wide.
    predicted = parts[1]
    assert "48 cores" in text and "256 cores" in text and "96 cores" not in text and "σ interval" not in text
    assert any(c.title == "96 cores" and not c.essential for c in predicted.columns)
    wide = _printed([table.render(m, wide=True) for m in parts])
    assert "96 cores" in wide and "σ interval" in wide
    # The report's one table keeps every column.
    full = rows.scaling_table(lock, fits, 256)
    assert {"σ contention", "σ interval", "κ interval", "48 cores", "96 cores", "256 cores", "note"} <= {
        c.title for c in full.columns}


def test_compares_change_table_fits_80_columns(stored):
    db = store.Store(str(stored))
    runs = [db.run(1), db.run(2)]
    series = [[s for s in _series(stored, r["id"]) if s.workload == "micro"] for r in runs]
    found = compare.compare_runs(runs, series, compare.run_labels(runs))
    models_ = rows.comparison_tables(found)
    text = _printed([table.render(m) for m in models_])
    _assert_fits(text)
    _assert_whole(models_, text)
    assert "faster" in text and "6.8.0-31-generic" in text


def test_a_table_too_wide_for_its_console_is_drawn_wider_not_cut():
    """At 30 columns the text folds and the numbers' titles fold; what still does not fit overflows."""
    model = TableModel("t", [Column("variant", left=True), Column("best /sec/core"), Column("user µs"),
                             Column("limit", left=True, wraps=True)])
    model.add(["small-cache", "1,234,567", "2,360", "client 1/3, queue grew 2/3, interfered 1/3, up to 12%"])
    text = _printed([table.render(model)], width=30)
    assert "…" not in text and any("1,234,567" in line and "2,360" in line for line in text.splitlines())
    assert "best" in text and "/sec/core" in text  # the title folded at its space
    lines = _printed([table.render(model)], width=80).splitlines()
    assert any("best /sec/core" in line for line in lines)  # not where it fits


# Through the command line, in a pipe


def _cli(*args: str, **env: str) -> str:
    """`mosbench ARGS` (in this process) into a pipe, COLUMNS unset unless given."""
    r = mosbench_here(*args, env={"COLUMNS": None, **env})
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_show_in_a_pipe_is_80_columns_and_wide_shows_the_rest(stored):
    out = _cli("show", "1", "--store", str(stored))
    _assert_fits(out)
    series = _series(stored)
    _assert_whole([*rows.cell_tables(series), rows.summary_table(series)], out)
    assert "2,410" in out and "client 1/3" in out
    assert "min–max" not in out and "client p99" not in out and "workload's own" not in out
    wide = _cli("show", "1", "--wide", "--store", str(stored))
    assert "…" not in wide and not EXPONENT.search(wide)
    for title in ("cpus", "median", "min–max", "steal", "client cpus", "client µs u+s", "client p99", "busy spread",
                  "workload's own (best trial)"):
        assert title in wide, title
    assert max(cell_len(line.rstrip()) for line in wide.splitlines()) > 80
    # COLUMNS is honoured: the run's line, wrapped at 80 by default, is one line in 200.
    first = "run #1 (complete) on bench-host-01.example.org, kernel 6.1.0-18-amd64: 48 CPUs: 4 socket(s)"
    assert first not in out and first in _cli("show", "1", "--store", str(stored), COLUMNS="200")


def test_compare_and_the_models_in_a_pipe_are_80_columns(stored):
    out = _cli("compare", "1", "2", "--store", str(stored))
    # The count of changes, a sentence a test holds whole, may be longer; the explanations under it fit.
    table_lines = [line for line in out.splitlines() if not re.match(r"\d+ significant changes? \(", line)]
    _assert_fits("\n".join(table_lines))
    assert "faster" in out and " ± " not in out
    wide = _cli("compare", "1", "2", "--wide", "--store", str(stored))
    assert " ± " in wide and "/s ×3" in wide  # each run's mean ± sd over its trials
    lock = _cli("model", "lock", "1", "--cores", "256", "--store", str(stored), COLUMNS="80")
    _assert_fits(lock, parameters=True)
    assert "collapse" in lock and "256 cores" in lock
    scaling = _cli("model", "scaling", "1", "--cores", "256", "--store", str(stored))
    _assert_fits(scaling, parameters=True)
    assert "scale/lock: scaling models fitted" in scaling and "σ interval" not in scaling
    assert "σ interval" in _cli("model", "scaling", "1", "--cores", "256", "--wide", "--store", str(stored))
