#!/usr/bin/env bash
# The project's test command (CI runs it through .ci/run): installs what is
# needed, builds pgcrew with ASan+UBSan in _build/sanitize, runs the cmocka
# unit tests (make check) and the pytest integration suite against that build.
# Then a short fuzz pass (scripts/fuzz.sh: every libFuzzer target of
# test/fuzz, FUZZ_CI_RUNS executions each, default 20000, and at most
# FUZZ_CI_CAP seconds each, default 150, which bounds fuzz_session, the
# slowest; clang build in _build/fuzz). Exits non-zero on any failure.
# Extra arguments go to pytest.
# PGCREW_BIN=/usr/sbin/pgbouncer scripts/test.sh validates the integration
# suite against PgBouncer instead (no build, no unit tests).
# Optional last step, in CI (CI set) or with PGCREW_PACKAGING_TEST=1, and
# never with PGCREW_PACKAGING_TEST=0: the packaging tests (test/packaging/:
# .deb built, installed, run and purged; .rpm built), which need root.
# In CI or with PGCREW_BUSY_TEST=1 (never with PGCREW_BUSY_TEST=0), the unit
# tests run a second time beside 2 busy loops per CPU (scripts/busy.sh), as
# on a distribution's build machine. scripts/test.sh --busy runs only that:
# dependencies, build, make check under load.
# In CI or with PGCREW_RECVSEND_TEST=1 (never with PGCREW_RECVSEND_TEST=0),
# the integration suite runs a second time with io_uring = 0 in every
# pgcrew (PGCREW_IO_URING=0): the first pass has pgcrew's default, io_uring
# batches where the kernel gives a ring; the second covers recv/send, what
# a kernel or container without io_uring gets.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

step() { printf '\n==== %s ====\n' "$*"; }

busy_only=no
if [ "${1:-}" = --busy ]; then
    busy_only=yes
    shift
fi
busy_ran=no
if [ $busy_only = yes ] || [ "${PGCREW_BUSY_TEST:-}" = 1 ] ||
   { [ -n "${CI:-}" ] && [ "${PGCREW_BUSY_TEST:-}" != 0 ]; }; then
    busy_ran=yes
fi

# make check in $builddir, its output then every unit test's cmocka log
# printed (and test-suite.log after a failure); arguments before it wrap
# the command (scripts/busy.sh). The output is kept in $builddir/OUT.
unit_tests() {
    local out=$1 rc=0
    shift
    "$@" make -C "$builddir" -j2 check >"$builddir/$out" 2>&1 || rc=$?
    cat "$builddir/$out"
    for log in "$builddir"/test/unit/*.log; do
        [ -f "$log" ] || continue
        printf '\n---- %s ----\n' "${log#"$builddir"/}"
        cat "$log"
    done
    if [ $rc -ne 0 ] && [ -f "$builddir/test-suite.log" ]; then
        printf '\n---- test-suite.log ----\n'
        cat "$builddir/test-suite.log"
    fi
    return $rc
}

step "dependencies"
scripts/deps.sh test || { echo "FAILED: scripts/deps.sh"; exit 1; }

unit_rc=0
unit_ran=no
busy_rc=0
busy_secs=0
busy_loops=$((2 * $(nproc)))
if [ -n "${PGCREW_BIN:-}" ]; then
    [ $busy_only = yes ] && { echo "--busy runs the unit tests: not with PGCREW_BIN"; exit 2; }
    busy_ran=no
    step "PGCREW_BIN=$PGCREW_BIN: integration tests only"
else
    builddir=_build/sanitize
    step "build ($builddir, --enable-sanitizers)"
    scripts/build.sh "$builddir" --enable-sanitizers || { echo "FAILED: build"; exit 1; }

    if [ $busy_only = no ]; then
        step "unit tests (make check)"
        unit_ran=yes
        unit_tests make-check.out || unit_rc=$?
    fi
    if [ $busy_ran = yes ]; then
        step "unit tests under load (make check beside $busy_loops busy loops)"
        busy_start=$SECONDS
        unit_tests make-check-busy.out scripts/busy.sh -n "$busy_loops" || busy_rc=$?
        busy_secs=$((SECONDS - busy_start))
    fi
    if [ $busy_only = yes ]; then
        step "summary"
        echo "unit tests under load ($busy_loops busy loops): $([ $busy_rc -eq 0 ] && echo ok || echo "FAILED ($busy_rc)") in ${busy_secs} s"
        exit $busy_rc
    fi
    export PGCREW_BIN=$root/$builddir/pgcrew
fi

fuzz_rc=0
fuzz_ran=no
if [ $unit_ran = yes ]; then
    step "fuzz, short pass (scripts/fuzz.sh ${FUZZ_CI_RUNS:-20000})"
    fuzz_ran=yes
    FUZZ_TIME_CAP=${FUZZ_CI_CAP:-150} timeout --kill-after=30 900 \
        scripts/fuzz.sh "${FUZZ_CI_RUNS:-20000}" || fuzz_rc=$?
fi

step "integration tests ($PGCREW_BIN)"
# pgbench runs 10 s per benchmark test locally, 5 s in CI to save time.
if [ -n "${CI:-}" ]; then export PGBENCH_SECONDS=${PGBENCH_SECONDS:-5}; fi
.venv/bin/python -m pytest test/integration -v "$@"
it_rc=$?

rs_ran=no
rs_rc=0
rs_secs=0
if [ "$(basename "$PGCREW_BIN")" != pgbouncer ] &&
   { [ "${PGCREW_RECVSEND_TEST:-}" = 1 ] ||
     { [ -n "${CI:-}" ] && [ "${PGCREW_RECVSEND_TEST:-}" != 0 ]; }; }; then
    step "integration tests again with io_uring = 0 (PGCREW_IO_URING=0)"
    rs_ran=yes
    rs_start=$SECONDS
    PGCREW_IO_URING=0 .venv/bin/python -m pytest test/integration -q "$@" || rs_rc=$?
    rs_secs=$((SECONDS - rs_start))
fi

# ---- optional: packaging (test/packaging/run.sh), a few minutes ----
pkg_ran=no
pkg_rc=0
pkg_secs=0
if [ "${PGCREW_PACKAGING_TEST:-}" = 1 ] ||
   { [ -n "${CI:-}" ] && [ "${PGCREW_PACKAGING_TEST:-}" != 0 ]; }; then
    step "packaging tests (test/packaging/run.sh)"
    pkg_ran=yes
    pkg_start=$SECONDS
    if scripts/deps.sh packaging; then
        timeout --kill-after=30 1500 bash test/packaging/run.sh || pkg_rc=$?
    else
        echo "FAILED: scripts/deps.sh packaging"
        pkg_rc=1
    fi
    pkg_secs=$((SECONDS - pkg_start))
fi

step "summary"
if [ $unit_ran = no ]; then
    echo "unit tests: not run (PGCREW_BIN given)"
else
    echo "unit tests: $([ $unit_rc -eq 0 ] && echo ok || echo "FAILED ($unit_rc)")"
fi
if [ $busy_ran = yes ]; then
    echo "unit tests under load ($busy_loops busy loops): $([ $busy_rc -eq 0 ] && echo ok || echo "FAILED ($busy_rc)") in ${busy_secs} s"
fi
if [ $fuzz_ran = yes ]; then
    echo "fuzz (short): $([ $fuzz_rc -eq 0 ] && echo ok || echo "FAILED ($fuzz_rc)")"
fi
echo "integration tests: $([ $it_rc -eq 0 ] && echo ok || echo "FAILED ($it_rc)")"
if [ $rs_ran = yes ]; then
    echo "integration tests with io_uring = 0: $([ $rs_rc -eq 0 ] && echo ok || echo "FAILED ($rs_rc)") in ${rs_secs} s"
fi
if [ $pkg_ran = no ]; then
    echo "packaging tests: not run (CI or PGCREW_PACKAGING_TEST=1 runs them)"
else
    echo "packaging tests: $([ $pkg_rc -eq 0 ] && echo ok || echo "FAILED ($pkg_rc)") in ${pkg_secs} s"
fi
[ $unit_rc -eq 0 ] && [ $busy_rc -eq 0 ] && [ $fuzz_rc -eq 0 ] && [ $it_rc -eq 0 ] &&
    [ $rs_rc -eq 0 ] && [ $pkg_rc -eq 0 ]
