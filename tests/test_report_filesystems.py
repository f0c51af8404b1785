"""The file systems' section from stored points alone: a figure's lines per operation, FxMark's Figure 2 as
a table of per-core ratios and as a heat map."""

import html as html_text
import re

from mosbench.analysis.cells import build_series
from mosbench.report import filesystems, html
from mosbench.store import db as store
from tests.conftest import mosbench_here
from tests.test_store import _point


def _fx(test: str, fs: str, cores: int, per_core: float, idle: float = 0.0, **kw) -> dict:
    return _point(workload="fxmark", test=test, variant=fs, cores=cores, unit="read", work=per_core * cores,
                  throughput=per_core * cores, cpus=",".join(map(str, range(cores))), user_s=0.1 * cores,
                  system_s=(0.9 - idle) * cores, idle_s=idle * cores, **kw)


POINTS = [
    _fx("DRBL", "tmpfs", 1, 100.0), _fx("DRBL", "tmpfs", 4, 95.0),
    _fx("DRBL", "ext4", 1, 80.0), _fx("DRBL", "ext4", 4, 20.0),
    _fx("MWRM", "ext4", 1, 50.0), _fx("MWRM", "ext4", 4, 35.0),
    _fx("DRBH", "btrfs", 1, 10.0, idle=0.5), _fx("DRBH", "btrfs", 4, 10.0),  # a one-core point that idled
    _fx("DWOL", "xfs", 4, 70.0),  # no one-core point
    _point(workload="micro", test="getppid1"),  # another workload's series: not the section's
]


def test_operations_come_in_fxmark_s_order_with_a_line_per_file_system():
    curves = filesystems.operation_curves(build_series(POINTS))
    assert [c.operation.name for c in curves] == ["DRBL", "DRBH", "DWOL", "MWRM"]
    assert curves[0].file_systems == ["tmpfs", "ext4"]  # the workload's order, not the points'
    assert curves[0].title == "DRBL: read a block of a private file (low sharing)"


def test_the_ratio_table_is_figure_2_in_numbers():
    t = filesystems.ratio_table(filesystems.operation_curves(build_series(POINTS)))
    assert [c.title for c in t.columns] == ["operation", "sharing", "tmpfs", "ext4", "btrfs", "xfs"]
    rows = {r.cells[0]: r for r in t.rows}
    assert rows["DRBL"].cells[2:4] == ["0.95", "0.25"]
    assert rows["DRBL"].cell_styles == {2: "good", 3: "poor"}
    assert rows["MWRM"].cells == ["MWRM", "medium", "–", "0.70", "–", "–"] and rows["MWRM"].cell_styles[3] == "fair"
    assert rows["DRBH"].cells[4] == "one core idled 50%" and rows["DRBH"].cell_styles[4] == "poor"
    assert rows["DWOL"].cells[5] == "needs 1 core and another count"
    assert "at 4 cores" in t.title and t.breaks == {2}  # a divider between data and metadata operations


def test_figures_are_drawn_only_where_there_is_something_to_draw():
    curves = filesystems.operation_curves(build_series(POINTS))
    grid = filesystems.grid_figure(curves)
    assert grid is not None and len([a for a in grid.axes if a.get_visible()]) == 4
    assert filesystems.heat_map(curves) is not None
    assert filesystems.operation_curves(build_series(POINTS[-1:])) == []
    assert filesystems.grid_figure([]) is None and filesystems.ratio_table([]) is None
    assert filesystems.heat_map(filesystems.operation_curves(build_series([_fx("DWOL", "xfs", 4, 70.0)]))) is None


TITLE = "File systems: FxMark's operations at three sharing levels"
RATIOS = {"DRBL": ["DRBL", "low", "0.95", "0.25", "–", "–"], "MWRM": ["MWRM", "medium", "–", "0.70", "–", "–"],
          "DWOL": ["DWOL", "low", "–", "–", "–", "needs 1 core and another count"]}


def _stored(tmp_path, points) -> tuple[str, str]:
    """The points as one complete run of a small store: its path and the run's id."""
    path = str(tmp_path / "s.sqlite")
    db = store.Store(path)
    run = db.create_run({}, {"hostname": "h", "kernel": "6.1.0"}, "mosbench run fxmark micro/getppid1")
    for p in points:
        db.add_point(run, **p)
    db.finish_run(run, "complete")
    return path, str(run)


def _cells(row_html: str) -> list[str]:
    return [html_text.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row_html)]


def test_show_and_the_html_report_carry_the_section(tmp_path):
    """From a store, as a user gets them: the page has the section (in the navigation, before the operations'
    own sections) with Figure 2's heat map and its table of ratios, graded; `show` prints the section's
    title and the same table."""
    path, run = _stored(tmp_path, POINTS)
    page = html.write(store.Store(path), [run], tmp_path / "r.html").read_text()
    headings = re.findall(r'<h2 id="([^"]+)">([^<]+)</h2>', page)
    titles = [html_text.unescape(t) for _, t in headings]
    assert TITLE in titles and titles.index(TITLE) < titles.index("fxmark/DRBL")
    anchor = headings[titles.index(TITLE)][0]
    assert f'href="#{anchor}">File systems</a>' in page
    section = page.split(f'<h2 id="{anchor}">')[1].split("<h2 ")[0]
    assert section.count("<svg") == 2  # the heat map and the operations' grid, drawn inline
    rows = {cells[0]: cells for r in re.findall(r"<tr[^>]*>(.*?)</tr>", section, re.S) if (cells := _cells(r))}
    assert set(rows) == {"DRBL", "DRBH", "DWOL", "MWRM"}
    for op, cells in RATIOS.items():
        assert rows[op] == cells
    assert '<td class=" good">0.95</td><td class=" poor">0.25</td>' in section

    shown = mosbench_here("show", run, "--store", path, env={"COLUMNS": "250"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = lines.index(TITLE)
    table = lines[at + 1:next(i for i, line in enumerate(lines) if i > at and line.startswith("fxmark/DRBL"))]
    assert any("FxMark's Figure 2" in line for line in table)
    for cells in RATIOS.values():
        assert any(line.split(None, len(cells) - 1) == cells for line in table), (cells, table)


def test_the_section_is_built_before_the_tests_and_only_for_fxmark():
    from mosbench.report import sections

    series = build_series(POINTS)
    view = sections.View(series, {}, (sections.RunSeries("#1", series, {}, "6.1"),), "")
    built = sections.build(view)
    [fs] = [s for s in built if isinstance(s, sections.FileSystems)]
    assert fs.items() == [fs.ratios] and fs.nav == "File systems" and fs.title == TITLE
    # Before the tests' own sections, which hold each operation's figure and verdict.
    assert built.index(fs) < min(i for i, s in enumerate(built) if isinstance(s, sections.Test))
    micro_only = build_series(POINTS[-1:])
    view = sections.View(micro_only, {}, (sections.RunSeries("#1", micro_only, {}, "6.1"),), "")
    assert not [s for s in sections.build(view) if isinstance(s, sections.FileSystems)]


def test_a_store_without_fxmark_has_no_section(tmp_path):
    path, run = _stored(tmp_path, POINTS[-1:])
    page = html.write(store.Store(path), [run], tmp_path / "r.html").read_text()
    assert TITLE not in html_text.unescape(page) and ">File systems</a>" not in page
    shown = mosbench_here("show", run, "--store", path, env={"COLUMNS": "250"})
    assert shown.returncode == 0 and TITLE not in shown.stdout, shown.stderr
