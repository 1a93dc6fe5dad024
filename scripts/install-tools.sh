#!/usr/bin/env bash
# Puts the external programs the test-suite drives within reach: redis-server (Debian's package), and promtool
# and the prometheus server binary (both from Debian's prometheus package, unpacked into $dest/bin without
# installing it: no systemd unit, nothing started; the tests run the server themselves, on loopback only).
# Best effort: without root or apt the dependent tests skip with a reason.
set -u
dest=${1:-.cache/tools}
mkdir -p "$dest/bin"
have() { command -v "$1" >/dev/null 2>&1 || [ -x "$dest/bin/$1" ]; }
can_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }
updated=0
apt_update() { [ $updated = 1 ] || { apt-get update -qq >/dev/null 2>&1 || true; updated=1; }; }

if ! have redis-server && can_apt; then
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null 2>&1 \
    || echo "install-tools: could not install redis-server" >&2
fi
if { ! have promtool || ! have prometheus; } && can_apt; then
  apt_update
  tmp=$(mktemp -d)
  if (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
    cp "$tmp/x/usr/bin/promtool" "$dest/bin/promtool"
    cp "$tmp/x/usr/bin/prometheus" "$dest/bin/prometheus"
  else
    echo "install-tools: could not fetch the prometheus package (promtool, prometheus)" >&2
  fi
  rm -rf "$tmp"
fi
for t in redis-server promtool prometheus; do
  if have "$t"; then echo "install-tools: $t ready"; else echo "install-tools: $t missing (its tests will skip)"; fi
done
