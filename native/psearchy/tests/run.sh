#!/usr/bin/env bash
# Tests mosbench-psearchy in each build flavour given (plain, ThreadSanitizer, ASan/UBSan): every word of
# a generated corpus is queried and compared with reference.py, in both modes, with one worker and with
# more workers than CPUs, with small tables (many runs, many DBs) and few open files (merge passes).
# Then bad input, a full disk and an interrupted job: each must fail with one clear line, leave nothing
# at the output path and no worker behind.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

scratch=$(mktemp -d)
chmod 755 "$scratch"
trap 'umount "$scratch/small" 2>/dev/null; rm -rf "$scratch"' EXIT
python3 "$here/reference.py" corpus "$scratch/corpus" --files 150 --seed 7
cpus=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
first=${cpus%%,*}
# Workers of a job whose output is under the scratch directory (the pattern travels in the environment,
# so the search does not find itself).
strays() { MARK="$scratch/" python3 -c '
import os
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        args = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
    except OSError:
        continue
    if "mosbench-psearchy" in args and os.environ["MARK"] in args:
        print(pid, args.replace("\0", " "))
'; }
leftovers() { ls -d "$scratch"/out "$scratch"/out.partial-* "$scratch"/small/out* "$scratch"/nobody/out* 2>/dev/null; }
sanitizer_spoke() { grep -q 'WARNING: ThreadSanitizer\|ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error' "$1"; }

# index_and_check BIN MODE CPUS NOFILE: builds an index and checks every word against the reference.
index_and_check() {
    local bin=$1 mode=$2 cpulist=$3 nofile=$4 out=$scratch/ix-$RANDOM flavour
    flavour=$(basename "$(dirname "$bin")")
    local what="[$flavour] $mode on $cpulist, nofile $nofile"
    if ! (ulimit -n "$nofile" && TSAN_OPTIONS=halt_on_error=1 "$bin" index --corpus "$scratch/corpus" --out "$out" \
            --cpus "$cpulist" --mode "$mode" --mem 64K --dblim 37 >"$scratch/result" 2>"$scratch/err") ||
        sanitizer_spoke "$scratch/err"; then
        bad "$what: index failed: $(head -20 "$scratch/err")"
        return
    fi
    if [[ $nofile -lt 64 ]] && ! grep -q '"merge_passes": [2-9]' "$scratch/result"; then
        bad "$what: expected several merge passes: $(cat "$scratch/result")"
        return
    fi
    if python3 "$here/reference.py" check "$scratch/corpus" "$bin" query --index "$out" >"$scratch/check" 2>&1; then
        ok
        echo "$what: $(cat "$scratch/check")"
    else
        bad "$what: $(head -10 "$scratch/check")"
    fi
    rm -rf "$out"
}

for bin in "$@"; do
    for mode in threads procs; do
        index_and_check "$bin" "$mode" "$first" 1024
        index_and_check "$bin" "$mode" "$cpus,$cpus,$first" 1024
    done
    index_and_check "$bin" threads "$cpus" 40
done

# The failure paths run in the last flavour given (make passes ASan/UBSan last): a leak or a bad access
# on the way out adds lines to what must be one.
bin=${*: -1}
# expect_failure WHAT MESSAGE COMMAND...: fails, says MESSAGE in one line, leaves no output and no worker.
expect_failure() {
    local what=$1 message=$2 err rc
    shift 2
    err=$("$@" 2>&1 >/dev/null)
    rc=$?
    local left stray
    left=$(leftovers)
    stray=$(strays)
    if [[ $rc -ne 0 && $(wc -l <<<"$err") -eq 1 && $err == *"$message"* && -z $left && -z $stray ]]; then
        ok
    else
        bad "bad input: $what (status $rc): $err${left:+; left behind: $left}${stray:+; still running: $stray}"
    fi
}
mkdir -p "$scratch/emptycorpus/sub" && : >"$scratch/emptycorpus/sub/empty"
expect_failure "missing corpus" "No such file" "$bin" index --corpus "$scratch/none" --out "$scratch/out" --cpus "$first"
expect_failure "corpus is a file" "Not a directory" "$bin" index --corpus "$scratch/corpus/empty" --out "$scratch/out" --cpus "$first"
expect_failure "only empty files" "no text to index" "$bin" index --corpus "$scratch/emptycorpus" --out "$scratch/out" --cpus "$first"
expect_failure "bad CPU list" "bad CPU list" "$bin" index --corpus "$scratch/corpus" --out "$scratch/out" --cpus 1-x
expect_failure "bad mode" "--mode must be" "$bin" index --corpus "$scratch/corpus" --out "$scratch/out" --cpus "$first" --mode forks
expect_failure "a CPU not ours" "cannot run on CPU" "$bin" index --corpus "$scratch/corpus" --out "$scratch/out" --cpus 4095
mkdir "$scratch/existing" && touch "$scratch/existing/x"
expect_failure "output exists" "already exists" "$bin" index --corpus "$scratch/corpus" --out "$scratch/existing" --cpus "$first"
[[ $(ls -A "$scratch/existing") == x ]] || bad "output exists: it was changed"
expect_failure "not an index" "not a psearchy index" "$bin" query --index "$scratch/corpus" word

# An unreadable file: as root, the indexer runs as nobody, to whom one file is closed.
mkdir -p "$scratch/locked" && cp -r "$scratch/corpus/d1" "$scratch/locked/" && echo secret >"$scratch/locked/secret"
chmod 600 "$scratch/locked/secret" && chmod -R a+rX "$scratch/locked" && chmod 600 "$scratch/locked/secret"
mkdir "$scratch/nobody" && chmod 777 "$scratch/nobody"
if [[ $(id -u) -eq 0 ]]; then
    chown root "$scratch/locked/secret"
    as_other=(setpriv --reuid=65534 --regid=65534 --clear-groups)
else
    chmod 000 "$scratch/locked/secret"
    as_other=()
fi
for mode in threads procs; do
    expect_failure "unreadable file ($mode)" "cannot read $scratch/locked/secret: Permission denied" \
        "${as_other[@]}" "$bin" index --corpus "$scratch/locked" --out "$scratch/nobody/out" --cpus "$cpus" --mode $mode
done

# A full disk: a 256 KB tmpfs cannot hold the index; the job must fail and leave the tmpfs empty.
if mkdir -p "$scratch/small" && mount -t tmpfs -o size=256k tmpfs "$scratch/small" 2>/dev/null; then
    for mode in threads procs; do
        expect_failure "full disk ($mode)" "No space left on device" \
            "$bin" index --corpus "$scratch/corpus" --out "$scratch/small/out" --cpus "$cpus" --mode $mode --mem 64K
        [[ -z $(ls -A "$scratch/small") ]] || bad "full disk ($mode): left $(ls -A "$scratch/small")"
    done
    umount "$scratch/small"
else
    echo "skip full-disk check (cannot mount a tmpfs here)"
fi

# Interrupted in the middle (a run already written): fails with "interrupted", removes its work.
python3 "$here/reference.py" corpus "$scratch/big" --files 3000 --seed 9
for mode in threads procs; do
    "$bin" index --corpus "$scratch/big" --out "$scratch/out" --cpus "$cpus" --mode $mode --mem 64K --wait-signal \
        >"$scratch/int.out" 2>"$scratch/int.err" &
    pid=$!
    for _ in $(seq 500); do grep -q ready "$scratch/int.out" && break; sleep 0.01; done
    kill -USR1 $pid
    for _ in $(seq 1000); do compgen -G "$scratch/out.partial-*/w0/run-0-1" >/dev/null && break; sleep 0.005; done
    kill -TERM $pid
    wait $pid
    rc=$?
    if [[ $rc -ne 0 && $(cat "$scratch/int.err") == *"interrupted; no index written"* && -z $(leftovers) &&
          -z $(strays) ]]; then
        ok
    else
        bad "interrupted ($mode): status $rc, $(cat "$scratch/int.err"), left $(leftovers) $(strays)"
    fi
done

echo "psearchy tests: $pass passed, $fail failed"
((fail == 0))
