#!/usr/bin/env bash
# The container tests, for real under podman (as root): builds pgcrew's
# image with scripts/container.sh and a PostgreSQL 15 image the same way
# (test/container/postgres.Containerfile), then runs test/container/*.py
# with Debian's python3 (/usr/bin), pytest, psycopg and yaml: the image with its environment configuration
# and with a mounted pgbouncer.ini (test_container.py), then the
# Kubernetes manifests of deploy/kubernetes under "podman kube play"
# (test_kube.py). podman's settings come from CONTAINERS_CONF (default:
# test/container/containers.conf: runc, cgroupfs, explicit ulimits).
# Where podman cannot run containers (no podman, not root, a runtime that
# fails), it says so and exits 0: "container tests: SKIPPED (reason)".
# Otherwise pytest's own summary is the closing line.
# usage: test/container/run.sh [pytest args]
#        PGCREW_CONTAINER_BASE=docker.io/library/debian:bookworm-slim test/container/run.sh
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
export CONTAINERS_CONF=${CONTAINERS_CONF:-$here/containers.conf}

skip() {
    echo "container tests: SKIPPED ($*)"
    exit 0
}
[ "$(id -u)" = 0 ] || skip "they need root: podman runs rootful here"
command -v podman >/dev/null || skip "no podman (scripts/deps.sh container installs it)"
command -v mmdebstrap >/dev/null || [ -n "${PGCREW_CONTAINER_BASE:-}" ] ||
    skip "no mmdebstrap (scripts/deps.sh container installs it)"
/usr/bin/python3 -c 'import pytest, psycopg, yaml' 2>/dev/null ||
    skip "no python3-pytest, python3-psycopg or python3-yaml (scripts/deps.sh container installs them)"

t0=$SECONDS
base=$(scripts/container.sh --base-only) || { echo "FAILED: the base image"; exit 1; }
# Can podman run a container at all here?
if ! out=$(timeout 120 podman run --rm "${PGCREW_CONTAINER_BASE:-$base}" true 2>&1); then
    printf '%s\n' "$out" | tail -n 5 | sed 's/^/    /'
    skip "podman cannot run a container on this machine"
fi
echo "# base image: $base ($((SECONDS - t0)) s)"

t=$SECONDS
image=$(scripts/container.sh ${PGCREW_CONTAINER_BASE:+--base "$PGCREW_CONTAINER_BASE"}) ||
    { echo "FAILED: scripts/container.sh"; exit 1; }
echo "# image: $image ($((SECONDS - t)) s)"

t=$SECONDS
pgbase=$(scripts/container.sh --pg-base) || { echo "FAILED: the PostgreSQL base"; exit 1; }
pgimage=localhost/pgcrew-test-postgres:latest
timeout 600 podman build --quiet --build-arg BASE="$pgbase" -t "$pgimage" \
    -f "$here/postgres.Containerfile" "$here" >/dev/null || { echo "FAILED: the PostgreSQL image"; exit 1; }
echo "# PostgreSQL image: $pgimage ($((SECONDS - t)) s)"

# Test files or ids among the arguments run alone; otherwise all of them.
where=("$here")
for a in "$@"; do
    case $a in *.py|*::*) where=() ;; esac
done
PGCREW_IMAGE=$image PGCREW_PG_IMAGE=$pgimage timeout --kill-after=30 1200 \
    /usr/bin/python3 -m pytest -p no:cacheprovider -c /dev/null --rootdir "$here" "${where[@]}" -v "$@"
rc=$?
echo "# container tests took $((SECONDS - t0)) s"
exit $rc
