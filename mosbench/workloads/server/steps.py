"""Brief client runs inside a point, before its measured window: the steps of a search for the load.

Veal & Foong (paper 002, section 4) measured each point at the highest load whose responses met
SPECweb2005's rule (at least 95% "good", 99% "tolerable"), found by stepping the client count, and
checked their one-core baseline by throttling the load from 10% to 100% of the maximum. Both are
series of short runs of the point's own client against its running servers: each step a fresh
client process in the load generator's group, a warm-up, a window timed by the phase word, and the
server CPUs' /proc/stat over that window. The steps are kept in the point's metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from mosbench.errors import PointFailed
from mosbench.machine import accounting
from mosbench.workloads.base import PointContext
from mosbench.workloads.server.loadgen import AFTER, WINDOW, Client, client_metrics

STEP_WARMUP_S = 0.3
STEP_START_STOP_S = 0.2  # a client's start, statistics file and result, as seen here
GOOD_SHARE, TOLERABLE_SHARE = 0.95, 0.99  # SPECweb2005's TIME_GOOD_PCT and TIME_TOL_PCT


@dataclass(frozen=True)
class Step:
    """One brief run: what was asked, what came back, and what the server's CPUs spent on it."""

    connections: int  # per port
    rate: float | None  # open-loop requests per second asked; None: closed loop
    done: int
    lost: int
    good: int
    tolerable: int
    requests_per_s: float
    kilobytes_per_s: float
    server_busy: float  # fraction of the server CPUs' time not idle
    server_us_per_kilobyte: float | None
    latency_p50_us: float
    latency_p99_us: float
    schedule_kept: float | None  # open loop: sent over due

    @property
    def good_share(self) -> float:
        return self.good / self.done if self.done else 0.0

    @property
    def tolerable_share(self) -> float:
        return self.tolerable / self.done if self.done else 0.0

    @property
    def meets_qos(self) -> bool:
        return self.done > 0 and not self.lost and self.good_share >= GOOD_SHARE and \
            self.tolerable_share >= TOLERABLE_SHARE

    def as_metrics(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(good_share=round(self.good_share, 4), tolerable_share=round(self.tolerable_share, 4))
        return out


# A step's client, started: (its name, its rate in all or None, its own stop in seconds).
StartClient = Callable[[str, float | None, float], Client]


def run_step(ctx: PointContext, name: str, start: StartClient, connections: int, seconds: float,
             rate: float | None = None) -> Step:
    """A client started by `start` (here or on the client hosts) run once for `seconds` after a warm-up."""
    client = start(name, rate, STEP_WARMUP_S + seconds + 30)
    try:
        time.sleep(STEP_WARMUP_S)
        client.check()
        before, t0 = accounting.read_proc_stat(), time.monotonic()
        client.set_phase(WINDOW)
        time.sleep(seconds)
        client.set_phase(AFTER)
        after, t1 = accounting.read_proc_stat(), time.monotonic()
        client.check()
    finally:
        result = client.stop()
    if result is None:
        raise PointFailed(f"{name} wrote no result")
    window = result.window_s or (t1 - t0)
    usage = accounting.usage(before, after, ctx.cpus)
    kilobytes = (result.bytes or 0) / 1000
    us_per_kilobyte = accounting.per_unit_us(usage.user + usage.system, kilobytes)
    figures = client_metrics(result)
    done = result.done or 0
    return Step(
        connections=connections, rate=rate, done=done, lost=result.lost or 0,
        good=done if result.good is None else result.good,
        tolerable=done if result.tolerable is None else result.tolerable,
        requests_per_s=round(done / window, 1), kilobytes_per_s=round(kilobytes / window, 1),
        server_busy=round(usage.busy_fraction, 4),
        server_us_per_kilobyte=None if us_per_kilobyte is None else round(us_per_kilobyte, 3),
        latency_p50_us=figures.get("latency_p50_us", 0.0), latency_p99_us=figures.get("latency_p99_us", 0.0),
        schedule_kept=figures.get("schedule_kept"),
    )


def step_seconds(seconds: float) -> float:
    """What one step of `seconds` takes in all: the client's start, its warm-up, the window, its stop."""
    return STEP_WARMUP_S + seconds + STEP_START_STOP_S


def connection_steps(most: int) -> list[int]:
    """1, 2, 4, ... up to and including `most`."""
    steps, c = [], 1
    while c < most:
        steps.append(c)
        c *= 2
    return [*steps, most]


def highest_meeting_qos(run: Callable[[int], Step], most: int) -> tuple[int, list[Step]]:
    """Steps the connections per port up from 1 until a step misses SPECweb2005's rule; the highest that
    met it, and every step taken. PointFailed when even one connection a port misses it."""
    steps: list[Step] = []
    best = 0
    for connections in connection_steps(most):
        step = run(connections)
        steps.append(step)
        if not step.meets_qos:
            break
        best = connections
    if not best:
        s = steps[0]
        raise PointFailed(f"SPECweb2005's rule is missed even at one connection a port: {s.good_share:.1%} good, "
                          f"{s.tolerable_share:.1%} tolerable, {s.lost} lost")
    return best, steps


BASELINE_SHARES = tuple(round(0.1 * i, 1) for i in range(1, 11))


def baseline(run: Callable[[float | None], Step]) -> tuple[Step, list[Step]]:
    """The one-core baseline (paper 002, Figures 2 and 3): the closed-loop maximum, then open-loop runs
    at 10% to 100% of its request rate."""
    top = run(None)
    if not top.requests_per_s:
        raise PointFailed("the baseline's closed-loop run answered nothing")
    return top, [run(share * top.requests_per_s) for share in BASELINE_SHARES]
