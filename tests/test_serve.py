"""mosbench serve through Flask's test client: every page and its JSON over a lab of several machines
(history_stores.fill_lab, and one whose hostname, kernel and labels are markup), who may triage (401, 403,
CSRF), the escaping of store text in HTML and in a page's JSON, the 4xx answers that change nothing, a 503
when the store does not answer, and the command's refusals."""

from __future__ import annotations

import gzip
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.request import urlopen

import pytest

from mosbench.store.db import Store, runs
from mosbench.testing.history_stores import LAB_COMMITS, Planted, fill, fill_lab
from mosbench.web import reports
from mosbench.web.app import REPORT_POLICY, create_app
from tests.conftest import ROOT, empty_commits

SCRIPT = "<script>alert(1)</script>"
EVIL_HOST = f"evil{SCRIPT}"
EVIL_KERNEL = "6.1.0-1-<b>amd64</b>"
SECRET = "alice-secret-0123456789"
TOKENS = {"alice": SECRET}
BEARER = {"Authorization": f"Bearer {SECRET}"}


def make_lab_store(path: Path) -> dict[str, list[int]]:
    """The lab of history_stores.fill_lab, and a machine whose name, kernel and run labels are markup, its
    micro/t3 slower from its run 8 (so its text reaches the alerts, graphs and runs)."""
    db = Store(str(path))
    ids = fill_lab(db)
    ids[EVIL_HOST] = fill(db, 12, [Planted(8, 0.7, tests=("t3",))], seed=7, host=EVIL_HOST,
                          kernel=lambda i: EVIL_KERNEL if i < 8 else "6.2.0-1-<b>amd64</b>")
    with db.engine.begin() as conn:
        conn.execute(runs.update().where(runs.c.id.in_(ids[EVIL_HOST])).values(label=SCRIPT))
    db.engine.dispose()
    return ids


@pytest.fixture(scope="module")
def lab_store(tmp_path_factory) -> tuple[Path, dict[str, list[int]]]:
    path = tmp_path_factory.mktemp("lab") / "lab.sqlite"
    return path, make_lab_store(path)


@pytest.fixture
def store_copy(lab_store, tmp_path) -> Path:
    """A store of its own for a test that triages."""
    copy = tmp_path / "lab.sqlite"
    shutil.copy(lab_store[0], copy)
    return copy


@pytest.fixture(scope="module")
def reader(lab_store):
    """A read-only server's client: every test of it reads."""
    app = create_app(str(lab_store[0]))
    yield app.test_client()
    app.extensions["mosbench.lab"].close()


@pytest.fixture
def writer(store_copy):
    app = create_app(str(store_copy), TOKENS)
    yield app.test_client()
    app.extensions["mosbench.lab"].close()


def drawn(client, url: str, within_s: float = 120.0):
    """A report's answer once drawn: asked again while the server says it is being drawn (503), as the page's
    own reload does."""
    deadline = time.monotonic() + within_s
    while True:
        r = client.get(url)
        if r.status_code != 503 or time.monotonic() > deadline:
            return r
        time.sleep(0.3)


def summary_of(client, *machines: str) -> dict:
    """The summary whose moved machines are these."""
    found = [s for s in client.get("/api/alerts").get_json() if sorted(s["machines"]) == sorted(machines)]
    assert len(found) == 1, found
    return found[0]


def test_every_page_answers_200_with_its_json(reader, lab_store):
    _, ids = lab_store
    lab = summary_of(reader, "arm", "big4s")
    pages = ["/", "/alerts", f"/alerts/{lab['id']}", "/graphs", "/graphs?order=kernel", "/graphs/cores",
             f"/runs/{ids['big4s'][-1]}", f"/compare?a={ids['big4s'][0]}&b={ids['arm'][0]}", "/alerts?state=untriaged"]
    for url in pages:
        r = reader.get(url)
        assert r.status_code == 200, (url, r.data[:300])
        assert r.mimetype == "text/html"
        # The page names its JSON, which answers too.
        api = re.search(r'href="(/api/[^"]*)" id="json-link"', r.get_data(as_text=True))
        assert api, url
        j = reader.get(api.group(1).replace("&amp;", "&"))
        assert j.status_code == 200 and j.is_json, (url, api.group(1))


def test_the_api_has_the_issues_shapes(reader):
    machines = reader.get("/api/machines").get_json()
    assert isinstance(machines, list)
    assert {m["hostname"] for m in machines} == {"big4s", "arm", "small2s", "ci", "ci2", "old", EVIL_HOST}
    summaries = reader.get("/api/alerts").get_json()
    assert isinstance(summaries, list) and len(summaries) >= 4
    for s in summaries:
        assert {"id", "state", "alerts"} <= set(s) and s["state"] == "untriaged"
        for a in s["alerts"]:
            assert {"hostname", "workload", "test", "variant", "cores", "ratio"} <= set(a)
    one = reader.get(f"/api/alerts/{summaries[0]['id']}").get_json()
    assert one["id"] == summaries[0]["id"] and one["alerts"] == summaries[0]["alerts"]


def test_a_change_that_hurt_two_machines_and_not_a_third(reader):
    """fill_lab's 6.1.0-22: micro/t1 fell on big4s (4 and 8 cores: scalability) and arm (every core);
    small2s ran both releases and did not move. The commit change has its bisect command."""
    lab = summary_of(reader, "arm", "big4s")
    assert (lab["before"], lab["after"], lab["by"], lab["direction"]) == ("6.1.0-21", "6.1.0-22", "release",
                                                                          "regression")
    assert lab["unmoved"] == ["small2s"]
    kinds = {a["hostname"]: (a["test"], a["kind"], a["ratio"]) for a in lab["alerts"]}
    assert kinds == {"big4s": ("t1", "scalability", pytest.approx(0.7, abs=0.07)),
                     "arm": ("t1", "every core", pytest.approx(0.75, abs=0.07))}
    assert all(a["explanation"] and a["explanation"][0].startswith("mosbench ab --kernel") for a in lab["alerts"])
    page = reader.get(f"/alerts/{lab['id']}").get_data(as_text=True)
    assert "small2s" in page and "mosbench ab --kernel 6.1.0-21-amd64 --kernel 6.1.0-22-amd64" in page
    ci = summary_of(reader, "ci")
    assert ci["by"] == "commit" and ci["unmoved"] == ["ci2"] and ci["bisect_command"].startswith("mosbench bisect")
    assert ci["bisect_command"] in reader.get(f"/alerts/{ci['id']}").get_data(as_text=True)


def test_a_summary_tells_each_change_as_history_does(reader, lab_store):
    """Each alert's lines are `mosbench history --host H`'s telling of its change, word for word: its adjusted
    p, what its kind means, every core count's own test, the per-core ratio at the most cores to one core."""
    from mosbench.analysis import history as hist
    from mosbench.report import history as history_report

    db = Store(str(lab_store[0]), create=False)
    h = hist.build(db.list_runs(), db.history_points, [], "big4s", hist.Order.TIME, None)
    db.engine.dispose()
    (shift,) = h.shifts
    expected = history_report.shift_lines(h, shift)
    told = " ".join(expected)
    assert "p adj." in told and "one core did not move" in told and "per-core ratio at the most cores" in told
    lab = summary_of(reader, "arm", "big4s")
    (big,) = [a for a in lab["alerts"] if a["hostname"] == "big4s"]
    assert big["told"] == expected
    page = html.unescape(reader.get(f"/alerts/{lab['id']}").get_data(as_text=True))
    assert "\n".join(expected) in page


def test_the_papers_figure_names_each_runs_kernel_and_commit(reader, lab_store):
    """Hovering a run of the paper's figure names its kernel and commit as history names them."""
    ids = lab_store[1]
    g = reader.get(f"/api/graphs/cores?run={ids['ci'][-1]}&run={ids['big4s'][-1]}&test=micro/t1").get_json()
    lines = {line["hostname"]: line for line in g["lines"]}
    assert (lines["ci"]["kernel"], lines["ci"]["commit"]) == ("6.19.0-rc1", LAB_COMMITS[1])
    assert (lines["big4s"]["kernel"], lines["big4s"]["commit"]) == ("6.1.0-22-amd64", None)
    assert lines["ci"]["cores"] == [1, 2, 4, 8] and len(lines["ci"]["trials"][0]) == 3


def test_two_runs_compared_say_when_they_come_from_different_machines(reader, lab_store):
    ids = lab_store[1]
    same = reader.get(f"/api/compare?a={ids['big4s'][11]}&b={ids['big4s'][12]}").get_json()
    assert same["same_machine"] and same["machines_note"] == "Both runs come from big4s (1 socket, 8 cores)."
    # What changed, as `mosbench compare` ends: the changes a side of which was not profiled, and the fewest
    # commands that would profile them.
    assert same["significant"] == 2 and same["explained"] == []
    assert same["unexplained"]["line"].startswith("2 significant changes not explained: a side was not profiled")
    assert same["unexplained"]["commands"] == [
        "mosbench run micro/t1 --profile micro/t1 --cores 4,8 --variant procs --trials 3"]
    other = reader.get(f"/compare?a={ids['big4s'][11]}&b={ids['arm'][12]}").get_data(as_text=True)
    assert re.search(r'<p id="machines" class="warn">These runs come from different machines: '
                     rf'#{ids["big4s"][11]} from big4s \(1 socket, 8 cores\), #{ids["arm"][12]} from arm', other)


def test_a_profiled_change_compared_names_what_grew(tmp_path):
    """test_explain_history's store, a lock planted from run 5: runs 3 and 7 profiled, compared."""
    from tests.test_explain import LOCK
    from tests.test_explain_history import _history

    db, ids = _history(tmp_path, {3, 7})
    db.engine.dispose()
    app = create_app(str(tmp_path / "h.sqlite"))
    found = app.test_client().get(f"/api/compare?a={ids[3]}&b={ids[7]}").get_json()
    page = app.test_client().get(f"/compare?a={ids[3]}&b={ids[7]}").get_data(as_text=True)
    app.extensions["mosbench.lab"].close()
    (why,) = found["explained"]
    assert why["heading"].startswith("micro/getppid1 procs at 2 cores: slower") and found["unexplained"] is None
    assert why["columns"][:2] == ["what", "kind"] and why["title"].startswith("micro/getppid1 procs at 2 cores: per")
    assert [LOCK, "kernel lock, own"] in [row[:2] for row in why["rows"]] and "account for 100%" in why["lines"][0]
    assert f"<td>{LOCK}</td>" in page


def test_the_overview_counts_and_arrows(reader, lab_store):
    r = reader.get("/")
    assert r.status_code == 200 and not r.location
    view = reader.get("/api/overview").get_json()
    rows = {m["hostname"]: m for m in view["machines"]}
    assert rows["big4s"]["runs"] == 18 and rows["big4s"]["kernel"] == "6.1.0-22-amd64"
    assert rows["big4s"]["last_run_id"] == lab_store[1]["big4s"][-1]
    assert rows["big4s"]["untriaged"] == 1 and rows["small2s"]["untriaged"] == 0
    cell = rows["big4s"]["workloads"][view["workloads"].index("micro")]
    assert 0.5 < cell["ratio"] < 1.0 and cell["cores"] == 8 and cell["series"] == 4


def test_an_arrow_marks_where_the_newest_run_began_a_change(tmp_path):
    """down's and up's newest run each began a change; older's change is history, not news."""
    path = tmp_path / "s.sqlite"
    db = Store(str(path))
    fill(db, 12, [Planted(11, 0.6, tests=("t1",))], seed=3, host="down")
    fill(db, 12, [Planted(11, 1.5, tests=("t2",))], seed=4, host="up")
    fill(db, 12, [Planted(5, 0.6, tests=("t1",))], seed=5, host="older")
    db.engine.dispose()
    app = create_app(str(path))
    view = app.test_client().get("/api/overview").get_json()
    app.extensions["mosbench.lab"].close()
    cells = {m["hostname"]: m["workloads"][0] for m in view["machines"]}
    assert {h: (c["change"], c["arrow"]) for h, c in cells.items()} == {
        "down": ("regression", "↓"), "up": ("improvement", "↑"), "older": (None, "")}
    assert re.search(r"run #12; it began a change: micro/t1 procs -4\d(\.\d)?% at 8 cores \(every core\)$",
                     cells["down"]["title"]), cells["down"]["title"]
    assert "began" not in cells["older"]["title"]


def test_the_overview_does_not_wait_for_every_machines_alerts_at_start(lab_store, monkeypatch):
    """While the server computes every machine's alerts for the first time, the overview answers at once:
    every machine from its newest run (as the overview says it once computed), the cells of the machines
    computed so far, the untriaged counts said to be computing, and the page reloading itself."""
    app = create_app(str(lab_store[0]))
    lab = app.extensions["mosbench.lab"]
    reached, go = threading.Event(), threading.Event()
    compute = lab.alerts._compute

    def held_at_small2s(host, fresh, rows):
        if host == "small2s":
            reached.set()
            go.wait(30)
        return compute(host, fresh, rows)

    monkeypatch.setattr(lab.alerts, "_compute", held_at_small2s)
    client = app.test_client()
    try:
        lab.warm_in_background()
        assert reached.wait(30)
        started = time.monotonic()
        during = client.get("/api/overview").get_json()
        page = client.get("/").get_data(as_text=True)
        assert time.monotonic() - started < 5
        go.set()
        while lab.warming:
            time.sleep(0.05)
        after = client.get("/api/overview").get_json()
    finally:
        go.set()
        lab.close()
    assert during["computing"] and during["untriaged"] is None and during["summaries"] is None
    assert during["computed"] == 2  # big4s and arm: their runs came first
    facts = ("hostname", "topology", "kernel", "runs", "last_run_id", "last_run_at")
    assert [[m[k] for k in facts] for m in during["machines"]] == [[m[k] for k in facts] for m in after["machines"]]
    rows = {m["hostname"]: m for m in during["machines"]}
    assert {h for h, m in rows.items() if not m["computing"]} == {"big4s", "arm"}
    assert {m["untriaged"] for m in rows.values()} == {None} and rows["ci"]["untriaged_text"] == "computing"
    assert rows["big4s"]["workloads"][0]["ratio"] > 0 and rows["ci"]["workloads"][0]["ratio_text"] == "computing"
    assert 'id="computing"' in page and '<meta http-equiv="refresh"' in page
    assert not after["computing"] and after["computed"] == len(after["machines"])
    assert after["untriaged"] == sum(m["untriaged"] for m in after["machines"]) > 0
    assert {m["hostname"]: m["untriaged"] for m in after["machines"]}["big4s"] == 1


def test_filters(reader):
    def ids(query: str) -> set[int]:
        r = reader.get(f"/api/alerts?{query}")
        assert r.status_code == 200, r.data
        return {s["id"] for s in r.get_json()}

    every = ids("")
    assert ids("machine=small2s") == set()  # it moved nowhere
    assert ids("machine=big4s") == {summary_of(reader, "arm", "big4s")["id"]}
    assert ids("direction=improvement") == {summary_of(reader, "ci")["id"]}
    assert ids("state=untriaged") == every and ids("state=fixed") == set()
    assert ids("workload=micro") == every
    for bad, code in (("state=gone", 400), ("direction=sideways", 400), ("machine=nowhere", 404),
                      ("workload=nothing", 404)):
        r = reader.get(f"/api/alerts?{bad}")
        assert r.status_code == code and set(r.get_json()) == {"error"}, bad


def test_each_form_shows_what_was_asked_for(reader, writer):
    """The records say which choice is the one shown (the templates only print it)."""
    def chosen(url: str) -> list[str]:
        page = reader.get(url).get_data(as_text=True)
        return [html.unescape(v) for v in
                re.findall(r'<(?:option|input)[^>]* value="([^"]*)"[^>]* (?:selected|checked)>', page)]

    assert chosen("/alerts?machine=small2s&workload=micro&state=fixed&direction=regression") == [
        "small2s", "micro", "fixed", "regression"]
    assert "No summary matches these filters." in reader.get("/alerts?state=fixed").get_data(as_text=True)
    assert chosen("/graphs?workload=micro&test=t1&variant=procs&cores=4&order=kernel&machine=arm") == [
        json.dumps(["micro", "t1", "procs"]), "4", "kernel", "arm"]
    assert chosen("/graphs/cores?test=micro/t2")[0] == "micro/t2"
    sid = summary_of(writer, "ci")["id"]
    _signed_in(writer)
    writer.patch(f"/api/alerts/{sid}", json={"state": "investigating"}, headers=BEARER)
    page = writer.get(f"/alerts/{sid}").get_data(as_text=True)
    assert re.findall(r'<option value="([^"]*)" selected>', page) == ["investigating"]  # the triage form's


def test_store_text_is_escaped_in_html_and_in_embedded_json(reader, lab_store):
    _, ids = lab_store
    evil = summary_of(reader, EVIL_HOST)
    pages = ["/", "/alerts", f"/alerts/{evil['id']}", f"/graphs?machine={EVIL_HOST}",
             f"/graphs?machine={EVIL_HOST}&order=kernel", f"/graphs/cores?run={ids[EVIL_HOST][-1]}",
             f"/runs/{ids[EVIL_HOST][-1]}", f"/compare?a={ids[EVIL_HOST][0]}&b={ids[EVIL_HOST][-1]}"]
    for url in pages:
        r = reader.get(url, query_string=None)
        page = r.get_data(as_text=True)
        assert r.status_code == 200, (url, page[:300])
        assert SCRIPT not in page and "<b>amd64" not in page, url
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page or "\\u003cscript\\u003e" in page, url
    graph = reader.get(f"/graphs?machine={EVIL_HOST}").get_data(as_text=True)
    embedded = re.search(r'<script type="application/json" id="graph-data">(.*?)</script>', graph, re.S).group(1)
    assert "<" not in embedded and "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in embedded
    data = json.loads(embedded)
    assert data["machines"][0]["hostname"] == EVIL_HOST and data["machines"][0]["runs"][0]["label"] == SCRIPT
    # The run's report, served: its text escaped as `mosbench report` escapes it.
    report = drawn(reader, f"/runs/{ids[EVIL_HOST][-1]}/report")
    assert report.status_code == 200 and SCRIPT not in report.get_data(as_text=True)


def test_headers_allow_no_inline_script_and_no_framing(reader, lab_store):
    r = reader.get("/")
    policy = r.headers["Content-Security-Policy"]
    assert "script-src 'self';" in policy and "frame-ancestors 'none'" in policy and "unsafe-eval" not in policy
    assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["X-Frame-Options"] == "DENY"
    report = drawn(reader, f"/runs/{lab_store[1][EVIL_HOST][-1]}/report")  # drawn once for the module's tests
    assert "script-src" not in report.headers["Content-Security-Policy"]  # default-src 'none': no script at all
    assert "frame-ancestors 'self'" in report.headers["Content-Security-Policy"]
    plotly = reader.get("/plotly/plotly.min.js")
    assert plotly.status_code == 200 and plotly.mimetype == "text/javascript" and b"plotly.js v" in plotly.data[:200]


def test_a_report_is_drawn_in_a_process_of_its_own_said_meanwhile_and_kept_compressed(lab_store, monkeypatch):
    """The served report is `mosbench report`'s page drawn by another process (this one's drawing code is made
    to fail): asked before it is drawn, a 503 that says so, with Retry-After and a page that reloads itself
    (no script: the report's policy, framed by the run's page); then the page, its figures SVG alone; kept
    gzip-compressed in the server's private folder, which goes when the server stops."""
    from mosbench.report import html as report_html

    def not_here(*_args):
        raise AssertionError("the report was drawn in the server's process")

    monkeypatch.setattr(report_html, "page", not_here)
    run_id = lab_store[1]["ci"][-1]
    app = create_app(str(lab_store[0]))
    lab = app.extensions["mosbench.lab"]
    lab.report_wait_s = 0  # the first request is answered before any drawing could end
    client = app.test_client()
    try:
        first = client.get(f"/runs/{run_id}/report")
        said = first.get_data(as_text=True)
        assert first.status_code == 503 and first.headers["Retry-After"] == str(reports.RELOAD_S), said[:300]
        assert f'<meta http-equiv="refresh" content="{reports.RELOAD_S}">' in said
        assert f"The report of run #{run_id} is being drawn" in said and "<script" not in said
        assert first.headers["Content-Security-Policy"] == REPORT_POLICY
        assert first.headers["X-Frame-Options"] == "SAMEORIGIN"
        lab.report_wait_s = 60  # the next request waits for the drawing under way
        r = drawn(client, f"/runs/{run_id}/report")
        page = r.get_data(as_text=True)
        assert r.status_code == 200 and "<svg" in page and "mosbench report" in page
        assert ".png" not in page and "_files" not in page  # no copies: the page holds its figures
        (kept,) = lab.reports.folder.iterdir()
        assert kept.name.endswith(".html.gz") and gzip.decompress(kept.read_bytes()).decode() == page
        assert client.get(f"/runs/{run_id}/report").get_data(as_text=True) == page  # kept: not drawn again
        # To a browser (it takes gzip), as it is kept: the server never holds the page itself.
        zipped = client.get(f"/runs/{run_id}/report", headers={"Accept-Encoding": "gzip, deflate, br"})
        assert zipped.headers["Content-Encoding"] == "gzip" and "Accept-Encoding" in zipped.headers["Vary"]
        assert zipped.data == kept.read_bytes()
        assert client.get(f"/runs/{run_id}").status_code == 200
    finally:
        folder = lab.reports.folder
        lab.close()
    assert not folder.exists()


class FakeDrawings:
    """Reports' drawing process replaced: each drawing counted, held until let go, or failing."""

    def __init__(self) -> None:
        self.drawn: list[tuple[int, ...]] = []
        self.go = threading.Event()
        self.go.set()
        self.failing = False

    def __call__(self, runs: tuple[int, ...], out: Path) -> None:
        self.go.wait(30)
        if self.failing:
            raise reports.DrawFailed(f"the report of #{runs[0]} could not be drawn: planted")
        self.drawn.append(runs)
        out.write_bytes(gzip.compress(f"report of {runs}".encode()))


def test_reports_kept_are_capped_and_a_queue_too_long_or_a_failure_is_said(lab_store):
    kept = reports.Reports(str(lab_store[0]), kept=2, queued=1)
    fake = FakeDrawings()
    kept._run_drawing = fake  # type: ignore[method-assign]
    try:
        for run in (1, 2, 3, 1):
            assert kept.html(("state", run), (run,), wait_s=10).page() == f"report of {(run,)}".encode()
        assert fake.drawn == [(1,), (2,), (3,), (1,)]  # 1 pushed out by 3, drawn again
        assert len(list(kept.folder.iterdir())) == 2
        assert kept.html(("state", 3), (3,)).page() == b"report of (3,)" and len(fake.drawn) == 4  # kept
        fake.go.clear()
        waiting = kept.html(("state", 4), (4,), wait_s=0)
        assert isinstance(waiting, reports.Drawing) and waiting.ahead == 0 and "#4 is being drawn" in waiting.text
        with pytest.raises(reports.Busy, match="1 reports are being drawn already"):
            kept.html(("state", 5), (5,), wait_s=0)
        fake.failing = True
        fake.go.set()
        with pytest.raises(reports.DrawFailed, match="#4 could not be drawn: planted"):
            kept.html(("state", 4), (4,), wait_s=10)
        fake.failing = False
        assert kept.html(("state", 4), (4,), wait_s=10).page() == b"report of (4,)"  # a failure is not kept
    finally:
        kept.close()
    assert not kept.folder.exists()


def test_a_report_that_cannot_be_drawn_is_one_line(lab_store, tmp_path):
    """The drawing process' own refusal (here a run the store does not hold) comes back as its one line; the
    server's page for it is a 500 with that line and no traceback."""
    kept = reports.Reports(str(lab_store[0]))
    try:
        with pytest.raises(reports.DrawFailed) as failed:
            kept.html(("gone",), (99999,), wait_s=120)
        assert str(failed.value).startswith("the report of #99999 could not be drawn: no run 99999")
    finally:
        kept.close()
    app = create_app(str(lab_store[0]))
    app.extensions["mosbench.lab"].reports._run_drawing = FakeDrawings()
    app.extensions["mosbench.lab"].reports._run_drawing.failing = True
    r = app.test_client().get(f"/runs/{lab_store[1]['ci'][0]}/report")
    assert r.status_code == 500 and "could not be drawn: planted" in r.get_data(as_text=True)
    assert "Traceback" not in r.get_data(as_text=True)
    app.extensions["mosbench.lab"].close()


def _state(client, summary_id: int) -> tuple[str, str]:
    s = client.get(f"/api/alerts/{summary_id}").get_json()
    return s["state"], s["note"]


def test_a_read_only_server_takes_no_triage(reader):
    sid = summary_of(reader, "ci")["id"]
    for headers in ({}, BEARER):
        r = reader.patch(f"/api/alerts/{sid}", json={"state": "fixed"}, headers=headers)
        assert r.status_code == 403 and "read-only" in r.get_json()["error"]
    assert reader.get("/signin").status_code == 404
    assert _state(reader, sid) == ("untriaged", "")


def test_bearer_tokens_401_403_then_200(writer):
    sid = summary_of(writer, "ci")["id"]
    # Checked before anything else about the request: an unknown summary, a body that is not JSON.
    for url, body in ((f"/api/alerts/{sid}", '{"state": "fixed"}'), ("/api/alerts/9999", "not json")):
        assert writer.patch(url, data=body).status_code == 401
        assert writer.patch(url, data=body, headers={"Authorization": "Basic YWxpY2U6eA=="}).status_code == 401
        assert writer.patch(url, data=body, headers={"Authorization": "Bearer wrong-wrong-wrong-wrong"}
                            ).status_code == 403
    assert writer.patch(f"/api/alerts/{sid}", data="{}").headers["WWW-Authenticate"].startswith("Bearer")
    assert _state(writer, sid) == ("untriaged", "")
    r = writer.patch(f"/api/alerts/{sid}", json={"state": "investigating", "note": f"bisecting {SCRIPT}",
                                                 "link": "https://bugzilla.kernel.org/show_bug.cgi?id=1"},
                     headers=BEARER)
    assert r.status_code == 200, r.data
    now = r.get_json()
    assert (now["id"], now["state"], now["note"], now["set_by"]) == (sid, "investigating", f"bisecting {SCRIPT}",
                                                                     "alice")
    assert now["link_href"] == "https://bugzilla.kernel.org/show_bug.cgi?id=1"
    assert writer.get(f"/api/alerts/{sid}").get_json() == now
    page = writer.get(f"/alerts/{sid}").get_data(as_text=True)
    assert SCRIPT not in page and "bisecting &lt;script&gt;" in page
    # One alert alone: its state, the summary's kept.
    alert = now["alerts"][0]
    key = {k: alert[k] for k in ("hostname", "workload", "test", "variant")}
    r = writer.patch(f"/api/alerts/{sid}", json={"state": "invalid", "note": "a noisy night", "alert": key},
                     headers=BEARER)
    assert r.status_code == 200 and r.get_json()["state"] == "investigating"
    one = r.get_json()["alerts"][0]
    assert (one["state"], one["note"], one["set_by"]) == ("invalid", "a noisy night", "alice")  # who set it, when
    assert one["set_at"] >= now["set_at"] and f"{one['set_text']}</div>" in writer.get(f"/alerts/{sid}").get_data(
        as_text=True) and one["set_text"].startswith("by alice, ")
    overview = {m["hostname"]: m["untriaged"] for m in writer.get("/api/machines").get_json()}
    assert overview["ci"] == 0 and overview["big4s"] == 1


def test_bad_requests_change_nothing(writer):
    sid = summary_of(writer, "ci")["id"]
    big = "x" * (70 * 1024)
    cases = [
        (f"/api/alerts/{sid}", "{not json", 400, "not JSON"),
        (f"/api/alerts/{sid}", '["fixed"]', 400, "JSON object"),
        (f"/api/alerts/{sid}", '{"state": "gone"}', 400, "no triage state 'gone'"),
        (f"/api/alerts/{sid}", '{"state": "fixed", "owner": "me"}', 400, "unknown field 'owner'"),
        (f"/api/alerts/{sid}", '{"state": "fixed", "note": 3}', 400, "'note' must be a string"),
        (f"/api/alerts/{sid}", '{"state": "fixed", "link": "javascript:alert(1)"}', 400, "http or https URL"),
        (f"/api/alerts/{sid}", '{"note": "the state left out"}', 400, 'give a "state": one of untriaged'),
        (f"/api/alerts/{sid}", json.dumps({"state": "fixed", "note": big}), 413, "larger than 64 KiB"),
        (f"/api/alerts/{sid}", '{"state": "fixed", "alert": {"hostname": "ci"}}', 400, "names one alert"),
        (f"/api/alerts/{sid}", json.dumps({"state": "fixed", "alert": {"hostname": "nowhere", "workload": "micro",
                                                                       "test": "t0", "variant": "procs"}}),
         404, "has no alert of nowhere/micro/t0/procs"),
        ("/api/alerts/9999", '{"state": "fixed"}', 404, "no alert summary 9999"),
    ]
    for url, body, code, said in cases:
        r = writer.patch(url, data=body, headers=BEARER)
        assert r.status_code == code, (body[:60], r.data[:200])
        assert said in r.get_json()["error"] and "Traceback" not in r.get_data(as_text=True), body[:60]
    assert _state(writer, sid) == ("untriaged", "")


def test_unknown_things_are_4xx_with_one_message(reader):
    for url, code, said in [
        ("/runs/99999", 404, "no run 99999"), ("/api/runs/99999", 404, "no run 99999"),
        ("/runs/99999/report", 404, "no run 99999"), ("/alerts/99999", 404, "no alert summary 99999"),
        ("/graphs?machine=nowhere", 404, "no machine 'nowhere'"), ("/graphs?workload=nothing", 404, "measured"),
        ("/graphs?workload=micro&test=t0&variant=procs&cores=3", 404, "not measured at 3 cores"),
        ("/graphs?order=sideways", 400, "no order 'sideways'"), ("/graphs?cores=many", 400, "not a number"),
        ("/graphs?order=commit", 400, "--tree"), ("/compare?a=1&b=1", 400, "itself"), ("/compare?a=1", 400, "two runs"),
        ("/api/compare?a=1&b=99999", 404, "no run 99999"), ("/graphs/cores?run=x", 400, "not a run id"),
        ("/nowhere", 404, "no page /nowhere on this server"), ("/api/nowhere", 404, "no page /api/nowhere"),
        ("/api/alerts/abc", 404, "no page /api/alerts/abc"),
    ]:
        r = reader.get(url)
        text = html.unescape(r.get_data(as_text=True))
        assert r.status_code == code and said.lower() in text.lower(), (url, text[:300])
        assert "Traceback" not in text and "sqlite" not in text and "spelling" not in text, url
    wrong = reader.delete("/api/alerts/1")
    assert wrong.status_code == 405
    assert wrong.get_json() == {"error": "DELETE is not taken at /api/alerts/1 (it takes GET, PATCH)"}


def _signed_in(client) -> str:
    """Signs in through the form; the CSRF token the pages now carry."""
    page = client.get("/signin").get_data(as_text=True)
    token = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    wrong = client.post("/signin", data={"csrf": token, "secret": "not-the-secret-at-all", "next": "/"})
    assert wrong.status_code == 403 and "not one this server knows" in wrong.get_data(as_text=True)
    assert client.post("/signin", data={"secret": SECRET}).status_code == 403  # no CSRF token: refused
    done = client.post("/signin", data={"csrf": token, "secret": SECRET, "next": "//elsewhere.example/"})
    assert done.status_code == 303 and done.location == "/"  # never sent to another site
    page = client.get("/").get_data(as_text=True)
    assert "signed in as <b>alice</b>" in page
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


def test_the_sign_in_form_and_csrf(writer):
    sid = summary_of(writer, "arm", "big4s")["id"]
    form = {"state": "acknowledged", "note": "seen", "link": ""}
    assert writer.post(f"/alerts/{sid}/triage", data=form).status_code == 401  # not signed in
    assert "triage-form" not in writer.get(f"/alerts/{sid}").get_data(as_text=True)
    token = _signed_in(writer)
    assert "triage-form" in writer.get(f"/alerts/{sid}").get_data(as_text=True)
    assert writer.post(f"/alerts/{sid}/triage", data=form).status_code == 403  # the form without its token
    assert writer.post(f"/alerts/{sid}/triage", data={**form, "csrf": "forged"}).status_code == 403
    assert writer.patch(f"/api/alerts/{sid}", json={"state": "fixed"}).status_code == 403  # a script of the page
    assert _state(writer, sid) == ("untriaged", "")
    done = writer.post(f"/alerts/{sid}/triage", data={**form, "csrf": token})
    assert done.status_code == 303 and done.location == f"/alerts/{sid}"
    assert _state(writer, sid) == ("acknowledged", "seen")
    assert writer.get(f"/api/alerts/{sid}").get_json()["set_by"] == "alice"
    assert writer.patch(f"/api/alerts/{sid}", json={"state": "fixed"}, headers={"X-CSRF-Token": token}
                        ).status_code == 200
    assert writer.post("/signout", data={"csrf": token}).status_code == 303
    assert writer.post(f"/alerts/{sid}/triage", data={**form, "csrf": token}).status_code == 401
    assert _state(writer, sid) == ("fixed", "seen")


def test_a_store_that_stops_answering_is_a_503(store_copy):
    app = create_app(str(store_copy), TOKENS)
    client = app.test_client()
    assert client.get("/").status_code == 200
    lab = app.extensions["mosbench.lab"]
    lab.db.engine.dispose()
    store_copy.unlink()
    store_copy.mkdir()  # where the store was, nothing SQLite can open
    for url in ("/", "/api/alerts", "/runs/1", "/api/compare?a=1&b=2"):
        r = client.get(url)
        assert r.status_code == 503, (url, r.data[:300])
        assert "not answering" in r.get_data(as_text=True) and r.headers["Retry-After"]
    assert client.patch("/api/alerts/1", json={"state": "fixed"}, headers=BEARER).status_code == 503
    lab.close()


def test_a_store_that_hangs_is_a_503_within_the_deadline(lab_store, monkeypatch):
    app = create_app(str(lab_store[0]), store_timeout_s=0.5)
    lab = app.extensions["mosbench.lab"]
    release = __import__("threading").Event()
    # A database that accepted the connection and never answers: the store's read blocks.
    monkeypatch.setattr(lab.alerts, "kept", lambda: release.wait(30))
    started = time.monotonic()
    r = app.test_client().get("/api/machines")
    assert r.status_code == 503 and "did not answer within 0.5 s" in r.get_json()["error"]
    assert time.monotonic() - started < 3
    release.set()
    lab.close()


def _serve(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mosbench", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, **kwargs)


def test_the_command_refuses_in_one_line(lab_store, tmp_path):
    store = str(lab_store[0])
    bad_tokens = tmp_path / "tokens"
    for text, said in (("alice\n", "line 1: give name:secret"), ("alice:short\n", "shorter than 16"),
                       (f"a:{SECRET}\nb:{SECRET}\n", "another name's too"), ("# nobody\n", "names no one")):
        bad_tokens.write_text(text)
        r = subprocess.run([sys.executable, "-m", "mosbench", "serve", "--store", store, "--tokens", str(bad_tokens)],
                           capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert (r.returncode, r.stdout) == (2, ""), r.stderr
        assert len(r.stderr.splitlines()) == 1 and said in r.stderr, r.stderr
    for args, said in ((["--bind", "0.0.0.0"], "--tokens FILE"), (["--bind", "lab.example"], "not an IP address"),
                       (["--tokens", str(tmp_path / "missing")], "cannot read the tokens file"),
                       (["--store", str(tmp_path / "none.sqlite")], "no results store"),
                       (["--store-timeout", "0.5"], "0.5 is below 1.0"), (["--store-timeout", "inf"], "not a finite")):
        r = subprocess.run([sys.executable, "-m", "mosbench", "serve", "--store", store, *args],
                           capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and said in r.stderr, (args, r.stderr)


def test_the_command_prints_its_address_first_and_stops_on_ctrl_c(lab_store, tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice:{SECRET}\n")
    server = _serve("--store", str(lab_store[0]), "--tokens", str(tokens),
                    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        url = server.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url), url
        with urlopen(url, timeout=30) as r:
            assert r.status == 200 and b"mosbench lab" in r.read()
        with urlopen(url + "api/machines", timeout=30) as r:
            assert any(m["hostname"] == "ci" for m in json.load(r))
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=30)
    assert server.returncode == 130 and err.strip().endswith("mosbench: interrupted"), err
    # A systemd stop (SIGTERM) is a clean exit.
    server = _serve("--store", str(lab_store[0]), "--read-only", "--bind", "0.0.0.0")
    url = server.stdout.readline().strip()
    assert url.startswith("http://0.0.0.0:")
    server.terminate()
    server.communicate(timeout=30)
    assert server.returncode == 0
    assert os.path.exists(lab_store[0])


def test_commit_order_reads_the_kernel_tree(tmp_path):
    """--tree: the runs in the tree's commit order (not the order they ran in), those it cannot place said."""
    tree = tmp_path / "linux"
    commits = empty_commits(tree, [f"c{n}" for n in range(3)])
    # Measured newest commit first: commit order turns time order around.
    at = [Planted(0, 1.0, environment={"kernel_commit": commits[2]}),
          Planted(4, 1.0, environment={"kernel_commit": commits[1]}),
          Planted(8, 1.0, environment={"kernel_commit": commits[0]})]
    db = Store(str(tmp_path / "s.sqlite"))
    fill(db, 12, at, seed=1, host="ci")
    fill(db, 6, [], seed=2, host="noc")  # no commits
    db.engine.dispose()
    app = create_app(str(tmp_path / "s.sqlite"), tree=tree)
    g = app.test_client().get("/api/graphs?order=commit&machine=ci&machine=noc").get_json()
    assert g["categories"] == [c[:12] for c in commits]
    ci, noc = g["machines"]
    assert [r["x"] for r in ci["runs"]] == [c[:12] for c in commits for _ in range(4)]
    assert (noc["runs"], noc["left_out"]) == ([], "6 runs without a kernel commit")
    app.extensions["mosbench.lab"].close()
