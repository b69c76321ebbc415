#!/bin/sh
# The Debian package, end to end: `dpkg-buildpackage -b` from debian/ in a
# copy of the source (DEB_BUILD_OPTIONS=nocheck: gitcd is built once more,
# without its tests), `dpkg -i` on this machine, then from the installed
# paths: `gitcd --version` says the package's version, `gitcd validate`
# accepts the installed examples, the man pages are found by `man`, the
# unit passes `systemd-analyze verify` (man pages included) and is not
# enabled, postinst created the gitcd system user, and the bash and zsh
# completion scripts are where the shells look. Then `dpkg --purge`
# removes every file, /etc/default/gitcd included, and the empty state
# folder; the gitcd user stays (Debian keeps system users).
#
# Needs root, dpkg-buildpackage and debhelper: skipped (77) otherwise, and
# when a gitcd package is already installed (the test would remove it). A
# build dependency missing fails: scripts/setup installs them all. Runs under a lock, so two runs on one machine
# take turns at dpkg.
set -eu
: "${GITCD_SOURCE_ROOT:?}"
here=$(cd "$(dirname "$0")" && pwd)

skip() { echo "skipped: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root for dpkg -i"
for t in dpkg-buildpackage dh dpkg-checkbuilddeps flock; do
  command -v "$t" >/dev/null 2>&1 || skip "no $t"
done

tmp=$(mktemp -d /tmp/gitcd-deb.XXXXXX)
installed=0
cleanup() {
  if [ "$installed" = 1 ]; then dpkg --purge gitcd >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

"$here/copy-source.sh" "$GITCD_SOURCE_ROOT" "$tmp/gitcd"
cd "$tmp/gitcd"
# scripts/setup installs every build dependency: one missing is a failure
# (debian/control and scripts/setup disagree), not a reason to skip.
dpkg-checkbuilddeps -Pnocheck || { echo "FAIL: build dependencies missing (scripts/setup installs them)"; exit 1; }
version=$(dpkg-parsechangelog -SVersion)

t0=$(date +%s)
if ! DEB_BUILD_OPTIONS="nocheck parallel=${GITCD_TEST_JOBS:-2}" \
     nice dpkg-buildpackage -b -us -uc -Pnocheck >"$tmp/build.log" 2>&1; then
  tail -n 60 "$tmp/build.log"
  echo "dpkg-buildpackage failed"
  exit 1
fi
echo "dpkg-buildpackage: $(( $(date +%s) - t0 ))s"
deb=$(ls "$tmp"/gitcd_"$version"_*.deb)
dpkg-deb -c "$deb" | awk '{print $6}'
dpkg-deb -f "$deb" Version Depends Recommends
# the shell completion scripts gitcd completion made at build time
for f in ./usr/share/bash-completion/completions/gitcd ./usr/share/zsh/vendor-completions/_gitcd; do
  dpkg-deb -c "$deb" | awk '{print $6}' | grep -qx "$f" || { echo "FAIL: $f is not in the package"; exit 1; }
done
# dh_installsystemd took the unit in: the maintainer scripts hand it to
# deb-systemd-helper (which also forgets it on purge).
dpkg-deb -e "$deb" "$tmp/control"
grep -q 'deb-systemd-helper' "$tmp/control/postinst" || { echo "FAIL: postinst does not register gitcd.service"; exit 1; }
grep -q 'deb-systemd-helper purge' "$tmp/control/postrm" || { echo "FAIL: postrm does not purge gitcd.service's state"; exit 1; }

fail() { echo "FAIL: $*"; exit 1; }

mkdir -p /run/lock
exec 9>/run/lock/gitcd-packaging-test.lock
flock 9
if dpkg-query -W -f='${Status}' gitcd 2>/dev/null | grep -q 'ok installed'; then
  skip "a gitcd package is already installed on this machine"
fi

installed=1
dpkg -i "$deb" || fail "dpkg -i"

out=$(/usr/bin/gitcd --version)
[ "$out" = "gitcd $version" ] || fail "gitcd --version says '$out', the package is $version"
echo "installed: $out"
/usr/bin/gitcd validate /usr/share/doc/gitcd/examples/quickstart /usr/share/doc/gitcd/examples/dialects ||
  fail "gitcd validate on the installed examples"
for c in "" validate render plan apply run etcd log status; do
  page=gitcd${c:+-$c}
  man -w "$page" >/dev/null || fail "man cannot find $page"
done
bash -n /usr/share/bash-completion/completions/gitcd || fail "the installed bash completion does not parse"
grep -q '^complete .*-F _gitcd gitcd$' /usr/share/bash-completion/completions/gitcd ||
  fail "the installed bash completion does not complete gitcd"
head -n 1 /usr/share/zsh/vendor-completions/_gitcd | grep -qx '#compdef gitcd' ||
  fail "the installed zsh completion is not a #compdef gitcd file"
unit=/lib/systemd/system/gitcd.service
[ -f "$unit" ] || fail "no $unit"
out=$(systemd-analyze verify "$unit" 2>&1) && [ -z "$out" ] || fail "systemd-analyze verify $unit: $out"
[ ! -e /etc/systemd/system/multi-user.target.wants/gitcd.service ] || fail "the unit was enabled"
[ -f /etc/default/gitcd ] || fail "no /etc/default/gitcd"
entry=$(getent passwd gitcd) || fail "postinst did not create the gitcd user"
case "$entry" in
  gitcd:*:/var/lib/gitcd:/usr/sbin/nologin) ;;
  *) fail "gitcd user: $entry" ;;
esac
uid=$(echo "$entry" | cut -d: -f3)
[ "$uid" -lt 1000 ] || fail "gitcd is not a system user (uid $uid)"
[ "$(stat -c %U /var/lib/gitcd)" = gitcd ] || fail "/var/lib/gitcd is not gitcd's"

dpkg --purge gitcd || fail "dpkg --purge"
installed=0
if dpkg-query -W -f='${Status}' gitcd 2>/dev/null | grep -q 'installed'; then
  fail "gitcd is still installed after purge"
fi
for f in /usr/bin/gitcd "$unit" /etc/default/gitcd /usr/share/man/man1/gitcd.1.gz /var/lib/gitcd \
         /usr/share/bash-completion/completions/gitcd /usr/share/zsh/vendor-completions/_gitcd; do
  [ ! -e "$f" ] || fail "$f left after purge"
done
getent passwd gitcd >/dev/null || fail "the gitcd user was removed (it is kept on purge)"
echo "purged; the gitcd system user is kept"
