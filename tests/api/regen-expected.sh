#!/bin/sh
# Rewrite the expected outputs of the `gitcd validate` corpus and golden
# tests from the current binary. Review `git diff` before keeping them.
# Usage: tests/api/regen-expected.sh path/to/gitcd
set -eu
bin=$(realpath "$1")
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root/tests/api/bad"
for f in *; do
        case $f in *.expected) continue ;; esac
        stem=${f%.yaml}
        "$bin" validate "$f" >"$stem.expected" 2>/dev/null || true
done
cd "$root"
for e in examples/quickstart/etcd.yaml examples/full/etcd.yaml examples/dialects/coreos.yaml \
        examples/dialects/etcd-io.yaml examples/dialects/improbable.yaml \
        examples/dialects/cozystack.yaml examples/dialects examples; do
        flat=$(echo "${e%.yaml}" | tr / -)
        { "$bin" validate "$e" 2>/tmp/gitcd-regen-err || true; sed 's/^/stderr: /' /tmp/gitcd-regen-err; } \
                >"tests/api/golden/$flat.expected"
done
rm -f /tmp/gitcd-regen-err
