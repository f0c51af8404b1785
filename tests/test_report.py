"""The report from recorded results of a large machine: every figure, the model, failures shown."""

import json

from mosbench import analysis, store
from mosbench.lockmodel import LockParams
from mosbench.report import html, plots, table
from tests.conftest import FIXTURES


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
    for stem in ("summary", "scale_lock", "scale_lock_model", "micro_open3", "scale_lock_samples"):
        assert (files / f"{stem}.png").stat().st_size > 1000 and (files / f"{stem}.svg").exists()
    assert "Lock-collapse model" in text and "runner died" in text and "Failed points" in text
    # The fitted ticket lock collapses well inside 512 cores; the scalable one does not.
    model_rows = text[text.index("Lock-collapse model"):]
    assert "ticket" in model_rows and "none" in model_rows
    series = analysis.build_series(db.points(run))
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
