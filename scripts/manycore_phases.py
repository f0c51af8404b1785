"""A phase of the many-core check (scripts/check_manycore.py) and how it ended: what the check records and
the summary (scripts/manycore_summary.py) reads, apart from both so that each imports it and neither the
other. Standard library only: a lent machine's system Python runs the check before anything is installed."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class State(enum.Enum):
    """How a phase ended, from best to worst: a phase ends in the worst thing that happened in it."""

    DONE = "done"
    SKIPPED = "skipped"  # it would not fit, or had nothing to work on
    CUT_SHORT = "cut short"  # stopped at its deadline: what it measured is kept
    FAILED = "failed"  # a command exited non-zero, a tool failed, or the phase raised

    def worse(self, other: State) -> State:
        order = list(State)
        return max(self, other, key=order.index)


@dataclass
class Failure:
    """What failed in a phase (a command by its output's name, or a pair), how, and its last lines."""

    what: str
    how: str
    lines: list[str] = field(default_factory=list)


@dataclass
class Phase:
    name: str
    started: float = 0.0
    seconds: float = 0.0
    state: State = State.DONE
    notes: list[str] = field(default_factory=list)  # what made the state, or what was left out, in order
    failures: list[Failure] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def mark(self, state: State, note: str) -> None:
        """Notes what happened; the phase's state becomes `state` where that is worse."""
        self.notes.append(note)
        self.state = self.state.worse(state)

    def failed(self, failure: Failure) -> None:
        self.failures.append(failure)
        self.mark(State.FAILED, f"{failure.what} {failure.how}")

    def describe(self) -> str:
        """"done", "skipped: no --wis given", "failed: run-scale-lock exited 3; …"."""
        return f"{self.state.value}: {'; '.join(self.notes)}" if self.notes else self.state.value
