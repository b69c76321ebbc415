#!/usr/bin/env bash
# The function-length check of the style test: no function in a C file of
# the tree is over 120 lines, counted from the line that opens it (the first
# line of its signature, at column 0) to its closing } at column 0. A longer
# one is split into named steps. Generated code (protobuf-c's) is built into
# the build folder and is not in the tree.
set -u
root=${GITCD_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 1
max=120
exempt=" "

files=$(git ls-files -co --exclude-standard -- '*.c' 2>/dev/null | grep -v '^build' || true)
[ -n "$files" ] || files=$(find . -name '*.c' -not -path './build*' | sed 's|^\./||')
check=""
for f in $files; do
  [ -f "$f" ] || continue
  case "$exempt" in *" $f "*) continue ;; esac
  check="$check $f"
done
[ -n "$check" ] || exit 0

# shellcheck disable=SC2086
long=$(awk -v max="$max" '
  FNR == 1 { start = 0; sig = 0 }
  /^[A-Za-z_].*\(/ && !/;[ \t]*$/ && !/^(typedef|enum|struct [A-Za-z_]+ *\{)/ {
    sig = FNR; name = $0; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
  }
  /^\{/ { if (sig) { start = sig; fname = name } }
  /^\}/ {
    if (start) {
      n = FNR - start + 1
      if (n > max)
        printf "%s:%d: %s is %d lines (at most %d): split it into named steps\n", FILENAME, start, fname, n, max
      start = 0; sig = 0
    }
  }' $check)
if [ -n "$long" ]; then
  echo "$long"
  exit 1
fi
exit 0
