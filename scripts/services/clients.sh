#!/usr/bin/env bash
# Make the official clients the suite drives available: the npm packages of tests/js (the AG-UI
# HttpAgent, playwright-core) and Debian's Chromium for the web page test. Prints
# `export CHROMIUM_PATH=...` on stdout; progress goes to stderr. Idempotent: a second run only re-checks.
#
#   eval "$(scripts/services/clients.sh)"
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
JS_DIR="$ROOT/tests/js"
log() { printf 'clients.sh: %s\n' "$*" >&2; }

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { log "error: Node.js and npm are required"; exit 1; }

# npm ci only when the lock file changed since the last install (npm keeps a copy of it in node_modules).
if ! cmp -s "$JS_DIR/package-lock.json" "$JS_DIR/node_modules/.package-lock.json" 2>/dev/null; then
  log "installing the JavaScript clients (npm ci in tests/js)"
  (cd "$JS_DIR" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi

chromium="${CHROMIUM_PATH:-$(command -v chromium || command -v chromium-browser || true)}"
if [ -z "$chromium" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  log "installing Debian's chromium for the web page test"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2; then
    apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >&2
  fi
  chromium="$(command -v chromium || true)"
fi
[ -n "$chromium" ] || { log "error: no Chromium (apt-get install chromium, or set CHROMIUM_PATH)"; exit 1; }
printf 'export CHROMIUM_PATH=%q\n' "$chromium"
