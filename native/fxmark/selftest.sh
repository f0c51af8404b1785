#!/usr/bin/env bash
# Checks mosbench-fxmark: runs every operation briefly on every CPU this process may use, as the harness
# runs it (--counters FILE --timeout S), in a scratch directory on tmpfs (/dev/shm; a disk's file system
# takes seconds to make MRPM's tree of 37,448 entries, out of the run's timeout), and
# checks that each task counted, that the run ended cleanly and left nothing behind, that the operations
# whose pool runs out (small pools here, so it does) published when each task stopped and the others
# never did, and that no sanitizer spoke:
#   PLAIN        every operation buffered, and the D* ones with --param directio=1 where the directory's
#                file system takes O_DIRECT;
#   TSAN, ASAN   every operation buffered.
# The counter file's layout is micro/driver.c's struct micro_header (MICRO_VERSION 1); a slot's words
# are fxmark.h's (count, when the task stopped). Windows of 0.3 s (FXMARK_SELFTEST_SECONDS) prove as much
# as longer ones: the small pools run out within milliseconds, every other loop counts thousands.
#   usage: fxmark/selftest.sh PLAIN [TSAN [ASAN]]
set -uo pipefail
if (($# < 1 || $# > 3)); then
    echo "usage: $0 PLAIN [TSAN [ASAN]]" >&2
    exit 2
fi
plain=$1 tsan=${2:-} asan=${3:-}
secs=${FXMARK_SELFTEST_SECONDS:-0.3}
# The sanitizers' start (and TSan's slower calls) come out of the same timeout, which starts before the
# tasks do.
san_s=${FXMARK_SELFTEST_SAN_SECONDS:-0.6}
# MRPM and MRPH's tree (37,448 entries) is made inside the timeout too: 0.3-0.6 s, more under TSan.
tree_s=${FXMARK_SELFTEST_TREE_SECONDS:-0.6}
trees=" MRPM MRPH "
stopping=" DWAL DWTL MWCL MWCM MWUL MWUM MWRM "
# Bounded pools: never "until the file system is full" on the machine's /dev/shm.
pools=(--param files=64 --param blocks=16)
cpus=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
ntasks=$(tr ',' '\n' <<<"$cpus" | grep -c .)
shm=/dev/shm
[[ -d $shm && -w $shm ]] || shm=${TMPDIR:-/tmp}
tmp=$(mktemp -d -p "$shm")
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

# The run's end state and each task's count and stop time from the counter file: "STATE N C0,C1,... S0,S1,...".
read_counters() {
    local version n stride offset state slots
    read -r version n stride offset state < <(od -An -v -t u4 -w20 -j 8 -N 20 "$1") || return 1
    [[ $(head -c 8 "$1") == MOSMICR1 && $version == 1 ]] || return 1
    slots=$(od -An -v -t u8 -j "$offset" -w"$stride" "$1" | head -n "$n")
    echo "$state $n $(awk '{print $1}' <<<"$slots" | paste -sd,) $(awk '{print $2}' <<<"$slots" | paste -sd,)"
}

# run BIN TEST SECONDS [PARAM ...]
run() {
    local bin=$1 test=$2 secs=$3
    shift 3
    local out rc state n counts stops left why=""
    rm -f "$tmp/counters"
    out=$("$bin" --test "$test" --mode procs --cpus "$cpus" --workdir "$tmp" --counters "$tmp/counters" \
        --timeout "$secs" "${pools[@]}" "$@" 2>&1)
    rc=$?
    read -r state n counts stops < <(read_counters "$tmp/counters" 2>/dev/null || echo "- 0 - -")
    left=$(find "$tmp" -mindepth 1 -maxdepth 1 ! -name counters | head -3)
    # 3 is STATE_STOPPED: the run ended by its timeout, not by a failure.
    [[ $rc -eq 0 && $state == 3 && $n -eq $ntasks ]] || why="did not end cleanly"
    tr ',' '\n' <<<"$counts" | grep -qx 0 && why="a task counted nothing"
    if [[ $stopping == *" $test "* ]]; then
        tr ',' '\n' <<<"$stops" | grep -qx 0 && why="a task's pool never ran out"
    elif [[ $stops =~ [1-9] ]]; then
        why="a stop published by an operation that never stops"
    fi
    [[ -n $left ]] && why="left behind: $left"
    grep -q 'WARNING: ThreadSanitizer\|ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error\|DEADLYSIGNAL' \
        <<<"$out" && why="a sanitizer spoke"
    if [[ -z $why ]]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL $(basename "$(dirname "$bin")")/$(basename "$bin") $test $* ($why; rc=$rc state=$state" \
            "counts=$counts stopped_ns=$stops)"
        sed 's/^/    /' <<<"$out" | head -30
        find "$tmp" -mindepth 1 -maxdepth 1 ! -name counters -exec rm -rf {} +
    fi
}

# A missing binary, or one that lists nothing, would otherwise pass with "0 passed, 0 failed".
if [[ ! -x $plain ]] || [[ -z $("$plain" --list 2>/dev/null) ]]; then
    echo "FAIL $plain: missing, or its --list is empty" >&2
    exit 1
fi
tests=$("$plain" --list | cut -f1)
direct=0
python3 -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_CREAT | os.O_RDWR | os.O_DIRECT))' "$tmp/probe" \
    2>/dev/null && direct=1
rm -f "$tmp/probe"
((direct)) || echo "note: $tmp's file system refuses O_DIRECT: the direct I/O runs are left out"
runs=0
for test in $tests; do
    extra=0
    [[ $trees == *" $test "* ]] && extra=$tree_s
    run "$plain" "$test" "$(awk "BEGIN {print $secs + $extra}")"
    runs=$((runs + 1))
    if ((direct)) && [[ $test == D* ]]; then
        run "$plain" "$test" "$(awk "BEGIN {print $secs + $extra}")" --param directio=1
        runs=$((runs + 1))
    fi
    for san in "$tsan" "$asan"; do
        if [[ -n $san ]]; then
            run "$san" "$test" "$(awk "BEGIN {print $san_s + $extra}")"
            runs=$((runs + 1))
        fi
    done
done
echo "$(basename "$plain") selftest (cpus $cpus): $pass passed, $fail failed"
((fail == 0 && pass == runs && pass >= 19))
