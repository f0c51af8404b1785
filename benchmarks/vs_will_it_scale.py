"""mosbench's micro tests side by side with will-it-scale's, same test, same tasks, interleaved rounds.

will-it-scale is not part of mosbench: build it yourself outside this tree (its Makefile needs
libhwloc-dev) and point --wis at the directory holding its `<test>_processes` and `<test>_threads`.

    .venv/bin/python benchmarks/vs_will_it_scale.py --wis ~/src/will-it-scale --rounds 5 [--json pairs.json]

Both tools run with the same task counts, pinned one task per CPU in the same order, with files in
the same directory (/tmp, will-it-scale's), address-space randomisation off (will-it-scale's runtest.py
uses setarch -R; mosbench-micro turns it off itself) and no descriptor inherited from the shell. Each
round runs ours and theirs back to back, alternating which goes first; each measurement skips the
warm-up seconds and averages the next seconds of per-second counts (will-it-scale prints them as it
goes; it is stopped by its process group once enough have come). Prints every test's median ops/s for
each tool and ours/theirs, with the rounds; at the end, how many pairs are within ±5% and how much of
the CPU time the host stole meanwhile.

A ratio outside ±5% may still be noise: beside it the script prints each tool's spread over its rounds
(interquartile range over median) and a 95% bootstrap interval of the ratio of medians. A pair is
"apart" only when the whole interval lies outside ±5%; "unclear" when the interval crosses a bound.
`--same` runs will-it-scale against itself, the noise floor of this host at these settings.

A contended test may be bimodal: each run lands at one of two rates, so a median of a few rounds says
which mode the dice chose, not how the tools compare. Each tool's per-second counts are checked for two
separated groups; a pair where either tool has them gets the verdict "bimodal" with both modes, never
"within" or "apart" on its medians.

This is a command over the package, which the many-core check (scripts/check_manycore.py) runs too:
the measuring is mosbench/run/willitscale.py, the bimodality rule and the verdicts
mosbench/analysis/pairs.py, the table mosbench/report/pairs.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mosbench.analysis.pairs import Comparison, Pair  # noqa: E402
from mosbench.report.pairs import format_failed, format_pair, format_totals, header  # noqa: E402
from mosbench.run.willitscale import close_inherited_fds, compare, shared_tests, task_counts  # noqa: E402


def write_json(path: Path, settings: dict, c: Comparison | None, pairs: list[Pair]) -> None:
    """Rewritten after every pair (a stopped run keeps what it measured), atomically."""
    data = {"settings": settings, "pairs": [p.to_json() for p in pairs], "complete": c is not None and not c.not_run}
    if c is not None:
        data |= {"not_run": c.not_run, "steal_pct": c.steal_pct, "seconds": c.seconds, "high_fds": c.high_fds,
                 "interrupted": c.interrupted, "failed": [dataclasses.asdict(f) for f in c.failed]}
        data["complete"] = data["complete"] and not c.failed
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--wis", type=Path, required=True, help="a built will-it-scale tree")
    ap.add_argument("--tests", help="comma-separated (default: every test both have)")
    ap.add_argument("--modes", default="procs", help="procs,threads")
    ap.add_argument("--tasks", default="1,max",
                    help="task counts: numbers, max (every CPU this process may use), half (max//2)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--duration", type=int, default=2)
    ap.add_argument("--same", action="store_true",
                    help="will-it-scale against itself in place of ours: the host's noise floor")
    ap.add_argument("--json", type=Path, metavar="PATH", help="every pair, with all its rounds, as JSON")
    args = ap.parse_args(argv)
    close_inherited_fds()  # see close_inherited_fds: neither tool gets a table sized by the shell's descriptors
    ncpu = len(os.sched_getaffinity(0))
    try:
        counts = task_counts(args.tasks, ncpu)
    except ValueError as e:
        ap.error(str(e))
    tests = args.tests.split(",") if args.tests else shared_tests(args.wis)
    modes_ = args.modes.split(",")
    settings = {"wis": str(args.wis), "tests": tests, "modes": modes_, "counts": counts, "rounds": args.rounds,
                "warmup": args.warmup, "duration": args.duration, "same": args.same, "cpus": ncpu}
    total = len(tests) * len(modes_) * len(counts)
    print(header(args.rounds, args.same), flush=True)
    started = time.monotonic()
    done: list[Pair] = []

    def show(p: Pair) -> None:
        done.append(p)
        eta = (time.monotonic() - started) / len(done) * (total - len(done))
        print(f"{format_pair(p)}   [eta {eta / 60:.0f} min]", flush=True)
        if args.json:
            write_json(args.json, settings, None, done)

    c = compare(args.wis, tests, modes_, counts, args.rounds, args.warmup, args.duration, same=args.same,
                on_pair=show, on_failed=lambda f: print(format_failed(f), flush=True))
    if args.json:
        write_json(args.json, settings, c, c.pairs)
    print(format_totals(c))
    if c.interrupted:
        sys.exit(130)  # as a shell reports an interrupted command, after the totals and the JSON
    if c.failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
