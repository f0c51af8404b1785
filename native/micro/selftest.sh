#!/usr/bin/env bash
# Runs every microbenchmark for one second in both modes on every CPU this process may use and checks
# that each task made progress. With --sanitizer (a TSan or ASan build), runs the subset that exercises
# the runner's concurrent paths: the start gate, partners, shared futexes and shared mutexes.
set -uo pipefail
sanitizer=0
if [[ ${1:-} == --sanitizer ]]; then sanitizer=1; shift; fi
bin=$1
cpus=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
ntasks=$(tr ',' '\n' <<<"$cpus" | wc -l)

if ((sanitizer)); then
    tests="getppid1 futex2 mutex2 context_switch1 open3 page_fault1"
else
    tests=$("$bin" --list | cut -f1)
fi

pass=0 fail=0
for test in $tests; do
    for mode in procs threads; do
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
echo "micro selftest ($(basename "$(dirname "$bin")")): $pass passed, $fail failed"
((fail == 0))
