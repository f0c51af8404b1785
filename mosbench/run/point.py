"""A point as the sweep makes it, from its placement to the row the store keeps.

Each part has one owner and one field, so nothing overwrites another's: the window's figures
(`Measured`), the workload's own metrics (its instance's `stop()`), the client-bound verdict, the
profile or the reason it was not recorded, the interference check and its retries.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from mosbench.run.plan import TrialKey
from mosbench.run.window import Measured
from mosbench.workloads.server.limits import Verdict


@dataclass
class Point:
    key: TrialKey
    started_at: dt.datetime
    cpus: str
    unit: str
    loadgen_cpus: str | None = None
    loadgen_shared: bool | None = None
    status: str = "failed"  # ok once measured; failed with a reason
    reason: str | None = None
    measured: Measured | None = None
    workload_metrics: dict[str, Any] = field(default_factory=dict)
    client: Verdict | None = None
    profile: dict[str, Any] | None = None
    profile_note: str | None = None  # why a profile was asked for and not recorded
    interfered: bool = False
    earlier_interference: list[float] = field(default_factory=list)  # shares of the attempts measured again
    logs: str | None = None

    def fail(self, reason: str) -> None:
        self.status, self.reason = "failed", reason

    @property
    def interference(self) -> float | None:
        m = self.measured
        return m.interference.share if m is not None and m.interference is not None else None

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.measured is not None:
            out.update(self.measured.metrics())
        out.update(self.workload_metrics)
        if self.client is not None:
            out.update(client_bound=self.client.client_bound, client_evidence=self.client.evidence)
        if self.profile_note:
            out["profile"] = self.profile_note
        if self.earlier_interference:
            out["interfered_attempts"] = [round(s, 5) for s in self.earlier_interference]
        return out

    def row(self) -> dict[str, Any]:
        """The store's columns (a failed point keeps its placement, reason and logs, never numbers)."""
        k = self.key
        out: dict[str, Any] = {
            "workload": k.workload, "test": k.test, "variant": k.variant, "cores": k.cores, "trial": k.trial,
            "started_at": self.started_at, "cpus": self.cpus, "loadgen_cpus": self.loadgen_cpus,
            "loadgen_shared": self.loadgen_shared, "unit": self.unit, "status": self.status,
            "reason": self.reason, "metrics": self.metrics(), "logs": self.logs,
        }
        if self.profile is not None:  # left out, not None: a JSON column would store None as JSON null
            out["profile"] = self.profile
        if self.status == "ok" and self.measured is not None:
            out.update(self.measured.columns(), interfered=self.interfered)
        return out
