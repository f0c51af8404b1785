#!/usr/bin/env bash
# Runs the Metis reference test in each build flavour given (plain, ThreadSanitizer, ASan/UBSan), and
# checks the program's handling of bad input: each must fail with one clear line and leave no output.
set -uo pipefail
pass=0 fail=0
for t in "$@"; do
    out=$(TSAN_OPTIONS=halt_on_error=1 "$t" 2>&1)
    if [[ $? -eq 0 ]] && ! grep -q 'WARNING: ThreadSanitizer\|ERROR: AddressSanitizer\|runtime error' <<<"$out"; then
        pass=$((pass + 1))
        echo "[$(basename "$(dirname "$(dirname "$t")")")] $out"
    else
        fail=$((fail + 1))
        echo "FAIL $t"
        sed 's/^/    /' <<<"$out" | head -40
    fi
done

bin=$(dirname "$(dirname "$1")")/mosbench-metis
scratch=$(mktemp -d)
trap 'umount "$scratch/small" 2>/dev/null; rm -rf "$scratch"' EXIT
expect_failure() {  # what, message, command...
    local what=$1 message=$2
    shift 2
    err=$("$@" 2>&1 >/dev/null)
    if [[ $? -ne 0 && $(wc -l <<<"$err") -eq 1 && $err == *"$message"* && ! -e $scratch/out && ! -e $scratch/out.partial ]]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL bad input: $what: $err"
    fi
}
: >"$scratch/empty"
expect_failure "missing input" "No such file" "$bin" --app invindex --input "$scratch/none" --cpus 0 --output "$scratch/out"
expect_failure "empty input" "input is empty" "$bin" --app invindex --input "$scratch/empty" --cpus 0 --output "$scratch/out"
expect_failure "a directory" "not a file" "$bin" --app invindex --input "$scratch" --cpus 0 --output "$scratch/out"
expect_failure "unknown app" "unknown app" "$bin" --app grep --input "$scratch/empty" --cpus 0
expect_failure "bad CPU list" "bad CPU list" "$bin" --app wordcount --input "$scratch/empty" --cpus 0-x
expect_failure "bad partitions" "--partitions needs a whole number" "$bin" --app invindex --input "$scratch/empty" --cpus 0 --partitions 4x
expect_failure "negative vocab" "--vocab needs a whole number" "$bin" --generate "$scratch/gen" --size-mb 1 --vocab -5
expect_failure "huge size" "--size-mb needs a whole number" "$bin" --generate "$scratch/gen" --size-mb 99999999999999999999
# A full disk: a 64 KB tmpfs cannot hold the index, and nothing may be left that looks like a result.
if mkdir -p "$scratch/small" && mount -t tmpfs -o size=64k tmpfs "$scratch/small" 2>/dev/null; then
    "$bin" --generate "$scratch/in" --size-mb 1 --seed 3 >/dev/null
    err=$("$bin" --app invindex --input "$scratch/in" --cpus 0 --output "$scratch/small/out" 2>&1 >/dev/null)
    if [[ $? -ne 0 && $err == *"No space left"* && -z $(ls -A "$scratch/small") ]]; then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
        echo "FAIL full disk: rc/message/leftovers wrong: $err; left: $(ls -A "$scratch/small")"
    fi
    umount "$scratch/small"
else
    echo "skip full-disk check (cannot mount a tmpfs here)"
fi
echo "metis tests: $pass passed, $fail failed"
((fail == 0))
