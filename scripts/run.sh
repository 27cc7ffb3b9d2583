#!/usr/bin/env bash
# Set up, ingest the sample knowledge base and serve on http://127.0.0.1:${PORT:-8000}
# with the embedded defaults: no servers, no API keys (development auth mode on loopback only).
set -euo pipefail
source "$(dirname "$0")/lib/env.sh"
cd "$ROOT"
ensure_venv

export DATA_DIR="${DATA_DIR:-$ROOT/data}"
export AUTH_MODE="${AUTH_MODE:-none}"
export HOST="${HOST:-127.0.0.1}"
export PORT="${PORT:-8000}"

python -m backend ingest-registry
log "starting the server on http://$HOST:$PORT; it says \"serving on\" once it answers"
exec python -m backend serve --host "$HOST" --port "$PORT"
