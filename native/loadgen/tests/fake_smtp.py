"""A minimal SMTP server for mosbench-smtpload's tests: it accepts (or, asked to, rejects) every
message and appends each accepted message's body line to <record>/<recipient's local part>, so
the test can hold the client's ledger against what really arrived. With --close-idle it also does
what a real server's idle time-out does: a connection left waiting for its next command (after the
greeting, HELO or an accepted message) for 10 to 40 ms is closed, with a 421 first or silently, and a
line is appended to LOG for each.

usage: fake_smtp.py PORT RECORD_DIR [--reject-rcpt] [--close-idle 421|silent LOG]
"""

import asyncio
import contextlib
import random
import sys
from pathlib import Path


class IdleClose:
    def __init__(self, say_421: bool, log: Path):
        self.say_421 = say_421
        self.log = log


async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: Path, reject: bool,
                  idle_close: IdleClose | None) -> None:
    with contextlib.suppress(ConnectionError):  # the client stops by closing its sockets mid-session
        await converse(reader, writer, record, reject, idle_close)
    writer.close()


async def next_line(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, idle: bool,
                    idle_close: IdleClose | None) -> bytes:
    """The next command; b"" when the client closed, or when the server let an idle connection go."""
    if not (idle and idle_close):
        return await reader.readline()
    try:
        return await asyncio.wait_for(reader.readline(), random.uniform(0.01, 0.04))
    except TimeoutError:
        if idle_close.say_421:
            writer.write(b"421 idle too long, closing\r\n")
            await writer.drain()
        with open(idle_close.log, "a") as f:
            f.write("closed\n")
        return b""


async def converse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: Path, reject: bool,
                   idle_close: IdleClose | None) -> None:
    writer.write(b"220 fake ESMTP\r\n")
    rcpt = ""
    idle = True  # waiting for the session's next step: where a server's idle time-out applies
    while line := await next_line(reader, writer, idle, idle_close):
        cmd = line.strip().upper()
        idle = False
        if cmd.startswith(b"HELO") or cmd.startswith(b"MAIL FROM"):
            writer.write(b"250 OK\r\n")
            idle = cmd.startswith(b"HELO")
        elif cmd.startswith(b"RCPT TO"):
            if reject:
                writer.write(b"550 no such user here\r\n")
            else:
                rcpt = line.split(b"<", 1)[1].split(b"@", 1)[0].decode()
                writer.write(b"250 Accepted\r\n")
        elif cmd == b"DATA":
            writer.write(b"354 go ahead\r\n")
            await writer.drain()
            body = []
            while (data := await reader.readline()) != b".\r\n":
                if not data:
                    return  # the client stopped mid-message: nothing was accepted
                body.append(data)
            with open(record / rcpt, "ab") as f:
                f.write(body[-1])  # the 20-byte line with the session and the sequence number
            writer.write(b"250 OK id=fake\r\n")
            idle = True
        elif cmd == b"QUIT":
            writer.write(b"221 closing\r\n")
            await writer.drain()
            break
        else:
            writer.write(b"500 unknown\r\n")
        await writer.drain()


async def main() -> None:
    port, record = int(sys.argv[1]), Path(sys.argv[2])
    reject = "--reject-rcpt" in sys.argv
    idle_close = None
    if "--close-idle" in sys.argv:
        i = sys.argv.index("--close-idle")
        idle_close = IdleClose(sys.argv[i + 1] == "421", Path(sys.argv[i + 2]))
    server = await asyncio.start_server(lambda r, w: session(r, w, record, reject, idle_close), "127.0.0.1", port,
                                        backlog=256)
    async with server:
        await server.serve_forever()


asyncio.run(main())
