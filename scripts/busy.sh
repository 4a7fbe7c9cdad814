#!/usr/bin/env bash
# Runs a command on a busy machine: scripts/busy.sh [-n N] COMMAND [ARGS...]
# starts N busy loops (default BUSY_LOOPS, else 2 per online CPU: a load
# average of about 2 x CPUs, as on a distribution's build machine), runs
# COMMAND beside them and returns its exit status. The loops end with the
# command, on a signal or an error too (trap), and each also ends by itself
# within a fraction of a second once this script is gone (even after a
# SIGKILL), so none outlives the run.
set -uo pipefail

n=${BUSY_LOOPS:-$((2 * $(nproc)))}
if [ "${1:-}" = -n ]; then
    n=$2
    shift 2
fi
if [ $# -eq 0 ] || ! [[ $n =~ ^[0-9]+$ ]]; then
    echo "usage: $0 [-n N] COMMAND [ARGS...]" >&2
    exit 2
fi

me=$$
pids=()
stop_loops() {
    [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
    [ ${#pids[@]} -gt 0 ] && wait "${pids[@]}" 2>/dev/null
    pids=()
}
trap stop_loops EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# One loop: pure CPU, with a look every few hundred ms whether this script
# still runs.
spin() {
    while kill -0 "$me" 2>/dev/null; do
        for ((i = 0; i < 200000; i++)); do :; done
    done
}

for ((k = 0; k < n; k++)); do
    spin &
    pids+=($!)
done
echo "busy: $n busy loops beside: $*" >&2
start=$SECONDS
"$@"
rc=$?
echo "busy: done in $((SECONDS - start)) s (exit status $rc)" >&2
exit $rc
