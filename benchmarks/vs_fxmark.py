"""fxmark's operations side by side with FxMark's own program: does the same name give the same number?

FxMark is not part of mosbench: fetch sslab-gatech/fxmark and build its `bin/fxmark` outside this tree
(its Makefile wants `src/cpupol.h`, the machine's CPU order, which its `bin/gen_corepolicy` writes with
Python 2; a hand-written one listing CPUs 0, 1, ... in order does as well). Give its path with --fxmark
or FXMARK; without it the script says so in one line and exits 0.

    flock /tmp/mosbench-measure.lock .venv/bin/python benchmarks/vs_fxmark.py --fs tmpfs --rounds 1 \
        --json /tmp/vs_fxmark.json          # run as root; repeat, then:
    .venv/bin/python benchmarks/vs_fxmark.py --report /tmp/vs_fxmark.json

Each pair runs FxMark's `fxmark --type=OP --ncore=N --duration=D --root=DIR` and `mosbench run fxmark/OP
--cores N --duration D`, back to back, alternating which goes first, each once the guest's free page
reporting has gone quiet (settle(), below), each on a file system of its own
made by the same code the same way (`machine/filesystem.py`'s `mount_fresh`, a loop device over a sparse
file on tmpfs, the same size), FxMark's root at the same depth below / as mosbench's working directory
(path walks cost a lookup per component), both pinned to CPUs 0 .. N-1. A round is every operation, file
system and core count once. Results are appended to --json as they come, so rounds may be run one
flock'd invocation at a time and interleaved with other work; --report prints the table of everything
stored: per cell the median of each tool's works/s, mosbench over FxMark's median ratio, the ratios'
range over the rounds and the round count, and where FxMark's own seconds ran past its --duration (a
call that outlasted its alarm: its works/s is over that longer time) by how much. `--baseline DIR`
also runs the mosbench of another checkout (DIR, with its native/ built; a copy from before a change) in
every pair, in turn with the other two, so one table holds the change's before and after against the
same FxMark runs.

The file system's size (--size-gib, 4 by default; FxMark's own is 32) bounds what the operations that fill
it take: FxMark's DWTL writes its files until the file system is full and MWUL/MWUM make files until no
inode is left, in memory here (tmpfs, or the loop device's image on tmpfs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mosbench.machine import filesystem, interference  # noqa: E402
from mosbench.workloads import fxmark  # noqa: E402

RESULT = re.compile(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", re.M)  # ncpu secs works works/sec
# FxMark counts from its start: its DURATION seconds are the first ones, in which a file (DWAL) or a
# directory (MWC*) is still small and a pool (MWU*, MWRM) still full. mosbench's window over the same
# seconds is the same operation's number; after a warm-up it would be a later stretch of them.
WARMUP_S = 0.0
# A guest with free page reporting (virtio-balloon's REPORTING) hands the pages a released file system held
# back to its host, in bursts about 2 s apart: measured here, 5 GiB over 20 s after a 2-core ext4 DWTL (its
# files fill the 4 GiB file system, and the loop device's image holds as much again). A program started in
# that time ran beside it, and touched pages the host must supply again: whichever went second in a pair
# read 25-40% low (ext4 DWTL at 2 cores, 8 pairs: 0.71-0.89 with FxMark first, 1.12-1.19 with mosbench
# first). Each program waits until the count of reported memory (interference.reported_kib, the one each
# mosbench window reads) has stood still this long, where this guest's kernel shows the count; elsewhere it
# starts at once.
QUIET_S = 3.0
SETTLE_LIMIT_S = 60.0
# FxMark's own seconds beyond its --duration by this factor: its last call outlasted the alarm.
OVERRUN = 1.1


@dataclass(frozen=True)
class Pair:
    op: str
    fs: str
    cores: int
    fxmark: float  # works/s, all cores
    mosbench: float | None  # None: its run failed
    order: str  # who ran in which order: "fxmark,mosbench,baseline"
    at: float
    baseline: float | None = None  # --baseline's mosbench, where one ran
    # FxMark's own seconds: past --duration where its last call outlasted the alarm (its works/s is then
    # over the longer time, mosbench's window ends on time: docs/FXMARK.md, DWAL on a 4 GiB ext4)
    fxmark_secs: float | None = None
    duration: int | None = None  # FxMark's --duration and mosbench's window, s

    def ratio(self, of: str = "mosbench") -> float | None:
        ours = getattr(self, of)
        return None if ours is None else ours / self.fxmark


class _Ledger:
    """mount_fresh's journal, in memory: the script releases what it makes itself."""

    def add_mount(self, entry: dict[str, str]) -> None:
        pass

    def remove_mount(self, entry: dict[str, str]) -> None:
        pass


def fs_size(size_gib: int) -> int:
    """The size mosbench gives a point's file system for -p size_gib (its memory bound where it has one)."""
    sizing = getattr(fxmark, "fs_size", None)
    return sizing({"size_gib": size_gib}) if sizing else size_gib << 30


def settle() -> float:
    """Waits until the guest's free page reporting has been quiet for QUIET_S (at most SETTLE_LIMIT_S):
    the seconds it waited."""
    if not interference.REPORTED_KIB.exists():
        return 0.0
    start = last_change = time.monotonic()
    last = interference.reported_kib()
    while time.monotonic() - last_change < QUIET_S and time.monotonic() - start < SETTLE_LIMIT_S:
        time.sleep(0.25)
        if (now := interference.reported_kib()) != last:
            last, last_change = now, time.monotonic()
    return time.monotonic() - start


def run_fxmark(binary: Path, op: str, fs_name: str, cores: int, duration: int,
               size_gib: int) -> tuple[float, float]:
    """FxMark's works/s for op on a new file system, its root as deep as mosbench's working directory
    (/dev/shm/<run>/fxmark/point-N/fs/micro.XXXXXX), and its seconds."""
    scratch = Path(tempfile.mkdtemp(prefix="vsfxmark-", dir="/dev/shm"))
    where = scratch / "fxmark" / "point-1"
    where.mkdir(parents=True)
    fs = filesystem.KNOWN[fs_name]
    mounted = filesystem.mount_fresh(fs, where / "fs", _Ledger(), size=fs_size(size_gib),
                                     image=None if fs.memory else where / "fs.img")
    try:
        root = Path(tempfile.mkdtemp(prefix="fxmark.", dir=where / "fs"))
        done = subprocess.run([str(binary), f"--type={op}", f"--ncore={cores}", f"--duration={duration}",
                               f"--root={root}"], capture_output=True, text=True, timeout=600, check=False)
        match = RESULT.search(done.stdout)
        if done.returncode or not match:
            raise RuntimeError(f"fxmark {op} {fs_name} x{cores}: rc {done.returncode}: "
                               f"{(done.stdout + done.stderr).strip()[-300:]}")
        return float(match.group(4)), float(match.group(2))
    finally:
        mounted.release()
        subprocess.run(["rm", "-rf", str(scratch)], check=False)


def run_mosbench(tree: Path, op: str, fs_name: str, cores: int, duration: int, size_gib: int) -> float:
    """`mosbench run` from tree's package and native/build: the point's throughput, all cores."""
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "s.sqlite"
        done = subprocess.run([sys.executable, "-m", "mosbench", "run", f"fxmark/{op}", "--variant", fs_name,
                               "--cores", str(cores), "--trials", "1", "--warmup", str(WARMUP_S),
                               "--duration", str(duration), "--interval", "0", "-p", f"size_gib={size_gib}",
                               "--store", str(store)],
                              cwd=tree, capture_output=True, text=True, timeout=900, check=False,
                              env={k: v for k, v in os.environ.items() if k != "MOSBENCH_NATIVE"})
        rows = sqlite3.connect(store).execute("select throughput, status, reason from points").fetchall() \
            if store.exists() else []
        if done.returncode or len(rows) != 1 or rows[0][1] != "ok":
            raise RuntimeError(f"mosbench {op} {fs_name} x{cores}: rc {done.returncode}: {rows} "
                               f"{done.stderr.strip()[-300:]}")
        return float(rows[0][0])


def measure(args: argparse.Namespace, binary: Path) -> None:
    ops = args.ops.split(",") if args.ops else [op.name for op in fxmark.OPERATIONS]
    out = Path(args.json)
    stored = json.loads(out.read_text()) if out.exists() else []
    trees = {"mosbench": ROOT, **({"baseline": Path(args.baseline).resolve()} if args.baseline else {})}
    for _ in range(args.rounds):
        for fs_name in args.fs.split(","):
            for cores in (int(c) for c in args.cores.split(",")):
                for op in ops:
                    # Each tool first, second and last in turn over the cell's own rounds: whatever the
                    # order does, each gets it alike. (A count over all pairs gave a cell the same order
                    # every round wherever a round held an even number of cells: --ops MRPM,MRPL.)
                    turn = sum((p["op"], p["fs"], p["cores"]) == (op, fs_name, cores) for p in stored)
                    order = ["fxmark", *trees]
                    order = order[turn % len(order):] + order[:turn % len(order)]
                    got: dict[str, float | None] = {}
                    secs = None
                    for who in order:
                        settle()
                        try:
                            if who == "fxmark":
                                got[who], secs = run_fxmark(binary, op, fs_name, cores, args.duration,
                                                            args.size_gib)
                            else:
                                got[who] = run_mosbench(trees[who], op, fs_name, cores, args.duration,
                                                        args.size_gib)
                        except RuntimeError as e:
                            print(f"FAILED {who}: {e}", file=sys.stderr, flush=True)
                            got[who] = None
                    if got["fxmark"] is None:
                        continue
                    pair = Pair(op, fs_name, cores, got["fxmark"], got["mosbench"], ",".join(order), time.time(),
                                got.get("baseline"), secs, args.duration)
                    stored.append(asdict(pair))
                    out.write_text(json.dumps(stored, indent=0))
                    print(f"{op:5} {fs_name:6} x{cores}  " + "  ".join(
                        f"{who} {v:,.0f}" if v is not None else f"{who} failed" for who, v in got.items())
                        + (f"  (FxMark's own {secs:.2f} s)" if secs and secs > args.duration * OVERRUN else ""),
                        flush=True)


def _ratios(ps: list[Pair], of: str) -> str:
    rs = [r for p in ps if (r := p.ratio(of)) is not None]
    if not rs:
        return f"{'-':>6} {'':>11}"
    return f"{statistics.median(rs):6.2f} {min(rs):5.2f}-{max(rs):<5.2f}"


def report(path: Path) -> None:
    pairs = [Pair(**p) for p in json.loads(path.read_text())]
    cells: dict[tuple[str, str, int], list[Pair]] = {}
    for p in pairs:
        cells.setdefault((p.op, p.fs, p.cores), []).append(p)
    order = {op.name: i for i, op in enumerate(fxmark.OPERATIONS)}
    baseline = any(p.baseline is not None for p in pairs)
    print(f"{'op':5} {'fs':6} {'cores':>5} {'FxMark ops/s':>13} {'mosbench':>13} {'ratio':>6} {'range':>11}"
          + (f" {'baseline':>8} {'range':>11}" if baseline else "") + f" {'rounds':>6}")
    within = {"mosbench": 0, "baseline": 0}
    for (op, fs_name, cores), ps in sorted(cells.items(), key=lambda c: (order.get(c[0][0], 99), c[0][1:])):
        for of in within:
            rs = [r for p in ps if (r := p.ratio(of)) is not None]
            within[of] += bool(rs) and 0.9 <= statistics.median(rs) <= 1.1
        ours = [p.mosbench for p in ps if p.mosbench is not None]
        over = [p.fxmark_secs / p.duration for p in ps if p.fxmark_secs and p.duration]
        print(f"{op:5} {fs_name:6} {cores:5} {statistics.median(p.fxmark for p in ps):13,.0f} "
              f"{statistics.median(ours) if ours else float('nan'):13,.0f} {_ratios(ps, 'mosbench')}"
              + (f"   {_ratios(ps, 'baseline')}" if baseline else "") + f" {len(ps):6}"
              + (f"  FxMark's own time up to {max(over):.1f}x its window" if over and max(over) > OVERRUN else ""))
    print(f"{within['mosbench']} of {len(cells)} cells within ±10% (median of mosbench/FxMark over the rounds)"
          + (f"; the baseline's: {within['baseline']}" if baseline else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fxmark", default=os.environ.get("FXMARK", ""), help="FxMark's bin/fxmark (or FXMARK)")
    ap.add_argument("--fs", default="tmpfs,ext4")
    ap.add_argument("--cores", default="1,2")
    ap.add_argument("--ops", default="", help="comma-separated operations (default: all 19)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--duration", type=int, default=2, help="seconds (FxMark takes whole seconds)")
    ap.add_argument("--size-gib", type=int, default=4)
    ap.add_argument("--json", default="vs_fxmark.json", help="pairs are appended here")
    ap.add_argument("--baseline", metavar="DIR", help="also run the mosbench of this checkout in every pair")
    ap.add_argument("--report", metavar="JSON", help="print the table of the pairs stored in JSON and exit")
    args = ap.parse_args()
    if args.report:
        report(Path(args.report))
        return 0
    binary = Path(args.fxmark) if args.fxmark else None
    if binary is None or not os.access(binary, os.X_OK):
        print("vs_fxmark: no FxMark program (--fxmark PATH or FXMARK=PATH to its bin/fxmark): skipped")
        return 0
    if os.geteuid() != 0:
        print("vs_fxmark: makes and mounts file systems: run it as root", file=sys.stderr)
        return 2
    measure(args, binary)
    report(Path(args.json))
    return 0


if __name__ == "__main__":
    sys.exit(main())
