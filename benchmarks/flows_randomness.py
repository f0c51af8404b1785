"""A run's flows, Veal & Foong's Table 3: the randomness of their RSS hashes' low bytes, ours beside ent's.

For every stored point with flows (memcached's contexts: each a UDP flow), the low byte of each flow's
Toeplitz hash (as the point stored it) goes through analysis/randomness.py and through Debian's `ent`
on the same bytes; the two reports are printed side by side.

    .venv/bin/python benchmarks/flows_randomness.py STORE.db [RUN_ID]
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mosbench.analysis.randomness import parse_ent, randomness  # noqa: E402

FIELDS = ("entropy", "chi_square", "chi_square_p", "mean", "monte_carlo_pi", "serial_correlation")


def main() -> None:
    db = sqlite3.connect(sys.argv[1])
    query = "select id, workload, variant, cores, trial, metrics from points where status = 'ok'"
    rows = db.execute(query + (" and run_id = ?" if len(sys.argv) > 2 else ""), sys.argv[2:3]).fetchall()
    for pid, workload, variant, cores, trial, metrics in rows:
        m = json.loads(metrics or "{}")
        if not m.get("flow_hash_low_bytes"):
            continue
        data = bytes.fromhex(m["flow_hash_low_bytes"])
        with tempfile.NamedTemporaryFile() as f:
            f.write(data)
            f.flush()
            ent = parse_ent(subprocess.run(["ent", f.name], capture_output=True, text=True, check=True).stdout)
        ours = randomness(data).printed()
        print(f"point {pid}: {workload} {variant} {cores} cores trial {trial}: {len(data)} flows "
              f"({m.get('flows_chosen')}), {m.get('rss_source')}")
        print(f"  {'':20} {'mosbench':>14} {'ent':>14}")
        for field in FIELDS:
            print(f"  {field:20} {getattr(ours, field)!s:>14} {getattr(ent, field)!s:>14}")


if __name__ == "__main__":
    main()
