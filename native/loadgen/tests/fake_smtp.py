"""A minimal SMTP server for mosbench-smtpload's tests: it accepts (or, asked to, rejects) every
message and appends each accepted message's body line to <record>/<recipient's local part>, so
the test can hold the client's ledger against what really arrived.

usage: fake_smtp.py PORT RECORD_DIR [--reject-rcpt]
"""

import asyncio
import contextlib
import sys
from pathlib import Path


async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: Path, reject: bool) -> None:
    with contextlib.suppress(ConnectionError):  # the client stops by closing its sockets mid-session
        await converse(reader, writer, record, reject)
    writer.close()


async def converse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: Path, reject: bool) -> None:
    writer.write(b"220 fake ESMTP\r\n")
    rcpt = ""
    while line := await reader.readline():
        cmd = line.strip().upper()
        if cmd.startswith(b"HELO") or cmd.startswith(b"MAIL FROM"):
            writer.write(b"250 OK\r\n")
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
    server = await asyncio.start_server(lambda r, w: session(r, w, record, reject), "127.0.0.1", port, backlog=256)
    async with server:
        await server.serve_forever()


asyncio.run(main())
