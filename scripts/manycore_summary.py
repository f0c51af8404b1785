"""The many-core check's one-page summary (scripts/check_manycore.py), from what its phases left in
its work directory: pairs-*.json, the store, the models' text. Markdown, readable as plain text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from mosbench.analysis import cells
from mosbench.analysis.pairs import Pair, Verdict, tally
from mosbench.store.db import Store
from mosbench.units import si

if TYPE_CHECKING:
    from scripts.manycore_phases import Phase


def page(work: Path, phases: list[Phase], cpus: int, elapsed: float, budget: float) -> str:
    facts = dict(line.split(" ", 1) for line in (work / "machine.txt").read_text().splitlines() if " " in line)
    lines = [f"# mosbench many-core check: {facts.get('host', '?')}, {cpus} CPUs",
             "", f"{facts.get('model', '')}; kernel {facts.get('kernel', '')}; Python {facts.get('python', '')}; "
             f"{elapsed:.0f} s of a {budget:.0f} s budget.", "", *phases_section(phases)]
    for label in ("max", "half"):
        path = work / f"pairs-{label}.json"
        if path.exists():
            lines += ["", *pairs_section([Pair.from_json(p) for p in json.loads(path.read_text())])]
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


def pairs_section(found: list[Pair]) -> list[str]:
    if not found:
        return ["## micro against will-it-scale: no pair measured"]
    out = [f"## micro against will-it-scale at {found[0].tasks} tasks ({len(found[0].ours)} interleaved rounds, "
           "medians, ops/s)",
           "",
           "| test | mode | mosbench | will-it-scale | ratio [95%] | verdict |",
           "| --- | --- | --- | --- | --- | --- |"]
    for p in found:
        verdict = "within ±5%" if p.verdict is Verdict.WITHIN else p.verdict.value
        modes = [f"{who}: {m.describe()}" for who, m in (("mosbench", p.ours_modes), ("will-it-scale", p.theirs_modes))
                 if m.bimodal]
        out.append(f"| {p.test} | {p.mode} | {si(p.ours_median)} | {si(p.theirs_median)} | "
                   f"{p.ratio:.3f} [{p.low:.3f}–{p.high:.3f}] | {'; '.join([verdict, *modes])} |")
    n = tally(found)
    out += ["", f"{n[Verdict.WITHIN]} of {len(found)} pairs within ±5%; {n[Verdict.APART]} apart by their interval, "
                f"{n[Verdict.UNCLEAR]} unclear, {n[Verdict.BIMODAL]} bimodal."]
    return out


def curves_section(store: Path) -> list[str]:
    """Per-core throughput of each curve at its fewest and most cores, and its scaling ratio (most cores over
    one, cells.scaling_ratio: a curve without a one-core point has none)."""
    db = Store(str(store))
    out = ["## Curves (per-core throughput, best trial)", "", "| run | test | variant | fewest cores | most cores | "
           "most / 1 core |", "| --- | --- | --- | --- | --- | --- |"]
    for run in db.list_runs():
        for s in cells.build_series(db.points(run["id"])):
            ok = s.ok_cells()
            if len(ok) < 2:
                continue
            lo, hi = ok[0], ok[-1]
            scaling = s.scalability()
            ratio = f"{scaling[0]:.2f}" if scaling else "– (no 1-core point)"
            out.append(f"| {run['label']} | {s.name} | {s.variant} | {lo.cores}: {si(lo.best)}/s | "
                       f"{hi.cores}: {si(hi.best)}/s | {ratio} |")
        par = run["plan"]["params"].get("scale", {}).get("par_ns")
        if par is not None and any(t == "lock" for _, t in run["plan"]["selections"]):
            out.append(f"| {run['label']} | (scale/lock's par_ns: {par} ns, chosen for {max(run['plan']['cores'])} "
                       "cores) | | | | |")
    return out


def holdout_lines(text: Path) -> list[str]:
    """A model command's tables as printed, without the command line itself."""
    return [line.rstrip() for line in text.read_text().splitlines()[1:] if line.strip()][:60]
