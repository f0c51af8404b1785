"""Every model fitted to a curve, in one place: Amdahl's law and the USL (scaling.py) for every curve, and
the models a workload declares for a test of its own (workloads' models_for: scale/lock's lock-collapse
model, lockmodel.py), fitted with the run's parameters of that workload and drawn one way
(plots.scaling_figure)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from mosbench.analysis import lockmodel, scaling
from mosbench.analysis.cells import Series, own_models
from mosbench.workloads.base import ModelSpec


class FittedModel(Protocol):
    """What a table, a figure and the JSON read of any fitted model (scaling.ModelFit, lockmodel.Fit)."""

    @property
    def model(self) -> str: ...  # its name: "amdahl", "usl" or the name a workload declares it by

    @property
    def label(self) -> str: ...

    @property
    def counts(self) -> tuple[int, ...]: ...  # the core counts fitted

    @property
    def rms_log_error(self) -> float: ...

    @property
    def undetermined(self) -> str: ...  # why no peak is named; "" where the points can tell

    @property
    def holdout(self) -> scaling.Holdout | None: ...

    def throughput(self, n) -> np.ndarray: ...  # total throughput at n cores

    def band(self, cores) -> tuple[np.ndarray, np.ndarray] | None: ...  # its 95% prediction interval there

    def peak(self, up_to: int) -> float | None: ...

    def peak_interval(self, up_to: int) -> tuple[float, float] | None: ...

    def describe(self) -> str: ...

    def as_json(self, cores: list[int]) -> dict[str, Any]: ...


# A model is fitted or refused (too few core counts for its parameters).
Outcome = FittedModel | scaling.Refusal

# The workloads' own models, by the name they declare them with.
OWN: dict[str, Callable[[ModelSpec, Series], FittedModel | None]] = {lockmodel.NAME: lockmodel.fit_spec}


def fit_own(spec: ModelSpec, s: Series) -> FittedModel | None:
    """A workload's own model fitted to one series; None where it does not apply to the series' variant."""
    if spec.name not in OWN:
        raise ValueError(f"no model named {spec.name!r}")
    return OWN[spec.name](spec, s)


def own_fits(s: Series, params: dict[str, Any] | None = None) -> dict[str, FittedModel]:
    """The series' own models (declared by its workload for its test), by name; those that apply only."""
    return {spec.name: f for spec in own_models(s, params) if (f := fit_own(spec, s)) is not None}


def series_fits(group: list[Series], params: dict | None = None) -> dict[str, dict[str, Outcome]]:
    """Amdahl's and the USL for each series (variant) of a test, and its workload's own models."""
    out: dict[str, dict[str, Outcome]] = {}
    for s in group:
        out[s.variant] = {m: scaling.fit(m, scaling.curve_trials(s.ok_cells())) for m in scaling.MODELS}
        out[s.variant].update(own_fits(s, params))
    return out
