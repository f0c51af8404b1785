"""Terminal rendering of the report's tables (built in rows.py): fits 80 columns, numbers never cut."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from mosbench.analysis.cells import Series
from mosbench.report import network, rows
from mosbench.report.rows import TableModel

STYLES = {"good": "green", "fair": "yellow", "poor": "red", "failed": "red"}


def render(model: TableModel) -> Table:
    t = Table(title=model.title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
              # The blank line a table without a note ends with, so the next title does not run into it
              caption=Text(model.note + "\n") if model.note else None, caption_justify="left")
    shown = [i for i, c in enumerate(model.columns) if not c.wide]
    for i in shown:
        col = model.columns[i]
        t.add_column(col.title, justify="left" if col.left else "right", no_wrap=not col.wraps,
                     overflow="fold" if col.wraps else "ellipsis", min_width=4 if col.wraps else len(col.title))
    for n, row in enumerate(model.rows):
        # Text, not markup: what comes from the machine or a workload ("[always] never") stays as it is.
        cells = [Text(row.cells[i], style=STYLES.get(row.cell_styles.get(i, ""), "")) for i in shown]
        t.add_row(*cells, style=STYLES.get(row.style or ""), end_section=n in model.breaks)
    return t


def series_tables(series: list[Series]) -> list[Table]:
    """One table per test, variants stacked; then the network section's, where a point has one."""
    return [render(m) for m in (*rows.cell_tables(series), *network.tables(series))]


def summary_table(series: list[Series]) -> Table:
    return render(rows.summary_table(series))


def lock_model_table(fits: dict, up_to: int) -> Table:
    return render(rows.lock_model_table(fits, up_to))
