"""The sections of a report, one list for both outputs: `mosbench show` prints each section's tables in the
terminal, the HTML report renders the same sections with their figures. Each is built here once, as a
record of what both outputs show; an output adds only what it alone can hold (the HTML: figures, profiles,
scaling models). A section one output has, the other has.

The list's order is the page's: the overview first (the summary and where the cores went), then the
sections only some runs have, then one a test. The terminal prints the overview last, where it stays on
the screen.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from mosbench.analysis import baseline, commute, verdict
from mosbench.analysis.cells import Series, group_by_test, workload_of
from mosbench.analysis.explain import Explained, Explanation
from mosbench.analysis.explain_history import HistoryExplained
from mosbench.analysis.history import History
from mosbench.analysis.profiles import BySeries
from mosbench.filenames import file_stem
from mosbench.report import commute as commute_report
from mosbench.report import filesystems, network, rows, webmethod, whatchanged
from mosbench.report import history as history_report
from mosbench.report.network import NetworkGroup
from mosbench.report.rows import TableModel

Profiles = BySeries


def curves(series: list[Series]) -> list[Series]:
    """The series read as curves of throughput against cores: a section a test, the summary and the verdicts.
    A workload whose series are something else says so (Workload.curves: commute's are sides of pairs)."""
    return [s for s in series if (w := workload_of(s.workload)) is None or w.curves]


@dataclass(frozen=True)
class Line:
    """A sentence under a table, in red in the terminal where what it says does not hold."""

    text: str
    holds: bool


Item = TableModel | Line


@dataclass(frozen=True)
class RunSeries:
    """One run's own series, unlabelled: the commutativity of a run is read from its points alone."""

    label: str
    series: list[Series]
    profiles: Profiles
    kernel: str


@dataclass(frozen=True)
class View:
    """What the sections are built from: one run, or several with their variants labelled by run."""

    series: list[Series]  # every run's
    profiles: Profiles  # by series, as labelled
    runs: tuple[RunSeries, ...]
    no_profile: str  # verdict.profile_advice for the runs' machine
    history: History | None = None  # the first run's machine's runs up to it (analysis/history.of_run)
    explained: tuple[Explained, ...] = ()  # each significant change against the first run, why (analysis/explain)
    history_explained: tuple[HistoryExplained, ...] = ()  # each of the history's changes, why (explain_history)

    @property
    def curves(self) -> list[Series]:
        return curves(self.series)


class Section(ABC):
    """One section: its kind (the HTML's template block), its anchor, heading and link, and its items in
    the order the terminal prints them."""

    kind: ClassVar[str]
    title: ClassVar[str]
    nav: ClassVar[str]
    overview: ClassVar[bool] = False
    headed: ClassVar[bool] = True  # whether the terminal prints the title (a test's table bears its name)

    @property
    def anchor(self) -> str:
        return self.kind

    @abstractmethod
    def items(self) -> list[Item]: ...


@dataclass(frozen=True)
class Summary(Section):
    kind = "summary"
    title = nav = "Summary"
    overview = True
    summary: TableModel  # Figure 3 in numbers
    verdicts: TableModel  # where each curve's cores went (Figure 12)

    def items(self) -> list[Item]:
        return [self.summary, self.verdicts]


@dataclass(frozen=True)
class CommuteRun:
    label: str
    found: list[commute.PairResult]
    situations: TableModel
    not_scaling: TableModel

    @property
    def missing_alone(self) -> list[str]:
        """Situations without an alone rate for a side: no verdict until a point at one core is measured."""
        return sorted({r.test for r in self.found if r.alone_a is None or r.alone_b is None})


@dataclass(frozen=True)
class Commute(Section):
    kind = "commute"
    title = "Commutativity: which commutative calls scale on this kernel"
    nav = "Commutativity"
    runs: tuple[CommuteRun, ...]  # each run with pairs
    changes: tuple[TableModel, ...]  # each later run's changed verdicts against the first

    def items(self) -> list[Item]:
        return [*(t for r in self.runs for t in (r.situations, r.not_scaling)), *self.changes]


@dataclass(frozen=True)
class Baseline:
    series: Series
    steps: list[baseline.BaselineStep]
    verdict: baseline.Verdict
    table: TableModel

    @property
    def name(self) -> str:
        return f"{self.series.name} ({self.series.variant})"

    @property
    def line(self) -> Line:
        return Line(self.verdict.text(self.series.workload), self.verdict.valid)


@dataclass(frozen=True)
class WebMethod(Section):
    kind = "web-method"
    title = "One-core baseline and the load each point carried"
    nav = "Baseline and load"
    baselines: tuple[Baseline, ...]
    qos: TableModel | None  # every file-set point's search

    def items(self) -> list[Item]:
        return [*(i for b in self.baselines for i in (b.table, b.line)), *([self.qos] if self.qos else [])]


@dataclass(frozen=True)
class Network(Section):
    kind = "network"
    title = nav = "Network"
    groups: tuple[NetworkGroup, ...]

    def items(self) -> list[Item]:
        return [t for g in self.groups for t in g.tables]


@dataclass(frozen=True)
class FileSystems(Section):
    kind = "filesystems"
    title = "File systems: FxMark's operations at three sharing levels"
    nav = "File systems"
    curves: tuple[filesystems.OperationCurves, ...]
    ratios: TableModel  # FxMark's Figure 2: operations × file systems, the per-core ratio at the most cores

    def items(self) -> list[Item]:
        return [self.ratios]


@dataclass(frozen=True)
class HistorySection(Section):
    kind = "history"
    title = "History"
    nav = "History"
    found: History
    series: TableModel  # each test's one-core and most-cores series over the runs
    changes: TableModel  # each row linked to its explanation in What changed, where its sides were profiled
    lines: tuple[Line, ...]  # each change told in full
    unexplained: whatchanged.Unexplained | None = None  # the changes a side of which was not profiled

    def items(self) -> list[Item]:
        left = self.unexplained
        return [self.series, self.changes, *self.lines,
                *((Line(left.line, False), *(Line(c, False) for c in left.commands)) if left else ())]


@dataclass(frozen=True)
class WhatChanged(Section):
    kind = "what-changed"
    title = "What changed: each significant change explained by its profiles"
    nav = "What changed"
    blocks: tuple[whatchanged.Block, ...]
    unexplained: whatchanged.Unexplained | None  # the changes a side of which was not profiled

    def items(self) -> list[Item]:
        left = self.unexplained
        return [*(i for b in self.blocks for i in (Line(b.heading, True), b.table, *(Line(t, True) for t in b.lines))),
                *((Line(left.line, False), *(Line(c, False) for c in left.commands)) if left else ())]


@dataclass(frozen=True)
class Test(Section):
    kind = "test"
    headed = False
    name: str
    group: list[Series]  # its variants, in the workload's order
    table: TableModel  # every (variant, cores)

    @property
    def anchor(self) -> str:
        return file_stem(self.name)

    @property
    def title(self) -> str:
        return self.name

    @property
    def nav(self) -> str:
        return self.name

    def items(self) -> list[Item]:
        return [self.table]


def _summary(view: View) -> list[Section]:
    found = verdict.judge_all(view.curves, view.profiles, view.no_profile)
    return [Summary(rows.summary_table(view.curves), rows.verdict_table(found))]


def _commute(view: View) -> list[Section]:
    runs = tuple(CommuteRun(r.label, found, commute_report.situations_table(found),
                            commute_report.not_scaling_table(r.series, found, r.profiles))
                 for r in view.runs if (found := commute.results(r.series)))
    first = view.runs[0]
    changes = tuple(commute_report.changes_table(first.label, r.label, changed) for r in view.runs[1:]
                    if (changed := commute.changed(commute.results(first.series), commute.results(r.series))))
    return [Commute(runs, changes)] if runs else []


def _web_method(view: View) -> list[Section]:
    found = tuple(Baseline(s, steps, judged, webmethod.baseline_table(f"{s.name} ({s.variant})", steps, judged,
                                                                      s.unit))
                  for s, steps, judged in webmethod.baselines(view.curves))
    qos = webmethod.qos_table(view.curves)
    return [WebMethod(found, qos)] if found or qos else []


def _network(view: View) -> list[Section]:
    groups = network.section(view.curves)
    return [Network(tuple(groups))] if groups else []


def _file_systems(view: View) -> list[Section]:
    curves = filesystems.operation_curves(view.curves)
    table = filesystems.ratio_table(curves)
    return [FileSystems(tuple(curves), table)] if curves and table else []


def _history(view: View) -> list[Section]:
    h = view.history
    if h is None:
        return []
    index = {id(shift): i for i, shift in enumerate(h.shifts)}
    # A change's row shows its most cores: the explanation there, else at the most cores explained.
    anchors = {index[id(x.shift)]: whatchanged.anchor(x) for x in sorted(view.history_explained,
                                                                          key=lambda x: x.change.cores)
               if isinstance(x.found, Explanation) and id(x.shift) in index}
    return [HistorySection(h, history_report.series_table(h), history_report.shifts_table(h, anchors),
                           tuple(Line(text, True) for text in history_report.summary_lines(h)),
                           whatchanged.unexplained(list(view.history_explained)))]


def _what_changed(view: View) -> list[Section]:
    """The comparison's changes and the history's, each explained; the commands that would profile the
    comparison's unprofiled sides (the history's are in its own section, beside its changes)."""
    found = whatchanged.blocks([*view.explained, *view.history_explained], whatchanged.REPORT_TOP)
    left = whatchanged.unexplained(list(view.explained))
    return [WhatChanged(tuple(found), left)] if found or left else []


def _tests(view: View) -> list[Section]:
    groups = group_by_test(view.curves)
    return [Test(name, group, t) for (name, group), t in zip(groups.items(), rows.cell_tables(view.curves),
                                                             strict=True)]


# The one list: each builder gives its sections, none where the runs have nothing for it.
SECTIONS: tuple[Callable[[View], list[Section]], ...] = (_summary, _commute, _web_method, _network, _file_systems,
                                                         _history, _what_changed, _tests)


def build(view: View) -> list[Section]:
    return [s for make in SECTIONS for s in make(view)]


def for_terminal(found: Sequence[Section]) -> list[Section]:
    """The terminal's order: the overview last."""
    return sorted(found, key=lambda s: s.overview)
