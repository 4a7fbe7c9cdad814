#!/usr/bin/env bash
# The project's test command (CI runs it through .ci/run): installs what is
# needed, builds pgcrew with ASan+UBSan in _build/sanitize, runs the cmocka
# unit tests (make check) and the pytest integration suite against that build.
# Then a short fuzz pass (scripts/fuzz.sh: every libFuzzer target of
# test/fuzz, FUZZ_CI_RUNS executions each, default 20000, and at most
# FUZZ_CI_CAP seconds each, default 150, which bounds fuzz_session, the
# slowest; clang build in _build/fuzz). Exits non-zero on any failure.
# Extra arguments go to pytest.
# PGCREW_BIN=.cache/pgbouncer-1.25.2/bin/pgbouncer scripts/test.sh validates
# the integration suite against PgBouncer instead (no build, no unit tests).
# In CI or with PGCREW_REF_TEST=1 (never with PGCREW_REF_TEST=0), after the
# pgcrew passes the suite runs once more against PgBouncer 1.25.2, the
# differential reference (scripts/pgbouncer_ref.sh builds it): every test
# not marked pgcrew_only must pass there too.
# Optional last step, in CI (CI set) or with PGCREW_PACKAGING_TEST=1, and
# never with PGCREW_PACKAGING_TEST=0: the packaging tests (test/packaging/:
# .deb built, installed, run and purged; .rpm built), which need root.
# Optional step, in CI (CI set) or with PGCREW_CONTAINER_TEST=1, and never
# with PGCREW_CONTAINER_TEST=0: the container tests (test/container/run.sh:
# the image built from the .deb, run under podman against a PostgreSQL
# container, and deploy/kubernetes under podman kube play), which need
# root; where podman cannot run containers they say so and count as skipped.
# In CI or with PGCREW_BUSY_TEST=1 (never with PGCREW_BUSY_TEST=0), the unit
# tests run a second time beside 2 busy loops per CPU (scripts/busy.sh), as
# on a distribution's build machine. scripts/test.sh --busy runs only that:
# dependencies, build, make check under load.
# In CI or with PGCREW_RECVSEND_TEST=1 (never with PGCREW_RECVSEND_TEST=0),
# the integration suite runs a second time with io_uring = 0 in every
# pgcrew (PGCREW_IO_URING=0): the first pass has pgcrew's default, io_uring
# batches where the kernel gives a ring; the second covers recv/send, what
# a kernel or container without io_uring gets.
# The integration suite runs in PGCREW_TEST_JOBS parallel runners (default
# 6; pytest-xdist), each with its own PostgreSQL clusters, ports and scratch
# directory, then the tests marked serial (those that need the whole machine
# or time what they do) one after another; PGCREW_TEST_JOBS=1 runs it all
# in one process, as before. Extra arguments with -m, -n or -p of their own
# also run it in one invocation. Every step's time is printed when it ends
# and in the summary, with the 20 slowest tests of the integration passes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD

# step NAME ends the running step (its time printed and kept for the
# summary) and starts the next; step_end ends the last one.
step_names=()
step_secs=()
step_start=
step_end() {
    [ -n "$step_start" ] || return 0
    local secs=$((SECONDS - step_start))
    step_secs+=("$secs")
    step_start=
    printf '==== %s: %s ====\n' "${step_names[-1]}" "$(mmss "$secs")"
}
step() {
    step_end
    step_names+=("$*")
    step_start=$SECONDS
    printf '\n==== %s ====\n' "$*"
}
mmss() { printf '%d:%02d' $(($1 / 60)) $(($1 % 60)); }

busy_only=no
if [ "${1:-}" = --busy ]; then
    busy_only=yes
    shift
fi
# wanted VAR: an optional step runs in CI or with VAR=1, never with VAR=0.
wanted() { [ "${!1:-}" = 1 ] || { [ -n "${CI:-}" ] && [ "${!1:-}" != 0 ]; }; }

busy_ran=no
if [ $busy_only = yes ] || wanted PGCREW_BUSY_TEST; then
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
        step_end
        printf '\n==== summary ====\n'
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

# ---- integration tests: parallel runners, then the serial group ----
# pgbench runs 10 s per benchmark test locally, 5 s in CI to save time.
if [ -n "${CI:-}" ]; then export PGBENCH_SECONDS=${PGBENCH_SECONDS:-5}; fi
jobs=${PGCREW_TEST_JOBS:-6}
for arg in "$@"; do
    case $arg in -m*|-n*|-p*|--numprocesses*) jobs=1 ;; esac
done
junit=$(mktemp -d /tmp/pgcrew-junit.XXXXXX)
trap 'rm -rf "$junit"' EXIT

# pytest_pass NAME ARGS...: one pytest invocation, its report in
# $junit/NAME.xml. No test selected (5: the caller's -k matched none here)
# counts as success; integration() fails when no pass selected any test.
pytest_pass() {
    local name=$1 rc=0
    shift
    .venv/bin/python -m pytest test/integration --junitxml="$junit/$name.xml" "$@" || rc=$?
    [ $rc -eq 5 ] && { passes_empty=$((passes_empty + 1)); rc=0; }
    passes=$((passes + 1))
    return $rc
}

# integration TITLE NAME [pytest args]: the suite, as parallel runners and
# a serial group (or one process with jobs = 1), one step each. worksteal:
# a runner out of tests takes half of another's queue, so a slow module
# near the end does not run alone.
integration() {
    local title=$1 name=$2 rc=0 serial_rc=0
    shift 2
    passes=0
    passes_empty=0
    if [ "$jobs" -gt 1 ]; then
        step "$title: $jobs parallel runners (not serial)"
        pytest_pass "$name-parallel" -n "$jobs" --dist worksteal -m "not serial" "$@" || rc=$?
        step "$title: serial group"
        pytest_pass "$name-serial" -m serial "$@" || serial_rc=$?
        [ $rc -ne 0 ] || rc=$serial_rc
    else
        step "$title"
        pytest_pass "$name" "$@" || rc=$?
    fi
    [ $rc -eq 0 ] && [ $passes_empty -eq $passes ] && rc=5
    return $rc
}

integration "integration tests ($PGCREW_BIN)" it -v "$@"
it_rc=$?

# again NAME VAR TITLE ASSIGNMENT...: the whole suite once more with those
# environment variables, in CI or with VAR=1 (never with VAR=0), when the
# first pass was pgcrew's. Sets NAME_ran, NAME_rc and NAME_secs.
pytest_args=("$@")
again() {
    local name=$1 var=$2 title=$3 start=$SECONDS rc=0 ran=no
    shift 3
    if [ "$(basename "$PGCREW_BIN")" != pgbouncer ] && wanted "$var"; then
        ran=yes
        local -x "$@"        # exported for the pass, restored at return
        integration "$title" "$name" -q "${pytest_args[@]}" || rc=$?
    fi
    printf -v "${name}_ran" %s $ran
    printf -v "${name}_rc" %s $rc
    printf -v "${name}_secs" %s $((SECONDS - start))
}

again recvsend PGCREW_RECVSEND_TEST "integration tests again with io_uring = 0 (PGCREW_IO_URING=0)" \
    PGCREW_IO_URING=0

# The differential reference: every test not marked pgcrew_only must pass
# against PgBouncer 1.25.2 too (scripts/deps.sh builds it).
ref_bin=$root/.cache/pgbouncer-1.25.2/bin/pgbouncer
again ref PGCREW_REF_TEST "integration tests against PgBouncer 1.25.2 ($ref_bin)" \
    PGCREW_BIN="$ref_bin"

# ---- optional: packaging (test/packaging/run.sh), a few minutes ----
pkg_ran=no
pkg_rc=0
pkg_secs=0
if wanted PGCREW_PACKAGING_TEST; then
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

# ---- optional: containers (test/container/run.sh), a few minutes ----
ct_ran=no
ct_rc=0
ct_secs=0
ct_note=
if wanted PGCREW_CONTAINER_TEST; then
    step "container tests (test/container/run.sh)"
    ct_ran=yes
    ct_start=$SECONDS
    ct_out=$(mktemp /tmp/pgcrew-ct.XXXXXX)
    if scripts/deps.sh container; then
        timeout --kill-after=30 1500 bash test/container/run.sh 2>&1 | tee "$ct_out"
        ct_rc=${PIPESTATUS[0]}
        ct_note=$(grep -o 'SKIPPED (.*)' "$ct_out" | head -n1)
    else
        echo "FAILED: scripts/deps.sh container"
        ct_rc=1
    fi
    rm -f "$ct_out"
    ct_secs=$((SECONDS - ct_start))
fi
step_end

printf '\n==== summary ====\n'
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
if [ $recvsend_ran = yes ]; then
    echo "integration tests with io_uring = 0: $([ $recvsend_rc -eq 0 ] && echo ok || echo "FAILED ($recvsend_rc)") in ${recvsend_secs} s"
fi
if [ $ref_ran = yes ]; then
    echo "integration tests against PgBouncer 1.25.2: $([ $ref_rc -eq 0 ] && echo ok || echo "FAILED ($ref_rc)") in ${ref_secs} s"
fi
if [ $pkg_ran = no ]; then
    echo "packaging tests: not run (CI or PGCREW_PACKAGING_TEST=1 runs them)"
else
    echo "packaging tests: $([ $pkg_rc -eq 0 ] && echo ok || echo "FAILED ($pkg_rc)") in ${pkg_secs} s"
fi
if [ $ct_ran = no ]; then
    echo "container tests: not run (CI or PGCREW_CONTAINER_TEST=1 runs them)"
elif [ -n "$ct_note" ]; then
    echo "container tests: $ct_note in ${ct_secs} s"
else
    echo "container tests: $([ $ct_rc -eq 0 ] && echo ok || echo "FAILED ($ct_rc)") in ${ct_secs} s"
fi
echo
echo "time per step:"
for i in "${!step_names[@]}"; do
    printf '%8s  %s\n' "$(mmss "${step_secs[$i]}")" "${step_names[$i]}"
done
printf '%8s  in all\n' "$(mmss $SECONDS)"
# The slowest tests of every integration pass, setup and teardown included
# (pytest's durations, from the passes' JUnit reports).
.venv/bin/python - "$junit"/*.xml <<'EOF'
import os, sys, xml.etree.ElementTree as ET
times = {}
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        continue
    name = os.path.basename(path)[:-4]
    for tc in root.iter("testcase"):     # a failed test with an error after: two
        test = f"{tc.get('classname', '')}.py::{tc.get('name', '')}"
        times[test, name] = max(times.get((test, name), 0), float(tc.get("time") or 0))
rows = sorted(((secs, test, name) for (test, name), secs in times.items()), reverse=True)
if rows:
    print(f"\nslowest {min(20, len(rows))} of {len(rows)} integration tests run:")
    for secs, test, name in rows[:20]:
        print(f"{secs:8.1f} s  {test}  ({name})")
EOF
[ $unit_rc -eq 0 ] && [ $busy_rc -eq 0 ] && [ $fuzz_rc -eq 0 ] && [ $it_rc -eq 0 ] &&
    [ $recvsend_rc -eq 0 ] && [ $ref_rc -eq 0 ] && [ $pkg_rc -eq 0 ] && [ $ct_rc -eq 0 ]
