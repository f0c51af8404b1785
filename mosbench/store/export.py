"""A run's points as a file other tools read: CSV (a row a point, its scalar columns) or JSON (the run
and every point with its samples, metrics and logs)."""

from __future__ import annotations

import csv
import io
import json
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mosbench.store.db import Store


class Format(StrEnum):
    CSV = "csv"
    JSON = "json"


# A point's nested columns, which a CSV cell cannot hold: JSON has them.
NOT_IN_CSV = ("samples", "metrics")


def export(db: Store, run_ref: str, fmt: Format) -> str:
    """The run `run_ref` names (an id or 'latest'), as `fmt`."""
    from mosbench.store.db import dumps, to_jsonable  # here: the command line names Format to start
    r = db.run(run_ref)
    if fmt is Format.JSON:
        return json.dumps({"run": json.loads(dumps([r]))[0],
                           "points": json.loads(dumps(db.points(r["id"], with_logs=True)))}, indent=1)
    rows = db.points(r["id"])
    buf = io.StringIO()
    fields = [k for k in (rows[0] if rows else {}) if k not in NOT_IN_CSV]
    writer = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: to_jsonable(v) for k, v in row.items()})
    return buf.getvalue()
