#!/bin/sh
# The release facts agree, and the version comes from the Git tag.
#
# 1. meson.build's project version, the newest entry of CHANGELOG.md and
#    of debian/changelog, and the image tag deploy/deployment.yaml runs
#    name the same release; LICENSE is the license meson.build declares
#    (Apache-2.0).
# 2. packaging/version, in a scratch repository: a tag v1.2.3 gives 1.2.3,
#    a commit later 1.2.3-1-g<id>, uncommitted changes add -dirty; without
#    Git it reads .tarball-version, then falls back to the given version;
#    as a meson dist script it writes .tarball-version and refuses a tag
#    that is not the project's version.
set -eu
: "${GITCD_SOURCE_ROOT:?}"
src=$GITCD_SOURCE_ROOT
fail() { echo "FAIL: $*"; exit 1; }

project=$(sed -n "s/^  version: '\([^']*\)',$/\1/p" "$src/meson.build" | head -n 1)
[ -n "$project" ] || fail "no version in meson.build's project()"
changelog=$(sed -n 's/^## \[\{0,1\}\([0-9][^] ]*\).*/\1/p' "$src/CHANGELOG.md" | head -n 1)
[ "$changelog" = "$project" ] || fail "CHANGELOG.md's newest release is '$changelog', meson.build says $project"
debian=$(sed -n '1s/^gitcd (\([^)]*\)).*/\1/p' "$src/debian/changelog")
[ "${debian%%-*}" = "$project" ] || fail "debian/changelog's newest version is '$debian', meson.build says $project"
grep -q "license: 'Apache-2.0'" "$src/meson.build" || fail "meson.build does not declare Apache-2.0"
grep -q 'Apache License' "$src/LICENSE" && grep -q 'Version 2.0, January 2004' "$src/LICENSE" &&
  grep -q 'END OF TERMS AND CONDITIONS' "$src/LICENSE" || fail "LICENSE is not the Apache-2.0 text"
image=$(sed -n 's/^ *image: *\(.*\)$/\1/p' "$src/deploy/deployment.yaml")
[ "$image" = "gitcd:$project" ] || fail "deploy/deployment.yaml runs '$image', the image the build makes is gitcd:$project"
echo "release $project: meson.build, CHANGELOG.md, debian/changelog, LICENSE and deploy/ agree"

command -v git >/dev/null 2>&1 || { echo "no git: the tag checks are skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
v="$src/packaging/version"
r="$tmp/repo"
git init -q "$r"
g() { git -C "$r" -c user.name=t -c user.email=t@example.invalid "$@"; }
echo a >"$r/a"
g add a && g commit -q -m one
[ "$($v "$r" 9.9.9)" = 9.9.9 ] || fail "untagged: not the fallback"
g tag -a v1.2.3 -m "1.2.3"
[ "$($v "$r" 9.9.9)" = 1.2.3 ] || fail "tag v1.2.3 gives '$($v "$r" 9.9.9)'"
g tag -a other-1 -m other
echo b >"$r/b"
g add b && g commit -q -m two
case "$($v "$r" 9.9.9)" in 1.2.3-1-g*) ;; *) fail "a commit after v1.2.3 gives '$($v "$r" 9.9.9)'" ;; esac
echo c >>"$r/a"
case "$($v "$r" 9.9.9)" in 1.2.3-1-g*-dirty) ;; *) fail "uncommitted changes give '$($v "$r" 9.9.9)'" ;; esac

t="$tmp/tarball"
mkdir "$t"
[ "$($v "$t" 9.9.9)" = 9.9.9 ] || fail "no Git, no .tarball-version: not the fallback"
echo 4.5.6 >"$t/.tarball-version"
[ "$($v "$t" 9.9.9)" = 4.5.6 ] || fail "no Git: .tarball-version not read"

mkdir "$tmp/dist"
MESON_SOURCE_ROOT=$r MESON_DIST_ROOT=$tmp/dist "$v" --dist 1.2.3 >/dev/null
case "$(cat "$tmp/dist/.tarball-version")" in 1.2.3-1-g*) ;; *) fail "--dist wrote '$(cat "$tmp/dist/.tarball-version")'" ;; esac
g checkout -q -- a
g tag -a v2.0.0 -m "2.0.0"
if MESON_SOURCE_ROOT=$r MESON_DIST_ROOT=$tmp/dist "$v" --dist 1.2.3 2>"$tmp/err"; then
  fail "--dist accepted tag v2.0.0 for project version 1.2.3"
fi
grep -q 'tagged v2.0.0' "$tmp/err" || fail "--dist refusal does not name the tag: $(cat "$tmp/err")"
MESON_SOURCE_ROOT=$r MESON_DIST_ROOT=$tmp/dist "$v" --dist 2.0.0 >/dev/null
[ "$(cat "$tmp/dist/.tarball-version")" = 2.0.0 ] || fail "--dist at v2.0.0 wrote '$(cat "$tmp/dist/.tarball-version")'"
echo "packaging/version: tag, describe, dirty, tarball and fallback all as documented"
