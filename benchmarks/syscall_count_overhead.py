"""What counting the server's system calls costs PostgreSQL's throughput, side by side.

postgres/read-only at max cores, both caches, with `-p syscalls=true` (perf stat on the syscall
tracepoints of every backend over the window, the default) and `-p syscalls=false`, interleaved
round by round so drift hits both alike. Each tracepoint hit costs the calling backend a little
kernel time, and a query makes about four to six calls. Prints each form's per-core throughput, the
median ratio and the number of rounds.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mosbench.store.db import Store  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "5"))
WARMUP, DURATION = 1, 4


def run(store: Path, counting: bool) -> dict[str, float]:
    """Queries/s/core per variant of one mosbench run."""
    subprocess.run([sys.executable, "-m", "mosbench", "run", "postgres/read-only", "--cores", "max", "--trials", "1",
                    "--warmup", str(WARMUP), "--duration", str(DURATION), "-p", f"syscalls={str(counting).lower()}",
                    "--store", str(store)], cwd=ROOT, check=True, capture_output=True)
    db = Store(str(store), create=False)
    return {p["variant"]: p["throughput"] / p["cores"] for p in db.points(db.run("latest")["id"], with_samples=False)
            if p["status"] == "ok"}


def main() -> None:
    results: dict[tuple[str, bool], list[float]] = {}
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "overhead.sqlite"
        for r in range(ROUNDS):
            for counting in ((True, False) if r % 2 == 0 else (False, True)):
                for variant, value in run(store, counting).items():
                    results.setdefault((variant, counting), []).append(value)
            print(f"round {r + 1}/{ROUNDS}: " + ", ".join(
                f"{v} {'counted' if c else 'plain'} {vals[-1] / 1e3:.1f}k" for (v, c), vals in sorted(results.items())),
                flush=True)
    for variant in sorted({v for v, _ in results}):
        counted, plain = results[(variant, True)], results[(variant, False)]
        ratio = statistics.median(counted) / statistics.median(plain)
        print(f"{variant:12s} counted median {statistics.median(counted) / 1e3:.1f}k, plain median "
              f"{statistics.median(plain) / 1e3:.1f}k queries/s/core over {len(counted)} rounds: "
              f"counted/plain {ratio:.3f}")
        print(f"SUMMARY {variant} counted_over_plain {ratio:.4f} rounds {len(counted)} cores {os.cpu_count()}")


if __name__ == "__main__":
    main()
