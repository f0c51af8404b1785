"""The report's History section and comparison tables link each explained change to its explanation in
What changed; a history change whose sides hold no profile is shown with the command that would profile them."""

import re

from mosbench.analysis import explain_history
from mosbench.report import html, whatchanged
from tests.conftest import mosbench_here as mosbench
from tests.test_explain import LOCK
from tests.test_explain import _store as compared_store
from tests.test_explain_history import AT, COMMAND, _built, _history


def _section(page: str, anchor: str) -> str:
    start = page.index(f'<h2 id="{anchor}">')
    end = page.find("<h2 ", start + 1)
    return page[start:end if end >= 0 else len(page)]


def _links(text: str) -> list[str]:
    return re.findall(r'<a href="#(why_[^"]+)">', text)


def test_a_history_change_links_to_its_explanation_and_the_explanation_is_there(tmp_path):
    db, ids = _history(tmp_path, {3, 4, 5})
    [x] = explain_history.explained(db, _built(db))
    page = html.write(db, [str(ids[-1])], tmp_path / "report.html").read_text()
    history, changed = _section(page, "history"), _section(page, "what-changed")
    anchor = whatchanged.anchor(x)
    assert anchor == f"why_history_{ids[AT - 1]}_{ids[AT]}_micro_getppid1_procs_2"
    # The change's row in the History section links its size to the explanation …
    assert _links(history) == [anchor]
    assert re.search(rf'<a href="#{anchor}">0\.5\d*× \[', history)
    # … which What changed holds under that id, with the function that grew.
    block = changed[changed.index(f'<h3 id="{anchor}">'):]
    assert block.startswith(f'<h3 id="{anchor}">micro/getppid1 procs at 2 cores: slower from #{ids[AT - 1]} to '
                            f'#{ids[AT]}')
    assert LOCK in block and "← dput_[k]" in block
    assert "not explained" not in history
    # The terminal's sections are the page's: `mosbench show` explains the same change.
    r = mosbench("show", str(ids[-1]), "--store", str(tmp_path / "h.sqlite"), env={"COLUMNS": "160"})
    assert r.returncode == 0, r.stderr
    assert f"micro/getppid1 procs at 2 cores: slower from #{ids[AT - 1]} to #{ids[AT]}" in r.stdout
    assert LOCK in r.stdout


def test_a_history_change_without_profiles_shows_the_command_in_the_history_section(tmp_path):
    db, ids = _history(tmp_path, set())
    page = html.write(db, [str(ids[-1])], tmp_path / "report.html").read_text()
    history = _section(page, "history")
    assert _links(history) == [] and 'id="what-changed"' not in page
    assert "1 significant change not explained: a side was not profiled" in history
    assert f"<pre>{COMMAND}</pre>" in history
    r = mosbench("show", str(ids[-1]), "--store", str(tmp_path / "h.sqlite"), env={"COLUMNS": "400"})
    assert r.returncode == 0, r.stderr
    assert "1 significant change not explained" in r.stdout and COMMAND in r.stdout


def test_the_comparison_links_each_explained_change_to_its_explanation(tmp_path):
    db, ids = compared_store(tmp_path)  # A, B profiled (B with the lock), C not profiled
    page = html.write(db, [str(i) for i in ids], tmp_path / "report.html").read_text()
    comparison, changed = _section(page, "comparison"), _section(page, "what-changed")
    # B's change is explained: its verdict links to it; C's is not, and its row links nowhere.
    assert _links(comparison) == ["why_vs_B_micro_getppid1_procs_2"]
    assert re.search(r'<a href="#why_vs_B_micro_getppid1_procs_2">[^<]+</a></td></tr>', comparison)
    assert '<h3 id="why_vs_B_micro_getppid1_procs_2">micro/getppid1 procs at 2 cores: slower, B/A 0.500' in changed
    # Every link on the page that names an explanation finds it.
    assert all(f'id="{a}"' in changed for a in _links(page))
