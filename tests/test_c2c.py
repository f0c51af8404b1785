"""Shared cache lines (perf c2c): the report read, recorded where a PMU has memory events, absent with the
reason where not, added up over trials and shown in the report.

The fixtures are `perf c2c report --stdio --full-symbols` as perf 6.1 prints it, in the layout of
tools/perf/builtin-c2c.c (perf_c2c__hists_fprintf, print_pareto: the block titles, "name : value" lines,
the column headers and widths) and ui/stdio/hist.c (fields joined by two spaces, each row led by two),
checked against the format strings in this machine's perf 6.1 binary and against published reports'
layout. The numbers, addresses and symbols are our own: a two-socket run of mosbench-scale's locks and
structures (c2c-perf6.1-report-stdio-x86-2socket.txt) and a window in which no line moved between cores
(c2c-perf6.1-report-stdio-no-shared-lines.txt).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import pytest
from markupsafe import escape

from mosbench.analysis import profiles
from mosbench.report import html, rows
from mosbench.run import c2c
from mosbench.run import profiler as profile
from mosbench.store import db as store
from tests.conftest import FIXTURES

REPORT = (FIXTURES / "c2c-perf6.1-report-stdio-x86-2socket.txt").read_text()
QUIET = (FIXTURES / "c2c-perf6.1-report-stdio-no-shared-lines.txt").read_text()
NO_PMU = "no PMU: perf c2c needs the CPU's memory sampling events (memory events not supported here)"


def test_the_totals_are_the_trace_and_shared_line_blocks():
    r = c2c.parse_report(REPORT)
    assert r["totals"] == {"records": 47926, "locked": 3102, "loads": 21590, "stores": 26336, "hitm_local": 2698,
                           "hitm_remote": 629, "hitm": 3327, "llc_misses": 1427, "peer_local": 0, "peer_remote": 0}
    assert r["shared"] == {"lines": 23, "loads": 8807, "stores": 4108, "locked": 1650, "merged": 7418}
    assert r["events"] == ["cpu/mem-loads,ldlat=30/P", "cpu/mem-stores/P"] and r["sort"] == "Total HITMs"


def test_the_lines_with_most_hitms_are_kept_with_the_code_that_touched_them():
    r = c2c.parse_report(REPORT)
    assert r["lines_shown"] == 12 and len(r["lines"]) == c2c.MAX_LINES
    assert [line["hitm"] for line in r["lines"]] == [1720, 624, 367, 229, 119, 78, 49, 41, 33, 25]
    lock = r["lines"][0]
    assert {k: lock[k] for k in ("address", "node", "hitm_local", "hitm_remote", "loads", "stores", "records")} == {
        "address": "0x55d3c1a4e0c0", "node": "0", "hitm_local": 1402, "hitm_remote": 318, "loads": 2394,
        "stores": 651, "records": 3045}
    assert lock["share"] == pytest.approx(0.517)
    # The Pareto's shares of the line's HITMs and stores, as counts: the lock word read, the unlock written.
    assert [(c["offset"], c["symbol"], c["dso"], c["source"], c["hitm_local"], c["hitm_remote"], c["stores"])
            for c in lock["code"]] == [("0x0", "ticket_lock", "mosbench-scale", "lock.c:31", 1210, 270, 0),
                                       ("0x4", "ticket_unlock", "mosbench-scale", "lock.c:44", 192, 48, 651)]
    first = lock["code"][0]
    assert first["records"] == 1882 and first["cpus"] == 48 and first["nodes"] == "0,1"
    assert first["iaddr"] == "0x55d3c0e0a1c4" and first["cycles"] == {"rmt": 388, "lcl": 171, "load": 74}


def test_a_kernel_line_without_debug_info_has_no_source_line():
    spin = c2c.parse_report(REPORT)["lines"][1]
    assert spin["address"] == "0xffff8f2a0d3e5a40" and spin["node"] == "1"
    assert [(c["symbol"], c["dso"], c["source"], c["hitm"]) for c in spin["code"]] == [
        ("native_queued_spin_lock_slowpath", "[kernel.kallsyms]", None, 485),  # perf printed "symbol+304"
        ("_raw_spin_lock", "[kernel.kallsyms]", None, 139)]


def test_keep_cuts_the_lines():
    assert [line["address"] for line in c2c.parse_report(REPORT, keep=2)["lines"]] == ["0x55d3c1a4e0c0",
                                                                                      "0xffff8f2a0d3e5a40"]


def test_a_window_without_shared_lines_has_totals_and_no_lines():
    r = c2c.parse_report(QUIET)
    assert r["totals"]["hitm"] == 0 and r["totals"]["loads"] == 8800 and r["shared"]["lines"] == 0
    assert r["lines"] == [] and r["lines_shown"] == 0


@pytest.mark.parametrize("text", ["", "perf: not a c2c report\n", "=====\n  Load Local HITM : lots\n",
                                  "           Shared Data Cache Line Table          \n      0  0x10  1%\n"])
def test_nothing_readable_gives_empty_parts_never_an_exception(text):
    r = c2c.parse_report(text)
    assert r["lines"] == [] and r["shared"] == {} and r["events"] == []
    assert "hitm" not in r["totals"]


def test_a_report_cut_off_keeps_what_came_before():
    lines = REPORT.splitlines()
    in_pareto = next(i for i, line in enumerate(lines) if "[.] ticket_lock" in line)
    r = c2c.parse_report("\n".join(lines[:in_pareto + 1]) + "\n          15.09%   13.6")  # a row cut mid-way
    assert len(r["lines"]) == 10 and [c["symbol"] for c in r["lines"][0]["code"]] == ["ticket_lock"]
    assert all(line["code"] == [] for line in r["lines"][1:])
    in_table = next(i for i, line in enumerate(lines) if line.startswith("      2      0x55d3c1a4e100"))
    r = c2c.parse_report("\n".join(lines[:in_table]))
    assert [line["hitm"] for line in r["lines"]] == [1720, 624] and r["totals"]["hitm"] == 3327
    r = c2c.parse_report("\n".join(lines[:20]))  # inside the first block
    assert r["totals"] == {"records": 47926, "locked": 3102, "loads": 21590, "hitm_local": 2698,
                           "hitm_remote": 629, "hitm": 3327} and r["lines"] == []


def test_perfs_nan_percentages_are_ignored():
    # With no LLC misses perf divides by zero and prints "-nan%".
    r = c2c.parse_report(re.sub(r"\d+\.\d%$", "-nan%", QUIET, flags=re.M))
    assert r["totals"]["llc_misses"] == 21 and r["totals"]["hitm"] == 0


def test_a_report_sorted_on_peer_snoops_reads_the_peers_apart_from_the_hitms():
    # Arm64's default display (-d peer): Peer Snoop share, then Load Peer Total/Local/Remote where the
    # HITM counts stand on x86; the LclHitm and RmtHitm columns keep their place near the end.
    text = REPORT.replace("Cachelines sort on                : Total HITMs",
                          "Cachelines sort on                : Peer Snoop")
    line = c2c.parse_report(text)["lines"][0]
    assert (line["peer"], line["peer_local"], line["peer_remote"]) == (1720, 1402, 318)
    assert line["hitm"] == 1720


def test_no_pmu_is_one_reason_a_reader_can_act_on():
    assert c2c.refusal("failed: memory events not supported\n", 255) == NO_PMU
    assert c2c.refusal("failed: no PMU supports the memory events\n", 255) == (
        "no PMU: perf c2c needs the CPU's memory sampling events (no PMU supports the memory events here)")
    assert c2c.refusal("Error:\nAccess to performance monitoring is limited.\n", 255) == (
        "perf c2c record cannot sample: Access to performance monitoring is limited.")
    assert c2c.refusal("", 129) == "perf c2c record cannot sample: status 129"


# --- the Recorder, with perf replaced by stand-ins that answer as perf does -------------------------------

SCRIPT = "mosbench-scale 4242    2004008\x20\n\t  1d2b ticket_lock (/work/native/build/mosbench-scale)\n\n"


class FakePerf:
    """A PerfControl that starts nothing: it keeps its command and what it was told."""

    started: ClassVar[list[FakePerf]] = []
    refuse: ClassVar[str | None] = None  # the word (enable, disable) a perf c2c stops answering at

    def __init__(self, launcher: Any, group: Any, argv: list[str], workdir: Path, name: str):
        self.argv, self.name, self.told = argv, name, []
        FakePerf.started.append(self)

    def _tell(self, word: str) -> None:
        if self.name == "perf-c2c" and word == FakePerf.refuse:
            raise OSError(f"perf c2c did not acknowledge {word!r}")
        self.told.append(word)

    def enable(self) -> None:
        self._tell("enable")

    def disable(self) -> None:
        self._tell("disable")

    def close(self) -> None:
        self.told.append("close")


class FakeLauncher:
    """Runs perf script and perf c2c report by writing what they print."""

    def __init__(self, logdir: Path, c2c_status: int = 0):
        self.logdir, self.c2c_status, self.ran = logdir, c2c_status, []

    def run(self, name: str, argv: list[str], group: Any, timeout: float | None = None) -> int:
        self.ran.append(argv)
        out = {"perf-script": SCRIPT, "perf-c2c-report": REPORT}.get(name, "")
        (self.logdir / f"{name}.out").write_text(out)
        return self.c2c_status if name == "perf-c2c-report" else 0

    def last_error(self, name: str) -> str:
        return "perf.data: file has no samples"


@pytest.fixture
def recorder(tmp_path, monkeypatch):
    """A Recorder on CPUs 0-1 whose perfs are stand-ins; no PMU counters, no lock tracing."""
    FakePerf.started, FakePerf.refuse = [], None
    monkeypatch.setattr(profile, "PerfControl", FakePerf)
    monkeypatch.setattr(profile, "pmu_unavailable", lambda: "no hardware counters")
    monkeypatch.setattr(profile, "locks_unavailable", lambda: "no lock tracepoints")
    monkeypatch.setattr(profile, "lock_stat_usable", lambda: False)

    def make(c2c_status: int = 0) -> profile.Recorder:
        return profile.Recorder(FakeLauncher(tmp_path, c2c_status), None, (0, 1), tmp_path, 1.0)
    return make


def _measure(rec: profile.Recorder) -> dict[str, Any]:
    rec.warmup_begins(0.0)
    rec.window_begins(100.0)
    rec.window_ends()
    return rec.finish(1.0)


def test_without_a_pmu_the_profile_stores_c2c_absent_with_the_reason(recorder, monkeypatch):
    monkeypatch.setattr(c2c, "unavailable", lambda: NO_PMU)
    prof = _measure(recorder())
    assert prof["c2c_absent"] == NO_PMU and "c2c" not in prof
    assert prof["stacks"] == {"mosbench-scale;ticket_lock": 1}  # the rest of the profile is whole
    assert [p.name for p in FakePerf.started] == ["perf-record"]


def test_with_a_pmu_perf_c2c_samples_the_window_on_the_points_cpus(recorder, monkeypatch, tmp_path):
    monkeypatch.setattr(c2c, "unavailable", lambda: None)
    rec = recorder()
    prof = _measure(rec)
    perf = next(p for p in FakePerf.started if p.name == "perf-c2c")
    assert perf.argv == ["perf", "c2c", "record", "--no-bpf-event", "-C", "0-1", "-o", str(tmp_path / "perf-c2c.data")]
    assert perf.told == ["enable", "disable", "close"]  # over the window alone, then written out
    assert rec.launcher.ran[-1] == ["perf", "c2c", "report", "-i", str(tmp_path / "perf-c2c.data"), "--stdio",
                                    "--full-symbols"]
    assert prof["c2c"] == c2c.parse_report(REPORT) and "c2c_absent" not in prof
    assert not (tmp_path / "perf-c2c-report.out").exists()


def test_a_perf_c2c_that_stops_answering_loses_the_c2c_part_only(recorder, monkeypatch):
    monkeypatch.setattr(c2c, "unavailable", lambda: None)
    FakePerf.refuse = "enable"
    prof = _measure(recorder())
    assert prof["c2c_absent"] == "perf c2c record did not enable: perf c2c did not acknowledge 'enable'"
    assert prof["stacks"] == {"mosbench-scale;ticket_lock": 1}


def test_a_report_that_fails_is_stored_as_absent(recorder, monkeypatch):
    monkeypatch.setattr(c2c, "unavailable", lambda: None)
    prof = _measure(recorder(c2c_status=1))
    assert prof["c2c_absent"] == "perf c2c report failed: perf.data: file has no samples"
    assert prof["samples"] == 1


# --- trials added up, and the report -------------------------------------------------------------------------

def _point(cores: int, work: float, trial: int = 1, **c2c_part: Any) -> dict[str, Any]:
    return {"workload": "scale", "test": "lock", "variant": "ticket", "cores": cores, "trial": trial,
            "status": "ok", "work": work,
            "profile": {"stacks": {"mosbench-scale;ticket_lock": 100}, "period_ns": 1_000_000, "window_s": 1.0,
                        "samples": 100, **c2c_part}}


def test_two_trials_c2c_add_up_by_line_address():
    report = c2c.parse_report(REPORT)
    other = c2c.parse_report(REPORT, keep=3)
    other["lines"][2]["address"] = "0x7f3b2c00f000"  # that trial's structure was elsewhere in memory
    prof = profiles.Profile.of_points([_point(48, 1e6, c2c=report), _point(48, 3e6, trial=2, c2c=other)])
    assert prof.c2c_hitm == 2 * 3327 and prof.c2c_absent is None
    assert prof.hitm_per_unit() == pytest.approx(2 * 3327 / 4e6)
    assert len(prof.c2c_lines) == profiles.C2C_LINES
    assert [(line["address"], line["hitm"]) for line in prof.c2c_lines[:4]] == [
        ("0x55d3c1a4e0c0", 3440), ("0xffff8f2a0d3e5a40", 1248), ("0x55d3c1a4e100", 367), ("0x7f3b2c00f000", 367)]
    code = prof.c2c_lines[0]["code"]
    assert [(c["symbol"], c["hitm"], c["stores"]) for c in code] == [("ticket_lock", 2960, 0),
                                                                     ("ticket_unlock", 480, 1302)]


def test_without_c2c_in_any_trial_there_is_no_hitm_rate_only_the_reason():
    prof = profiles.Profile.of_points([_point(2, 1e6, c2c_absent=NO_PMU), _point(2, 1e6, trial=2, c2c_absent=NO_PMU)])
    assert prof.hitm_per_unit() is None and prof.c2c_absent == NO_PMU and prof.c2c_lines == []
    old = profiles.Profile.of_points([_point(2, 1e6)])  # stored before c2c was recorded
    assert old.hitm_per_unit() is None and old.c2c_absent is None


def test_the_c2c_table_reads_hitm_per_unit_and_the_lines_shares():
    prof = profiles.Profile.of_points([_point(48, 1e6, c2c=c2c.parse_report(REPORT))])
    t = rows.c2c_table("scale/lock", "ticket", "acquisition", 48, prof)
    assert t.rows[0].cells[:4] == ["[every line]", "", "100%", "3.33"]
    assert "3327 HITM samples: 15.4% of the sampled loads" in t.rows[0].cells[5]
    assert t.rows[1].cells[:5] == ["0x55d3c1a4e0c0", "", "52%", "1.72", "651"] and t.rows[1].cell_styles == {2: "poor"}
    assert t.rows[2].cells == ["", "0x0", "44%", "1.48", "0", "ticket_lock (mosbench-scale)", "lock.c:31"]
    assert t.column("source:line")[5:7] == ["–", "–"]  # the kernel's, without debug info


def _report(tmp_path: Path, by_cores: dict[int, dict[str, Any]]) -> str:
    db = store.Store(str(tmp_path / "s.sqlite"))
    run = db.create_run({}, {"hostname": "two-socket", "kernel": "6.1.0"}, "mosbench run scale/lock --profile")
    for cores, part in by_cores.items():
        p = _point(cores, 1e6 * cores, **part)
        db.add_point(run, workload="scale", test="lock", variant="ticket", cores=cores, trial=1, status="ok",
                     started_at=store.now(), cpus=f"0-{cores - 1}", unit="acquisition", window_s=1.0,
                     work=p["work"], throughput=p["work"], user_s=cores * 1.0, system_s=0.0, idle_s=0.0,
                     steal_s=0.0, samples=[], profile=p["profile"])
    db.finish_run(run, "complete")
    return html.write(db, [str(run)], tmp_path / "r.html").read_text()


def test_the_report_says_c2c_was_absent_and_why_rather_than_none(tmp_path):
    text = _report(tmp_path, {1: {"c2c_absent": NO_PMU}, 2: {"c2c_absent": NO_PMU}})
    assert f"ticket: shared cache lines (perf c2c): absent: {escape(NO_PMU)}" in text
    assert "shared cache lines at 2 cores" not in text


def test_the_report_shows_the_shared_lines_of_a_recorded_profile(tmp_path):
    text = _report(tmp_path, {1: {"c2c": c2c.parse_report(QUIET)}, 48: {"c2c": c2c.parse_report(REPORT)}})
    assert "scale/lock ticket: shared cache lines at 48 cores (perf c2c samples" in text
    assert "ticket_lock (mosbench-scale)" in text and "lock.c:31" in text and "0x55d3c1a4e0c0" in text
    assert "absent" not in text.split("Where the time went")[1].split("Scaling models")[0]
