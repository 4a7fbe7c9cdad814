#!/usr/bin/env bash
# The packaging tests: one "make dist" tarball, then the .deb test
# (test_deb.sh: build, lintian, install, run, purge) and the .rpm test
# (test_rpm.sh: rpmbuild -bb, rpm -qp). Needs root and the "packaging"
# profile of scripts/deps.sh. Prints "packaging: N passed, N failed" last.
# usage: test/packaging/run.sh
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

work=$(mktemp -d /tmp/pgcrew-pkg.XXXXXX)
trap 'rm -rf "$work"' EXIT

start=$SECONDS
note "make dist"
tarball=$(make_tarball "$work/dist") || bail "make dist"
ok "make dist: $(basename "$tarball") ($((SECONDS - start)) s)"

total_pass=$pkg_pass
total_fail=$pkg_fail
for t in test_deb test_rpm; do
    t0=$SECONDS
    note "---- $t.sh"
    bash "$here/$t.sh" "$tarball" | tee "$work/$t.out"
    rc=${PIPESTATUS[0]}
    p=$(grep -c '^ok - ' "$work/$t.out")
    f=$(grep -c '^not ok - ' "$work/$t.out")
    # A test that stopped early without a "not ok" still failed.
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    note "$t.sh: $((SECONDS - t0)) s"
done
note "packaging tests took $((SECONDS - start)) s"
pkg_pass=$total_pass
pkg_fail=$total_fail
summary packaging
