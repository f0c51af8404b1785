"""Server workloads driven from client hosts against the same from loopback, side by side.

Two client hosts (network namespaces with real sshd: mosbench/testing/clienthosts.py) reach the servers over veth
and a bridge; the loopback path runs the generator on this machine. Interleaved rounds (loopback
first in odd rounds, client hosts first in even ones), each a `mosbench run` of the selections
(memcached and apache by default; exim, postgres too) at 1 and 2 cores, one trial, then the medians
over rounds per path and point:
requests/s per core, the server's CPU µs per request, the client's CPU µs per request (loopback: the
generator's group; hosts: the generators' own CPU time over the window, summed over hosts), and the
share of NET_RX softirqs on the server's CPUs.

On a 2-CPU machine the hosts' generators share CPUs with a 2-core server (their CPUs are this
machine's), so the runs allow any interference: the figure to read is CPU per request on each side.

    .venv/bin/python benchmarks/remote_clients.py --rounds 3
    .venv/bin/python benchmarks/remote_clients.py --selections exim,postgres/read-only \
        --variant tuned,large-cache -p postgres.rows=200000 -p postgres.syscalls=false
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mosbench.store.db import Store  # noqa: E402
from mosbench.testing.clienthosts import ClientHosts  # noqa: E402

SELECTIONS = "memcached,apache/close"


def run(path: str, hosts: ClientHosts, store: Path, args: argparse.Namespace) -> None:
    extra = ["--clients", hosts.clients(), "--server-address", hosts.server_address, "--ssh-config",
             str(hosts.ssh_config)] if path == "client hosts" else []
    cmd = [str(ROOT / ".venv/bin/mosbench"), "run", *args.selections.split(","), "--variant", args.variant,
           "--cores", "1,2",
           "--trials", "1", "--warmup", str(args.warmup), "--duration", str(args.duration), "--max-interference",
           "100", "--store", f"sqlite:///{store}", "--label", path, *extra,
           *(w for p in args.param for w in ("-p", p))]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"{path}: mosbench run failed:\n{out.stderr[-3000:]}")


def figures(store: Path) -> dict[tuple[str, str, int], list[dict[str, float]]]:
    db = Store(str(store), create=False)
    found: dict[tuple[str, str, int], list[dict[str, float]]] = defaultdict(list)
    for run in db.list_runs():
        for p in db.points(run["id"], with_samples=False):
            if p["status"] == "ok":
                found[(run["label"], p["workload"], p["cores"])].append(_figures(p))
    return found


def _figures(p: dict) -> dict[str, float]:
    """One point's per-core throughput, server and client CPU per unit, and NET_RX figures."""
    m = p["metrics"] or {}
    work = p["work"]
    if p["loadgen_user_s"] is not None:
        client = (p["loadgen_user_s"] + p["loadgen_system_s"]) / work * 1e6
    else:
        client = m.get("client_cpu_us_per_request") or float("nan")
    return {
        "per_core": p["throughput"] / p["cores"],
        "server_us": (p["cgroup_user_s"] + p["cgroup_system_s"]) / work * 1e6,
        "client_us": client,
        "net_rx_on_point": m.get("nic_net_rx_on_point") if m.get("nic_net_rx_on_point") is not None
        else float("nan"),
        "net_rx_per_request": m.get("nic_net_rx_total", 0) / work if m.get("nic_net_rx_total") else float("nan"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--selections", default=SELECTIONS, help=f"what to run (default {SELECTIONS})")
    ap.add_argument("--variant", default="per-core",
                    help="variants, comma-separated, of every selection (default per-core; exim: tuned, "
                         "postgres: large-cache)")
    ap.add_argument("--param", "-p", action="append", default=[], help="a -p passed to every run")
    ap.add_argument("--store", type=Path, help="keep the runs in this SQLite file (default: a temporary one)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, ClientHosts(2) as hosts:
        store = args.store or Path(d) / "r.db"
        for r in range(args.rounds):
            order = ["loopback", "client hosts"] if r % 2 == 0 else ["client hosts", "loopback"]
            for path in order:
                print(f"round {r + 1}: {path}", flush=True)
                run(path, hosts, store, args)
        found = figures(store)
    print(f"\nmedians of {args.rounds} interleaved rounds, variants {args.variant}, server CPU from its cgroup")
    print(f"{'workload':10} {'cores':>5} {'path':13} {'unit/s/core':>11} {'server µs/unit':>14} {'client µs/unit':>14} "
          f"{'NET_RX on server CPUs':>22} {'NET_RX/req':>11}")
    for (label, workload, cores), rows in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        share = "" if med["net_rx_on_point"] != med["net_rx_on_point"] else f"{med['net_rx_on_point']:.0%}"
        print(f"{workload:10} {cores:5d} {label:13} {med['per_core']:11.0f} {med['server_us']:14.2f} "
              f"{med['client_us']:14.2f} {share:>22} {med['net_rx_per_request']:11.2f}")


if __name__ == "__main__":
    main()
