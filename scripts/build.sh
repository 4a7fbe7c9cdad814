#!/usr/bin/env bash
# Builds pgcrew out of tree: scripts/build.sh BUILD_DIR [configure options].
# Generates ./configure when it is missing; configures BUILD_DIR once (again
# if the options change) and runs make -j2 there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ $# -lt 1 ]; then
    echo "usage: $0 BUILD_DIR [configure options]" >&2
    exit 2
fi
builddir=$1
shift
src=$PWD

if [ ! -x configure ]; then
    echo "build: autoreconf"
    autoreconf -fi
fi

mkdir -p "$builddir"
cd "$builddir"
opts="$*"
if [ ! -f Makefile ] || [ "$(cat .configure-options 2>/dev/null)" != "$opts" ]; then
    echo "build: configure $opts (in $builddir)"
    "$src/configure" -q "$@"
    echo "$opts" > .configure-options
fi
make -j2
