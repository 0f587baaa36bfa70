#!/usr/bin/env bash
# Installs the Debian packages doctx needs, only those missing.  Run as root
# on a fresh Debian 12 machine (make run / make test call it first).
set -euo pipefail
# gnuplot-nox: make bench's charts (gnuplot without the X11/Qt front ends).
# libbson-dev: the document engine's representation (docs/engine.md).
# libmicrohttpd-dev: doctxd's HTTP server; curl: its contract tests.
# stunnel4: the TLS tunnel to a redis-server with --tls-port (docs/redis-tls.md,
# tests/redis/tls.sh); Debian 12's hiredis has no TLS of its own.
pkgs=(build-essential cmake pkg-config clang libclang-rt-14-dev
      libsqlite3-dev libjansson-dev libhiredis-dev libpcre2-dev libbson-dev
      redis-server
      redis-tools sqlite3 jq python3 gnuplot-nox libmicrohttpd-dev curl
      stunnel4)
# chromium: the admin page's browser test (tests/browser/admin.sh), driven
# by puppeteer-core from tests/browser's package-lock (npm ci, below).
pkgs+=(chromium)
command -v npm >/dev/null || pkgs+=(nodejs npm)
# python3-pytest, nodejs: the Python and Node clients' tests (tests/clients/).
pkgs+=(python3-pytest)
command -v node >/dev/null || pkgs+=(nodejs)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
# tests/browser's npm packages at the lock's pinned versions, once per
# lock (puppeteer-core drives Debian's chromium: no browser download).
npm_ci() {
  local dir lock stamp
  dir=$(cd "$(dirname "$0")/.." && pwd)/tests/browser
  lock=$dir/package-lock.json stamp=$dir/node_modules/.package-lock.json
  [ -f "$lock" ] || return 0
  [ -f "$stamp" ] && [ "$stamp" -nt "$lock" ] && return 0
  echo "setup: npm ci in tests/browser"
  (cd "$dir" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --ignore-scripts --no-audit \
     --no-fund --loglevel=error >/dev/null)
}
if [ ${#missing[@]} -eq 0 ]; then npm_ci; exit 0; fi
echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "setup: missing packages ${missing[*]}; run as root" >&2; exit 1; fi
else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_ci
