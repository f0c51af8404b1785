"""The report from recorded results of a large machine: every figure, the model, failures shown."""

import html as html_text
import json
import re

import pytest

from mosbench.analysis import cells as analysis
from mosbench.analysis import lockmodel, models
from mosbench.analysis.lockmodel import LockParams
from mosbench.report import html, plots, rows, table
from mosbench.store import db as store
from mosbench.workloads.scale import LOCK_KINDS
from tests import test_commute, test_report_network, test_web_method
from tests.conftest import FIXTURES, mosbench_here


def _fill(db: store.Store) -> int:
    topo = json.loads((FIXTURES / "topology-4x64-smt2.json").read_text())
    cpus = [k for k in topo if k.endswith("physical_package_id")]
    env = {"hostname": "big", "kernel": "6.1.0", "topology": {"cpus": [{}] * len(cpus)},
           "topology_summary": "512 CPUs: 4 socket(s)", "cpu_model": "recorded"}
    plan = {"params": {"scale": {"cs_ns": 200, "par_ns": 9800}}}
    run = db.create_run(plan, env, "mosbench run scale/lock micro/open3")
    ticket = LockParams(9800, 220, 35, "ticket")
    mcs = LockParams(9800, 240, 45, "scalable")
    for cores in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512):
        for variant, p in (("stock", ticket), ("scalable", mcs)):
            for trial in (1, 2):
                tp = p.throughput(cores) * (1 - 0.01 * trial)
                db.add_point(run, workload="scale", test="lock", variant=variant, cores=cores, trial=trial,
                             status="ok", started_at=store.now(), cpus=f"0-{cores - 1}", unit="acquisition",
                             window_s=2.0, work=tp * 2, throughput=tp, user_s=cores * 2.0, system_s=0.01,
                             idle_s=0.0, steal_s=0.0,
                             samples=[{"t": -1.0, "phase": "warmup", "rate": tp}, {"t": 1.0, "phase": "window",
                                                                                    "rate": tp}])
        db.add_point(run, workload="micro", test="open3", variant="threads", cores=cores, trial=1,
                     status="ok" if cores < 512 else "failed", reason=None if cores < 512 else "runner died",
                     started_at=store.now(), cpus=f"0-{cores - 1}", unit="op", window_s=2.0,
                     work=None if cores == 512 else 1e6 * 2, throughput=None if cores == 512 else 1e6 / cores,
                     user_s=0.1, system_s=cores * 1.0, idle_s=0.0, steal_s=0.0, samples=[])
    db.finish_run(run, "complete")
    return run


def test_report_of_a_512_cpu_machine(tmp_path):
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = _fill(db)
    out = html.write(db, [str(run)], tmp_path / "rep.html")
    text = out.read_text()
    files = tmp_path / "rep_files"
    for stem in ("summary", "scale_lock", "scale_lock_scaling", "micro_open3", "scale_lock_samples"):
        assert (files / f"{stem}.png").stat().st_size > 1000 and (files / f"{stem}.svg").exists()
    assert "runner died" in text and "Failed points" in text
    # Ten core counts: both scaling models fitted, drawn and tabled for each curve, and for scale/lock
    # the lock-collapse model beside them, in the same table and figure.
    assert "Scaling models" in text and "ticket lock model" in text and "scalable lock model" in text
    series = analysis.build_series(db.points(run))
    group = analysis.group_by_test(series)["scale/lock"]
    fits = models.series_fits(group, {"cs_ns": 200, "par_ns": 9800})
    assert set(fits["stock"]) == {"amdahl", "usl", "lock"} and fits["stock"]["lock"].params.kind == "ticket"
    model = rows.scaling_table(group, fits, 512)
    peaks = {(v, m): p for v, m, p in zip(model.column("variant"), model.column("model"), model.column("peak at"),
                                          strict=True)}
    # The fitted ticket lock collapses well inside 512 cores; the scalable one does not.
    knee = int(peaks[("stock", "ticket lock model")])
    assert 2 <= knee < 512 and peaks[("scalable", "scalable lock model")] == "none"
    stock = next(s for s in group if s.variant == "stock")
    assert knee == lockmodel.fit_series(stock, 9800, 200, LOCK_KINDS).params.collapse(512)
    assert f"<td class=\"\">{knee}</td>" in text  # the same row in the HTML
    assert "micro/open3" not in {s.name for s in series if analysis.own_models(s)}
    lock = {s.variant: s for s in series if s.name == "scale/lock"}
    assert lock["stock"].scalability()[0] < 0.05 < lock["scalable"].scalability()[0]
    summary = table.summary_table(series)
    assert summary.row_count == 3


def test_two_runs_compared_on_one_figure(tmp_path):
    db = store.Store(str(tmp_path / "s.sqlite"))
    a, b = _fill(db), _fill(db)
    text = html.write(db, [str(a), str(b)], tmp_path / "cmp.html").read_text()
    assert f"stock (#{a})" in text and f"stock (#{b})" in text


def test_job_samples_show_cpu_busy_not_a_rate(tmp_path):
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}, {}]}}, "cmd")
    for cores in (1, 2):
        # A job's work arrives all at once at its end: per-second rates are 0 until then.
        samples = [{"t": t, "phase": "window", "rate": 0.0 if t < 3 else 1.0, "busy": 1.0 if t < 2 else 0.5}
                   for t in (1.0, 2.0, 3.0)]
        db.add_point(run, workload="psearchy", test="", variant="procs", cores=cores, trial=1, status="ok",
                     started_at=store.now(), cpus=f"0-{cores - 1}", unit="job", window_s=3.0, work=1.0,
                     throughput=1 / 3, user_s=2.0, system_s=0.5, idle_s=0.5, steal_s=0.0, samples=samples)
    db.finish_run(run, "complete")
    series = analysis.build_series(db.points(run))
    fig = plots.samples_figure(series)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "CPUs busy (%)"
    data = [line for line in ax.lines if line.get_label() == "procs, 2 cores"]
    assert [list(line.get_ydata()) for line in data] == [[100.0, 50.0, 50.0]]  # the 2-core trial's busy time


def test_job_cpu_time_reads_in_seconds_per_job(tmp_path):
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}]}}, "cmd")
    db.add_point(run, workload="metis", test="invindex", variant="4k", cores=1, trial=1, status="ok",
                 started_at=store.now(), cpus="0", unit="job", window_s=3.55, work=1.0, throughput=1 / 3.55,
                 user_s=3.2, system_s=0.35, idle_s=0.0, steal_s=0.0, samples=[])
    (t,) = rows.cell_tables(analysis.build_series(db.points(run)))
    assert t.title == "metis/invindex: job/hour/core, CPU s per job"
    assert t.column("user s") == ["3.2"] and t.column("sys s") == ["0.35"] and t.column("best /hour/core") == ["1.01k"]


def test_client_cpu_time_apart_and_shares_that_add_up(tmp_path):
    """A server point whose load generator shared the measured CPUs: /proc/stat holds both, so the
    server's CPU time is its own group's and the client's is shown beside it; busy, idle and steal of
    the measured CPUs add up to 1 on a VM that steals."""
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}, {}]}}, "cmd")
    db.add_point(run, workload="memcached", test="", variant="per-core", cores=2, trial=1, status="ok",
                 started_at=store.now(), cpus="0-1", loadgen_cpus="0-1", loadgen_shared=True, unit="request",
                 window_s=1.0, work=1e5, throughput=1e5, user_s=0.6, system_s=1.0, idle_s=0.2, steal_s=0.2,
                 cgroup_user_s=0.2, cgroup_system_s=0.6, loadgen_user_s=0.4, loadgen_system_s=0.4, samples=[])
    (t,) = rows.cell_tables(analysis.build_series(db.points(run)))
    assert t.column("client cpus") == ["0-1 (shared)"]
    assert t.column("user µs") == ["2"] and t.column("sys µs") == ["6"]  # the server's group, per request
    assert t.column("client µs u+s") == ["4+4"]
    assert t.column("idle") == ["10%"] and t.column("steal") == ["10%"]  # of 2 s: busy 80%, idle 10%, steal 10%
    (s,) = analysis.build_series(db.points(run))
    # 0.2 idle CPU-seconds over 1e5 requests: the breakdown's idle
    assert s.cells[2].best_trial.idle_us_per_unit == pytest.approx(2.0)
    terminal = table.render(t)
    assert "workload's own (best trial)" not in [c.header for c in terminal.columns]  # wide: HTML only


def _server_point(db, run, cores, trial, **values):
    base = dict(workload="memcached", test="", variant="per-core", cores=cores, trial=trial, status="ok",
                started_at=store.now(), unit="request", window_s=1.0, work=1e5, throughput=1e5, steal_s=0.0,
                samples=[])
    db.add_point(run, **{**base, **values})


def test_client_on_cpus_of_its_own_leaves_the_server_proc_stat(tmp_path):
    """With CPUs of its own the client is not in the measured CPUs' /proc/stat, which also holds the
    softirq time spent there on the server's packets (no group is charged it): that is the server's."""
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}, {}]}}, "cmd")
    _server_point(db, run, 1, 1, cpus="0", loadgen_cpus="1", loadgen_shared=False, user_s=0.2, system_s=0.8,
                  idle_s=0.0, cgroup_user_s=0.1, cgroup_system_s=0.3, loadgen_user_s=0.1, loadgen_system_s=0.3,
                  metrics={"client_bound": False, "client_evidence": "client CPUs 40% busy, server CPUs 0% idle",
                           "latency_p99_us": 5830.0})
    (t,) = rows.cell_tables(analysis.build_series(db.points(run)))
    assert t.column("user µs") == ["2"] and t.column("sys µs") == ["8"]
    assert t.column("client µs u+s") == ["1+3"]
    assert t.column("client p99") == ["5.83 ms"] and t.column("limit") == ["server"]


def test_client_bound_trials_are_flagged(tmp_path):
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}, {}]}}, "cmd")
    for trial, bound in ((1, True), (2, False)):
        _server_point(db, run, 1, trial, cpus="0", loadgen_cpus="1", loadgen_shared=False, user_s=0.3,
                      system_s=0.3, idle_s=0.4, loadgen_user_s=0.2, loadgen_system_s=0.8,
                      metrics={"client_bound": bound, "client_evidence": "client CPUs 100% busy while ..."})
    (t,) = rows.cell_tables(analysis.build_series(db.points(run)))
    assert t.column("limit") == ["client 1/2"]
    (row,) = t.rows
    assert row.cell_styles == {[c.title for c in t.columns].index("limit"): "poor"}


def test_machine_text_is_not_markup(tmp_path):
    """What a workload or the machine says ("[madvise]", "[red]") is shown as it is."""
    from rich.console import Console

    model = rows.TableModel("t", [rows.Column("k", left=True), rows.Column("v", left=True)])
    model.add(["thp", "always [madvise] never"])
    model.add(["reason", "[red]not a style[/red]"])
    console = Console(width=100, record=True)
    console.print(table.render(model))
    out = console.export_text()
    assert "always [madvise] never" in out and "[red]not a style[/red]" in out


@pytest.mark.parametrize(("unit", "plural"), [("query", "queries"), ("op", "ops"), ("message", "messages"),
                                              ("day", "days"), ("bytes", "bytes"), ("req/conn", "req/conn")])
def test_units_are_pluralised_as_words(unit, plural):
    from mosbench.report.plots import _plural

    assert _plural(unit) == plural


def test_the_best_trial_is_the_fastest_per_core_and_carries_its_interference(tmp_path):
    """A cell's figures are its fastest trial's, not its last; a point stored before interference was
    measured reads as unknown, not as quiet."""
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}]}}, "cmd")
    for trial, work, interference in ((1, 2e5, 0.07), (2, 1e5, None)):
        _server_point(db, run, 1, trial, cpus="0", work=work, throughput=work, user_s=0.2, system_s=0.8, idle_s=0.0,
                      interference=interference, interfered=interference is not None)
    (s,) = analysis.build_series(db.points(run))
    c = s.cells[1]
    assert (c.best, c.median) == (2e5, 1.5e5)
    assert c.best_trial is c.trials[0] and c.best_trial.system_us_per_unit == pytest.approx(4.0)
    assert (c.trials[0].interference_share, c.trials[0].interfered) == (0.07, True)
    assert (c.trials[1].interference_share, c.trials[1].interfered) == (None, False)


def test_a_workloads_notes_are_counted_in_the_limit_column(tmp_path):
    """Exim's deliveries behind its acceptances: its own note, counted over the point's trials beside the
    client's limit and flagged; the flag itself is not repeated among its metrics."""
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}, {}]}}, "cmd")
    for trial, lag in ((1, True), (2, False)):
        _server_point(db, run, 1, trial, workload="exim", variant="stock", unit="message", cpus="0", loadgen_cpus="1",
                      loadgen_shared=False, user_s=0.3, system_s=0.6, idle_s=0.1, loadgen_user_s=0.1,
                      loadgen_system_s=0.1, metrics={"client_bound": False, "queue_growth": 500 * trial,
                                                     "deliveries_lag": lag})
    (t,) = rows.cell_tables(analysis.build_series(db.points(run)))
    assert t.column("limit") == ["server, queue grew 1/2"]
    (row,) = t.rows
    assert row.cell_styles == {[c.title for c in t.columns].index("limit"): "poor"}
    assert t.column("workload's own (best trial)") == ["queue_growth=500"]
    exim = analysis.workload_of("exim")
    assert [n.text for n in exim.point_notes({"deliveries_lag": True, "queue_growth": 500})] == [
        "DELIVERIES LAG (the queue grew by 500 in the window)"]
    assert exim.point_notes({"deliveries_lag": False, "queue_growth": 3}) == []


def test_a_workloads_own_columns_read_the_best_trial(tmp_path, monkeypatch):
    from mosbench.workloads.base import MetricColumn

    class Stub:
        kind = "window"
        metrics_shown_apart = ("faults",)

        def columns_for(self, test):
            return (MetricColumn("faults/op", lambda m: str(m.get("faults", "–"))),)

        def point_notes(self, metrics):
            return []

        def variant_rank(self, variant):
            return 0

    monkeypatch.setattr(analysis, "workload_of", lambda name: Stub())
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}]}}, "cmd")
    for trial, work in ((1, 1e5), (2, 2e5)):
        _server_point(db, run, 1, trial, workload="stub", cpus="0", work=work, throughput=work, user_s=0.5,
                      system_s=0.5, idle_s=0.0, metrics={"faults": trial, "other": 1})
    _server_point(db, run, 2, 1, workload="stub", cpus="0-1", status="failed", reason="died", work=None,
                  throughput=None, user_s=None, system_s=None, idle_s=None)
    (t,) = rows.cell_tables(analysis.build_series(db.points(run)))
    assert t.column("faults/op") == ["2", "–"]  # the faster trial's; nothing for a point without one
    assert t.column("workload's own (best trial)") == ["other=1", ""]
    assert "limit" not in [c.title for c in t.columns]  # no client, nothing noted


def test_a_workloads_own_figure_draws_its_metrics(tmp_path):
    """PostgreSQL's system calls per query: a line per kind and variant, the total last in black."""
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({"params": {}}, {"hostname": "h", "kernel": "k", "topology": {"cpus": [{}, {}]}}, "cmd")
    for cores in (1, 2):
        _server_point(db, run, cores, 1, workload="postgres", test="read-only", variant="small-cache", unit="query",
                      cpus=f"0-{cores - 1}", user_s=0.5, system_s=0.5, idle_s=0.0,
                      metrics={"lseek_per_query": 1.0 * cores, "syscalls_per_query": 4.0, "transactions": 10})
    (s,) = analysis.build_series(db.points(run))
    (figure,) = analysis.figures_for(s)
    fig = plots.metric_figure([s], figure)
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == ["small-cache: lseek", "small-cache: all"]
    assert list(ax.lines[0].get_ydata()) == [1.0, 2.0] and ax.lines[1].get_color() == "black"
    assert ax.get_ylabel() == "system calls per query"
    out = html.write(db, [str(run)], tmp_path / "r.html").read_text()
    assert figure.heading in out and (tmp_path / "r_files" / "postgres_read-only_syscalls.png").exists()


def test_no_legend_covers_a_curve(tmp_path):
    """Every figure of a test keeps its legend off the axes, where the first core counts' points are (the
    16-core report's legend sat on micro_mmap1's and dup1's first points)."""
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = _fill(db)
    group = analysis.group_by_test(analysis.build_series(db.points(run)))["scale/lock"]
    figures = [plots.test_figure(group, "scale/lock"), plots.samples_figure(group),
               plots.scaling_figure(group, models.series_fits(group, {"cs_ns": 200, "par_ns": 9800}), 512),
               plots.lock_model_figure({s.variant: models.own_fits(s, {"cs_ns": 200, "par_ns": 9800})["lock"]
                                        for s in group}, 512)]
    for fig in figures:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = [*fig.legends, *(a.get_legend() for a in fig.axes if a.get_legend())]
        assert legends, fig
        for legend in legends:
            box = legend.get_window_extent(renderer)
            for ax in fig.axes:
                assert not box.overlaps(ax.get_window_extent(renderer)), (fig.axes[0].get_title(), legend)


def _every_section(db: store.Store) -> int:
    """_fill's run and a section of each other kind: commute pairs, a one-core baseline, a networked point."""
    run = _fill(db)
    for p in test_commute._run():
        db.add_point(run, started_at=store.now(), **{k: v for k, v in p.items() if k not in ("interference",
                                                                                             "interfered")})
    test_report_network._point(db, run, 4, 1, 1e5, test_report_network._networked((40000, 10000)))
    steps = [test_web_method._step(rate=r, carried=r, busy=r / 1000, us=2.0).as_metrics()
             for r in range(100, 1001, 100)]
    db.add_point(run, workload="apache", test="baseline", variant="per-core", cores=1, trial=1, status="ok",
                 started_at=store.now(), cpus="0", unit="request", window_s=1.0, work=1000, throughput=1000,
                 user_s=0.5, system_s=0.5, idle_s=0.0, steal_s=0.0, samples=[],
                 metrics={"baseline_max": {"requests_per_s": 1000.0}, "baseline": steps})
    return run


def test_show_and_the_report_have_the_same_sections_from_one_list(tmp_path):
    """Every section the HTML has, `show` prints, in the same order but for the overview (the summary and the
    verdicts), which the terminal leaves for last; commute's pairs are a section, not curves."""
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = _every_section(db)
    page = html.write(db, [str(run)], tmp_path / "rep.html").read_text()
    titles = [t for _, t in re.findall(r'<h2 id="([^"]+)">([^<]+)</h2>', page) if t not in ("Failed points",
                                                                                          "Environment")]
    tests = ["apache/baseline", "memcached", "micro/open3", "scale/lock"]
    assert titles == ["Summary", "Commutativity: which commutative calls scale on this kernel",
                      "One-core baseline and the load each point carried", "Network", *tests]
    shown = mosbench_here("show", str(run), "--store", str(tmp_path / "s.sqlite"), env={"COLUMNS": "250"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    # A section's heading, or for a test the title of its table (its name, then its rate's unit).
    at = [next(i for i, line in enumerate(lines) if line == title or re.match(f"{title}: \\S+/sec/core", line))
          for title in titles]
    assert sorted(at) == [*at[1:], at[0]]  # the page's order, the overview moved to the end
    for title in re.findall(r'<p class="note"><b>([^<]+)</b></p>', page):  # the network section's tables
        assert html_text.unescape(title) in lines
