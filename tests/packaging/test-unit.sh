#!/bin/sh
# packaging/gitcd.service as systemd reads it: `systemd-analyze verify`
# accepts it without a single warning, and systemd's own review of its
# sandbox (`systemd-analyze security`) rates the exposure 2.0 or less
# ("OK"). The unit names /usr/bin/gitcd; the check points it at the built
# binary, since verify insists the program exists. Skipped (77) without
# systemd-analyze.
set -eu
command -v systemd-analyze >/dev/null 2>&1 || { echo "no systemd-analyze"; exit 77; }
: "${GITCD_SOURCE_ROOT:?}" "${GITCD_BIN:?}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unit="$tmp/gitcd.service"
sed "s#/usr/bin/gitcd#$GITCD_BIN#" "$GITCD_SOURCE_ROOT/packaging/gitcd.service" >"$unit"

if ! out=$(systemd-analyze verify --man=no "$unit" 2>&1) || [ -n "$out" ]; then
  echo "systemd-analyze verify is not silent about packaging/gitcd.service:"
  echo "$out"
  exit 1
fi
echo "verify: clean"

for want in 'Type=notify' 'User=gitcd' 'StateDirectory=gitcd' 'WatchdogSec=' \
            'ProtectSystem=strict' 'NoNewPrivileges=yes' 'PrivateTmp=yes' 'CapabilityBoundingSet=$'; do
  grep -q "^$want" "$unit" || { echo "packaging/gitcd.service lacks $want"; exit 1; }
done

review=$(systemd-analyze security --offline=yes "$unit" 2>&1) || true
level=$(printf '%s\n' "$review" | sed -n 's/.*Overall exposure level for gitcd.service: \([0-9.]*\).*/\1/p')
[ -n "$level" ] || { echo "no exposure level in:"; echo "$review"; exit 1; }
echo "security: exposure $level"
awk -v l="$level" 'BEGIN { exit !(l <= 2.0) }' || {
  printf '%s\n' "$review" | grep '✗'
  echo "exposure $level is above 2.0"
  exit 1
}
