"""Cache lines that move between cores: `perf c2c` over a point's window, read into what the store keeps.

`perf c2c record` samples loads and stores with the data address they touched (the PMU's memory sampling
events: Intel's load-latency and precise-store events, AMD's IBS, Arm's SPE), and `perf c2c report`
groups the samples by cache line. A load that hit a line Modified in another core's cache (a HITM, local
or remote socket) is a line written by one core and read by another: true or false sharing. The report
names each hot line, the offsets in it and the code (symbol, source:line) that touched each offset.

The counts are samples, not events: perf samples at its default frequency (4000 Hz a CPU), so HITM
samples per unit of work compare points recorded the same way, and the HITM share of the sampled loads
says how much of the memory traffic was sharing. A machine without the PMU's memory events (most VMs)
has no c2c: it is stored as absent with the reason, never as zero.

The text read is `perf c2c report --stdio` as perf 6.1 prints it (tools/perf/builtin-c2c.c: the
"Trace Event Information", "Global Shared Cache Line Event Information" and "c2c details" blocks of
"name : value" lines, the "Shared Data Cache Line Table" and the "Shared Cache Line Distribution
Pareto"; columns joined by two spaces, each row led by two). Older and newer perfs add or drop columns
(Node and PA cnt, stores N/A, peer snoops): rows are read by their shape, not by fixed positions.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
from typing import Any

MAX_LINES = 10  # cache lines kept per point, most HITMs first
MAX_CODE = 8  # code rows kept per line
SECTIONS = {
    "Trace Event Information": "trace",
    "Global Shared Cache Line Event Information": "shared",
    "c2c details": "details",
    "Shared Data Cache Line Table": "table",
    "Shared Cache Line Distribution Pareto": "pareto",
}
STAT = re.compile(r"^  (\S[^:]*?)?\s*: (.*)$")  # "  Load Local HITM                   :       2698"
TABLE_ROW = re.compile(r"^\s+(\d+)\s+(0x[0-9a-f]+)\s+(.*\S)\s*$")  # Index, Address, the rest
PARETO_LINE = re.compile(r"^\s+(\d+)((?:\s+\d+){2,})\s+(0x[0-9a-f]+)\s*$")  # Num, HITM and store counts, Address
CODE_ROW = re.compile(r"^\s+(?P<pcts>(?:[\d.]+%\s+){3,})(?P<offset>0x[0-9a-f]+)\s+(?P<mid>.*?)\s*"
                      r"(?P<iaddr>0x[0-9a-f]+)\s+(?P<cyc_rmt>\S+)\s+(?P<cyc_lcl>\S+)\s+(?P<cyc_load>\S+)\s+"
                      r"(?P<records>\d+)\s+(?P<cpus>\d+)\s+(?P<tail>\S.*?)\s*$")
SOURCE_LINE = re.compile(r"^[^?\s].*:\d+$")  # file.c:123; perf's "??:0" and "symbol+0x12" are not
# perf's totals by the names it prints them with (perf 6.1; absent names are left out).
TRACE_KEYS = {"Total records": "records", "Load Operations": "loads", "Store Operations": "stores",
              "Locked Load/Store Operations": "locked", "Load Local HITM": "hitm_local",
              "Load Remote HITM": "hitm_remote", "Load LLC Misses": "llc_misses",
              "Load HIT Local Peer": "peer_local", "Load HIT Remote Peer": "peer_remote"}
SHARED_KEYS = {"Total Shared Cache Lines": "lines", "Load HITs on shared lines": "loads",
               "Store HITs on shared lines": "stores", "Locked Access on shared lines": "locked",
               "Total Merged records": "merged"}
NO_PMU = ("memory events not supported", "no PMU supports", "no PMU that supports")


def refusal(stderr: str, status: int) -> str:
    """What perf c2c record said when it would not sample, as one reason for a reader."""
    said = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in said:
        if any(s in line for s in NO_PMU):
            detail = line.removeprefix("failed:").strip()
            return f"no PMU: perf c2c needs the CPU's memory sampling events ({detail} here)"
    return f"perf c2c record cannot sample: {said[-1] if said else f'status {status}'}"


@functools.cache
def unavailable() -> str | None:
    """Why shared cache lines cannot be sampled here (no PMU memory events: a VM), or None."""
    if not shutil.which("perf"):
        return "perf is not installed (Debian: linux-perf)"
    try:
        probe = subprocess.run(["perf", "c2c", "record", "-o", os.devnull, "--", "true"],
                               capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return f"perf c2c record could not be run: {e}"
    return None if probe.returncode == 0 else refusal(probe.stderr, probe.returncode)


def _int(text: str) -> int | None:
    with contextlib.suppress(ValueError):
        return int(text)
    return None


def _stats(lines: list[str], keys: dict[str, str]) -> dict[str, int]:
    """A block's "name : value" lines, the named counts only (percentages and unknown names ignored)."""
    out = {}
    for line in lines:
        if (m := STAT.match(line)) and m[1] in keys and (value := _int(m[2].strip())) is not None:
            out[keys[m[1]]] = value
    return out


def _details(lines: list[str]) -> dict[str, Any]:
    events, sort = [], None
    for line in lines:
        if not (m := STAT.match(line)):
            continue
        if m[1] in (None, "Events"):  # the events' continuation lines have no name
            events.append(m[2].strip())
        elif m[1] == "Cachelines sort on":
            sort = m[2].strip()
    return {"events": events, "sort": sort}


def _table_row(m: re.Match, peer: bool) -> dict[str, Any] | None:
    """A Shared Data Cache Line Table row: its share of the HITMs, then counts. The hit columns are
    read from the end (LclHitm, RmtHit, RmtHitm, Lcl, Rmt DRAM), which every perf since 4.10 ends with."""
    tokens = m[3].split()
    at = next((i for i, t in enumerate(tokens) if t.endswith("%")), None)
    counts = [_int(t) for t in tokens[at + 1:]] if at is not None else []
    if at is None or len(counts) < 8 or any(c is None for c in counts):
        return None
    line = {"address": m[2], "node": tokens[0] if at else None, "hitm_local": counts[-5],
            "hitm_remote": counts[-3], "records": counts[3], "loads": counts[4], "stores": counts[5],
            "share": _percent(tokens[at]), "code": []}
    line["hitm"] = line["hitm_local"] + line["hitm_remote"]
    if peer:  # sorted on peer snoops (Arm): the first three counts are peers, not HITMs
        line.update(peer=counts[0], peer_local=counts[1], peer_remote=counts[2])
    return line


def _percent(text: str) -> float | None:
    with contextlib.suppress(ValueError):
        return round(float(text.rstrip("%")) / 100, 6)
    return None


def _source_and_nodes(fields: list[str]) -> tuple[str | None, str | None]:
    """After symbol and object: Source:Line (absent with --no-source) and the nodes of the CPUs that
    touched it ("0  1": two spaces between nodes, so split into digit fields)."""
    nodes: list[str] = []
    while fields and fields[-1].isdigit():
        nodes.insert(0, fields.pop())
    source = "  ".join(fields) or None
    return (source if source and SOURCE_LINE.match(source) else None), (",".join(nodes) or None)


def _code_row(m: re.Match, counts: list[int]) -> dict[str, Any]:
    """A Pareto code row: its shares of the line's remote and local HITMs and stores, as counts."""
    shares = [float(p.rstrip("%")) / 100 for p in m["pcts"].split()]
    hitm_remote, hitm_local = (round(s * c) for s, c in zip(shares[:2], counts[:2], strict=True))
    stores = round(sum(s * c for s, c in zip(shares[2:], counts[2:], strict=False)))
    symbol, *rest = re.split(r"\s{2,}", m["tail"])
    source, nodes = _source_and_nodes(rest[1:])
    return {"offset": m["offset"], "symbol": re.sub(r"^\[.\] ", "", symbol), "dso": rest[0] if rest else None,
            "source": source, "iaddr": m["iaddr"], "hitm": hitm_local + hitm_remote, "hitm_local": hitm_local,
            "hitm_remote": hitm_remote, "stores": stores, "records": int(m["records"]), "cpus": int(m["cpus"]),
            "nodes": nodes, "cycles": {k: _int(m[f"cyc_{k}"]) for k in ("rmt", "lcl", "load")}}


def _pareto(lines: list[str], by_address: dict[str, dict[str, Any]]) -> None:
    """The code rows under each line's "Num HITM… Address" row, added to that line."""
    current: dict[str, Any] | None = None
    counts: list[int] = []
    for text in lines:
        if m := PARETO_LINE.match(text):
            counts = [int(c) for c in m[2].split()]  # RmtHitm, LclHitm, then the store columns
            current = by_address.setdefault(m[3], {
                "address": m[3], "node": None, "hitm_remote": counts[0], "hitm_local": counts[1],
                "hitm": counts[0] + counts[1], "records": None, "loads": None, "stores": sum(counts[2:]),
                "share": None, "code": []})
        elif current is not None and (c := CODE_ROW.match(text)):
            current["code"].append(_code_row(c, counts))


def _split(text: str) -> dict[str, list[str]]:
    """The report's lines by section (title lines between "=====" rules)."""
    out: dict[str, list[str]] = {}
    section = None
    for line in text.splitlines():
        if (title := line.strip()) in SECTIONS:
            section = SECTIONS[title]
            out[section] = []
        elif section is not None and not line.startswith("====="):
            out[section].append(line)
    return out


def parse_report(text: str, keep: int = MAX_LINES) -> dict[str, Any]:
    """`perf c2c report --stdio`: the totals, and the `keep` lines with most HITMs with the code that
    touched them. A missing or cut-off section leaves its part empty."""
    sections = _split(text)
    totals = _stats(sections.get("trace", []), TRACE_KEYS)
    if "hitm_local" in totals and "hitm_remote" in totals:
        totals["hitm"] = totals["hitm_local"] + totals["hitm_remote"]
    details = _details(sections.get("details", []))
    peer = (details["sort"] or "").startswith("Peer")
    table = [row for line in sections.get("table", []) if (m := TABLE_ROW.match(line))
             if (row := _table_row(m, peer)) is not None]
    by_address = {row["address"]: row for row in table}
    _pareto(sections.get("pareto", []), by_address)
    for line in by_address.values():
        line["code"] = sorted(line["code"], key=lambda c: (c["hitm"], c["records"]), reverse=True)[:MAX_CODE]
    ranked = sorted(by_address.values(), key=lambda line: (line["hitm"], line.get("peer", 0)), reverse=True)
    return {"totals": totals, "shared": _stats(sections.get("shared", []), SHARED_KEYS), **details,
            "lines_shown": len(by_address), "lines": ranked[:keep]}
