#!/usr/bin/env bash
# Builds the integration suite's differential reference, PgBouncer 1.25.2,
# from Debian's source package (the upstream tarball Debian ships, checked
# against its SHA-256) into .cache/pgbouncer-1.25.2/bin/pgbouncer, with
# c-ares and OpenSSL as Debian builds it. Only the binary: the man pages
# need pandoc. Idempotent: a binary that reports 1.25.2 is kept.
# usage: scripts/pgbouncer_ref.sh          (prints the binary's path)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version=1.25.2
sha256=924ad35113fd0a71c8e2dbe85b5d03445532e2b7b37a9f8a48983beea238b332
tarball=pgbouncer_$version.orig.tar.gz
url=http://deb.debian.org/debian/pool/main/p/pgbouncer/$tarball
prefix=$PWD/.cache/pgbouncer-$version
bin=$prefix/bin/pgbouncer

if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -q "PgBouncer $version"; then
    echo "$bin"
    exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/pgbouncer-ref.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "pgbouncer_ref: building PgBouncer $version from $url" >&2
curl -fsSL --retry 3 -o "$work/$tarball" "$url"
echo "$sha256  $work/$tarball" | sha256sum --status -c ||
    { echo "pgbouncer_ref: $tarball does not match its SHA-256" >&2; exit 1; }
tar -xzf "$work/$tarball" -C "$work"
(
    cd "$work/pgbouncer-$version"
    ./configure -q --prefix="$prefix" --with-cares --with-openssl >/dev/null
    make -s -j"$(nproc)" pgbouncer >/dev/null
    install -D -m 0755 pgbouncer "$bin"
)
# The suite starts it as the service user: every directory on the way must
# be readable.
chmod -R a+rX "$prefix"
"$bin" --version | grep -q "PgBouncer $version" ||
    { echo "pgbouncer_ref: the built binary is not PgBouncer $version" >&2; exit 1; }
echo "$bin"
