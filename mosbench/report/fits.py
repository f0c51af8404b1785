"""What `mosbench model lock` and `model scaling` say of their fits beside the tables (report/rows.py):
the JSON a CI system reads, and the lines under a table that say where a fit is unsure or was refused."""

from __future__ import annotations

from typing import Any

from mosbench.filenames import file_stem
from mosbench.report import rows


def lock_json(fits: dict, up_to: int, run_id: int | None) -> dict[str, Any]:
    """The lock model's fits (or the given model, run_id None) read at the lock table's core counts."""
    counts = rows.lock_model_counts(fits, up_to)
    return {"run": run_id, "up_to": up_to, "cores": counts,
            "models": [{"variant": name, **f.as_json(counts)} for name, f in fits.items()]}


def lock_lines(fits: dict) -> list[str]:
    """Each lock's note and what its fit could not determine."""
    return [f"{name}: {line}" for name, f in fits.items() for line in (f.note, f.undetermined) if line]


def scaling_test_json(name: str, group: list, fits: dict, up_to: int) -> dict[str, Any]:
    """One test's variants, each with its models read past the most cores measured."""
    counts = rows.extrapolation_counts(max((c.cores for s in group for c in s.ok_cells()), default=1), up_to)
    return {"test": name, "unit": group[0].unit, "cores": counts,
            "variants": [{"variant": s.variant, "models": [f.as_json(counts) for f in fits[s.variant].values()]}
                         for s in group]}


def scaling_json(run_id: int, up_to: int, tests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"run": run_id, "up_to": up_to, "rates": "per second per core", "tests": tests}


def scaling_lines(group: list, fits: dict) -> list[str]:
    """Under a test's table: each model refused, and what a fitted one could not determine."""
    from mosbench.analysis import scaling

    out = []
    for s in group:
        for f in fits[s.variant].values():
            line = f"refused: {f.reason}" if isinstance(f, scaling.Refusal) else f.undetermined
            if line:
                out.append(f"{s.variant} {f.label}: {line}")
    return out


def draw_lock(fits: dict, up_to: int, output) -> None:
    """The lock model's figure into `output` (PNG or SVG, by its suffix)."""
    from mosbench.report import plots

    fig = plots.lock_model_figure(fits, up_to)
    output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(output, dpi=130)


def draw_scaling(name: str, group: list, fits: dict, up_to: int, output):
    """A test's fits drawn into the directory `output` as PNG and SVG; the files' path without its suffix,
    or None where there is nothing to draw."""
    from mosbench.report import plots

    fig = plots.scaling_figure(group, fits, up_to)
    if not fig:
        return None
    stem = f"{file_stem(name)}_scaling"
    plots.save(fig, output, stem)
    return output / stem
