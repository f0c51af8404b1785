#!/usr/bin/env bash
# Runs every libscale stress test in each build flavour (plain, ThreadSanitizer, ASan/UBSan), then
# every libscale benchmark for a second on every CPU this process may use, in each flavour, checking
# that all tasks made progress and no sanitizer spoke. Arguments: FLAVOUR=BUILD_DIR ...
set -uo pipefail
cpus=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
ntasks=$(tr ',' '\n' <<<"$cpus" | wc -l)
pass=0 fail=0
sanitizer_spoke() { grep -q 'WARNING: ThreadSanitizer\|ERROR: AddressSanitizer\|runtime error' <<<"$1"; }

for arg in "$@"; do
    flavour=${arg%%=*} dir=${arg#*=}
    for t in "$dir"/libscale-tests/test_*; do
        out=$(TSAN_OPTIONS=halt_on_error=1 "$t" 2>&1)
        rc=$?
        if [[ $rc -eq 0 ]] && ! sanitizer_spoke "$out"; then
            pass=$((pass + 1))
            sed "s/^/[$flavour] /" <<<"$out" | grep PASS
        else
            fail=$((fail + 1))
            echo "FAIL [$flavour] $(basename "$t") (rc=$rc)"
            sed 's/^/    /' <<<"$out" | head -40
        fi
    done
    bin=$dir/mosbench-scale
    for test in $("$bin" --list | cut -f1); do
        # Concurrency Kit synchronises through inline assembly that ThreadSanitizer cannot see, so
        # every CK lock looks racy to it; CK's locks are the comparison, not ours to prove.
        if [[ $flavour == tsan && $test == lock/ck-* ]]; then
            echo "[$flavour] skip benchmark $test (CK's inline-asm atomics are invisible to TSan)"
            continue
        fi
        out=$("$bin" --test "$test" --mode threads --cpus "$cpus" --warmup 0 --duration 1 2>&1)
        rc=$?
        per_task=$(grep '^sample' <<<"$out" | tail -1)
        per_task=${per_task##*tasks=}
        zero=$(tr ',' '\n' <<<"$per_task" | grep -cx 0)
        seen=$(tr ',' '\n' <<<"$per_task" | grep -c .)
        if [[ $rc -eq 0 && $zero -eq 0 && $seen -eq $ntasks ]] && grep -q '^SUMMARY' <<<"$out" &&
            ! sanitizer_spoke "$out"; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
            echo "FAIL [$flavour] benchmark $test (rc=$rc)"
            sed 's/^/    /' <<<"$out" | head -40
        fi
    done
done
echo "libscale: $pass passed, $fail failed"
((fail == 0))
