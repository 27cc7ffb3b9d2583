#!/usr/bin/env bash
# Make a local PostgreSQL 15 available for the tests and print how to reach it.
#
#   eval "$(scripts/services/postgres.sh)"     # or: source scripts/services/postgres.sh
#
# Does nothing when POSTGRES_TEST_DSN is already set. Otherwise starts (or creates) the Debian
# cluster 15/main, waits for it, ensures role `graphrag` (password `graphrag`) and database
# `graphrag_test`, and prints `export POSTGRES_TEST_DSN=...` on stdout. Progress goes to stderr.
# Idempotent: running it again only re-checks.

_pg_service_main() {
    set -euo pipefail

    local version=15 cluster=main role=graphrag password=graphrag database=graphrag_test

    log() { printf 'postgres.sh: %s\n' "$*" >&2; }
    die() { log "error: $*"; exit 1; }

    if [[ -n "${POSTGRES_TEST_DSN:-}" ]]; then
        log "POSTGRES_TEST_DSN is already set; leaving it alone"
        return 0
    fi

    command -v pg_lsclusters >/dev/null 2>&1 && command -v pg_ctlcluster >/dev/null 2>&1 \
        || die "PostgreSQL ${version} is not installed (need pg_lsclusters/pg_ctlcluster from postgresql-common;" \
               "e.g. apt-get install postgresql-${version}), or set POSTGRES_TEST_DSN to an existing server"
    [[ -d "/usr/lib/postgresql/${version}/bin" ]] \
        || die "PostgreSQL ${version} server binaries are missing (/usr/lib/postgresql/${version}/bin);" \
               "install postgresql-${version} or set POSTGRES_TEST_DSN"

    # Admin SQL runs as the postgres OS user (peer authentication on the local socket).
    as_postgres() {
        if [[ "$(id -un)" == postgres ]]; then
            "$@"
        elif [[ "$(id -u)" == 0 ]]; then
            runuser -u postgres -- "$@"
        elif sudo -n true 2>/dev/null; then
            sudo -n -u postgres -- "$@"
        else
            die "need root, sudo or the postgres user to administer the local cluster"
        fi
    }

    cluster_field() {  # $1: column number of `pg_lsclusters -h` for our cluster
        pg_lsclusters -h | awk -v v="$version" -v c="$cluster" -v f="$1" '$1 == v && $2 == c { print $f }'
    }

    if [[ -z "$(cluster_field 1)" ]]; then
        log "creating cluster ${version}/${cluster}"
        pg_createcluster "$version" "$cluster" >&2 || die "pg_createcluster ${version} ${cluster} failed"
    fi

    local port status
    port="$(cluster_field 3)"
    status="$(cluster_field 4)"
    if [[ "$status" != online* ]]; then
        log "starting cluster ${version}/${cluster} on port ${port}"
        pg_ctlcluster "$version" "$cluster" start >&2 \
            || die "pg_ctlcluster ${version} ${cluster} start failed (see /var/log/postgresql/postgresql-${version}-${cluster}.log)"
    fi

    local tries=0
    until pg_isready -q -h 127.0.0.1 -p "$port"; do
        tries=$((tries + 1))
        ((tries < 60)) || die "Postgres on 127.0.0.1:${port} did not accept connections within 30 s"
        sleep 0.5
    done
    log "Postgres is accepting connections on 127.0.0.1:${port}"

    # Fixed identifiers and password (no user input), so inlining them into SQL is safe.
    psql_admin() { as_postgres psql -p "$port" -X -q -t -A -v ON_ERROR_STOP=1 "$@"; }
    if [[ -z "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '${role}'")" ]]; then
        log "creating role ${role}"
        psql_admin -c "CREATE ROLE ${role} LOGIN PASSWORD '${password}'" >&2
    else
        psql_admin -c "ALTER ROLE ${role} LOGIN PASSWORD '${password}'" >&2
    fi
    if [[ -z "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '${database}'")" ]]; then
        log "creating database ${database}"
        psql_admin -c "CREATE DATABASE ${database} OWNER ${role}" >&2
    fi

    # Loopback only: TLS (on by default in Debian's cluster) would add a record per message and buy nothing.
    printf 'export POSTGRES_TEST_DSN=postgresql://%s:%s@127.0.0.1:%s/%s?sslmode=disable\n' \
        "$role" "$password" "$port" "$database"
}

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
    # Sourced: run in a subshell so `set -e`/`exit` cannot touch the caller's shell, then export.
    if _pg_service_output="$(_pg_service_main)"; then
        eval "$_pg_service_output"
        unset _pg_service_output
    else
        unset _pg_service_output
        return 1
    fi
else
    (_pg_service_main)
fi
