#!/bin/sh
# The man pages the build writes (man/mkman, from the --help texts): gitcd
# and every subcommand `gitcd --help` lists has one, each renders with
# `man -l` without a single groff warning, and each names every option its
# --help text names (one source, so they cannot drift). Skipped (77) when
# the build has no man pages (no help2man) or man is missing.
set -eu
: "${GITCD_BUILD_ROOT:?}" "${GITCD_BIN:?}"
mandir="$GITCD_BUILD_ROOT/man"
[ -f "$mandir/gitcd.1" ] || { echo "no man pages in this build (help2man missing)"; exit 77; }
command -v man >/dev/null 2>&1 || { echo "no man"; exit 77; }

cmds=$("$GITCD_BIN" --help | awk '/^Commands:/ { f = 1; next } f && /^  [a-z]/ { print $1; next } f { exit }')
[ -n "$cmds" ] || { echo "gitcd --help lists no commands"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for c in "" $cmds; do
  if [ -z "$c" ]; then page="$mandir/gitcd.1"; help=$("$GITCD_BIN" --help)
  else page="$mandir/gitcd-$c.1"; help=$("$GITCD_BIN" "$c" --help); fi
  if [ ! -f "$page" ]; then
    echo "no man page for 'gitcd $c'"; status=1; continue
  fi
  err=$(LC_ALL=C.UTF-8 MANWIDTH=200 man --warnings -E UTF-8 -l "$page" 2>&1 >"$tmp/page.txt") || {
    echo "man -l $page failed: $err"; status=1; continue; }
  if [ -n "$err" ]; then
    echo "man -l $page warns:"; echo "$err"; status=1
  fi
  # Every long option of the --help text appears in the rendered page.
  for opt in $(printf '%s\n' "$help" | grep -o -- '--[a-z][a-z-]*' | sort -u); do
    grep -q -- "$opt" "$tmp/page.txt" || { echo "$page does not mention $opt"; status=1; }
  done
  echo "ok: $(basename "$page")"
done
exit $status
