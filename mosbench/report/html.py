"""The HTML report: one self-contained file (figures embedded as SVG) with PNG and SVG copies beside it, or
the page alone (page(): what `mosbench serve` shows).

One run, or several compared on the same figures (say, two kernels): each run's variants then carry
the run's label, so "procs (6.1)" and "procs (6.8)" are drawn side by side.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from mosbench import outfile
from mosbench.analysis import cells as analysis
from mosbench.analysis import commute, compare, explain, models, profiles, verdict
from mosbench.filenames import file_stem
from mosbench.outfile import Output
from mosbench.printable import printable
from mosbench.report import commute as commute_report
from mosbench.report import filesystems, flamegraph, plots, rows, sections, webmethod, whatchanged
from mosbench.report import history as history_report
from mosbench.store import db as store
from mosbench.workloads.base import test_name

ENV_KEYS = ("hostname", "kernel", "kernel_version", "kernel_cmdline", "arch", "cpu_model", "topology_summary",
            "memory_bytes", "governor", "thp", "thp_defrag", "smt_control", "virtualization", "mosbench_version",
            "mosbench_commit", "harness_scheduling")


def _profiles(group: list[analysis.Series], found: profiles.BySeries, files: Path, stem: str) -> list[dict[str, Any]]:
    """Per variant with profiles at two core counts or more: the differential table and flame graph
    from the fewest cores to the most."""
    out = []
    for s in group:
        by_cores = found.get(s.key, {})
        if not by_cores:
            continue
        low, high = min(by_cores), max(by_cores)
        # Shared cache lines at the most cores, or why they were not sampled: absent is never shown as none.
        shared: dict[str, Any] = (
            {"c2c": rows.c2c_table(s.name, s.variant, s.unit, high, by_cores[high])}
            if by_cores[high].hitm_per_unit() is not None else
            {"c2c_absent": by_cores[high].c2c_absent or "not recorded (profiled before mosbench ran perf c2c)"})
        if low == high:
            out.append({"variant": s.variant, "note": f"profiled at {low} cores only: nothing to set it against",
                        **shared})
            continue
        entry: dict[str, Any] = {"variant": s.variant, **shared, "table": rows.profile_table(
            s.name, s.variant, s.unit, low, high, by_cores[low], by_cores[high]), "locks": rows.lock_table(
            s.name, s.variant, s.unit, low, high, by_cores[low], by_cores[high])}
        if graph := flamegraph.svg(by_cores[low], by_cores[high], low, high, s.unit):
            files.mkdir(parents=True, exist_ok=True)
            (files / f"{stem}_{file_stem(s.variant)}_flame.svg").write_text(graph)
            entry["flame"] = Markup(graph)
        out.append(entry)
    return out


@dataclass(frozen=True)
class _SectionJob:
    groups: dict[str, list[analysis.Series]]
    profiles: dict
    files: Path
    params: dict[str, dict[str, Any]]
    up_to: int
    no_profile: str  # verdict.profile_advice for the runs' machine
    png: bool  # PNG copies of the figures beside the page (plots.save)

    def section(self, name: str) -> dict[str, Any]:
        """One test's section: its figures, fits, profiles and verdicts (each test's apart from the others')."""
        group, files = self.groups[name], self.files
        stem = file_stem(name)
        title = f"{name} ({group[0].unit})"
        svg = plots.save(plots.test_figure(group, title), files, stem, self.png)
        samples_fig = plots.samples_figure(group)
        samples_svg = plots.save(samples_fig, files, f"{stem}_samples", self.png) if samples_fig else None
        section = {"name": name, "anchor": stem, "figure": Markup(svg),
                   "samples": Markup(samples_svg) if samples_svg else None}
        fits = models.series_fits(group, self.params.get(group[0].workload, {}))
        section["scaling_table"] = rows.scaling_table(group, fits, self.up_to)
        if fig := plots.scaling_figure(group, fits, self.up_to):
            section["scaling"] = Markup(plots.save(fig, files, f"{stem}_scaling", self.png))
        section["profiles"] = _profiles(group, self.profiles, files, stem)
        section["verdicts"] = rows.verdict_table(verdict.judge_all(group, self.profiles, self.no_profile))
        section["own_figures"] = [
            {"heading": f.heading, "note": f.note, "svg": Markup(plots.save(fig, files, f"{stem}_{f.name}", self.png))}
            for f in analysis.figures_for(group[0]) if (fig := plots.metric_figure(group, f))]
        return section


_job: _SectionJob | None = None  # what forked workers inherit, rather than have every series pickled to them


def _section_of(name: str) -> dict[str, Any]:
    assert _job is not None
    return _job.section(name)


def _in_parallel(job: _SectionJob) -> list[dict[str, Any]]:
    """The sections on every CPU the report may use: a 256-CPU run's report draws hundreds of figures and
    fits every curve a hundred times over, each test apart from the others."""
    global _job
    names = list(job.groups)
    workers = min(len(os.sched_getaffinity(0)), len(names))
    if workers < 2:
        return [job.section(n) for n in names]
    _job = job
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return list(pool.map(_section_of, names))
    finally:
        _job = None


def _figures(view: sections.View, built: list[sections.Section], files: Path, png: bool) -> dict[str, dict[str, Any]]:
    """By anchor, the figures of every section but the tests': what the page shows and a terminal cannot."""
    fig = plots.summary_figure(view.curves)
    out: dict[str, dict[str, Any]] = {
        "summary": {"figure": Markup(plots.save(fig, files, "summary", png)) if fig else None}}
    kernels = {r.label: r.kernel for r in view.runs}
    for s in built:
        if isinstance(s, sections.Commute):
            drawn = []
            for r in s.runs:
                matrix = commute_report.heat_map(r.found, kernels[r.label])
                where = files / file_stem(r.label) if len(view.runs) > 1 else files
                drawn.append(Markup(plots.save(matrix, where, "commute_matrix", png)) if matrix else None)
            out[s.anchor] = {"figures": drawn}
        elif isinstance(s, sections.FileSystems):
            drawn = [(filesystems.heat_map(list(s.curves)), "fxmark_figure2"),
                     (filesystems.grid_figure(list(s.curves)), "fxmark_operations")]
            out[s.anchor] = {"figures": [Markup(plots.save(fig, files, stem, png)) for fig, stem in drawn if fig]}
        elif isinstance(s, sections.HistorySection):
            out[s.anchor] = {"figures": [Markup(plots.save(fig, files, stem, png)) for stem, fig in
                                         history_report.figures(s.found)],
                             "left_out": history_report.undrawn(s.found)}
        elif isinstance(s, sections.WhatChanged):
            out[s.anchor] = {"figures": whatchanged.flames(s.blocks, files)}
        elif isinstance(s, sections.WebMethod):
            out[s.anchor] = {"figures": [
                Markup(plots.save(webmethod.baseline_figure(b.name, b.steps, b.verdict, b.series.unit), files,
                                  f"{file_stem(b.series.name)}_{file_stem(b.series.variant)}_baseline", png))
                for b in s.baselines]}
    return out


def _anchors(explained: tuple[explain.Explained, ...]) -> dict[str, dict[analysis.PointKey, str]]:
    """The ids of the comparison's explained changes in What changed, by the other run's label and point:
    what the comparison tables link their verdicts to."""
    out: dict[str, dict[analysis.PointKey, str]] = {}
    for x in explained:
        if isinstance(x.found, explain.Explanation):
            out.setdefault(x.found.labels[1], {})[x.change.point] = whatchanged.anchor(x)
    return out


def write(db: store.Store, run_refs: list[str], output: Path | Output) -> Path:
    """The report of the runs at `output` (a path, or outfile.target's checked one), its figures' PNG and SVG
    in `<stem>_files/` beside it, the page and its figures written whole or not at all (outfile.py); a device
    or pipe (/dev/stdout) has the page alone, which holds every figure."""
    out = output if isinstance(output, Output) else outfile.target(output, "the report")
    files_name = f"{out.path.stem}_files"
    with out.writing():
        files = out.folder(files_name) or out.scratch()
        out.write_text(_page(db, run_refs, files, None if out.in_place else files_name, png=True))
    return out.path


def page(db: store.Store, run_refs: list[str]) -> str:
    """The report's page alone, as `write` draws it (on every CPU: the caller is a process of its own, never a
    server's threads, which must not fork), its figures embedded as SVG only: no PNG drawn, no copy kept."""
    with tempfile.TemporaryDirectory(prefix="mosbench-report-") as scratch:
        return _page(db, run_refs, Path(scratch), None, png=False)


# What a page and an SVG mean as they are: their lines and a log's tabs. Every other control character (the
# ESC of a label's escapes, a CR) is written as its escape: the page shows what was stored, never raw.
_PAGE_KEEPS = "\n\t"


def _escape_svgs(files: Path) -> None:
    """The SVG copies beside the page as free of raw control characters as the page (a flame graph's
    function names come from stored profiles)."""
    for svg in files.rglob("*.svg"):
        text = svg.read_text()
        if (safe := printable(text, keep=_PAGE_KEEPS)) != text:
            svg.write_text(safe)


def _page(db: store.Store, run_refs: list[str], files: Path, files_name: str | None, png: bool) -> str:
    """The page, its figures drawn into `files` (which it names `files_name`; None: none are kept; png: their PNG
    copies too)."""
    runs = [db.run(ref) for ref in run_refs]
    several = len(runs) > 1
    series: list[analysis.Series] = []
    per_run: list[list[analysis.Series]] = []
    per_run_profiles: list[profiles.BySeries] = []
    found_profiles: profiles.BySeries = {}  # by series, as labelled
    failures: list[dict[str, Any]] = []
    labels = compare.run_labels(runs)
    every_run: list[list[dict[str, Any]]] = []  # each run's points, for the explanations of what changed
    for r, label in zip(runs, labels, strict=True):
        pts = db.points(r["id"], with_logs=True, with_profiles=True)
        if several:
            every_run.append(pts)
        series.extend(analysis.build_series(pts, label if several else None))
        per_run.append(analysis.build_series(pts))
        per_run_profiles.append(profiles.by_series(pts))
        for key, by_cores in per_run_profiles[-1].items():
            found_profiles[analysis.SeriesKey(key.workload, key.test, f"{key.variant} ({label})") if several
                           else key] = by_cores
        failures.extend({"run": label, "name": test_name(p["workload"], p["test"]),
                         "variant": p["variant"], "cores": p["cores"], "trial": p["trial"], "cpus": p["cpus"],
                         "reason": p["reason"], "logs": (p.get("logs") or "")[-4000:]}
                        for p in pts if p["status"] != "ok")

    # Models are read out to 256 cores, or to the largest machine among the runs.
    up_to = max(256, *(len(r["environment"].get("topology", {}).get("cpus", [])) for r in runs))
    params = runs[0]["plan"].get("params", {})
    no_profile = verdict.profile_advice(runs[0]["environment"])
    compared = compare.compare_runs(runs, per_run, labels) if several else None
    explained = tuple(explain.comparison(compared, runs, every_run)) if compared else ()
    found_history, history_explained = history_report.of_run_explained(db, runs[0])
    view = sections.View(series, found_profiles, tuple(
        sections.RunSeries(label, run_series, run_profiles, r["environment"].get("kernel", "this kernel"))
        for r, label, run_series, run_profiles in zip(runs, labels, per_run, per_run_profiles, strict=True)),
        no_profile, found_history, explained,
        history_explained)
    built = sections.build(view)
    tests = [s for s in built if isinstance(s, sections.Test)]
    job = _SectionJob({t.name: t.group for t in tests}, found_profiles, files, params, up_to, no_profile, png)
    figures = dict(zip((t.anchor for t in tests), _in_parallel(job), strict=True))
    figures.update(_figures(view, built, files, png))

    # The template is report.html.j2: escaping by extension would leave failure reasons and logs raw.
    env = Environment(loader=PackageLoader("mosbench.report"), autoescape=select_autoescape(("html", "j2")))
    html = env.get_template("report.html.j2").render(
        runs=[{
            "id": r["id"], "label": label, "status": r["status"], "command": r["command"],
            "started": r["started_at"].strftime("%Y-%m-%d %H:%M:%S"),
            "finished": r["finished_at"].strftime("%Y-%m-%d %H:%M:%S") if r["finished_at"] else "",
            "env": {k: r["environment"].get(k) for k in ENV_KEYS},
            "vm": r["environment"].get("virtual_machine"),
            "plan": json.dumps(r["plan"], indent=1),
            "details": json.dumps({k: v for k, v in r["environment"].items() if k not in ENV_KEYS and k != "topology"},
                                  indent=1, sort_keys=True),
        } for r, label in zip(runs, labels, strict=True)],
        interference_banner=rows.interference_banner(series), explain_floor=explain.FLOOR,
        sections=[(s, figures.get(s.anchor, {})) for s in built], scales_at=commute.SCALES_AT,
        failures=failures,
        comparison=rows.comparison_tables(compared, _anchors(explained)) if compared else None,
        files=files_name,
    )
    _escape_svgs(files)
    return printable(html, keep=_PAGE_KEEPS)
