"""A run's flows, Veal & Foong's Table 3: the randomness of their RSS hashes' low bytes, ours beside ent's.

For every stored point with flows (memcached's contexts: each a UDP flow), the low byte of each flow's
Toeplitz hash (as the point stored it) goes through analysis/randomness.py and through Debian's `ent`
on the same bytes; the two reports are printed side by side.

    .venv/bin/python benchmarks/flows_randomness.py STORE.db [RUN_ID]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mosbench.analysis.randomness import parse_ent, randomness  # noqa: E402
from mosbench.store.db import Store  # noqa: E402

FIELDS = ("entropy", "chi_square", "chi_square_p", "mean", "monte_carlo_pi", "serial_correlation")


def main() -> None:
    db = Store(sys.argv[1], create=False)
    runs = [db.run(sys.argv[2])["id"]] if len(sys.argv) > 2 else [r["id"] for r in db.list_runs()]
    found = [p for r in runs for p in db.points(r, with_samples=False) if p["status"] == "ok"]
    for p in sorted(found, key=lambda p: p["id"]):  # in the order they were measured
        m = p["metrics"] or {}
        if not m.get("flow_hash_low_bytes"):
            continue
        data = bytes.fromhex(m["flow_hash_low_bytes"])
        with tempfile.NamedTemporaryFile() as f:
            f.write(data)
            f.flush()
            ent = parse_ent(subprocess.run(["ent", f.name], capture_output=True, text=True, check=True).stdout)
        ours = randomness(data).printed()
        print(f"point {p['id']}: {p['workload']} {p['variant']} {p['cores']} cores trial {p['trial']}: "
              f"{len(data)} flows ({m.get('flows_chosen')}), {m.get('rss_source')}")
        print(f"  {'':20} {'mosbench':>14} {'ent':>14}")
        for field in FIELDS:
            print(f"  {field:20} {getattr(ours, field)!s:>14} {getattr(ent, field)!s:>14}")


if __name__ == "__main__":
    main()
