#!/usr/bin/env bash
# Runs every testcase of a micro driver binary (mosbench-micro, or mosbench-scale for libscale) for one
# second in each mode on every CPU this process may use, and checks that each task made progress and
# that no sanitizer spoke. With --sanitizer (a TSan or ASan build of mosbench-micro), runs the subset
# that exercises the driver's concurrent paths: the start gate, partners, shared futexes and mutexes.
#   --modes "procs threads"   modes to run (libscale's testcases are threads-only)
#   --skip REGEX              testcases not to run, each named with the reason in --why
set -uo pipefail
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

if ((sanitizer)); then
    tests="getppid1 futex_pingpong pthread_mutex1 context_switch1 open3 page_fault1"
else
    tests=$("$bin" --list | cut -f1)
fi

pass=0 fail=0
for test in $tests; do
    if [[ -n $skip && $test =~ $skip ]]; then
        echo "skip $test ($why)"
        continue
    fi
    for mode in $modes; do
        out=$("$bin" --test "$test" --mode "$mode" --cpus "$cpus" --warmup 0 --duration 1 2>&1)
        rc=$?
        summary=$(grep '^SUMMARY' <<<"$out")
        last=$(grep '^sample' <<<"$out" | tail -1)
        # Every task must have counted: a task stuck at zero means the gate or pinning is broken.
        per_task=${last##*tasks=}
        zero=$(tr ',' '\n' <<<"$per_task" | grep -cx 0)
        ntask_seen=$(tr ',' '\n' <<<"$per_task" | grep -c .)
        if [[ $rc -eq 0 && -n $summary && $zero -eq 0 && $ntask_seen -eq $ntasks ]] &&
            ! grep -q 'WARNING: ThreadSanitizer\|ERROR: AddressSanitizer\|runtime error' <<<"$out"; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
            echo "FAIL $test/$mode (rc=$rc)"
            sed 's/^/    /' <<<"$out" | head -40
        fi
    done
done
echo "$(basename "$bin") selftest ($(basename "$(dirname "$bin")")): $pass passed, $fail failed"
((fail == 0))
