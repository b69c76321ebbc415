#!/usr/bin/env bash
# Regenerate tests/render/golden/<example>.yaml from every example under
# examples/ (except examples/ci/) with a built gitcd, then review the diff:
#
#   tests/render/update-golden.sh [path/to/gitcd]
#
# The gitcd binary defaults to $GITCD_BIN, else build/cli/gitcd.
# Names: examples/quickstart/etcd.yaml -> quickstart.yaml,
#        examples/dialects/coreos.yaml -> dialects-coreos.yaml.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-${GITCD_BIN:-$root/build/cli/gitcd}}
[ -x "$bin" ] || { echo "update-golden: $bin is not an executable gitcd (build it first)" >&2; exit 1; }
cd "$root"
out=tests/render/golden
mkdir -p "$out"
rm -f "$out"/*.yaml
n=0
while IFS= read -r f; do
  rel=${f#examples/}
  name=${rel%.*}
  name=${name%/etcd}
  name=${name//\//-}
  "$bin" render "$f" > "$out/$name.yaml"
  echo "$f -> $out/$name.yaml"
  n=$((n + 1))
done < <(find examples -path examples/ci -prune -o -type f \( -name '*.yaml' -o -name '*.yml' \) -print | LC_ALL=C sort)
echo "update-golden: $n golden files written; review them with git diff" >&2
