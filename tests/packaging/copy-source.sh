#!/bin/sh
# copy-source.sh SRC DEST: copy the source tree SRC into DEST as a release
# would see it: in a Git checkout, the files Git tracks plus new ones not
# ignored (so uncommitted work is tested too), without .git; elsewhere (an
# unpacked tarball) everything but build folders.
set -eu
src=$1
dest=$2
mkdir -p "$dest"
if [ -e "$src/.git" ] && command -v git >/dev/null 2>&1; then
  git -C "$src" ls-files -z --cached --others --exclude-standard |
    (cd "$src" && xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) |
    tar -C "$src" --null -T - -cf - | tar -C "$dest" -xf -
else
  tar -C "$src" --exclude='./build*' --exclude='./obj-*' -cf - . | tar -C "$dest" -xf -
fi
