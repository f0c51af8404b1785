"""What every page's record shares: its JSON (every field, times as ISO 8601, in the field's order) and how
its numbers read. A page's HTML and its /api/ JSON are both drawn from one such record."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
from collections.abc import Container, Iterable
from typing import Any

from mosbench import units


def jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no nan or inf
    return value


class Record:
    """A page's typed record (a frozen dataclass): its JSON is every field."""

    def as_json(self) -> Any:
        return jsonable(self)


@dataclasses.dataclass(frozen=True)
class Option:
    """One choice a page's form offers: what it sends, what it shows, and whether it is the one shown now.
    Records hand these to the templates (as properties: the JSON has the values already), so that a template
    only prints what it is given."""

    value: str
    text: str
    chosen: bool


def options(values: Iterable[Any], chosen: Container[Any], text: Any = str) -> tuple[Option, ...]:
    return tuple(Option(str(v), text(v), v in chosen) for v in values)


def change_text(ratio: float | None) -> str:
    """A ratio after/before as the change it is: +4.1%, -12%."""
    if ratio is None or not math.isfinite(ratio):
        return "–"
    return f"{(ratio - 1) * 100:+.3g}%"


def interval_text(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return ""
    return f"[{(low - 1) * 100:+.3g}%, {(high - 1) * 100:+.3g}%]"


def ratio_text(ratio: float | None) -> str:
    return "–" if ratio is None else units.plain(ratio)


def age_text(when: dt.datetime | None, now: dt.datetime) -> str:
    """How long ago, in the largest unit that says it: 40 s, 3 min, 5 h, 12 days."""
    if when is None:
        return ""
    seconds = max(0.0, (now - when).total_seconds())
    for size, unit in ((86400, "day"), (3600, "h"), (60, "min")):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if unit == 'day' and n != 1 else ''} ago"
    return f"{int(seconds)} s ago"


def when_text(when: dt.datetime | None) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC") if when else ""
