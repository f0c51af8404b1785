"""What the commands share: the store and width options, a finite float, the store opened, the parsers of
comma lists and commit ids, and a figure's -o checked."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING

import click

from mosbench import outfile
from mosbench.errors import UserError
from mosbench.store.location import DEFAULT_PATH as DEFAULT_STORE

if TYPE_CHECKING:
    from mosbench.store.db import Store

store_option = click.option("--store", "store_url", envvar="MOSBENCH_STORE", default=None,
                            help="Results store: an SQLite path or a SQLAlchemy URL (postgresql+psycopg://…). "
                                 f"Default {DEFAULT_STORE}.")


wide_option = click.option("--wide", is_flag=True,
                           help="Every column, at the width it needs (by default the essential ones fit the "
                                "terminal, or 80 columns in a pipe; the HTML report has them all).")


class FiniteFloat(click.ParamType):
    """A float at least `least`; nan and inf are refused (a window of inf seconds never ends)."""

    name = "seconds"

    def __init__(self, least: float):
        self.least = least

    def convert(self, value, param, ctx) -> float:
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        if x < self.least:
            self.fail(f"{value} is below {self.least}", param, ctx)
        return x



def open_store(store_url: str | None, create: bool = True) -> Store:
    """The results store (store/db.Store). SQLAlchemy is imported here, so a command that reads no store
    (--help, list, doctor, a shell's completion) starts without it."""
    from mosbench.store.db import Store

    return Store(store_url, create=create)


def comma_list(_ctx, _param, value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def commit_id(_ctx, _param, value: str | None) -> str | None:
    """--commit: a commit id as git prints it (history orders and bisects runs by it), lower-cased."""
    if value is not None and not re.fullmatch(r"[0-9a-fA-F]{7,40}", value):
        raise UserError(f"--commit {value!r} is not a commit id: give its 7 to 40 hex digits "
                        "(`git -C TREE rev-parse REV` prints them)")
    return value.lower() if value else None


def figure_target(output: Path) -> outfile.Output:
    """-o FIGURE checked before anything is fitted: a format matplotlib draws, a place it can be written."""
    from matplotlib.figure import Figure  # here: the commands that draw nothing start without it

    kinds = Figure().canvas.get_supported_filetypes()
    if output.suffix.lstrip(".").lower() not in kinds:
        raise UserError(f"-o {output}: name a figure by what it is drawn as ({', '.join(f'.{k}' for k in kinds)})")
    return outfile.target(output, "the figure")
