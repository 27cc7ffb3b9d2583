#!/usr/bin/env bash
# The whole test suite: lint, types, and pytest against real Postgres and the scripted model server.
# Installs the JavaScript clients (tests/js) and Chromium when missing.
# Starts the local Postgres (POSTGRES_TEST_DSN unset) and a Neo4j 5.26 test server (NEO4J_TEST_URI unset,
# stopped again on exit). Extra arguments go to pytest.
set -euo pipefail
source "$(dirname "$0")/lib/env.sh"
cd "$ROOT"
ensure_venv test

# In CI a missing service fails the run instead of skipping its tests.
if [ -n "${CI:-}" ]; then export REQUIRE_REAL_SERVICES=1; fi

if [ -z "${POSTGRES_TEST_DSN:-}" ]; then
  if services="$(scripts/services/postgres.sh)"; then
    eval "$services"
  elif [ "${REQUIRE_REAL_SERVICES:-0}" = "1" ]; then
    log "error: Postgres is required (REQUIRE_REAL_SERVICES=1) and could not be started"
    exit 1
  else
    log "warning: no local Postgres; Postgres tests use testcontainers or are skipped"
  fi
fi

if [ -z "${NEO4J_TEST_URI:-}" ]; then
  if services="$(scripts/services/neo4j.sh)"; then
    eval "$services"  # NEO4J_TEST_URI, NEO4J_TEST_PID, NEO4J_TEST_DIR
    trap 'scripts/services/neo4j.sh stop' EXIT
  elif [ "${REQUIRE_REAL_SERVICES:-0}" = "1" ]; then
    log "error: Neo4j is required (REQUIRE_REAL_SERVICES=1) and could not be started"
    exit 1
  else
    log "warning: no local Neo4j; Neo4j tests use testcontainers or are skipped"
  fi
fi

if services="$(scripts/services/clients.sh)"; then
  eval "$services"  # CHROMIUM_PATH; the npm clients are in tests/js/node_modules
elif [ "${REQUIRE_REAL_SERVICES:-0}" = "1" ]; then
  log "error: the JavaScript clients and Chromium are required (REQUIRE_REAL_SERVICES=1) and could not be installed"
  exit 1
else
  log "warning: no JavaScript clients or Chromium; the AG-UI client and web page tests are skipped"
fi

log "ruff"; ruff check backend tests benchmarks; ruff format --check --quiet backend tests benchmarks
log "mypy"; mypy
log "pytest"
python -m pytest "$@"
