#!/usr/bin/env bash
# Make a local Neo4j 5.26 available for the tests and print how to reach it.
#
#   eval "$(scripts/services/neo4j.sh)"        # start; prints NEO4J_TEST_URI, NEO4J_TEST_PID, NEO4J_TEST_DIR
#   scripts/services/neo4j.sh stop              # stop the server those variables describe, wait for it
#
# Does nothing when NEO4J_TEST_URI is already set. Otherwise builds (once; the jars come from Maven
# Central into ~/.m2 on the first run) and starts scripts/services/neo4j — the embedded Neo4j DBMS with
# a Bolt connector on 127.0.0.1, no auth, no TLS, a throwaway data dir — on a free port, waits until
# Bolt answers and prints `export ...` lines on stdout. Progress and errors go to stderr.
# Needs Java 17+ and Maven. Tunables: NEO4J_TEST_HEAP (768m), NEO4J_TEST_PAGECACHE_MB (128),
# NEO4J_TEST_START_TIMEOUT_S (180), NEO4J_TEST_JAVA_OPTS (extra JVM flags), NEO4J_TEST_CACHE (build
# cache, default ~/.cache/graphrag-test-neo4j), TMPDIR (where the throwaway data dir goes).

_neo4j_service_main() {
    set -euo pipefail

    local here src_dir cache_root
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    src_dir="$here/neo4j"
    cache_root="${NEO4J_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/graphrag-test-neo4j}"

    log() { printf 'neo4j.sh: %s\n' "$*" >&2; }
    die() { log "error: $*"; exit 1; }

    # The build is keyed by the launcher's sources, so editing them rebuilds and nothing lands in the tree.
    build_dir() {
        local key
        key="$(cd "$src_dir" && find pom.xml src -type f -print0 | sort -z | xargs -0 cat | sha256sum | cut -c1-16)"
        printf '%s/%s\n' "$cache_root" "$key"
    }

    classpath_complete() {  # $1: classpath file; every jar must still be in the local repository
        local jar
        [[ -s "$1" ]] || return 1
        while IFS= read -r -d ':' jar; do
            [[ -f "$jar" ]] || return 1
        done < <(cat "$1"; printf ':')
    }

    build() {  # $1: target dir
        local target="$1" work
        if [[ -f "$target/classes/org/graphrag/testserver/TestNeo4jServer.class" ]] \
            && classpath_complete "$target/classpath.txt"; then
            return 0
        fi
        command -v mvn >/dev/null 2>&1 || die "Maven is not installed (apt-get install maven), or set NEO4J_TEST_URI"
        command -v javac >/dev/null 2>&1 || die "a JDK 17+ is not installed (apt-get install openjdk-17-jdk-headless)"
        mkdir -p "$cache_root"
        work="$(mktemp -d "$cache_root/build.XXXXXX")"
        local mvn_args=(-q -B -f "$src_dir/pom.xml" dependency:build-classpath "-Dmdep.outputFile=$work/classpath.txt")
        # Offline first: later runs must not depend on the network; the first run downloads the jars.
        if ! mvn -o "${mvn_args[@]}" >"$work/mvn.log" 2>&1; then
            log "fetching Neo4j jars from Maven Central into ~/.m2 (first run only)"
            mvn "${mvn_args[@]}" >"$work/mvn.log" 2>&1 || { tail -n 30 "$work/mvn.log" >&2; die "mvn dependency:build-classpath failed"; }
        fi
        javac -nowarn --release 17 -cp "$(cat "$work/classpath.txt")" -d "$work/classes" \
            "$src_dir"/src/main/java/org/graphrag/testserver/*.java >&2 || die "javac failed"
        rm -rf "$target"
        mv "$work" "$target" 2>/dev/null || { rm -rf "$work"; [[ -d "$target" ]] || die "cannot write $target"; }
        # Builds of older launcher sources that nobody started for a week.
        find "$cache_root" -mindepth 1 -maxdepth 1 -type d -mtime +7 ! -path "$target" -exec rm -rf {} + 2>/dev/null || true
    }

    free_port() {  # the kernel's pick; without Python a random high port (a clash is retried)
        python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
            2>/dev/null || echo $((20000 + RANDOM % 40000))
    }

    # Starts the launcher; prints its pid. Returns 2 when the port was taken (the caller picks another).
    launch() {  # $1: build dir, $2: state dir, $3: port
        local target="$1" state="$2" port="$3" pid
        : >"$state/neo4j.log"
        # setsid + redirected fds: the server outlives this script and never holds the caller's pipe open.
        # The --add-opens let the page cache and Netty use direct buffers as in a packaged Neo4j server.
        # C1 only (TieredStopAtLevel=1): starts ~30% faster and a test run is no slower.
        setsid java "-Xms256m" "-Xmx${NEO4J_TEST_HEAP:-768m}" -XX:+UseParallelGC -XX:+ExitOnOutOfMemoryError \
            -XX:TieredStopAtLevel=1 \
            --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/java.io=ALL-UNNAMED \
            --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-exports=java.base/sun.nio.ch=ALL-UNNAMED \
            -Dio.netty.tryReflectionSetAccessible=true -Dfile.encoding=UTF-8 ${NEO4J_TEST_JAVA_OPTS:-} \
            -cp "$target/classes:$(cat "$target/classpath.txt")" org.graphrag.testserver.TestNeo4jServer \
            "$state/home" "$port" "${NEO4J_TEST_PAGECACHE_MB:-128}" \
            </dev/null >>"$state/neo4j.log" 2>&1 &
        pid=$!
        printf '%s\n' "$pid" >"$state/neo4j.pid"
        local waited=0 limit=$((${NEO4J_TEST_START_TIMEOUT_S:-180} * 10))
        until grep -q '^READY ' "$state/neo4j.log"; do
            if ! kill -0 "$pid" 2>/dev/null; then
                grep -q 'Address already in use' "$state/neo4j.log" && return 2
                tail -n 40 "$state/neo4j.log" >&2
                die "Neo4j exited before Bolt answered (log: $state/neo4j.log)"
            fi
            waited=$((waited + 1))
            if ((waited > limit)); then
                kill "$pid" 2>/dev/null || true
                tail -n 40 "$state/neo4j.log" >&2
                die "Neo4j did not answer on 127.0.0.1:${port} within ${NEO4J_TEST_START_TIMEOUT_S:-180} s (log: $state/neo4j.log)"
            fi
            sleep 0.1
        done
        printf '%s\n' "$pid"
    }

    start() {
        if [[ -n "${NEO4J_TEST_URI:-}" ]]; then
            log "NEO4J_TEST_URI is already set; leaving it alone"
            return 0
        fi
        command -v java >/dev/null 2>&1 || die "Java 17+ is not installed, or set NEO4J_TEST_URI to an existing server"
        local target state port pid attempt status
        target="$(build_dir)"
        build "$target"
        touch "$target"  # in use: keeps it from being pruned
        state="$(mktemp -d "${TMPDIR:-/tmp}/graphrag-neo4j.XXXXXX")"
        for attempt in 1 2 3; do
            port="$(free_port)"
            log "starting Neo4j on 127.0.0.1:${port} (data: $state/home)"
            status=0
            pid="$(launch "$target" "$state" "$port")" || status=$?
            ((status == 2)) && { log "port ${port} was taken; retrying"; continue; }
            ((status == 0)) || exit "$status"
            log "Neo4j is answering on bolt://127.0.0.1:${port} (pid ${pid})"
            printf 'export NEO4J_TEST_URI=bolt://127.0.0.1:%s\n' "$port"
            printf 'export NEO4J_TEST_PID=%s\n' "$pid"
            printf 'export NEO4J_TEST_DIR=%s\n' "$state"
            return 0
        done
        die "no free port found after ${attempt} attempts"
    }

    # Our launcher, and not a recycled pid of some other program.
    is_our_server() {  # $1: pid
        [[ -r "/proc/$1/cmdline" ]] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q 'org.graphrag.testserver.TestNeo4jServer'
    }

    stop() {
        local pid="${NEO4J_TEST_PID:-}" state="${NEO4J_TEST_DIR:-}"
        if [[ -z "$pid" && -n "$state" && -f "$state/neo4j.pid" ]]; then
            pid="$(cat "$state/neo4j.pid")"
        fi
        if [[ -z "$pid" ]]; then
            log "no NEO4J_TEST_PID: nothing started by this run to stop"
            return 0
        fi
        if is_our_server "$pid"; then
            log "stopping Neo4j (pid ${pid})"
            kill -TERM "$pid" 2>/dev/null || true
            local waited=0
            while kill -0 "$pid" 2>/dev/null; do
                waited=$((waited + 1))
                if ((waited > 600)); then
                    log "Neo4j (pid ${pid}) did not stop within 60 s; killing it"
                    kill -KILL "$pid" 2>/dev/null || true
                    break
                fi
                sleep 0.1
            done
        fi
        # Only remove what this script created (its mktemp naming), never an arbitrary directory.
        if [[ -n "$state" && "$(basename "$state")" == graphrag-neo4j.* && -f "$state/neo4j.pid" ]]; then
            rm -rf "$state"
        fi
    }

    case "${1:-start}" in
        start) start ;;
        stop) stop ;;
        *) die "usage: neo4j.sh [start|stop]" ;;
    esac
}

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
    # Sourced: run in a subshell so `set -e`/`exit` cannot touch the caller's shell, then export.
    if _neo4j_service_output="$(_neo4j_service_main "$@")"; then
        eval "$_neo4j_service_output"
        unset _neo4j_service_output
    else
        unset _neo4j_service_output
        return 1
    fi
else
    (_neo4j_service_main "$@")
fi
