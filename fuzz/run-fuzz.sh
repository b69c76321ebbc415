#!/bin/sh
# Run a libFuzzer binary over a copy of its seed corpus, so that the inputs
# it discovers land in the build directory and never in the source tree.
# A finding exits 1: libFuzzer's own code for it (77) means "skipped" to meson.
#   run-fuzz.sh FUZZER SEED_DIR WORK_DIR [libFuzzer options...]
set -eu
fuzzer=$1 seeds=$2 work=$3
shift 3
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
cp "$seeds"/* "$work/corpus/"
exec "$fuzzer" -artifact_prefix="$work/artifacts/" -error_exitcode=1 "$@" "$work/corpus"
