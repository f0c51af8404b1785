"""Every model fitted to a curve, in one place: Amdahl's law and the USL (scaling.py) for every curve, and
the models a workload declares for a test of its own (workloads' models_for: scale/lock's lock-collapse
model, lockmodel.py), fitted with the run's parameters of that workload and drawn one way
(plots.scaling_figure)."""

from __future__ import annotations

from typing import Any

from mosbench.analysis import lockmodel, scaling
from mosbench.analysis.cells import Series, own_models
from mosbench.workloads.base import ModelSpec


def fit_own(spec: ModelSpec, s: Series) -> Any:
    """A workload's own model fitted to one series; None where it does not apply to the series' variant."""
    if spec.name == "lock":
        return lockmodel.fit_series(s, spec.params["a"], spec.params["s_min"], spec.params["kinds"])
    raise ValueError(f"no model named {spec.name!r}")


def own_fits(s: Series, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The series' own models (declared by its workload for its test), by name; those that apply only."""
    return {spec.name: f for spec in own_models(s, params) if (f := fit_own(spec, s)) is not None}


def series_fits(group: list[Series], params: dict | None = None) -> dict[str, dict[str, Any]]:
    """Amdahl's and the USL for each series (variant) of a test, and its workload's own models."""
    out: dict[str, dict[str, Any]] = {}
    for s in group:
        out[s.variant] = {m: scaling.fit(m, scaling.curve_trials(s.ok_cells())) for m in scaling.MODELS}
        out[s.variant].update(own_fits(s, params))
    return out
