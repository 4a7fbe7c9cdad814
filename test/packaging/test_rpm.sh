#!/usr/bin/env bash
# The .rpm: rpmbuild -bb with rpm/pgcrew.spec from the "make dist" tarball,
# using Debian's rpm (--nodeps: the build dependencies are Debian packages
# here, which rpm cannot see), then its files, modes, config files and
# scriptlets as rpm -qp shows them. Nothing is installed.
# usage: test/packaging/test_rpm.sh [pgcrew-VERSION.tar.gz]
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v rpmbuild >/dev/null || bail "rpmbuild not found (apt-get install rpm)"
work=$(mktemp -d /tmp/pgcrew-rpm.XXXXXX)
trap 'rm -rf "$work"' EXIT

tarball=${1:-}
if [ -z "$tarball" ]; then
    note "make dist"
    tarball=$(make_tarball "$work/dist") || bail "make dist"
fi
tarball=$(readlink -f "$tarball")
top=$work/rpmbuild
mkdir -p "$top/SOURCES" "$top/SPECS"
cp "$tarball" "$top/SOURCES/"
base=$(basename "$tarball" .tar.gz)
tar -xzf "$tarball" -C "$top/SPECS" --strip-components=2 "$base/rpm/pgcrew.spec"
check "rpm/pgcrew.spec is in the tarball" test -f "$top/SPECS/pgcrew.spec" || exit 1

note "rpmbuild -bb"
timeout 1200 rpmbuild -bb --nodeps --define "_topdir $top" \
    --define "_smp_mflags -j2" "$top/SPECS/pgcrew.spec" >"$work/rpmbuild.log" 2>&1
check "rpmbuild -bb" test $? -eq 0 || { tail -n 40 "$work/rpmbuild.log"; exit 1; }
rpm=$(ls "$top"/RPMS/*/pgcrew-[0-9]*.rpm | head -n 1)
note "built $(basename "$rpm")"

files=$(rpm -qlp "$rpm" 2>/dev/null)
printf '%s\n' "$files" | sed 's/^/    /'
for f in /usr/sbin/pgcrew /etc/pgcrew/pgcrew.ini /etc/pgcrew/userlist.txt \
    /etc/logrotate.d/pgcrew /usr/lib/systemd/system/pgcrew.service \
    /usr/lib/systemd/system/pgcrew.socket /usr/lib/tmpfiles.d/pgcrew.conf \
    /usr/lib/sysusers.d/pgcrew.conf /var/log/pgcrew /run/pgcrew \
    /usr/share/doc/pgcrew/README.md /usr/share/doc/pgcrew/examples/pgcrew.ini; do
    check "rpm -qlp: $f" grep -qx "$f" <<<"$files"
done
check "rpm -qlp: both man pages" bash -c "
    grep -q '^/usr/share/man/man1/pgcrew.1' <<<'$files' &&
    grep -q '^/usr/share/man/man5/pgcrew.ini.5' <<<'$files'"

modes=$(rpm -qp --qf '[%{FILEMODES:perms} %{FILEUSERNAME}:%{FILEGROUPNAME} %{FILENAMES}\n]' "$rpm" 2>/dev/null)
check "pgcrew.ini: -rw-r----- root:pgcrew" grep -qx -- '-rw-r----- root:pgcrew /etc/pgcrew/pgcrew.ini' <<<"$modes"
check "userlist.txt: -rw-r----- root:pgcrew" grep -qx -- '-rw-r----- root:pgcrew /etc/pgcrew/userlist.txt' <<<"$modes"
check "/var/log/pgcrew: drwxr-s--- pgcrew:adm" grep -qx 'drwxr-s--- pgcrew:adm /var/log/pgcrew' <<<"$modes"

configs=$(rpm -qcp "$rpm" 2>/dev/null)
check "config files: pgcrew.ini, userlist.txt, logrotate" bash -c "
    grep -qx /etc/pgcrew/pgcrew.ini <<<'$configs' &&
    grep -qx /etc/pgcrew/userlist.txt <<<'$configs' &&
    grep -qx /etc/logrotate.d/pgcrew <<<'$configs'"

scripts=$(rpm -qp --scripts "$rpm" 2>/dev/null)
printf '%s\n' "$scripts" | sed 's/^/    /'
check "preinstall makes the pgcrew user and group" bash -c "
    grep -q 'useradd -r -g pgcrew' <<<'$scripts' && grep -q 'groupadd -r pgcrew' <<<'$scripts'"
check "postinstall presets pgcrew.service only and runs systemd-tmpfiles" bash -c "
    post=\$(sed -n '/^postinstall/,/^preuninstall/p' <<<'$scripts')
    grep -q 'preset' <<<\"\$post\" && grep -q 'pgcrew.service' <<<\"\$post\" &&
    ! grep -q 'pgcrew.socket' <<<\"\$post\" && grep -q 'systemd-tmpfiles --create' <<<\"\$post\""
check "preuninstall stops and disables both units" bash -c "
    grep -A4 '^preuninstall' <<<'$scripts' | grep -q 'pgcrew.service pgcrew.socket'"
check "postuninstall restarts the service on upgrade" bash -c "
    grep -A4 '^postuninstall' <<<'$scripts' | grep -q 'try-restart pgcrew.service'"

# The unit in the rpm runs the binary the rpm installs.
mkdir -p "$work/x"
cp "$rpm" "$work/x/p.rpm" && rpm2archive "$work/x/p.rpm" && tar -xzf "$work/x/p.rpm.tgz" -C "$work/x"
check "the rpm's pgcrew.service runs /usr/sbin/pgcrew /etc/pgcrew/pgcrew.ini" \
    grep -qx 'ExecStart=/usr/sbin/pgcrew /etc/pgcrew/pgcrew.ini' "$work/x/usr/lib/systemd/system/pgcrew.service"
for page in man1/pgcrew.1 man5/pgcrew.ini.5; do
    f=$work/x/usr/share/man/$page.gz
    [ -f "$f" ] || f=$work/x/usr/share/man/$page
    check "man -l ${page#*/} from the rpm: no warnings" man_check "$f"
done

summary "packaging (rpm)"
