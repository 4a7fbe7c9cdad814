#!/usr/bin/env bash
# Runs libFuzzer targets over their seed corpora (called by "make fuzz"):
#   run.sh SEED_DIR TARGET...
# Each target gets FUZZ_RUNS executions (default 200000), or FUZZ_SECONDS of
# fuzzing when that is set; with FUZZ_TIME_CAP no target runs longer than
# that many seconds (the CI pass: fuzz_session runs a few hundred inputs a
# second, the parsers thousands). Inputs that found new coverage are kept in
# work/<target> beside the binaries, crashing inputs in crashes/. Prints one
# line per target; exits 1 if any target crashed, leaked, hit UB or a timeout.
set -uo pipefail
seeds=$1
shift
rc=0
for t in "$@"; do
    name=$(basename "$t")
    dir=$(dirname "$t")
    work=$dir/work/$name
    crashes=$dir/crashes
    log=$dir/$name.log
    mkdir -p "$work" "$crashes"
    corpora=("$work")
    [ -d "$seeds/$name" ] && corpora+=("$seeds/$name")
    if [ -n "${FUZZ_SECONDS:-}" ]; then
        limit=(-max_total_time="$FUZZ_SECONDS")
    else
        limit=(-runs="${FUZZ_RUNS:-200000}")
    fi
    [ -n "${FUZZ_TIME_CAP:-}" ] && limit+=(-max_total_time="$FUZZ_TIME_CAP")
    scratch=$(mktemp -d)
    start=$SECONDS
    if TMPDIR=$scratch ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
       "$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
            -print_final_stats=1 -artifact_prefix="$crashes/$name-" \
            "${corpora[@]}" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        echo "PASS $name: ${runs:-?} executions in $((SECONDS - start)) s," \
             "corpus $(find "$work" -type f | wc -l) kept + $(find "$seeds/$name" -type f 2>/dev/null | wc -l) seeds"
    else
        echo "FAIL $name: see $log; the input is in $crashes/"
        tail -n 40 "$log"
        rc=1
    fi
    rm -rf "$scratch"
done
exit $rc
