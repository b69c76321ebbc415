#!/usr/bin/env bash
# The layer check of the style test: a folder of the library includes only
# from its own folder and the layers below it. The layers are the block
# between the "layers" markers in docs/architecture.md, highest first, one
# layer a line (folders of one layer include nothing of each other); this
# script reads them there, so the document and the check cannot disagree.
# A folder with C files in no layer fails too, unless it is outside the
# library (tests, benchmarks, fuzz targets).
set -u
root=${GITCD_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 1
doc=docs/architecture.md
outside=" tests bench fuzz build "

layers=$(awk '/<!-- layers: begin/ {on = 1; next} /<!-- layers: end/ {on = 0} on' "$doc" |
  grep -v '^```' | sed 's/#.*//')
if [ -z "$(echo "$layers" | tr -d '[:space:]')" ]; then
  echo "$doc: no layers block (<!-- layers: begin --> ... <!-- layers: end -->)"
  exit 1
fi

declare -A rank
n=$(echo "$layers" | grep -c '[^[:space:]]')
i=$n
while read -r line; do
  [ -n "$(echo "$line" | tr -d '[:space:]')" ] || continue
  for f in $line; do
    f=${f%/}
    if [ -n "${rank[$f]:-}" ]; then
      echo "$doc: $f/ is in two layers"
      exit 1
    fi
    rank[$f]=$i
  done
  i=$((i - 1))
done <<< "$layers"

files=$(git ls-files -co --exclude-standard -- '*.c' '*.h' 2>/dev/null | grep -v '^build' || true)
[ -n "$files" ] || files=$(find . -name '*.[ch]' -not -path './build*' | sed 's|^\./||')

bad=0
declare -A seen
for file in $files; do
  case $file in */*) ;; *) continue ;; esac
  top=${file%%/*}
  case "$outside" in *" $top "*) continue ;; esac
  case $top in build*) continue ;; esac
  [ -f "$file" ] || continue
  if [ -z "${rank[$top]:-}" ]; then
    if [ -z "${seen[$top]:-}" ]; then
      echo "$top/ is in no layer: add it to the layers block of $doc"
      seen[$top]=1
      bad=1
    fi
    continue
  fi
  mine=${rank[$top]}
  while IFS=: read -r lineno inc; do
    [ -n "$lineno" ] || continue
    dep=${inc#*\"}
    dep=${dep%%/*}
    [ "$dep" != "$top" ] || continue
    theirs=${rank[$dep]:-}
    [ -n "$theirs" ] || continue
    if [ "$theirs" -ge "$mine" ]; then
      echo "$file:$lineno: $top/ includes ${inc#*\"}: $dep/ is not below $top/ in the layers of $doc"
      bad=1
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z0-9_-]*/' "$file" | sed 's/"[^"]*$//; s/:[^"]*"/:"/')
done
exit $bad
