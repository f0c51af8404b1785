"""`mosbench serve`: the lab's pages and their JSON over a store (mosbench/web), until Ctrl-C. The address it
serves on is the first line it prints. Flask and waitress are imported only here, when it serves."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import click

from mosbench.commands.options import FiniteFloat, store_option
from mosbench.errors import UserError
from mosbench.web.deadline import STORE_TIMEOUT_S

# A deadline shorter than this would refuse pages that a store answers in its ordinary time.
SHORTEST_STORE_TIMEOUT_S = 1.0


@click.command()
@store_option
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="The port to listen on (0: a free one, printed on the first line).")
@click.option("--bind", "address", default="127.0.0.1", show_default=True, metavar="ADDR",
              help="The address to listen on (an IP address, or localhost). Any but a loopback address needs "
                   "--tokens or --read-only.")
@click.option("--tokens", "tokens_file", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Who may triage: one name:secret a line (the name is recorded with each triage). Without it "
                   "the server is read-only.")
@click.option("--read-only", is_flag=True, help="Take no triage, whatever --tokens says.")
@click.option("--tree", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="The kernel git tree (only read) the runs' commits come from: the graphs' commit order.")
@click.option("--store-timeout", "store_timeout_s", type=FiniteFloat(SHORTEST_STORE_TIMEOUT_S),
              default=STORE_TIMEOUT_S, show_default=True,
              help="A page whose store does not answer within this many seconds is answered 503 (Retry-After), "
                   "the server going on with the others.")
def serve(store_url, port, address, tokens_file, read_only, tree, store_timeout_s) -> None:
    """The lab in a browser: every machine's runs against every workload, the alert summaries history's
    changes make and their triage, graphs of any series across machines, each run's report and two runs
    compared; each page's JSON under /api/ (docs/SERVE.md). Bound to 127.0.0.1 unless --bind says otherwise."""
    from mosbench.web import serving, tokens

    serving.check_address(address)
    if not serving.is_loopback(address) and tokens_file is None and not read_only:
        raise UserError(f"--bind {address} serves beyond this machine: give --tokens FILE (who may triage) or "
                        "--read-only")
    names = tokens.read(tokens_file) if tokens_file is not None else None
    from mosbench.web.app import create_app

    app = create_app(store_url, names, read_only, tree, store_timeout_s)
    lab = app.extensions["mosbench.lab"]
    logging.basicConfig(level=logging.WARNING, format="mosbench serve: %(message)s")
    stopping = threading.Event()
    # systemd's stop (SIGTERM) is a stop asked for: exit 0. Ctrl-C is an interrupt, as for every command: 130.
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    served = serving.start(app, address, port)
    lab.warm_in_background()  # before the address is printed: no client knows it yet (--port 0)
    print(served.url, flush=True)
    writes = "read-only" if read_only or not names else f"triage by {len(names)} name{'s' if len(names) > 1 else ''}"
    print(f"serving {lab.db.shown_url} ({writes}) until Ctrl-C", flush=True)
    try:
        while not stopping.wait(0.5):
            pass
    finally:
        served.stop()
        lab.close()
