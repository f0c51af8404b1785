"""Whether a workload's one-core baseline is valid (Veal & Foong, paper 002, section 4.1).

A per-core ratio compares a point against the one-core point. That is only fair when one core's
efficiency does not itself depend on load: their web server's cycles per byte stayed flat up to 96.7%
utilization (Figure 2) and its throughput followed the offered load (Figure 3). A baseline whose CPU
per unit climbs while the core still has time to spare, or that cannot carry the rate it is offered
well below its maximum, bends early, and every per-core ratio built on its one-core point is suspect.
A bend is a lasting change: one step off the band, with the steps after it back on, is noise.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

# A step's CPU per unit more than this far from the light-load median is a bend...
FLAT_WITHIN = 0.15
# ...and so is carrying less than this share of the offered rate...
CARRIED = 0.95
# ...as long as the core was below this utilization (above it, queueing is expected).
HIGH_UTILIZATION = 0.9
# The light-load reference: the steps offered at most this share of the maximum.
LIGHT_SHARE = 0.5


@dataclass(frozen=True)
class BaselineStep:
    offered_share: float  # of the closed-loop maximum's request rate
    offered: float  # requests per second asked
    carried: float  # requests per second answered
    busy: float  # the server core's utilization
    cpu_us_per_unit: float | None


@dataclass(frozen=True)
class Verdict:
    valid: bool
    reference_us: float | None  # the light-load median CPU per unit
    bends_at: BaselineStep | None  # the first step that bent below high utilization
    reason: str

    def text(self, workload: str) -> str:
        if self.valid:
            return (f"{workload}'s one-core baseline holds: below {HIGH_UTILIZATION:.0%} busy, CPU per unit keeps "
                    f"within ±{FLAT_WITHIN:.0%} of {self.reference_us:.3g} µs (no lasting change) and the offered "
                    "rate is carried")
        return f"{workload}'s one-core baseline bends early ({self.reason}): its per-core ratios are suspect"


def steps_from(metrics: dict[str, Any]) -> list[BaselineStep]:
    """The curve stored by a baseline point (its "baseline_max" and "baseline" steps)."""
    top = (metrics.get("baseline_max") or {}).get("requests_per_s")
    out = []
    for s in metrics.get("baseline") or []:
        if not s.get("rate"):
            continue
        out.append(BaselineStep(round(s["rate"] / top, 2) if top else 0.0, s["rate"], s["requests_per_s"],
                                s["server_busy"], s.get("server_us_per_kilobyte")))
    return out


def judge(steps: list[BaselineStep]) -> Verdict:
    """Bent where, from some step on, every step below high utilization is off: a lasting change, not one
    noisy step (a one-second step of large downloads carries a few dozen of them)."""
    light = [s.cpu_us_per_unit for s in steps if s.offered_share <= LIGHT_SHARE and s.cpu_us_per_unit]
    if not light:
        return Verdict(False, None, None, "no step at light load to compare with")
    ref = statistics.median(light)
    below = [s for s in steps if s.busy < HIGH_UTILIZATION]

    def inefficient(s: BaselineStep) -> bool:
        return bool(s.cpu_us_per_unit) and abs(s.cpu_us_per_unit / ref - 1) > FLAT_WITHIN

    def dropped(s: BaselineStep) -> bool:
        return s.carried < CARRIED * s.offered

    for i, s in enumerate(below):
        rest = below[i:]
        if len(rest) >= 2 and all(inefficient(r) for r in rest):
            return Verdict(False, ref, s, f"{s.cpu_us_per_unit:.3g} µs per unit from {s.offered_share:.0%} of the "
                           f"maximum and {s.busy:.0%} busy on, {s.cpu_us_per_unit / ref - 1:+.0%} from {ref:.3g} µs")
        if len(rest) >= 2 and all(dropped(r) for r in rest):
            return Verdict(False, ref, s, f"carried {s.carried:.0f}/s of {s.offered:.0f}/s offered from "
                           f"{s.offered_share:.0%} of the maximum and {s.busy:.0%} busy on")
    return Verdict(True, ref, None, "")
