"""Terminal rendering of the report's tables (built in rows.py): they fit the console, numbers never cut.

By default a table shows its essential columns (rows.Column: not `wide`, not `essential=False`) in the
console's width: a terminal's, COLUMNS, or 80 in a pipe. Where they do not fit at their natural widths,
text gives way first: long text (the columns that wrap) folds down to SOFT_TEXT characters, then the
titles of number columns fold onto a second line, then long text folds down to HARD_TEXT and names (the
other text columns) wrap at their spaces. A number column is never narrower than its widest cell, so no
number is cut, folded or ended with "…": a table that still does not fit is drawn wider than the console
(a terminal wraps its lines; nothing is cropped) rather than lose a digit. With wide=True (--wide) every
column is shown at the width it needs, long text folding at WIDE_TEXT characters.

Every cell, title and note is printable() before it is measured: a label, a test's name or a failure's
reason from the store is shown with its escapes written out, and laid out at the width it then has.
"""

from __future__ import annotations

import copy
import dataclasses

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from mosbench.analysis.cells import Series
from mosbench.printable import printable
from mosbench.report import network, rows
from mosbench.report.rows import Column, TableModel

STYLES = {"good": "green", "fair": "yellow", "poor": "red", "failed": "red"}
GAP = 2  # between two columns: a space of padding and the (blank) rule
SOFT_TEXT = 20
HARD_TEXT = 8
WIDE_TEXT = 60


def _width(text: str) -> int:
    return max((cell_len(line) for line in text.split("\n")), default=0)


def _word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


class _Fit:
    """One column's widths: `natural` (its widest cell or title on one line), `least` (never narrower)
    and what it folds to at each stage."""

    def __init__(self, col: Column, cells: list[str], wide: bool):
        widest = max((_width(c) for c in cells), default=0)
        self.natural = max(widest, _width(col.title))
        title_word = _word(col.title)
        self.number = not col.left and not col.wraps
        if self.number:  # every cell whole; only the title folds, at its spaces
            self.least = self.folded = max(widest, title_word)
        elif col.wraps:  # folds anywhere, down to a few characters
            self.folded = max(title_word, min(self.natural, SOFT_TEXT))
            self.least = max(title_word, min(self.natural, HARD_TEXT))
        else:  # a name: wraps at its spaces
            self.least = self.folded = max(title_word, max((_word(c) for c in cells), default=0))
        if wide and col.wraps:
            self.natural = max(self.least, min(self.natural, WIDE_TEXT))
        self.wraps = col.wraps


def layout(fits: list[_Fit], width: int | None) -> list[int]:
    """Each column's width in `width` characters (None: as wide as needed), in the order of the module's
    docstring; a column is never made narrower than its `least`."""
    widths = [f.natural for f in fits]
    if width is None:
        return widths
    budget = width - GAP * (len(fits) - 1)

    def shrink(floors: dict[int, int]) -> None:
        while sum(widths) > budget:
            over = [i for i, floor in floors.items() if widths[i] > floor]
            if not over:
                return
            widths[max(over, key=lambda i: (widths[i], -i))] -= 1

    shrink({i: f.folded for i, f in enumerate(fits) if f.wraps})
    # A number's title folds whole, onto a second line, and only as many titles as need to: the one that
    # gives back most first.
    for i in sorted((i for i, f in enumerate(fits) if f.number), key=lambda i: widths[i] - fits[i].least,
                    reverse=True):
        if sum(widths) <= budget:
            break
        widths[i] = fits[i].least
    shrink({i: f.least for i, f in enumerate(fits) if not f.number})
    # What a folded title gave back beyond the need goes to the text that folded.
    spare = budget - sum(widths)
    while spare > 0 and (short := [i for i, f in enumerate(fits) if not f.number and widths[i] < f.natural]):
        widths[min(short, key=lambda i: (widths[i], i))] += 1
        spare -= 1
    return widths


class FittedTable(Table):
    """A rich Table that lays its columns out (layout) in the width it is drawn in; its title and note
    wrap at that width."""

    def __init__(self, model: TableModel, shown: list[int], wide: bool):
        model = _escaped(model)
        super().__init__(title=model.title, caption=model.note, box=box.SIMPLE_HEAD, show_edge=False,
                         pad_edge=False, padding=(0, 1, 0, 0))
        self.fits = [_Fit(model.columns[i], [r.cells[i] for r in model.rows], wide) for i in shown]
        self.wide = wide
        for i in shown:
            col = model.columns[i]
            self.add_column(col.title, justify="left" if col.left else "right", no_wrap=False, overflow="fold")
        for n, row in enumerate(model.rows):
            # Text, not markup: what comes from the machine or a workload ("[always] never") stays as it is.
            cells = [Text(row.cells[i], style=STYLES.get(row.cell_styles.get(i, ""), "")) for i in shown]
            self.add_row(*cells, style=STYLES.get(row.style or ""), end_section=n in model.breaks)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = layout(self.fits, None if self.wide else options.max_width)
        body = copy.copy(self)  # the rows without the title and note, at exactly these widths
        body.title = body.caption = None
        body.columns = [copy.copy(c) for c in self.columns]
        for col, w in zip(body.columns, widths, strict=True):
            col.width = w
        body.width = sum(widths) + GAP * (len(widths) - 1)
        prose = options.update(width=max(options.max_width, 20), no_wrap=False, overflow="fold", justify="default")
        if self.title:
            yield from console.render(Text(str(self.title), style="table.title"), prose)
        yield from Table.__rich_console__(body, console, options.update(no_wrap=False, overflow="fold"))
        if self.caption:
            yield from console.render(Text(str(self.caption), style="table.caption"), prose)
        yield Segment.line()


def _escaped(model: TableModel) -> TableModel:
    """The table with its text as printable() writes it (its line breaks kept: a cell may hold two lines)."""
    def safe(text: str | None) -> str | None:
        return None if text is None else printable(text, keep="\n")

    out = copy.copy(model)
    out.title, out.note = safe(model.title) or "", safe(model.note)
    out.columns = [dataclasses.replace(c, title=printable(c.title, keep="\n")) for c in model.columns]
    out.rows = [dataclasses.replace(r, cells=[printable(c, keep="\n") for c in r.cells]) for r in model.rows]
    return out


def render(model: TableModel, wide: bool = False) -> Table:
    """The essential columns (wide: every column) of a table, laid out when printed."""
    shown = [i for i, c in enumerate(model.columns) if wide or (c.essential and not c.wide)]
    return FittedTable(model, shown, wide)


def series_tables(series: list[Series], wide: bool = False) -> list[Table]:
    """One table per test, variants stacked; then the network section's, where a point has one."""
    return [render(m, wide) for m in (*rows.cell_tables(series), *network.tables(series))]


def summary_table(series: list[Series], wide: bool = False) -> Table:
    return render(rows.summary_table(series), wide)


def lock_model_tables(fits: dict, up_to: int, wide: bool = False) -> list[Table]:
    return [render(m, wide) for m in rows.lock_model_tables(fits, up_to)]
