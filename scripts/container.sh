#!/usr/bin/env bash
# Builds pgcrew's OCI image (packaging/container/Containerfile) with podman,
# from the project's own .deb:
#  1. the .deb: dpkg-buildpackage -b from a "make dist" tarball of this
#     tree (kept in .cache/container/ and reused while the tree is the
#     same), or the one given with --deb;
#  2. the base: by default a minimal Debian 12 made here with mmdebstrap
#     (its tarball kept in .cache/container/) and "podman import"ed as
#     localhost/pgcrew-base:bookworm, so no image registry is needed; or
#     any image given with --base, such as docker.io/library/debian:bookworm-slim;
#  3. podman build, tagged localhost/pgcrew:VERSION and localhost/pgcrew:latest.
# Prints the image's name and size last. Needs root (or sudo) for
# mmdebstrap and dpkg-buildpackage's tools (scripts/deps.sh container).
# usage: scripts/container.sh [--base IMAGE] [--deb FILE] [--tag NAME]
#        scripts/container.sh --base-only      (only step 2; prints its name)
#        scripts/container.sh --pg-base        (a base with PostgreSQL 15, for the tests)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
cache=$root/.cache/container
mkdir -p "$cache"

base=
deb=
tag=localhost/pgcrew
mode=image
while [ $# -gt 0 ]; do
    case $1 in
        --base) base=$2; shift 2 ;;
        --deb) deb=$2; shift 2 ;;
        --tag) tag=$2; shift 2 ;;
        --base-only) mode=base; shift ;;
        --pg-base) mode=pg; shift ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "usage: $0 [--base IMAGE] [--deb FILE] [--tag NAME] | --base-only | --pg-base" >&2; exit 2 ;;
    esac
done

say() { printf 'container: %s\n' "$*" >&2; }

# The same Debian 12 sources as the host's default: the release, its
# updates and security, so the libraries match what the .deb was built with.
mirrors=("deb http://deb.debian.org/debian bookworm main"
         "deb http://deb.debian.org/debian bookworm-updates main"
         "deb http://deb.debian.org/debian-security bookworm-security main")
# What pgcrew's .deb depends on, so it installs into the local base with
# dpkg alone (no network in the build); a debian:bookworm-slim base gets
# them from apt instead.
runtime_pkgs=adduser,libevent-2.1-7,libevent-openssl-2.1-7,libssl3,libc-ares2,libldap-2.5-0,libpam0g,liburing2
# Documentation, manuals and translations are left out of every base.
dpkg_opts=(--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
           --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
           --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/lintian/*')

# make_base NAME PACKAGES [HOOK...]: a minbase Debian 12 with PACKAGES,
# imported as NAME unless podman has it. The tarball is kept a week.
make_base() {
    local name=$1 pkgs=$2 tar
    shift 2
    if podman image exists "$name"; then
        echo "$name"
        return 0
    fi
    tar=$cache/$(echo "$name" | tr '/:' '__').tar
    if [ ! -s "$tar" ] || [ -n "$(find "$tar" -mtime +7 2>/dev/null)" ]; then
        command -v mmdebstrap >/dev/null ||
            { say "mmdebstrap is missing (scripts/deps.sh container installs it)"; return 1; }
        say "mmdebstrap: a minimal Debian 12 with $pkgs -> $tar"
        rm -f "$tar"
        mmdebstrap --quiet --format=tar --variant=minbase --include="$pkgs" "${dpkg_opts[@]}" "$@" \
            --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/*.log' \
            bookworm "$tar.part" "${mirrors[@]}" >&2
        mv "$tar.part" "$tar"
    fi
    say "podman import $tar as $name"
    podman import --quiet --change 'CMD ["/bin/bash"]' \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' "$tar" "$name" >/dev/null
    echo "$name"
}

if [ $mode = base ]; then
    make_base localhost/pgcrew-base:bookworm "$runtime_pkgs"
    exit 0
fi
if [ $mode = pg ]; then
    # The test PostgreSQL: Debian's package, no cluster made at install.
    make_base localhost/pgcrew-test-postgres-base:bookworm postgresql-15,openssl \
        --setup-hook='mkdir -p "$1/etc/postgresql-common/createcluster.d"' \
        --setup-hook='echo "create_main_cluster = false" > "$1/etc/postgresql-common/createcluster.d/no-main.conf"'
    exit 0
fi

# ---- 1. the .deb ------------------------------------------------------------
# The cache key: every tracked file's content and any change not committed.
tree_key() {
    { git ls-files -s; git diff HEAD; git ls-files -o --exclude-standard -z | xargs -0r sha256sum; } 2>/dev/null |
        sha256sum | cut -c1-16
}
if [ -z "$deb" ]; then
    key=$(tree_key)
    deb=$(ls "$cache"/deb-"$key"/pgcrew_*.deb 2>/dev/null | head -n1 || true)
    if [ -z "$deb" ]; then
        . "$root/test/packaging/lib.sh"
        work=$(mktemp -d /tmp/pgcrew-container.XXXXXX)
        trap 'rm -rf "$work"' EXIT
        say "make dist"
        tarball=$(make_tarball "$work/dist")
        mkdir -p "$work/deb"
        tar -xzf "$tarball" -C "$work/deb"
        say "dpkg-buildpackage -b (log: $work/build.log)"
        if ! (cd "$work"/deb/pgcrew-*/ && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
                dpkg-buildpackage -b -us -uc >"$work/build.log" 2>&1); then
            tail -n 40 "$work/build.log" >&2
            exit 1
        fi
        rm -rf "$cache"/deb-*
        mkdir -p "$cache/deb-$key"
        cp "$work"/deb/pgcrew_*.deb "$cache/deb-$key/"
        deb=$(ls "$cache"/deb-"$key"/pgcrew_*.deb)
    fi
fi
[ -f "$deb" ] || { say "no such .deb: $deb"; exit 1; }
say "package: $deb"

# ---- 2. the base ------------------------------------------------------------
[ -n "$base" ] || base=$(make_base localhost/pgcrew-base:bookworm "$runtime_pkgs")

# ---- 3. the image -----------------------------------------------------------
version=$(dpkg-deb -f "$deb" Version)
version=${version%-*}
ctx=$(mktemp -d /tmp/pgcrew-image.XXXXXX)
trap 'rm -rf "$ctx" ${work:+"$work"}' EXIT
cp "$deb" "$ctx/pgcrew.deb"
cp packaging/container/Containerfile "$ctx/"
say "podman build from $base"
podman build --quiet --layers=false --build-arg BASE="$base" \
    -t "$tag:$version" -t "$tag:latest" -f "$ctx/Containerfile" "$ctx" >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$tag:latest")
say "built $tag:$version ($((size / 1000000)) MB)"
echo "$tag:latest"
