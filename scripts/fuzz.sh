#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan, _build/fuzz) and runs each
# over its seed corpus: scripts/fuzz.sh [RUNS] (executions per target, default
# 200000), or FUZZ_SECONDS=N scripts/fuzz.sh for N seconds per target (how a
# release is checked). scripts/test.sh runs a short pass. See test/fuzz/README.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/deps.sh fuzz
CC=clang scripts/build.sh _build/fuzz --enable-fuzzing >/dev/null
make -s -C _build/fuzz fuzz FUZZ_RUNS="${1:-200000}" FUZZ_SECONDS="${FUZZ_SECONDS:-}"
