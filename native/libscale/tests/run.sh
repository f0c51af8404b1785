#!/usr/bin/env bash
# Runs every libscale stress test in each build flavour (plain, ThreadSanitizer, ASan/UBSan), then every
# libscale benchmark for a second on every CPU in each flavour (micro/selftest.sh checks that every
# task made progress and no sanitizer spoke). Arguments: FLAVOUR=BUILD_DIR ...
set -uo pipefail
here=$(dirname "$0")
pass=0 fail=0 rc=0

for arg in "$@"; do
    flavour=${arg%%=*} dir=${arg#*=}
    for t in "$dir"/libscale-tests/test_*; do
        out=$(TSAN_OPTIONS=halt_on_error=1 "$t" 2>&1)
        code=$?
        if [[ $code -eq 0 ]] && ! grep -q 'WARNING: ThreadSanitizer\|ERROR: AddressSanitizer\|runtime error' <<<"$out"; then
            pass=$((pass + 1))
            sed "s/^/[$flavour] /" <<<"$out" | grep PASS
        else
            fail=$((fail + 1))
            echo "FAIL [$flavour] $(basename "$t") (rc=$code)"
            sed 's/^/    /' <<<"$out" | head -40
        fi
    done
    skip=()
    if [[ $flavour == tsan ]]; then
        # Concurrency Kit synchronises through inline assembly that ThreadSanitizer cannot see, so every
        # CK lock looks racy to it; CK's locks are the comparison, not ours to prove.
        skip=(--skip '^lock/ck-' --why "CK's inline-asm atomics are invisible to TSan")
    fi
    "$here/../../micro/selftest.sh" --modes threads "${skip[@]}" "$dir/mosbench-scale" || rc=1
done
echo "libscale stress tests: $pass passed, $fail failed"
((fail == 0 && rc == 0))
