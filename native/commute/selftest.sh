#!/usr/bin/env bash
# Checks mosbench-commute: that every --list line has the five fields the harness parses (name, VERDICT,
# MODE, STATE, WHY), then runs every situation briefly in its own mode and checks that each task counted,
# that the run ended cleanly and left no scratch directory, and that no sanitizer spoke:
#   PLAIN        side=2 (pairs) on every CPU this process may use, side=0 and side=1 (the alone rates)
#                on one, each for 0.3 s;
#   TSAN, ASAN   side=2 for 0.6 s on every CPU (their start comes out of the same timeout).
# Runs go as the harness's do (--counters FILE --timeout S), not through the standalone sampler, whose
# window is whole seconds. A third of a second proves what a second did (every task counted, the run
# stopped cleanly, no sanitizer spoke): 67 situations take about two minutes on 2 CPUs, not three and a half.
#   usage: commute/selftest.sh PLAIN [TSAN [ASAN]]
set -uo pipefail
source "$(dirname "$0")/../testing/counters.sh"
if (($# < 1 || $# > 3)); then
    echo "usage: $0 PLAIN [TSAN [ASAN]]" >&2
    exit 2
fi
plain=$1 tsan=${2:-} asan=${3:-}
pair_s=${COMMUTE_SELFTEST_PAIR_SECONDS:-0.3}
alone_s=${COMMUTE_SELFTEST_ALONE_SECONDS:-0.3}
# The sanitizers' start (and TSan's slower calls) come out of the same timeout, which starts before the tasks do.
san_s=${COMMUTE_SELFTEST_SAN_SECONDS:-0.6}
cpus=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
one_cpu=${cpus%%,*}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

calls=" open link unlink rename stat fstat lseek close pipe read write pread pwrite mmap munmap mprotect memread memwrite "
index_of() { # the call's place in COMMUTER's order
    local before=${calls%% $1 *}
    wc -w <<<"$before"
}

check_list() {
    local bin=$1 line name verdict mode state why extra a b ok
    local n=0 conflicts=0
    while IFS= read -r line; do
        n=$((n + 1))
        IFS=$'\t' read -r name verdict mode state why extra <<<"$line"
        a=${name%%-*} b=${name#*-} b=${b%%/*}
        ok=1
        [[ $(tr -cd '\t' <<<"$line" | wc -c) -eq 4 && -z $extra && -n $state && -n $why ]] || ok=0
        [[ $verdict == commutes || $verdict == conflicts ]] || ok=0
        [[ $mode == threads || $mode == procs ]] || ok=0
        [[ $name =~ ^[a-z]+-[a-z]+/[a-z0-9-]+$ && $calls == *" $a "* && $calls == *" $b "* ]] || ok=0
        ((ok)) && (($(index_of "$a") <= $(index_of "$b"))) || ok=0
        [[ $verdict == conflicts ]] && conflicts=$((conflicts + 1))
        if ((ok)); then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
            echo "FAIL --list line: $line"
        fi
    done < <("$bin" --list)
    echo "$(basename "$bin") --list: $n situations, $conflicts of them conflicts"
}

# run BIN TEST MODE CPUS SIDE SECONDS
run() {
    local bin=$1 test=$2 mode=$3 list=$4 side=$5 secs=$6
    local want out rc state n per_task left
    want=$(tr ',' '\n' <<<"$list" | grep -c .)
    rm -f "$tmp/counters"
    out=$("$bin" --test "$test" --mode "$mode" --cpus "$list" --param side="$side" --workdir "$tmp" \
        --counters "$tmp/counters" --timeout "$secs" 2>&1)
    rc=$?
    read -r state n per_task < <(read_counters "$tmp/counters" 2>/dev/null || echo "- 0 -")
    left=$(find "$tmp" -mindepth 1 -maxdepth 1 ! -name counters | head -3)
    # 3 is STATE_STOPPED: the run ended by its timeout, not by a failure.
    if [[ $rc -eq 0 && $state == 3 && $n -eq $want && -z $left ]] &&
        ! tr ',' '\n' <<<"$per_task" | grep -qx 0 &&
        ! grep -q "$SANITIZER_SPOKE" <<<"$out"; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL $(basename "$(dirname "$bin")")/$(basename "$bin") $test mode=$mode cpus=$list side=$side" \
            "(rc=$rc state=$state counts=$per_task${left:+ left behind: $left})"
        sed 's/^/    /' <<<"$out" | head -30
        find "$tmp" -mindepth 1 -maxdepth 1 ! -name counters -exec rm -rf {} +
    fi
}

# A missing binary, or one that lists nothing, would otherwise pass with "0 passed, 0 failed".
if [[ ! -x $plain ]] || [[ -z $("$plain" --list 2>/dev/null) ]]; then
    echo "FAIL $plain: missing, or its --list is empty" >&2
    exit 1
fi
listed=$("$plain" --list | wc -l)
check_list "$plain"
while IFS=$'\t' read -r test verdict mode _; do
    run "$plain" "$test" "$mode" "$cpus" 2 "$pair_s"
    run "$plain" "$test" "$mode" "$one_cpu" 0 "$alone_s"
    run "$plain" "$test" "$mode" "$one_cpu" 1 "$alone_s"
    for san in "$tsan" "$asan"; do
        [[ -n $san ]] && run "$san" "$test" "$mode" "$cpus" 2 "$san_s"
    done
done < <("$plain" --list)
echo "$(basename "$plain") selftest (cpus $cpus): $pass passed, $fail failed"
# Every situation checked: its --list line and at least its three plain runs.
((fail == 0 && pass >= 4 * listed))
