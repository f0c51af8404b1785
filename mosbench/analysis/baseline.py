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

# A lasting rise of CPU per unit above the curve's median by more than this is a bend...
FLAT_WITHIN = 0.15
# ...and so is carrying less than this share of the offered rate...
CARRIED = 0.95
# ...as long as the core was below this utilization (above it, queueing is expected).
HIGH_UTILIZATION = 0.9


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
    reference_us: float | None  # the median CPU per unit of the steps below high utilization
    bends_at: BaselineStep | None  # where the lasting change begins
    reason: str
    # The lightest step's CPU per unit over the reference, less 1: wake-ups and idle exits spread over few
    # requests. Not a bend (the ratios compare loaded points), but a reader should see it.
    light_excess: float | None = None

    def text(self, workload: str) -> str:
        light = (f"; at the lightest load CPU per unit is {self.light_excess:+.0%} (fixed costs over fewer "
                 "requests)" if self.light_excess is not None and self.light_excess > FLAT_WITHIN else "")
        if self.valid:
            return (f"{workload}'s one-core baseline holds: below {HIGH_UTILIZATION:.0%} busy, CPU per unit does "
                    f"not rise for good above {self.reference_us:.3g} µs +{FLAT_WITHIN:.0%} and the offered rate "
                    f"is carried{light}")
        return f"{workload}'s one-core baseline bends early ({self.reason}): its per-core ratios are suspect{light}"


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
    """Bent where, from some step on, every step below high utilization costs more CPU per unit than the
    curve's median allows, or carries less than it is offered: a lasting change, not one noisy step (a
    one-second step of large downloads carries a few dozen of them). CPU per unit that falls as the load
    rises is fixed costs amortized, not a bend."""
    below = [s for s in steps if s.busy < HIGH_UTILIZATION]
    costs = [s.cpu_us_per_unit for s in below if s.cpu_us_per_unit]
    if len(costs) < 2:
        return Verdict(False, None, None, "fewer than two steps below high utilization to judge")
    ref = statistics.median(costs)
    lightest = min(steps, key=lambda s: s.offered)
    light = lightest.cpu_us_per_unit / ref - 1 if lightest.cpu_us_per_unit else None

    def costlier(s: BaselineStep) -> bool:
        return bool(s.cpu_us_per_unit) and s.cpu_us_per_unit > ref * (1 + FLAT_WITHIN)

    def dropped(s: BaselineStep) -> bool:
        return s.carried < CARRIED * s.offered

    for i, s in enumerate(below):
        rest = below[i:]
        if len(rest) >= 2 and all(costlier(r) for r in rest):
            return Verdict(False, ref, s, f"{s.cpu_us_per_unit:.3g} µs per unit from {s.offered_share:.0%} of the "
                           f"maximum and {s.busy:.0%} busy on, {s.cpu_us_per_unit / ref - 1:+.0%} from {ref:.3g} µs",
                           light)
        if len(rest) >= 2 and all(dropped(r) for r in rest):
            return Verdict(False, ref, s, f"carried {s.carried:.0f}/s of {s.offered:.0f}/s offered from "
                           f"{s.offered_share:.0%} of the maximum and {s.busy:.0%} busy on", light)
    return Verdict(True, ref, None, "", light)
