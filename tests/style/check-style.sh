#!/usr/bin/env bash
# The style test: every folder of the library includes only from the layers
# below it (check-layers.sh, the layers of docs/architecture.md), no function
# is over 120 lines (check-functions.sh), and every C file in the tree is
# formatted as .clang-format says.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=${GITCD_SOURCE_ROOT:-$(cd "$here/../.." && pwd)}
cd "$root" || exit 1
GITCD_SOURCE_ROOT=$root "$here/check-layers.sh" || exit 1
GITCD_SOURCE_ROOT=$root "$here/check-functions.sh" || exit 1
cf=$(command -v clang-format || command -v clang-format-14 || true)
if [ -z "$cf" ]; then
  echo "clang-format not installed"; exit 77
fi
files=$(git ls-files -co --exclude-standard -- '*.c' '*.h' 2>/dev/null | grep -v '^build' || true)
[ -n "$files" ] || files=$(find . -name '*.[ch]' -not -path './build*')
# One clang-format process for the whole tree (fast); on a failure, name each file.
# shellcheck disable=SC2086
"$cf" --dry-run --Werror $files >/dev/null 2>&1 && exit 0
bad=0
for f in $files; do
  [ -f "$f" ] || continue
  if ! "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (run: $cf -i $f)"
    bad=1
  fi
done
exit $bad
