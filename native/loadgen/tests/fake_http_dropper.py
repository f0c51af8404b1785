"""An HTTP/1.1 server that keeps connections alive but lets each go, unanswered, after a few requests,
as a busy server may drop an idle kept connection: mosbench-httpload must send the request again on a
new connection, not fail. A response cut off after its first bytes is still the client's failure.
usage: fake_http_dropper.py PORT ANSWERS_PER_CONNECTION
"""

import contextlib
import socket
import sys
import threading

BODY = b"m" * 300
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 300\r\nContent-Type: text/html\r\n\r\n" + BODY


def serve(conn: socket.socket, answers: int) -> None:
    with contextlib.suppress(OSError):  # the client stopped mid-request: its business
        answer(conn, answers)


def answer(conn: socket.socket, answers: int) -> None:
    with conn:
        pending = b""
        for _ in range(answers + 1):
            while b"\r\n\r\n" not in pending:
                data = conn.recv(4096)
                if not data:
                    return
                pending += data
            pending = pending.split(b"\r\n\r\n", 1)[1]
            if _ == answers:
                return  # the request after the last answer: closed without a byte of reply
            conn.sendall(RESPONSE)


def main() -> None:
    port, answers = int(sys.argv[1]), int(sys.argv[2])
    with socket.create_server(("127.0.0.1", port), backlog=128) as server:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=serve, args=(conn, answers), daemon=True).start()


if __name__ == "__main__":
    main()
