# Sourced by the selftests that run a micro-driver binary as the harness does (--counters FILE --timeout S).
# The counter file's layout is micro/driver.c's struct micro_header (MICRO_VERSION 1).

# The run's end state, task count and per-task counts from the counter file: "STATE N C0,C1,...".
# STATE 3 is STATE_STOPPED: the run ended by its timeout, not by a failure.
read_counters() {
    local version n stride offset state
    read -r version n stride offset state < <(od -An -v -t u4 -w20 -j 8 -N 20 "$1") || return 1
    [[ $(head -c 8 "$1") == MOSMICR1 && $version == 1 ]] || return 1
    echo "$state $n $(od -An -v -t u8 -j "$offset" -w"$stride" "$1" | head -n "$n" | awk '{print $1}' | paste -sd,)"
}

SANITIZER_SPOKE='WARNING: ThreadSanitizer\|ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error\|DEADLYSIGNAL'
