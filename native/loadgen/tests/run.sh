#!/usr/bin/env bash
# The load generators' tests: the histogram in every flavour, then each build of mosbench-memload
# against a private memcached on loopback (plain, ThreadSanitizer, AddressSanitizer): every request
# answered, none lost (2 s time-outs, 80 requests in flight: nothing overflows), no error; a port
# with no server is a clear failure, a bad flag exit 2.
# Then each build of mosbench-httpload against Python's http.server: every response checked, the
# wrong body length and an error status each a clear failure; and against a server that drops kept
# connections unanswered (fake_http_dropper.py): each such request sent again, nothing failed.
# Then each build of mosbench-smtpload against a fake SMTP server (fake_smtp.py) that records what
# it accepted: the client's ledger must match it message for message; a rejection is a clear failure.
# usage: run.sh TEST_HIST... -- MEMLOAD... -- HTTPLOAD... -- SMTPLOAD...
set -euo pipefail
hists=()
while [[ $# -gt 0 && $1 != -- ]]; do hists+=("$1"); shift; done
shift
memloads=()
while [[ $# -gt 0 && $1 != -- ]]; do memloads+=("$1"); shift; done
shift
httploads=()
while [[ $# -gt 0 && $1 != -- ]]; do httploads+=("$1"); shift; done
shift
smtploads=("$@")
for t in "${hists[@]}"; do "$t"; done
cpus=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
free_tcp_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

web=$(mktemp -d)
head -c 299 /dev/zero | tr '\0' m > "$web/index.html"; echo >> "$web/index.html"
hport=$(free_tcp_port)
python3 -m http.server --bind 127.0.0.1 --directory "$web" "$hport" >/dev/null 2>&1 &
httpd=$!
trap 'kill "$httpd" 2>/dev/null; wait "$httpd" 2>/dev/null; rm -rf "$web"' EXIT
for i in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $hport))" 2>/dev/null && break; sleep 0.1; done
hout=$(mktemp)
for bin in "${httploads[@]}"; do
    "$bin" --ports "$hport" --cpus "$cpus" --connections-per-port 2 --expect-bytes 300 --warmup 0.2 --duration 1 > "$hout"
    read -r done lost errors < <(sed -n 's/.*done=\([0-9]*\) lost=\([0-9]*\) errors=\([0-9]*\).*/\1 \2 \3/p' "$hout")
    [[ ${done:-0} -gt 50 && $lost -eq 0 && $errors -eq 0 ]] || { echo "$bin: $(cat "$hout")" >&2; exit 1; }
    echo "$bin: $(cat "$hout")"
done
if "${httploads[0]}" --ports "$hport" --cpus 0 --expect-bytes 301 --duration 1 > "$hout" 2>&1; then
    echo "httpload: a wrong body length passed" >&2; exit 1
fi
grep -q "body of 300 bytes for /index.html, 301 expected" "$hout" || { echo "httpload: unclear failure: $(cat "$hout")" >&2; exit 1; }
if "${httploads[0]}" --ports "$hport" --cpus 0 --path /missing --duration 1 > "$hout" 2>&1; then
    echo "httpload: a 404 passed" >&2; exit 1
fi
grep -q "answered 'HTTP/1.0 404" "$hout" || { echo "httpload: unclear 404 failure: $(cat "$hout")" >&2; exit 1; }
# A server that lets kept connections go unanswered after 3 requests: each request is sent again on a
# new connection, nothing fails.
dport=$(free_tcp_port)
python3 "$(dirname "$0")/fake_http_dropper.py" "$dport" 3 &
dropper=$!
trap 'kill "$httpd" "$dropper" 2>/dev/null; wait "$httpd" "$dropper" 2>/dev/null; rm -rf "$web"' EXIT
for i in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $dport))" 2>/dev/null && break; sleep 0.1; done
for bin in "${httploads[@]}"; do
    "$bin" --ports "$dport" --cpus 0 --connections-per-port 2 --keepalive --expect-bytes 300 --warmup 0.2 \
        --duration 1 > "$hout"
    read -r done lost errors < <(sed -n 's/.*done=\([0-9]*\) lost=\([0-9]*\) errors=\([0-9]*\).*/\1 \2 \3/p' "$hout")
    [[ ${done:-0} -gt 20 && $lost -eq 0 && $errors -eq 0 ]] || { echo "$bin (dropped connections): $(cat "$hout")" >&2; exit 1; }
    echo "$bin against dropped kept connections: $(cat "$hout")"
done
kill "$dropper" 2>/dev/null; wait "$dropper" 2>/dev/null || true
trap 'kill "$httpd" 2>/dev/null; wait "$httpd" 2>/dev/null; rm -rf "$web"' EXIT
rm -f "$hout"

here=$(dirname "$0")
mail=$(mktemp -d)
sport=$(free_tcp_port)
python3 "$here/fake_smtp.py" "$sport" "$mail" &
smtpd=$!
trap 'kill "$httpd" "$smtpd" 2>/dev/null; wait "$httpd" "$smtpd" 2>/dev/null; rm -rf "$web" "$mail"' EXIT
for i in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $sport))" 2>/dev/null && break; sleep 0.1; done
sout=$(mktemp)
for bin in "${smtploads[@]}"; do
    rm -f "$mail"/u*
    "$bin" --ports "$sport" --cpus "$cpus" --sessions 6 --messages-per-connection 3 --warmup 0.2 --duration 1 \
        --ledger "$sout.ledger" --result "$sout.json" > "$sout"
    read -r done lost errors < <(sed -n 's/.*done=\([0-9]*\) lost=\([0-9]*\) errors=\([0-9]*\).*/\1 \2 \3/p' "$sout")
    [[ ${done:-0} -gt 30 && $lost -eq 0 && $errors -eq 0 ]] || { echo "$bin: $(cat "$sout")" >&2; exit 1; }
    # Every message the ledger says was accepted arrived once, in its session's box, and nothing else did.
    python3 - "$sout.ledger" "$mail" "$sout.json" <<'PY' || { echo "$bin: ledger and mailboxes disagree" >&2; exit 1; }
import json, sys
from pathlib import Path
ledger, mail, result = json.load(open(sys.argv[1])), Path(sys.argv[2]), json.load(open(sys.argv[3]))
assert len(ledger["sessions"]) == 6
for s in ledger["sessions"]:
    box = mail / s["user"]
    got = [line.split(".") for line in box.read_text().split()] if box.exists() else []
    assert all(int(sid) == int(s["user"][1:]) for sid, _ in got), (s["user"], got[:3])
    seqs = sorted(int(n) for _, n in got)
    accepted = [n for a, b in s["accepted"] for n in range(a, b)]
    assert len(seqs) == len(set(seqs)), "a message twice"
    assert set(accepted) <= set(seqs) <= set(accepted) | set(s["uncertain"]), (s, seqs[-5:])
conn = result["connection_ns"]
assert result["sessions"] == 6 and 0 < conn["p50"] <= conn["max"], result
PY
    echo "$bin: $(cat "$sout")"
done
kill "$smtpd"; wait "$smtpd" 2>/dev/null || true
python3 "$here/fake_smtp.py" "$sport" "$mail" --reject-rcpt &
smtpd=$!
for i in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $sport))" 2>/dev/null && break; sleep 0.1; done
if "${smtploads[0]}" --ports "$sport" --cpus 0 --sessions 2 --duration 1 > "$sout" 2>&1; then
    echo "smtpload: a rejected recipient passed" >&2; exit 1
fi
grep -q "answered '550 no such user here' to RCPT TO" "$sout" || { echo "smtpload: unclear rejection: $(cat "$sout")" >&2; exit 1; }
set +e
"${smtploads[0]}" --ports "$sport" --cpus 0 --sessions 0 --duration 1 >/dev/null 2>&1
[[ $? -eq 2 ]] || { echo "smtpload: --sessions 0 not exit 2" >&2; exit 1; }
"${smtploads[0]}" --ports "$sport" --cpus 0 --sessions 2 --first-session 65535 --duration 1 >/dev/null 2>&1
[[ $? -eq 2 ]] || { echo "smtpload: sessions past u65535 not exit 2" >&2; exit 1; }
set -e
# A second host's generator: its sessions mail users from --first-session on, and its ledger names them.
kill "$smtpd"; wait "$smtpd" 2>/dev/null || true
python3 "$here/fake_smtp.py" "$sport" "$mail" &
smtpd=$!
for i in $(seq 50); do python3 -c "import socket; socket.create_connection(('127.0.0.1', $sport))" 2>/dev/null && break; sleep 0.1; done
rm -f "$mail"/u*
"${smtploads[0]}" --ports "$sport" --cpus 0 --sessions 3 --first-session 40 --duration 0.5 --ledger "$sout.ledger" >/dev/null
python3 - "$sout.ledger" "$mail" <<'PY' || { echo "smtpload: --first-session not honoured" >&2; exit 1; }
import json, sys
from pathlib import Path
ledger, mail = json.load(open(sys.argv[1])), Path(sys.argv[2])
assert [s["user"] for s in ledger["sessions"]] == ["u00040", "u00041", "u00042"], ledger["sessions"]
assert sorted(p.name for p in mail.iterdir()) == ["u00040", "u00041", "u00042"], list(mail.iterdir())
for box in mail.iterdir():
    assert all(line.split(".")[0] == box.name[1:] for line in box.read_text().split()), box
PY
rm -f "$sout" "$sout.ledger" "$sout.json"

if ! command -v memcached >/dev/null; then
    echo "loadgen: memcached not installed, memload tests skipped" >&2
    exit 0
fi
free_udp_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
user=$(id -u memcache >/dev/null 2>&1 && echo memcache || echo nobody)
port=$(free_udp_port)
memcached -u "$user" -l 127.0.0.1 -p 0 -U "$port" -t 1 -m 16 &
server=$!
out=$(mktemp)
trap 'kill "$server" "$httpd" "$smtpd" 2>/dev/null; wait "$server" "$httpd" "$smtpd" 2>/dev/null; rm -rf "$out" "$out.json" "$web" "$mail"' EXIT
for i in $(seq 50); do   # memcached binds its UDP port a moment after it starts
    python3 -c "import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.1); s.sendto(b'\0\1\0\0\0\1\0\0version\r\n', ('127.0.0.1', $port)); s.recv(100)" 2>/dev/null && break
    sleep 0.1
done

for bin in "${memloads[@]}"; do
    "$bin" --ports "$port" --cpus "$cpus" --contexts-per-port 4 --timeout-ms 2000 --warmup 0.2 --duration 1 --result "$out.json" > "$out"
    read -r sent done lost errors < <(sed -n 's/.*sent=\([0-9]*\) done=\([0-9]*\) lost=\([0-9]*\) errors=\([0-9]*\).*/\1 \2 \3 \4/p' "$out")
    [[ ${done:-0} -gt 1000 ]] || { echo "$bin: only ${done:-0} replies: $(cat "$out")" >&2; exit 1; }
    [[ $lost -eq 0 && $errors -eq 0 ]] || { echo "$bin: lost $lost, errors $errors" >&2; exit 1; }
    # Replies in the window answer requests sent in it or at most one batch per context before it.
    (( done <= sent + 4 * 20 )) || { echo "$bin: $done replies for $sent requests" >&2; exit 1; }
    python3 -c "import json,sys; r=json.load(open('$out.json')); l=r['latency_ns']; assert l['count']==r['done'] and 0<l['p50']<=l['p99']<=l['p999']<=l['max'], r" \
        || { echo "$bin: bad result file" >&2; exit 1; }
    echo "$bin: $(cat "$out")"
done

bin=${memloads[0]}
nobody=$(free_udp_port)
if "$bin" --ports "$nobody" --cpus 0 --warmup 0 --duration 1 > "$out" 2>&1; then
    echo "memload: no failure for a port without a server" >&2; exit 1
fi
grep -q "refused" "$out" || { echo "memload: unclear failure: $(cat "$out")" >&2; exit 1; }
set +e
"$bin" --ports 0 --cpus 0 --duration 1 >/dev/null 2>&1; [[ $? -eq 2 ]] || { echo "memload: bad port not exit 2" >&2; exit 1; }
"$bin" --ports "$port" --cpus 0 --batch 65 --duration 1 >/dev/null 2>&1; [[ $? -eq 2 ]] || { echo "memload: batch 65 not exit 2" >&2; exit 1; }
echo "loadgen: ok"
