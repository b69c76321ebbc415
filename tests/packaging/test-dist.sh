#!/bin/sh
# The release tarball stands on its own: `meson dist` (committed files
# only, with .tarball-version), then, from the unpacked tarball alone, a
# -Werror build and the unit suite; the built gitcd reports the version
# the tarball records. Kept cheap: the unit suite only, the integration and
# e2e suites already ran against the same code. Skipped (77) outside a Git
# checkout (meson dist needs one).
set -eu
: "${GITCD_SOURCE_ROOT:?}" "${GITCD_BUILD_ROOT:?}"
[ -e "$GITCD_SOURCE_ROOT/.git" ] && command -v git >/dev/null 2>&1 ||
  { echo "skipped: not a Git checkout"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

tmp=$(mktemp -d /tmp/gitcd-dist.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# A build folder of its own, so the one under test is left alone.
meson setup "$tmp/configure" "$GITCD_SOURCE_ROOT" -Dtests=false >/dev/null
meson dist -C "$tmp/configure" --no-tests --allow-dirty --formats xztar >"$tmp/dist.log" 2>&1 ||
  { cat "$tmp/dist.log"; fail "meson dist"; }
tarball=$(ls "$tmp"/configure/meson-dist/gitcd-*.tar.xz)
echo "tarball: $(basename "$tarball")"

mkdir "$tmp/unpacked"
tar -C "$tmp/unpacked" -xJf "$tarball"
root=$(ls -d "$tmp"/unpacked/gitcd-*)
[ ! -e "$root/.git" ] || fail "the tarball holds .git"
for f in LICENSE CHANGELOG.md CONTRIBUTING.md .tarball-version debian/control packaging/gitcd.service; do
  [ -e "$root/$f" ] || fail "the tarball lacks $f"
done
version=$(cat "$root/.tarball-version")

t0=$(date +%s)
meson setup "$tmp/build" "$root" --buildtype=debugoptimized -Dwerror=true >"$tmp/setup.log" 2>&1 ||
  { cat "$tmp/setup.log"; fail "meson setup from the tarball"; }
nice ninja -C "$tmp/build" -j "${GITCD_TEST_JOBS:-2}" >"$tmp/build.log" 2>&1 ||
  { tail -n 40 "$tmp/build.log"; fail "the build from the tarball"; }
out=$("$tmp/build/cli/gitcd" --version)
[ "$out" = "gitcd $version" ] || fail "gitcd --version says '$out', the tarball is $version"
nice meson test -C "$tmp/build" --no-rebuild --suite unit --print-errorlogs \
  --num-processes "${GITCD_TEST_JOBS:-2}" >"$tmp/test.log" 2>&1 ||
  { tail -n 60 "$tmp/test.log"; fail "unit tests from the tarball"; }
grep -E '^(Ok|Fail|Skipped):' "$tmp/test.log"
echo "built and unit-tested from the tarball in $(( $(date +%s) - t0 ))s: $out"
