#!/usr/bin/env bash
# Every benchmark, then the report: the knowledge bases are built from ../shared/datasets by the benchmarks
# themselves (retrieval_quality caches its indexes under benchmarks/.cache/), each module of benchmarks/ runs
# in turn and writes benchmarks/results/<name>.json, then `python -m benchmarks.report` writes
# benchmarks/results/latest.json and benchmarks/REPORT.md (plots in benchmarks/report/). conversation (routing
# across four KBs) and answers (the extractive answers of the default run on CMRC, LiHua and the orchard) run right
# after retrieval_quality, over the indexes it cached; one still missing (with --quick: LiHua and CMRC, unless an
# earlier full run cached them) is built there, which takes minutes.
#
#   scripts/bench.sh [--quick] [--only name,name] [--dry-run]
#
#   --quick    each module's quick mode where it has one, graph_indexing on the embedded store only
#              (budget: 5 minutes; the full suite: 30, with Neo4j on the first 450 2wiki passages, the
#              embedded store on all 6,119 (also the whole-corpus retrieval quality), and retrieval_quality
#              on the other datasets, two at a time)
#   --only     only these modules (then the report), e.g. --only streaming_latency,concurrency
#   --dry-run  print the steps and their commands; install, start and run nothing
#
# Installs the peers' own virtualenv (.venv-peers: nano-graphrag and LightRAG, pinned in
# benchmarks/peers/requirements.txt; about 1.5 minutes, once) when podcast_indexing runs and it is missing,
# so that they are measured in the same run; if that install fails, podcast_indexing reports them as not
# installed and the suite goes on.
# Starts the local Postgres (POSTGRES_TEST_DSN unset; history_store, concurrency, ingestion_jobs) and a Neo4j 5.26
# server with the JIT fully on (NEO4J_TEST_URI unset; graph_indexing and ingestion_jobs in full mode, stopped again
# right after the last of them), as scripts/test.sh does. ingestion_jobs (chat while 2,000 passages are ingested
# through the API; throughput with 1 and 2 workers and the model extractor) runs right after graph_indexing.
# A module whose file is missing is skipped; one that fails is recorded and the next one runs. Prints the
# elapsed time of every step; exit status 1 when any step failed.
set -euo pipefail
source "$(dirname "$0")/lib/env.sh"
cd "$ROOT"

# In order; the report reads whatever they wrote. conversation and answers reuse the indexes retrieval_quality caches.
MODULES=(retrieval_quality conversation answers graph_indexing ingestion_jobs streaming_latency llm_token_parse agui_overhead concurrency history_store podcast_indexing)

QUICK=0
DRY_RUN=0
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --dry-run) DRY_RUN=1 ;;
    --only) ONLY="${2:?--only needs module names}"; shift ;;
    --only=*) ONLY="${1#--only=}" ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) log "bench.sh: unknown argument $1 (see --help)"; exit 2 ;;
  esac
  shift
done

selected=("${MODULES[@]}")
if [ -n "$ONLY" ]; then
  IFS=',' read -ra selected <<<"$ONLY"
  for name in "${selected[@]}"; do
    [[ " ${MODULES[*]} " == *" $name "* ]] || { log "bench.sh: unknown module $name (one of: ${MODULES[*]})"; exit 2; }
  done
fi

wants() { [[ " ${selected[*]} " == *" $1 "* ]]; }

# Whether a module among the rest ($2...) is selected to run after module $1.
wants_after() {
  local current="$1" seen=0 name
  shift
  for name in "${selected[@]}"; do
    [ "$seen" = 0 ] || [[ " $* " != *" $name "* ]] || return 0
    [ "$name" != "$current" ] || seen=1
  done
  return 1
}

# The arguments of one module: --quick where its argparse has it.
module_args() {
  local quick=()
  [ "$QUICK" = 1 ] && quick=(--quick)
  case "$1" in
    graph_indexing)  # Neo4j's start, build and writes alone take the quick budget: the full run measures it,
      # on the passages that hold every dev question's (the whole corpus: a separate `--store neo4j` run)
      if [ "$QUICK" = 1 ]; then echo --store embedded --quick; else echo --store both --neo4j-passages 450 --rounds 2; fi ;;
    retrieval_quality)  # two datasets at a time on the two cores: the same figures in about half the time; the
      # whole 2wiki corpus is graph_indexing's (the same agents and questions), so it is not built twice
      if [ "$QUICK" = 1 ]; then echo --quick; else echo --jobs 2 --datasets 2wiki_dev,lihua,cmrc; fi ;;
    history_store)
      if [ "$QUICK" = 1 ]; then echo --quick; else echo --rounds 2; fi ;;
    concurrency | podcast_indexing | conversation | answers) echo "${quick[@]}" ;;
    ingestion_jobs)  # quick: chat during a small ingestion only; the full run also measures the throughput cases
      if [ "$QUICK" = 1 ]; then echo --quick --parts serving --passages 200 --turns 30; fi ;;
    streaming_latency | llm_token_parse)  # fewer rounds, into a quick file that leaves the full one alone
      if [ "$QUICK" = 1 ]; then
        extra=""
        [ "$1" = streaming_latency ] && extra="--ttft-requests 20"
        echo --rounds 3 $extra --output "benchmarks/results/$1_quick.json"
      fi ;;
    *) echo ;;  # agui_overhead: about a second
  esac
}

duration() {  # seconds → "4m07s"
  printf '%dm%02ds' $(($1 / 60)) $(($1 % 60))
}

OWN_NEO4J=0  # 1 while the Neo4j server this script started runs
STEPS=()
TIMINGS=()  # "name<TAB>status<TAB>seconds" of each step run, for the suite's timing file
failures=0

# Runs one step (or prints it with --dry-run) and records "name status elapsed". With --optional first, a
# failure is reported but does not fail the suite.
run_step() {
  local optional=0 name started status=ok elapsed
  [ "$1" != --optional ] || { optional=1; shift; }
  name="$1"
  shift
  log ""
  log "== $name: $*"
  started=$(date +%s)
  if [ "$DRY_RUN" = 1 ]; then
    status="dry run"
  else
    "$@" || status="FAILED (exit $?)"
    [[ "$status" != FAILED* || "$optional" = 0 ]] || status="optional, ${status#FAILED }"
  fi
  elapsed=$(($(date +%s) - started))
  [[ "$status" != FAILED* ]] || failures=$((failures + 1))
  TIMINGS+=("$name	$status	$elapsed")
  log "== $name: $status in $(duration "$elapsed")"
  STEPS+=("$(printf '%-20s %-18s %s' "$name" "$status" "$(duration "$elapsed")")")
}

skip_step() {
  log ""
  log "== $1: skipped ($2)"
  STEPS+=("$(printf '%-20s %-18s %s' "$1" "skipped" "$2")")
}

datasets="${DATASETS_DIR:-$ROOT/../shared/datasets}"
if [ ! -d "$datasets" ]; then
  log "bench.sh: the datasets are missing ($datasets); set DATASETS_DIR"
  [ "$DRY_RUN" = 1 ] || exit 1
fi

suite_started=$(date +%s)
if [ "$DRY_RUN" = 1 ]; then
  log "dry run: ensure_venv test,bench"
else
  ensure_venv test,bench
fi

# The peers' virtualenv, never the product's .venv: their dependency trees (dspy, graspologic, litellm, ...)
# are theirs. Reinstalled only when their requirements change.
PEERS_VENV="$ROOT/.venv-peers"
peers_stamp="$PEERS_VENV/.installed-$(sha256sum benchmarks/peers/requirements.txt | cut -c1-16)"
install_peers() {
  local python
  python="$(command -v python3.11 || find_python)" || return 1
  rm -rf "$PEERS_VENV"
  "$python" -m venv "$PEERS_VENV" &&
    "$PEERS_VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r benchmarks/peers/requirements.txt &&
    touch "$peers_stamp"
}
if wants podcast_indexing && [ ! -f "$peers_stamp" ]; then
  # Optional: without the peers, podcast_indexing still measures ours and says how to install them.
  run_step --optional peers_venv install_peers
  if [ "$DRY_RUN" = 0 ] && [ ! -f "$peers_stamp" ]; then
    rm -rf "$PEERS_VENV"
    log "warning: could not install the peers' virtualenv; podcast_indexing reports them as not installed"
  fi
fi

if { wants history_store || wants concurrency || wants ingestion_jobs; } && [ -z "${POSTGRES_TEST_DSN:-}" ]; then
  if [ "$DRY_RUN" = 1 ]; then
    log "dry run: eval \"\$(scripts/services/postgres.sh)\""
  elif services="$(scripts/services/postgres.sh)"; then
    eval "$services"
  else
    log "warning: no local Postgres; history_store, concurrency and ingestion_jobs measure SQLite only"
  fi
fi

if { wants graph_indexing || wants ingestion_jobs; } && [ "$QUICK" = 0 ] && [ -z "${NEO4J_TEST_URI:-}" ]; then
  # The test script's server runs C1 only (faster start); a benchmark wants the full JIT.
  export NEO4J_TEST_JAVA_OPTS="${NEO4J_TEST_JAVA_OPTS:--XX:TieredStopAtLevel=4}"
  if [ "$DRY_RUN" = 1 ]; then
    log "dry run: NEO4J_TEST_JAVA_OPTS=$NEO4J_TEST_JAVA_OPTS eval \"\$(scripts/services/neo4j.sh)\"; stop after its last user"
  elif services="$(scripts/services/neo4j.sh)"; then
    eval "$services"  # NEO4J_TEST_URI, NEO4J_TEST_PID, NEO4J_TEST_DIR
    OWN_NEO4J=1
    trap 'scripts/services/neo4j.sh stop' EXIT
  else
    log "warning: no local Neo4j; graph_indexing and ingestion_jobs report the neo4j store as skipped"
  fi
fi

for module in "${selected[@]}"; do
  if [ ! -f "benchmarks/$module.py" ]; then
    skip_step "$module" "benchmarks/$module.py is missing"
    continue
  fi
  read -ra args <<<"$(module_args "$module")"
  run_step "$module" python -m "benchmarks.$module" "${args[@]}"
  if [ "$OWN_NEO4J" = 1 ] && ! wants_after "$module" ingestion_jobs graph_indexing; then
    # No later step uses it: an idle JVM would only take memory and CPU from the measurements that follow.
    scripts/services/neo4j.sh stop || log "warning: could not stop the benchmark's Neo4j"
    trap - EXIT
    OWN_NEO4J=0
  fi
done
# The whole suite's timing (not with --only: that is not the whole suite), read by the report's budget goal.
if [ -z "$ONLY" ] && [ "$DRY_RUN" = 0 ]; then
  suite_file="benchmarks/results/suite.json"
  [ "$QUICK" = 0 ] || suite_file="benchmarks/results/suite_quick.json"
  printf '%s\n' "${TIMINGS[@]}" | python -m benchmarks.suite_timing "$suite_file" \
    --quick "$QUICK" --started "$suite_started" --budget "$((QUICK == 1 ? 300 : 1800))"
fi
run_step report python -m benchmarks.report

total=$(($(date +%s) - suite_started))
budget=$((QUICK == 1 ? 300 : 1800))
log ""
log "step                 status             elapsed"
printf '%s\n' "${STEPS[@]}" >&2
log "total $(duration "$total") (budget $(duration "$budget")$([ "$total" -le "$budget" ] || echo ': EXCEEDED'))"
if [ "$failures" -gt 0 ]; then
  log "$failures step(s) failed; benchmarks/REPORT.md shows what the others measured"
  exit 1
fi
[ "$DRY_RUN" = 1 ] || log "report: benchmarks/REPORT.md"
