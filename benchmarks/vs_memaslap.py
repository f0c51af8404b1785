"""mosbench-memload against memaslap (Debian's memcaslap): requests answered per client CPU-second.

Both drive the same private memcached (one instance, `-t 1`, pinned to the first CPU) over UDP with
the same number of client contexts and threads, pinned to the same client CPUs, in interleaved
rounds. The traffic is the paper's: gets of keys that are not there. memaslap always stores the keys
it will get before it starts, so the script empties the server (flush_all) during its warm-up;
memaslap also insists on keys of at least 16 bytes where ours are 8. Each round measures, over the
same window on the script's clock, the client's CPU time (utime + stime of every thread, from
/proc/PID/stat) and the gets answered (ours: its result file; memaslap: its per-second "Period"
lines). Prints each round and the medians: answered/s, client CPU-seconds per second, answered per
client CPU-second, and ours over theirs.

With --namespace the clients run in a network namespace of their own (mosbench/testing/clienthosts.py: a veth
pair to a bridge here, link-local addresses), the server listens on the bridge's address and the
pair's receiving end steers packets (RPS) to the server's CPU: each request's receive path then runs
on the server's side, not the client's CPU (the paper's setup, with the NIC's part played by veth).

    .venv/bin/python benchmarks/vs_memaslap.py --rounds 5 [--namespace]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mosbench import cpulist, native, procfs  # noqa: E402
from mosbench.workloads.memcached import server_user  # noqa: E402
from mosbench.workloads.server import ports  # noqa: E402


def pinned(cpus: list[int]):
    return lambda: os.sched_setaffinity(0, cpus)


# Where the server listens and how a client command is run: loopback here, or a namespace (--namespace).
HOST = ports.HOST
PREFIX: list[str] = []


def flush(port: int) -> None:
    with socket.create_connection((HOST, port), timeout=2) as s:
        s.sendall(b"flush_all\r\n")
        if not s.recv(100).startswith(b"OK"):
            raise RuntimeError("memcached did not take flush_all")


def window_cpu(proc: subprocess.Popen, warmup: float, duration: float, at_warmup=None) -> tuple[float, float]:
    """Client CPU seconds over [warmup, warmup + duration] from the process's start, and the window's length."""
    t0 = time.monotonic()
    if at_warmup:
        time.sleep(warmup / 2)
        at_warmup()
    time.sleep(max(0.0, t0 + warmup - time.monotonic()))
    c0, w0 = procfs.cpu_seconds(proc.pid), time.monotonic()
    time.sleep(max(0.0, w0 + duration - time.monotonic()))
    return procfs.cpu_seconds(proc.pid) - c0, time.monotonic() - w0


def ours(port: int, cpus: list[int], contexts: int, warmup: float, duration: float, tmp: Path) -> tuple[float, float]:
    result = tmp / "ours.json"
    proc = subprocess.Popen([*PREFIX, str(native.binary("mosbench-memload")), "--host", HOST, "--ports", str(port),
                             "--cpus",
                             cpulist.format(cpus), "--contexts-per-port", str(contexts), "--warmup", str(warmup),
                             "--duration", str(duration), "--result", str(result)], stdout=subprocess.DEVNULL)
    cpu, _ = window_cpu(proc, warmup, duration)
    proc.wait(30)
    answered = json.loads(result.read_text())
    if answered["errors"]:
        raise RuntimeError(f"memload: {answered['errors']} error replies")
    return answered["done"] / answered["window_s"], cpu / answered["window_s"]


def theirs(port: int, cpus: list[int], contexts: int, warmup: float, duration: float, tmp: Path) -> tuple[float, float]:
    cfg = tmp / "memaslap.cfg"
    cfg.write_text("key\n16 16 1\nvalue\n8 8 1\ncmd\n0 0.0\n1 1.0\n")  # get only; its shortest key is 16 bytes
    run_for = int(warmup + duration + 2)
    proc = subprocess.Popen([*PREFIX, "memcaslap", "-s", f"{HOST}:{port}", "-U", "-T", str(len(cpus)), "-c",
                             str(contexts), "-t", f"{run_for}s", "-S", "1s", "-F", str(cfg)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=pinned(cpus), start_new_session=True)
    try:
        cpu, window = window_cpu(proc, warmup, duration, at_warmup=lambda: flush(port))
        out, _ = proc.communicate(timeout=run_for + 30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # Per-second get counts: "Period <seconds> <ops> ..." under each "Get Statistics" heading.
    periods = [int(m.group(1)) for m in re.finditer(r"Get Statistics\n.*\nPeriod\s+\d+\s+(\d+)", out)]
    first, last = int(warmup), int(warmup + duration)  # whole seconds of the window
    got = periods[first:last]
    if len(got) < last - first:
        raise RuntimeError(f"memaslap printed {len(periods)} seconds of statistics")
    misses = re.search(r"get_misses: (\d+)", out)
    if not misses or int(misses.group(1)) == 0:
        raise RuntimeError("memaslap's gets did not miss: the flush did not take")
    return sum(got) / (last - first), cpu / window


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--contexts", type=int, default=8, help="client contexts (memaslap: concurrency)")
    ap.add_argument("--namespace", action="store_true", help="clients in a network namespace over veth")
    args = ap.parse_args()
    if args.namespace:
        from mosbench.testing.clienthosts import ClientHosts

        global HOST, PREFIX
        # The requests' receive path on the server's CPU, as a NIC's queue interrupt would put it.
        with ClientHosts(1, rps_cpus=tuple(sorted(os.sched_getaffinity(0))[:1])) as hosts:
            HOST, PREFIX = hosts.server_address, ["ip", "netns", "exec", hosts.hosts[0].netns]
            compare(args)
    else:
        compare(args)


def compare(args: argparse.Namespace) -> None:
    if not shutil.which("memcaslap") or not shutil.which("memcached"):
        sys.exit("vs_memaslap: needs memcached and memcaslap (apt-get install memcached libmemcached-tools)")
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, client_cpus = cpus[:1], (cpus[1:] or cpus)
    (port,) = ports.free_ports(1, udp=True)
    server = subprocess.Popen(["memcached", *server_user(), "-l", HOST, "-p", str(port), "-U", str(port),
                               "-t", "1", "-m", "64"], preexec_fn=pinned(server_cpu))
    results: dict[str, list[tuple[float, float]]] = {"mosbench-memload": [], "memaslap": []}
    try:
        deadline = time.monotonic() + 10
        while ports.is_free(port, udp=True, host=HOST) and time.monotonic() < deadline:  # until it has bound
            time.sleep(0.05)
        print(f"memcached on CPU {server_cpu[0]} at {HOST}{' (clients in a namespace)' if PREFIX else ''}, "
              f"clients on CPUs {cpulist.format(client_cpus)}, "
              f"{args.contexts} contexts, {args.rounds} interleaved rounds of {args.duration:g} s")
        with tempfile.TemporaryDirectory() as d:
            for r in range(args.rounds):
                order = [("mosbench-memload", ours), ("memaslap", theirs)]
                for name, fn in order if r % 2 == 0 else reversed(order):
                    rate, cpu = fn(port, client_cpus, args.contexts, args.warmup, args.duration, Path(d))
                    results[name].append((rate, cpu))
                    print(f"  round {r + 1} {name:17} {rate:10.0f} answered/s  client {cpu:5.2f} CPU-s/s  "
                          f"{rate / cpu if cpu else float('inf'):10.0f} per client CPU-s", flush=True)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(10)
    print(f"\n{'client':17} {'answered/s':>12} {'CPU-s/s':>8} {'per CPU-s':>12}  (medians of {args.rounds} rounds)")
    per_cpu = {}
    for name, rows in results.items():
        per_cpu[name] = statistics.median(rate / cpu for rate, cpu in rows)
        print(f"{name:17} {statistics.median(r for r, _ in rows):12.0f} {statistics.median(c for _, c in rows):8.2f} "
              f"{per_cpu[name]:12.0f}")
    print(f"ours/memaslap, answered per client CPU-second: {per_cpu['mosbench-memload'] / per_cpu['memaslap']:.2f}")


if __name__ == "__main__":
    main()
