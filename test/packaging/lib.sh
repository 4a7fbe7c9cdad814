# Helpers shared by the packaging tests (sourced, bash).
# Each check prints "ok - ..." or "not ok - ..." and is counted; a failed
# check shows the output of what it ran.

pkg_pass=0
pkg_fail=0
pkg_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

note() { printf '# %s\n' "$*"; }
ok() { pkg_pass=$((pkg_pass + 1)); printf 'ok - %s\n' "$*"; }
not_ok() { pkg_fail=$((pkg_fail + 1)); printf 'not ok - %s\n' "$*"; }

# check "what" command...: one check, passed when the command succeeds.
check() {
    local what=$1 out rc
    shift
    out=$("$@" 2>&1) && rc=0 || rc=$?
    if [ $rc -eq 0 ]; then
        ok "$what"
    else
        not_ok "$what (exit $rc: $*)"
        [ -z "$out" ] || printf '%s\n' "$out" | tail -n 30 | sed 's/^/    /'
    fi
    return $rc
}

# A failure that makes the rest of a test pointless.
bail() {
    not_ok "$*"
    exit 1
}

# The counts, as the closing line: "NAME: N passed, N failed".
summary() {
    printf '%s: %d passed, %d failed\n' "$1" "$pkg_pass" "$pkg_fail"
    [ "$pkg_fail" -eq 0 ]
}

# make_tarball DIR: "make dist" in DIR (configured out of tree from the
# work tree); prints the tarball's path.
make_tarball() {
    local dir=$1
    if [ ! -x "$pkg_root/configure" ]; then
        (cd "$pkg_root" && autoreconf -fi) >&2 || return 1
    fi
    mkdir -p "$dir"
    (cd "$dir" && "$pkg_root/configure" -q --disable-tests && make -s dist) >&2 || return 1
    ls "$dir"/pgcrew-*.tar.gz
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
    local p=$1
    while port_in_use "$p"; do p=$((p + 1)); done
    echo "$p"
}

# wait_for SECONDS command...: polls every 0.1 s until the command succeeds.
wait_for() {
    local n=$(($1 * 10))
    shift
    while [ $n -gt 0 ]; do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
        n=$((n - 1))
    done
    return 1
}

# man_check PAGE: renders like lintian does; any warning fails.
man_check() {
    local err
    err=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 \
        man --warnings -E UTF-8 -l -Tutf8 -Z "$1" 2>&1 >/dev/null)
    if [ -n "$err" ]; then
        printf '%s\n' "$err"
        return 1
    fi
    # It renders, with its NAME section.
    LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$1" 2>/dev/null | grep -q '^NAME'
}
