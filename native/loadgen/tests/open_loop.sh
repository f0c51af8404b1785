#!/usr/bin/env bash
# The load generators' open loop (--rate), for each build given (plain, ThreadSanitizer, AddressSanitizer):
# at a rate the server keeps up with, the requests due in the window match the rate, the client sends
# them all and every one is answered (mosbench-memload against a private memcached, a batch of gets per
# issue, also with --batch changed; mosbench-smtpload against fake_smtp.py, a message per issue, with
# reconnects every few messages). At a rate far above what the server does, the client falls behind:
# far fewer sent than due, its lag in the result file, and still a clean exit. Against a server that
# closes idle SMTP connections (some with a 421 first), an idle session reconnects and nothing fails.
# --rate 0 and --rate abc: exit 2 with a one-line message.
# mosbench-httpload against Python's http.server serving a small file set (--files): at a rate, over
# kept connections, every body checked; closed loop, the bodies' bytes over the answers lie within the
# set's sizes; a listed size the server does not send is a clear failure naming the file; a malformed
# list exits 2 naming its line; SPECweb2005's rule judged per answer (nothing good at an impossible
# byte rate and no time allowance, everything tolerable by the default rules).
# usage: open_loop.sh MEMLOAD... -- SMTPLOAD... -- HTTPLOAD...
set -euo pipefail
memloads=()
while [[ $# -gt 0 && $1 != -- ]]; do memloads+=("$1"); shift; done
[[ $# -gt 0 ]] && shift
smtploads=()
while [[ $# -gt 0 && $1 != -- ]]; do smtploads+=("$1"); shift; done
[[ $# -gt 0 ]] && shift
httploads=("$@")
if [[ ${#memloads[@]} -eq 0 || ${#smtploads[@]} -eq 0 || ${#httploads[@]} -eq 0 ]]; then
    echo "usage: $0 MEMLOAD... -- SMTPLOAD... -- HTTPLOAD..." >&2
    exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
cpus=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
free_tcp_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
free_udp_port() { python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_tcp() {
    for _ in $(seq 50); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $1))" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "open_loop: nothing listens on port $1" >&2
    return 1
}

# Only the servers started here are stopped, by their PIDs; the scratch directory goes with them.
tmp=$(mktemp -d)
pids=()
cleanup() {
    local p
    for p in ${pids[@]+"${pids[@]}"}; do kill "$p" 2>/dev/null || true; done
    for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
# Stops one of them, and forgets it: the trap must not kill a PID since given to another process.
stop() {
    local p kept=()
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    for p in ${pids[@]+"${pids[@]}"}; do [[ $p == "$1" ]] || kept+=("$p"); done
    pids=(${kept[@]+"${kept[@]}"})
}

failed=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failed=1; }

# The SUMMARY line's fields: sets sent done lost errors due window_s.
read_summary() {
    local line
    line=$(grep '^SUMMARY ' "$1" || true)
    sent='' done='' lost='' errors='' due='' window_s=''
    for kv in $line; do
        case $kv in
        sent=*|done=*|lost=*|errors=*|due=*|window_s=*) printf -v "${kv%%=*}" '%s' "${kv#*=}" ;;
        esac
    done
    [[ -n $sent && -n $done && -n $lost && -n $errors && -n $due && -n $window_s ]]
}

# The result file against the SUMMARY: its rate, the same due, a lag, a latency per answer.
check_result() { # JSON RATE DUE DONE
    python3 - "$@" <<'PY'
import json, sys
r, rate, due, done = json.load(open(sys.argv[1])), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
assert abs(r["rate"] - rate) < 1e-3 and r["due"] == due and r["done"] == done, r
assert isinstance(r["lag_max_ns"], int) and r["lag_max_ns"] >= 0, r
assert r["latency_ns"]["count"] == done, r
print(r["lag_max_ns"])
PY
}

# A run the server keeps up with: no error, none lost, some done, due within 10% of rate x window,
# sent within 10% of due. LABEL RATE then the command.
# Runs the command at --rate for a second after a brief warm-up: its SUMMARY read (read_summary) and
# its result file checked against it (lag set), or a failure said and 1. LABEL RATE then the command.
run_at_rate() {
    local label=$1 rate=$2
    shift 2
    local json=$tmp/result.json status=0
    out=$tmp/out
    rm -f "$json"
    "$@" --rate "$rate" --warmup 0.2 --duration 1 --result "$json" > "$out" 2>&1 || status=$?
    if [[ $status -ne 0 ]]; then fail "$label: exit status $status: $(tr '\n' ' ' < "$out")"; return 1; fi
    if ! read_summary "$out"; then fail "$label: no SUMMARY: $(tr '\n' ' ' < "$out")"; return 1; fi
    if ! lag=$(check_result "$json" "$rate" "$due" "$done" 2>&1); then
        fail "$label: result file: $lag"; return 1
    fi
}

check_kept() {
    local label=$1 rate=$2
    run_at_rate "$@" || return 0
    if ! awk -v rate="$rate" -v w="$window_s" -v due="$due" -v sent="$sent" -v done="$done" -v lost="$lost" \
        -v errors="$errors" 'BEGIN { want = rate * w
            exit !(errors == 0 && lost == 0 && done > 0 && due >= 0.9 * want && due <= 1.1 * want &&
                   sent >= 0.9 * due && sent <= 1.1 * due) }'; then
        fail "$label: want errors=0 lost=0 done>0, due ~ $rate x $window_s, sent ~ due: $(cat "$out")"; return
    fi
    pass "$label: rate=$rate window_s=$window_s due=$due sent=$sent done=$done lost=0 errors=0 lag_max_ns=$lag"
}

# A rate far above the server's: far fewer sent than due, a lag of at least 100 ms, no error, exit 0.
check_behind() {
    local label=$1 rate=$2
    run_at_rate "$@" || return 0
    if ! (( errors == 0 && done > 0 && sent * 2 < due && lag >= 100000000 )); then
        fail "$label: want sent < due / 2, lag >= 100 ms, done > 0, errors=0: lag_max_ns=$lag $(cat "$out")"; return
    fi
    pass "$label: behind: rate=$rate due=$due sent=$sent done=$done lost=$lost errors=0 lag_max_ns=$lag exit 0"
}

# A bad --rate: exit 2 and one line saying why.
check_bad_rate() {
    local label=$1 rate=$2 status=0
    shift 2
    "$@" --rate "$rate" --duration 1 > "$tmp/out" 2>&1 || status=$?
    if [[ $status -ne 2 || $(wc -l < "$tmp/out") -ne 1 ]] || ! grep -q -- '--rate' "$tmp/out"; then
        fail "$label: --rate $rate: want exit 2 and one line about --rate, got $status: $(cat "$tmp/out")"; return
    fi
    pass "$label: --rate $rate: exit 2: $(cat "$tmp/out")"
}

# SMTP: fake_smtp.py accepts everything.
mail=$tmp/mail
mkdir "$mail"
sport=$(free_tcp_port)
python3 "$here/fake_smtp.py" "$sport" "$mail" &
smtpd=$!
pids+=("$smtpd")
wait_tcp "$sport"
for bin in "${smtploads[@]}"; do
    check_kept "$bin" 200 "$bin" --ports "$sport" --cpus "$cpus" --sessions 8 --messages-per-connection 3
    check_behind "$bin" 1000000 "$bin" --ports "$sport" --cpus "$cpus" --sessions 8 --messages-per-connection 3
    check_bad_rate "$bin" 0 "$bin" --ports "$sport" --cpus "$cpus"
    check_bad_rate "$bin" abc "$bin" --ports "$sport" --cpus "$cpus"
done
stop "$smtpd"

# SMTP against a server that closes a connection left idle for 10 to 40 ms (waiting for MAIL FROM or
# QUIT), with or without a 421 first, so sessions waiting their turn find their connection closed,
# some just as their MAIL FROM goes: each reconnects and sends its message, none fails or is lost.
for mode in 421 silent; do
    iport=$(free_tcp_port)
    log=$tmp/idle_closes.$mode
    : > "$log"
    mkdir -p "$tmp/idle_mail"
    python3 "$here/fake_smtp.py" "$iport" "$tmp/idle_mail" --close-idle "$mode" "$log" &
    idled=$!
    pids+=("$idled")
    wait_tcp "$iport"
    for bin in "${smtploads[@]}"; do
        before=$(wc -l < "$log")
        check_kept "$bin (server closes idle connections, $mode)" 60 \
            "$bin" --ports "$iport" --cpus "$cpus" --sessions 4 --messages-per-connection 1000
        closes=$(( $(wc -l < "$log") - before ))
        if (( closes > 0 )); then
            pass "$bin ($mode): the server closed $closes idle connections"
        else
            fail "$bin ($mode): the server closed no idle connection: the test tested nothing"
        fi
    done
    stop "$idled"
done

# memcached: a private one on its own UDP port.
if ! command -v memcached >/dev/null; then
    echo "open_loop: memcached not installed, memload tests skipped" >&2
else
    user=$(id -u memcache >/dev/null 2>&1 && echo memcache || echo nobody)
    port=$(free_udp_port)
    memcached -u "$user" -l 127.0.0.1 -p 0 -U "$port" -t 1 -m 16 &
    server=$!
    pids+=("$server")
    for _ in $(seq 50); do  # memcached binds its UDP port a moment after it starts
        python3 -c "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.1); s.sendto(b'\0\1\0\0\0\1\0\0version\r\n', ('127.0.0.1', $port)); s.recv(100)" 2>/dev/null && break
        sleep 0.1
    done
    for bin in "${memloads[@]}"; do
        check_kept "$bin" 20000 "$bin" --ports "$port" --cpus "$cpus" --timeout-ms 2000
        # A batch of 8 is one issue: still 20000 gets a second, in 2500 batches.
        check_kept "$bin --batch 8" 20000 "$bin" --ports "$port" --cpus "$cpus" --timeout-ms 2000 --batch 8
        check_behind "$bin" 100000000 "$bin" --ports "$port" --cpus "$cpus"
        check_bad_rate "$bin" 0 "$bin" --ports "$port" --cpus "$cpus"
        check_bad_rate "$bin" abc "$bin" --ports "$port" --cpus "$cpus"
    done
    stop "$server"
fi

# HTTP: a file set of three sizes, served by Python's http.server (HTTP/1.0: it closes each kept
# connection after its answer, so each request after the first on it is sent again on a new one).
web=$tmp/web
mkdir -p "$web/set"
head -c 300 /dev/zero > "$web/set/small"
head -c 70000 /dev/zero > "$web/set/medium"
head -c 1500000 /dev/zero > "$web/set/large"
printf '# weight bytes path\n5 300 /set/small\n3 70000 /set/medium\n1 1500000 /set/large\n' > "$tmp/files"
hport=$(free_tcp_port)
python3 -m http.server --bind 127.0.0.1 --directory "$web" "$hport" >/dev/null 2>&1 &
httpd=$!
pids+=("$httpd")
wait_tcp "$hport"
for bin in "${httploads[@]}"; do
    check_kept "$bin --files" 100 "$bin" --ports "$hport" --cpus "$cpus" --files "$tmp/files" --keepalive
    out=$tmp/out
    if "$bin" --ports "$hport" --cpus "$cpus" --files "$tmp/files" --duration 1 --good-rate 1099511627776 \
        --good-ms 0 --result "$tmp/r.json" > "$out" 2>&1 && python3 - "$tmp/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["done"] > 20 and r["errors"] == 0 and r["files"] == 3, r
assert 300 <= r["bytes"] / r["done"] <= 1500000, r
assert r["good"] == 0 and r["tolerable"] == r["done"], r
PY
    then
        pass "$bin --files closed loop: $(grep SUMMARY "$out"); nothing good at an impossible byte rate"
    else
        fail "$bin --files closed loop: $(cat "$out")"
    fi
done
sed 's/^3 70000/3 70001/' "$tmp/files" > "$tmp/files.wrong"
if "${httploads[0]}" --ports "$hport" --cpus 0 --files "$tmp/files.wrong" --duration 1 > "$tmp/out" 2>&1; then
    fail "httpload: a body of the wrong size passed"
elif grep -q "sent a body of 70000 bytes for /set/medium, 70001 expected" "$tmp/out"; then
    pass "httpload: a wrong size fails naming the file: $(grep expected "$tmp/out")"
else
    fail "httpload: unclear wrong-size failure: $(cat "$tmp/out")"
fi
printf '1 300 /set/small\nzero 70000 /set/medium\n' > "$tmp/files.bad"
status=0
"${httploads[0]}" --ports "$hport" --cpus 0 --files "$tmp/files.bad" --duration 1 > "$tmp/out" 2>&1 || status=$?
if [[ $status -eq 2 ]] && grep -q "line 2: want" "$tmp/out"; then
    pass "httpload: a malformed list exits 2: $(cat "$tmp/out")"
else
    fail "httpload: malformed list: status $status: $(cat "$tmp/out")"
fi
stop "$httpd"

if (( failed )); then
    echo "open_loop: FAILED" >&2
    exit 1
fi
echo "open_loop: ok"
