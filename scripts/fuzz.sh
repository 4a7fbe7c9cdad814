#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, _build/fuzz) and runs each
# over its seed corpus: scripts/fuzz.sh [RUNS] (executions per target, default
# 200000: about 10 minutes for fuzz_session, the session core), or
# FUZZ_SECONDS=N scripts/fuzz.sh for N seconds per target (how a release is
# checked); FUZZ_TIME_CAP=N stops any target after N seconds. scripts/test.sh
# runs a short pass. See test/fuzz/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/deps.sh fuzz
CC=clang scripts/build.sh _build/fuzz --enable-fuzzing >/dev/null
make -s -C _build/fuzz fuzz FUZZ_RUNS="${1:-200000}" FUZZ_SECONDS="${FUZZ_SECONDS:-}" \
    FUZZ_TIME_CAP="${FUZZ_TIME_CAP:-}"
