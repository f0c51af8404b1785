"""The many-core check's one-page summary (scripts/check_manycore.py), from what its phases left in
its work directory: pairs-*.json, the store, the models' text. Markdown, readable as plain text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vs_will_it_scale import Modes  # benchmarks/ is on the path: the check imports it first

from mosbench.analysis import cells
from mosbench.store.db import Store
from mosbench.units import si

if TYPE_CHECKING:
    from check_manycore import Phase


def page(work: Path, phases: list[Phase], cpus: int, elapsed: float, budget: float) -> str:
    facts = dict(line.split(" ", 1) for line in (work / "machine.txt").read_text().splitlines() if " " in line)
    lines = [f"# mosbench many-core check: {facts.get('host', '?')}, {cpus} CPUs",
             "", f"{facts.get('model', '')}; kernel {facts.get('kernel', '')}; Python {facts.get('python', '')}; "
             f"{elapsed:.0f} s of a {budget:.0f} s budget.", "", *phases_section(phases)]
    for label in ("max", "half"):
        path = work / f"pairs-{label}.json"
        if path.exists():
            lines += ["", *pairs_section(json.loads(path.read_text()))]
    store = work / "store.sqlite"
    if store.exists():
        lines += ["", *curves_section(store)]
    for name in ("model-lock", "model-scaling-lock", "model-scaling-scale"):
        text = work / f"{name}.txt"
        if text.exists():
            lines += ["", f"## `{text.read_text().splitlines()[0].removeprefix('$ ')}`", "", "```",
                      *holdout_lines(text), "```"]
    return "\n".join(lines) + "\n"


def phases_section(phases: list[Phase]) -> list[str]:
    """Each phase's time and state; then, where any failed, what failed and the last lines it printed."""
    lines = ["| phase | seconds | state |", "| --- | --- | --- |",
             *(f"| {p.name} | {p.seconds:.0f} | {p.describe()} |" for p in phases)]
    failed = [(p, f) for p in phases for f in p.failures]
    if not failed:
        return lines
    lines += ["", f"## FAILED: {len({p.name for p, _ in failed})} of {len(phases)} phases"]
    for p, f in failed:
        lines += ["", f"{p.name}: {f.what} {f.how}", *(["", "```", *f.lines, "```"] if f.lines else [])]
    return lines


def pairs_section(found: list[dict[str, Any]]) -> list[str]:
    if not found:
        return ["## micro against will-it-scale: no pair measured"]
    tasks = found[0]["tasks"]
    rounds = len(found[0]["ours"])
    out = [f"## micro against will-it-scale at {tasks} tasks ({rounds} interleaved rounds, medians, ops/s)",
           "",
           "| test | mode | mosbench | will-it-scale | ratio [95%] | verdict |",
           "| --- | --- | --- | --- | --- | --- |"]
    for p in found:
        verdict = {"within": "within ±5%"}.get(p["verdict"], p["verdict"])
        modes = [f"{who}: {Modes(**p[f'{key}_modes']).describe()}" for who, key in (("mosbench", "ours"),
                                                                                     ("will-it-scale", "theirs"))
                 if p[f"{key}_modes"]["bimodal"]]
        out.append(f"| {p['test']} | {p['mode']} | {si(p['ours_median'])} | {si(p['theirs_median'])} | "
                   f"{p['ratio']:.3f} [{p['low']:.3f}–{p['high']:.3f}] | {'; '.join([verdict, *modes])} |")
    within = sum(1 for p in found if p["verdict"] == "within")
    out += ["", f"{within} of {len(found)} pairs within ±5%; "
                f"{sum(1 for p in found if p['verdict'] == 'apart')} apart by their interval, "
                f"{sum(1 for p in found if p['verdict'] == 'unclear')} unclear, "
                f"{sum(1 for p in found if p['verdict'] == 'bimodal')} bimodal."]
    return out


def curves_section(store: Path) -> list[str]:
    """Per-core throughput of each curve at its fewest and most cores, and their ratio."""
    db = Store(str(store))
    out = ["## Curves (per-core throughput, best trial)", "", "| run | test | variant | fewest cores | most cores | "
           "ratio |", "| --- | --- | --- | --- | --- | --- |"]
    for run in db.list_runs():
        for s in cells.build_series(db.points(run["id"])):
            ok = s.ok_cells()
            if len(ok) < 2:
                continue
            lo, hi = ok[0], ok[-1]
            out.append(f"| {run['label']} | {s.name} | {s.variant} | {lo.cores}: {si(lo.best)}/s | "
                       f"{hi.cores}: {si(hi.best)}/s | {hi.best / lo.best:.2f} |")
        par = run["plan"]["params"].get("scale", {}).get("par_ns")
        if par is not None and any(t == "lock" for _, t in run["plan"]["selections"]):
            out.append(f"| {run['label']} | (scale/lock's par_ns: {par} ns, chosen for {max(run['plan']['cores'])} "
                       "cores) | | | | |")
    return out


def holdout_lines(text: Path) -> list[str]:
    """A model command's tables as printed, without the command line itself."""
    return [line.rstrip() for line in text.read_text().splitlines()[1:] if line.strip()][:60]
