#!/usr/bin/env bash
# Runs every testcase of a micro driver binary (mosbench-micro, or mosbench-scale for libscale) in each
# mode on every CPU this process may use, and checks that each task made progress, that the run stopped
# cleanly and left no scratch behind, and that no sanitizer spoke. With --sanitizer (a TSan or ASan build
# of mosbench-micro), runs the subset that exercises the driver's concurrent paths: the start gate,
# partners, shared futexes and mutexes.
# Runs go as the harness's do (--counters FILE --timeout S), so a window can be a fraction of a second:
# 0.3 s (0.6 s under a sanitizer, whose start comes out of the same timeout) proves what a whole second
# did. The standalone sampler (whole-second windows, its sample lines and SUMMARY) is checked once, on
# the first testcase.
#   --modes "procs threads"   modes to run (libscale's testcases are threads-only)
#   --skip REGEX              testcases not to run, each named with the reason in --why
#   MICRO_SELFTEST_SECONDS    the window of each run (default 0.3, or 0.6 with --sanitizer)
set -uo pipefail
source "$(dirname "$0")/../testing/counters.sh"
sanitizer=0 modes="procs threads" skip="" why=""
while [[ ${1:-} == --* ]]; do
    case $1 in
        --sanitizer) sanitizer=1; shift ;;
        --modes) modes=$2; shift 2 ;;
        --skip) skip=$2; shift 2 ;;
        --why) why=$2; shift 2 ;;
        *) echo "selftest.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
bin=$1
cpus=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
ntasks=$(tr ',' '\n' <<<"$cpus" | wc -l)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ((sanitizer)); then
    tests="getppid1 futex_pingpong pthread_mutex1 context_switch1 open3 page_fault1"
    secs=${MICRO_SELFTEST_SECONDS:-0.6}
else
    tests=$("$bin" --list | cut -f1)
    secs=${MICRO_SELFTEST_SECONDS:-0.3}
fi
# A missing binary, or one that lists nothing, would otherwise pass with "0 passed, 0 failed".
if [[ -z $tests ]]; then
    echo "FAIL $bin: missing, or its --list is empty" >&2
    exit 1
fi

pass=0 fail=0
failed() {
    fail=$((fail + 1))
    echo "FAIL $*"
    sed 's/^/    /' <<<"$out" | head -40
    find "$tmp" -mindepth 1 -maxdepth 1 ! -name counters -exec rm -rf {} +
}

# run TEST MODE: one window as the harness runs it.
run() {
    local test=$1 mode=$2 rc state n per_task left
    rm -f "$tmp/counters"
    out=$("$bin" --test "$test" --mode "$mode" --cpus "$cpus" --workdir "$tmp" --counters "$tmp/counters" \
        --timeout "$secs" 2>&1)
    rc=$?
    read -r state n per_task < <(read_counters "$tmp/counters" 2>/dev/null || echo "- 0 -")
    left=$(find "$tmp" -mindepth 1 -maxdepth 1 ! -name counters | head -3)
    # Every task must have counted: a task stuck at zero means the gate or pinning is broken.
    if [[ $rc -eq 0 && $state == 3 && $n -eq $ntasks && -z $left ]] &&
        ! tr ',' '\n' <<<"$per_task" | grep -qx 0 && ! grep -q "$SANITIZER_SPOKE" <<<"$out"; then
        pass=$((pass + 1))
    else
        failed "$test/$mode (rc=$rc state=$state tasks=$n counts=$per_task${left:+ left behind: $left})"
    fi
}

# standalone TEST MODE: the driver's own sampler, one whole-second window, its last sample and SUMMARY.
standalone() {
    local test=$1 mode=$2 rc summary last per_task zero seen
    out=$("$bin" --test "$test" --mode "$mode" --cpus "$cpus" --warmup 0 --duration 1 2>&1)
    rc=$?
    summary=$(grep '^SUMMARY' <<<"$out")
    last=$(grep '^sample' <<<"$out" | tail -1)
    per_task=${last##*tasks=}
    zero=$(tr ',' '\n' <<<"$per_task" | grep -cx 0)
    seen=$(tr ',' '\n' <<<"$per_task" | grep -c .)
    if [[ $rc -eq 0 && -n $summary && $zero -eq 0 && $seen -eq $ntasks ]] && ! grep -q "$SANITIZER_SPOKE" <<<"$out"; then
        pass=$((pass + 1))
    else
        failed "$test/$mode standalone (rc=$rc)"
    fi
}

first=1
for test in $tests; do
    if [[ -n $skip && $test =~ $skip ]]; then
        echo "skip $test ($why)"
        continue
    fi
    for mode in $modes; do
        if ((first)); then
            standalone "$test" "$mode"
            first=0
        fi
        run "$test" "$mode"
    done
done
echo "$(basename "$bin") selftest ($(basename "$(dirname "$bin")"), ${secs} s windows): $pass passed, $fail failed"
((fail == 0 && pass > 0))
