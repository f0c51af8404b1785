"""Where the results store is when none is named: apart from db.py, since the command line names it in its
help and must start without importing SQLAlchemy."""

from pathlib import Path

DEFAULT_PATH = Path("results") / "mosbench.sqlite"
