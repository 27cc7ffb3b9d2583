"""The benchmark report: `results/latest.json` and `REPORT.md` with one PNG plot per area, from the results.

Reads the per-benchmark files that exist in the results directory, taking a full-mode file before its quick
one (retrieval quality dataset by dataset; graph indexing: `graph_indexing.json`, else the largest
`graph_indexing_<N>.json`), and assembles `latest.json`: one section per area (retrieval, serving, streaming,
concurrency, indexing, history), each naming the file, mode, date and machine of its source run, and `goals`,
each goal of the issue with the measured value and met / missed / no data. A missing or unreadable input
leaves its keys present with null and a note. Then `REPORT.md`: a header, the goals table, and per area the
tables, a plot under `report/` (matplotlib, Agg) and one sentence per plot generated from the numbers.

Nothing is measured here. The report is regenerated, never edited by hand (scripts/bench.sh runs this last).

Run:  python -m benchmarks.report [--results benchmarks/results] [--report benchmarks/REPORT.md]
                                  [--plots benchmarks/report]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmarks.quality_data import HIPPORAG_RECALL_AT_5

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
REPORT = ROOT / "benchmarks" / "REPORT.md"
PLOTS = ROOT / "benchmarks" / "report"

AGENTS = ("naive_rag_agent", "graph_agent", "hybrid_agent", "deep_research_agent", "fusion_agent")
BASELINE = "bm25"
WIKI_PASSAGES = 6119
PEER_CORPUS_NOTE = "recorded upstream on about the first 425 passages (fast-graphrag's benchmark), not on ours"
HIPPORAG_NOTE = "from the HippoRAG papers, on 1,000 questions of the same 6,119-passage corpus (not these 51)"

GOAL_PERFECT_AT_8 = 0.95
GOAL_R_AT_5 = 0.90
GOAL_LIHUA_MULTI = 0.60
GOAL_LIHUA_SINGLE = 0.90
GOAL_RATIO = 1.5
GOAL_AGUI_US = 50.0
GOAL_STREAMS = 200
GOAL_INDEX_S = 180.0
GOAL_RSS_MIB = 1536.0
GOAL_INSERT_P95_MS = 2000.0
GOAL_DELETE_P95_MS = 1000.0
GOAL_RETRIEVAL_P95_MS = {agent: 150.0 for agent in AGENTS} | {"deep_research_agent": 500.0}
GOAL_SUITE_MIN = 30
GOAL_SUITE_QUICK_MIN = 5

# latest.json key → (retrieval_quality dataset, figures)
RETRIEVAL_SETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "2wiki_dev": ("2wiki_dev", ("perfect@8", "R@2", "R@5")),
    "2wiki_full": ("2wiki_full", ("R@2", "R@5")),
    "lihua_dev": ("lihua", ("single_all@5", "multi_all@5", "null_empty_rate")),
    "cmrc_dev": ("cmrc", ("R@1", "R@5")),
}
GRAPH_QUALITY = {"perfect_at_8": "perfect@8", "recall_at_2": "R@2", "recall_at_5": "R@5"}
OURS_MODES = ("offline", "llm_0ms", "llm_200ms")
PEERS = ("nano_graphrag", "lightrag")


# -- values ------------------------------------------------------------------------------------------------------


def dig(value: Any, *path: str) -> Any:
    """`value[path[0]][path[1]]...`, or None where a level is missing or not a dict."""
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def num(value: Any) -> float | None:
    """A finite number as float; anything else (None, NaN, text, bool) as None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def fmt(value: Any, spec: str = ".2f", unit: str = "") -> str:
    """A number for the report; "–" when there is none."""
    found = num(value)
    return "–" if found is None else f"{format(found, spec)}{unit}"


def clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null (json.dumps would write NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


# -- sources -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Source:
    """One result file that was read, and what kind of run wrote it."""

    path: Path
    data: dict[str, Any]
    full: bool
    scope: str = ""

    @property
    def date(self) -> str:
        found = self.data.get("date")
        if isinstance(found, str):
            return found
        stamp = datetime.fromtimestamp(self.path.stat().st_mtime, UTC)
        return f"{stamp.isoformat(timespec='seconds')} (file time)"

    @property
    def machine(self) -> dict[str, Any]:
        found = self.data.get("machine")
        if isinstance(found, dict):
            return found
        return {"description": str(found)} if found else {}

    def describe(self) -> dict[str, Any]:
        mode = "full" if self.full else "quick"
        return {"file": rel(self.path), "mode": mode, "scope": self.scope, "date": self.date, "machine": self.machine}


@dataclass(slots=True)
class Inputs:
    """Every source found, by name, and what could not be read."""

    results: Path
    sources: dict[str, Source | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def read_source(path: Path, full: bool, scope: str, notes: list[str]) -> Source | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        notes.append(f"{rel(path)} could not be read ({error}); ignored")
        return None
    if not isinstance(data, dict):
        notes.append(f"{rel(path)} is not a JSON object; ignored")
        return None
    quick = bool(dig(data, "parameters", "quick"))
    return Source(path, data, full and not quick, scope)


def first_source(candidates: Iterable[tuple[Path, bool, str]], notes: list[str]) -> Source | None:
    """The first candidate (path, full mode, scope) that exists and reads."""
    for path, full, scope in candidates:
        found = read_source(path, full, scope, notes)
        if found is not None:
            return found
    return None


def graph_indexing_candidates(results: Path) -> list[tuple[Path, bool, str]]:
    """graph_indexing.json (all passages), then graph_indexing_<N>.json, largest N first."""
    partial = []
    for path in results.glob("graph_indexing_*.json"):
        match = re.fullmatch(r"graph_indexing_(\d+)\.json", path.name)
        if match:
            partial.append((int(match.group(1)), path))
    full = [(results / "graph_indexing.json", True, f"all {WIKI_PASSAGES:,} 2wiki passages")]
    return full + [(p, False, f"the first {n:,} of {WIKI_PASSAGES:,} 2wiki passages") for n, p in sorted(partial)[::-1]]


def load_inputs(results: Path) -> Inputs:
    inputs = Inputs(results)
    notes = inputs.notes

    def one(name: str, quick_name: str | None = None) -> Source | None:
        candidates = [(results / f"{name}.json", True, "")]
        if quick_name:
            candidates.append((results / f"{quick_name}.json", False, ""))
        return first_source(candidates, notes)

    inputs.sources = {
        "retrieval_full": read_source(results / "retrieval_quality.json", True, "", notes),
        "retrieval_quick": read_source(results / "retrieval_quality_quick.json", False, "", notes),
        "graph_indexing": first_source(graph_indexing_candidates(results), notes),
        "streaming_latency": one("streaming_latency", "streaming_latency_quick"),
        "llm_token_parse": one("llm_token_parse", "llm_token_parse_quick"),
        "agui_overhead": one("agui_overhead"),
        "concurrency": one("concurrency", "concurrency_quick"),
        "history_store": one("history_store", "history_store_quick"),
        "podcast_indexing": one("podcast_indexing", "podcast_indexing_quick"),
        "suite": read_source(results / "suite.json", True, "", notes),
        "suite_quick": read_source(results / "suite_quick.json", False, "", notes),
    }
    return inputs


def missing(benchmark: str) -> str:
    return f"no {benchmark} results in benchmarks/results: run `python -m benchmarks.{benchmark}`"


# -- retrieval -----------------------------------------------------------------------------------------------------


def quality_result(inputs: Inputs, dataset: str, whole_corpus: bool) -> tuple[Source, dict[str, Any]] | None:
    """The retrieval_quality result of `dataset`: from the full-mode file, else the quick one."""
    for key in ("retrieval_full", "retrieval_quick"):
        source = inputs.sources.get(key)
        result = dig(source.data if source else None, "results", dataset)
        if source is None or not isinstance(result, dict):
            continue
        if whole_corpus and result.get("documents") != WIKI_PASSAGES:
            continue
        return source, result
    return None


def agent_rows(result: dict[str, Any], figures: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """Per agent (and BM25): the figures and the latency p50 / p95 of one dataset."""
    names = list(dict.fromkeys([*AGENTS, *(result.get("agents") or {}), BASELINE]))
    rows = {}
    for name in names:
        row = {figure: num(dig(result, "agents", name, figure)) for figure in figures}
        row |= {"p50_ms": num(dig(result, "latency", name, "p50_ms"))}
        row |= {"p95_ms": num(dig(result, "latency", name, "p95_ms"))}
        rows[name] = row
    return rows


def empty_rows(figures: Sequence[str]) -> dict[str, dict[str, float | None]]:
    return {name: dict.fromkeys(figures) for name in (*AGENTS, BASELINE)}


def graph_quality_rows(source: Source, figures: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """2wiki figures from graph_indexing's retrieval phase (embedded store first)."""
    stores = source.data.get("stores") or {}
    store = next((s for s in ("embedded", *stores) if dig(stores, s, "retrieval")), None)
    rows = empty_rows(figures)
    for agent in AGENTS:
        quality = dig(stores, store or "", "retrieval", agent, "quality") or {}
        named = {GRAPH_QUALITY.get(k, k): num(v) for k, v in quality.items()}
        rows[agent] = {figure: named.get(figure) for figure in figures}
    return rows


def retrieval_set(inputs: Inputs, key: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(rows per agent, description of the source) of one latest.json retrieval key."""
    dataset, figures = RETRIEVAL_SETS[key]
    found = quality_result(inputs, dataset, whole_corpus=key == "2wiki_full")
    graph = inputs.sources.get("graph_indexing")
    if key == "2wiki_full" and found is not None and graph_is_newer(graph, found[1]):
        found = None
    if found is not None:
        source, result = found
        about = {"source": source.describe(), "documents": result.get("documents")}
        about |= {"questions": result.get("questions"), "index": result.get("index")}
        if (result.get("datasets_at_a_time") or 1) > 1:  # retrieval_quality --jobs: latency under shared load
            about["note"] = f"Latencies with {result['datasets_at_a_time']} datasets evaluated at a time"
        return agent_rows(result, figures), about
    if key == "2wiki_full" and graph is not None and graph.full:
        about = {"source": graph.describe(), "documents": WIKI_PASSAGES, "questions": 51}
        about["note"] = "from graph_indexing's retrieval phase on the embedded store (no BM25 row there)"
        return graph_quality_rows(graph, figures), about
    note = (
        f"no 2wiki run over all {WIKI_PASSAGES:,} passages"
        if key == "2wiki_full"
        else missing("retrieval_quality") + f" ({dataset})"
    )
    return empty_rows(figures), {"source": None, "note": note}


def graph_is_newer(graph: Source | None, quality: dict[str, Any]) -> bool:
    """The full suite measures the whole 2wiki corpus in graph_indexing (the same agents and questions, on the
    embedded store); a retrieval_quality run over it counts only when it is the newer of the two."""
    if graph is None or not graph.full:
        return False
    return when(dig(graph.data, "stores", "embedded", "measured_on")) > when(quality.get("date"))


def when(stamp: object) -> datetime:
    """An ISO date of a result file; the oldest possible for none (or one that does not parse)."""
    try:
        parsed = datetime.fromisoformat(str(stamp))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def retrieval_section(inputs: Inputs) -> dict[str, Any]:
    section: dict[str, Any] = {"datasets": {}}
    for key in RETRIEVAL_SETS:
        section[key], section["datasets"][key] = retrieval_set(inputs, key)
    dev = quality_result(inputs, "2wiki_dev", whole_corpus=False)
    full = quality_result(inputs, "2wiki_full", whole_corpus=True)
    section["peers_2wiki_dev"] = dig(dev[1] if dev else None, "peers")
    section["peers_note"] = PEER_CORPUS_NOTE
    section["hipporag_published_recall@5"] = (
        dig(full[1] if full else None, "hipporag_published_recall@5") or HIPPORAG_RECALL_AT_5
    )
    section["hipporag_note"] = HIPPORAG_NOTE
    return section


# -- serving, indexing on 2wiki -------------------------------------------------------------------------------------


def graph_stores(source: Source | None) -> dict[str, dict[str, Any]]:
    stores = dig(source.data if source else None, "stores") or {}
    return {name: result for name, result in stores.items() if isinstance(result, dict)}


def serving_rows(result: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    return {
        agent: {
            "p50_ms": num(dig(result, "retrieval", agent, "latency", "p50_ms")),
            "p95_ms": num(dig(result, "retrieval", agent, "latency", "p95_ms")),
        }
        for agent in AGENTS
    }


def serving_sections(inputs: Inputs) -> tuple[dict[str, Any], dict[str, Any]]:
    """`serving` (the embedded store, else the first measured one; with the source) and `serving_by_store`."""
    source = inputs.sources.get("graph_indexing")
    stores = graph_stores(source)
    by_store: dict[str, Any] = {name: serving_rows(result) for name, result in stores.items()}
    measured = [name for name, result in stores.items() if "retrieval" in result]
    store = "embedded" if "embedded" in measured else next(iter(measured), None)
    serving: dict[str, Any] = serving_rows(stores[store]) if store else serving_rows({})
    serving["store"] = store
    serving["source"] = source.describe() if source else None
    if source is None:
        serving["note"] = missing("graph_indexing")
    serving["stores_not_measured"] = {
        n: r.get("failed") or r.get("skipped") for n, r in stores.items() if n not in measured
    }
    return serving, by_store


def twowiki_indexing(result: dict[str, Any]) -> dict[str, Any]:
    """One store's 2wiki indexing and one-document write figures from graph_indexing."""
    index = result.get("index") or {}
    return {
        "passages": num(dig(result, "parameters", "passages")),
        "wall_s": num(index.get("wall_s")),
        "peak_rss_mib": num(dig(index, "peak_rss_mib", "benchmark_vmhwm")),
        "neo4j_jvm_peak_rss_mib": num(dig(index, "peak_rss_mib", "neo4j_jvm")),
        "documents_per_s": num(index.get("documents_per_s")),
        "calls_per_chunk": num(index.get("model_calls_per_chunk")),
        "insert_p95_ms": num(dig(result, "insert", "write_alone", "p95_ms")),
        "insert_with_refresh_p95_ms": num(dig(result, "insert", "write_plus_refresh", "p95_ms")),
        "delete_p95_ms": num(dig(result, "delete", "write_alone", "p95_ms")),
        "delete_with_refresh_p95_ms": num(dig(result, "delete", "write_plus_refresh", "p95_ms")),
        "failed": result.get("failed") or result.get("skipped"),
    }


# -- streaming, concurrency, history ---------------------------------------------------------------------------------


def streaming_section(inputs: Inputs) -> dict[str, Any]:
    source, parse = inputs.sources.get("streaming_latency"), inputs.sources.get("llm_token_parse")
    data = source.data if source else {}

    def side(name: str) -> dict[str, float | None]:
        return {
            "added_us_per_token_p50": num(dig(data, "added_latency_per_token_us", name, "p50_us_median")),
            "added_us_per_token_p99": num(dig(data, "added_latency_per_token_us", name, "p99_us_median")),
            "ttft_ms_p50": num(dig(data, "first_token_ms", f"{name}/plain", "client_ms", "p50")),
            "ttft_ms_p99": num(dig(data, "first_token_ms", f"{name}/plain", "client_ms", "p99")),
            "cpu_us_per_token": num(dig(data, "cpu_per_token", name, "cpu_us_per_token_median")),
            "tokens_per_s": num(dig(data, "cpu_per_token", name, "tokens_per_s_median")),
        }

    section: dict[str, Any] = side("ours")
    section["passthrough_ratio"] = num(dig(data, "cpu_per_token", "ratio"))
    section["passthrough_ratio_of"] = "server CPU per streamed token, ours / bare FastAPI pass-through"
    section["passthrough"] = side("passthrough")
    section["model_client_cpu_us_per_token"] = model_client(parse)
    section["agui"] = agui_overhead(inputs.sources.get("agui_overhead"))
    section["source"] = source.describe() if source else None
    section["model_client_source"] = parse.describe() if parse else None
    if source is None:
        section["note"] = missing("streaming_latency")
    return section


def agui_overhead(source: Source | None) -> dict[str, Any]:
    """CPU per AG-UI event over the internal stream: the whole run (mostly token frames) and its other events."""
    data = source.data if source else None
    return {
        "us_per_event_whole_run": num(dig(data, "results", "whole_run", "agui_overhead_us_per_event")),
        "us_per_event_structured": num(dig(data, "results", "structured_events_only", "agui_overhead_us_per_event")),
        "source": source.describe() if source else None,
    }


def model_client(source: Source | None) -> dict[str, float | None]:
    rows = dig(source.data if source else None, "results")
    if not isinstance(rows, list):
        return {}
    return {str(r.get("method")): num(r.get("cpu_us_per_token_median")) for r in rows if isinstance(r, dict)}


def concurrency_section(inputs: Inputs) -> dict[str, Any]:
    source = inputs.sources.get("concurrency")
    data = source.data if source else {}

    def side(name: str) -> dict[str, Any]:
        result = dig(data, "results", name) or {}
        hwm = num(dig(result, "rss_kib", "hwm"))
        return {
            "streams_total": result.get("streams"),
            "errors": result.get("errors"),
            "ttft_p50_ms": num(dig(result, "ttft_ms", "p50")),
            "ttft_p99_ms": num(dig(result, "ttft_ms", "p99")),
            "tokens_per_s": num(result.get("tokens_per_s")),
            "server_cpu_us_per_token": num(result.get("server_cpu_us_per_token")),
            "peak_rss_mib": round(hwm / 1024, 1) if hwm is not None else None,
        }

    section: dict[str, Any] = {"streams": dig(data, "parameters", "streams"), **side("ours")}
    section["waves"] = dig(data, "parameters", "waves")
    section["history"] = dig(data, "parameters", "history")
    section["passthrough"] = side("passthrough")
    section["ours_over_passthrough"] = dig(data, "results", "ours_over_passthrough")
    section["every_turn_stored"] = dig(data, "results", "goals", "every_turn_stored")
    section["source"] = source.describe() if source else None
    if source is None:
        section["note"] = missing("concurrency")
    return section


def history_section(inputs: Inputs) -> dict[str, Any]:
    source = inputs.sources.get("history_store")
    stores = dig(source.data if source else None, "results", "stores") or {}
    targets: dict[str, Any] = {}
    for target, by_sessions in stores.items():
        targets[target] = {
            str(n): {
                "turns_per_s": num(dig(f, "turns_per_s")),
                "start_p50_ms": num(dig(f, "start_ms", "p50")),
                "start_p95_ms": num(dig(f, "start_ms", "p95")),
                "append_p50_ms": num(dig(f, "append_ms", "p50")),
                "append_p95_ms": num(dig(f, "append_ms", "p95")),
                "cpu_us_per_turn": num(dig(f, "cpu_us_per_turn")),
            }
            for n, f in (by_sessions or {}).items()
        }
    section: dict[str, Any] = {"targets": targets}
    section["postgres_over_raw"] = dig(source.data if source else None, "results", "postgres_over_raw")
    section["source"] = source.describe() if source else None
    if source is None:
        section["note"] = missing("history_store")
    return section


# -- indexing ------------------------------------------------------------------------------------------------------


def per_document(wall: Any, documents: Any) -> float | None:
    w, d = num(wall), num(documents)
    return round(w / d, 3) if w is not None and d else None


def ours_podcast(result: dict[str, Any]) -> dict[str, Any]:
    return {
        "documents": result.get("documents"),
        "chunks": result.get("chunks"),
        "wall_s": num(result.get("wall_s")),
        "s_per_document": per_document(result.get("wall_s"), result.get("documents")),
        "minilm_s": num(dig(result, "split_s", "embedding_minilm")),
        "calls_per_chunk": num(result.get("model_calls_per_chunk")),
        "entities": result.get("entities"),
        "relations": result.get("relations"),
        "peak_rss_mib": num(result.get("peak_rss_mib")),
        "failed": result.get("failed"),
    }


def peer_phase(result: dict[str, Any], phase: str) -> dict[str, Any]:
    part = result.get(phase) or {}
    index = part.get("index") or {}
    return {
        "documents": index.get("documents"),
        "chunks": index.get("chunks"),
        "wall_s": num(index.get("wall_s")),
        "s_per_document": per_document(index.get("wall_s"), index.get("documents")),
        "calls_per_chunk": num(index.get("model_calls_per_chunk")),
        "entities": index.get("entities"),
        "relations": index.get("relations"),
        "peak_rss_mib": num(part.get("peak_rss_mib_vmhwm")),
        "query_p50_ms": num(dig(part, "queries", "latency", "p50_ms")),
        "query_p95_ms": num(dig(part, "queries", "latency", "p95_ms")),
        "failed": part.get("failed"),
    }


def peers_podcast(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(podcast phase, 2wiki phase) per peer; a peer that did not run keeps its status."""
    podcast, wiki = {}, {}
    for peer, result in (dig(data, "results", "peers") or {}).items():
        if not isinstance(result, dict) or result.get("status") != "ran":
            status = result.get("status") if isinstance(result, dict) else None
            podcast[peer] = wiki[peer] = {"status": status or "not run"}
            continue
        podcast[peer], wiki[peer] = peer_phase(result, "podcast"), peer_phase(result, "wiki")
    return podcast, wiki


def indexing_section(inputs: Inputs) -> dict[str, Any]:
    source, graph = inputs.sources.get("podcast_indexing"), inputs.sources.get("graph_indexing")
    data = source.data if source else {}
    ours = {mode: ours_podcast(r) for mode, r in (dig(data, "results", "ours") or {}).items() if isinstance(r, dict)}
    rss = [r["peak_rss_mib"] for r in ours.values() if r["peak_rss_mib"] is not None]
    podcast_peers, wiki_peers = peers_podcast(data)
    section: dict[str, Any] = {
        "podcast_offline_s": dig(ours, "offline", "wall_s"),
        "podcast_llm0_s": dig(ours, "llm_0ms", "wall_s"),
        "podcast_llm200_s": dig(ours, "llm_200ms", "wall_s"),
        "calls_per_chunk": dig(ours, "llm_0ms", "calls_per_chunk"),
        "peak_rss_mb": max(rss) if rss else None,
        "peak_rss_unit": "MiB (VmHWM, the largest of our modes)",
        "podcast_documents": dig(data, "parameters", "documents"),
        "podcast_peer_documents": dig(data, "parameters", "peer_documents"),
        "peer_passages": dig(data, "parameters", "peer_passages"),
        "podcast": {**ours, **podcast_peers},
        "peers_2wiki": wiki_peers,
        "source": source.describe() if source else None,
        "2wiki_by_store": {
            name: twowiki_indexing(r) | {"measured_on": r.get("measured_on")} for name, r in graph_stores(graph).items()
        },
        "2wiki_peers_quoted": dig(graph.data if graph else None, "peers", "indexing_800_passages"),
        "2wiki_source": graph.describe() if graph else None,
    }
    if source is None:
        section["note"] = missing("podcast_indexing")
    return section


# -- goals ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Goal:
    """One goal of the issue as measured: status is met, missed, no data or not measured."""

    goal: str
    measured: str
    value: float | None
    status: str
    source: str
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        found = {k: getattr(self, k) for k in ("goal", "measured", "value", "status", "source", "note")}
        return found | ({"measured": "–"} if self.status == "no data" else {})


def verdict(ok: bool | None) -> str:
    return "no data" if ok is None else ("met" if ok else "missed")


def best(rows: dict[str, Any], key: Callable[[dict[str, Any]], float | None]) -> tuple[str, dict[str, Any]] | None:
    """The agent (not BM25) whose row scores highest by `key`, among those with a value."""
    scored = [(key(r), a, r) for a, r in rows.items() if a != BASELINE and isinstance(r, dict) and key(r) is not None]
    if not scored:
        return None
    _, agent, row = max(scored, key=lambda t: t[0] or 0.0)
    return agent, row


def source_label(section: dict[str, Any] | None) -> str:
    described = dig(section, "source")
    if not isinstance(described, dict):
        return "–"
    return f"{Path(str(described.get('file'))).name} ({described.get('mode')}, {short_date(described.get('date'))})"


def at_least_goal(rows: dict[str, Any], figure: str, goal: float, text: str, src: str) -> Goal:
    found = best(rows, lambda r: num(r.get(figure)))
    if found is None:
        return Goal(text, "–", None, "no data", src)
    agent, row = found
    value = num(row.get(figure))
    return Goal(text, f"{agent}: {fmt(value, '.3f')}", value, verdict((value or 0.0) >= goal), src)


def lihua_goal(rows: dict[str, Any], src: str) -> Goal:
    text = f"LiHua Multi all-evidence@5 ≥ {GOAL_LIHUA_MULTI} while Single ≥ {GOAL_LIHUA_SINGLE}"

    def score(row: dict[str, Any]) -> float | None:
        multi, single = num(row.get("multi_all@5")), num(row.get("single_all@5"))
        if multi is None or single is None:
            return None
        return multi + (1.0 if single >= GOAL_LIHUA_SINGLE else 0.0)  # the best Multi among Single ≥ goal first

    found = best(rows, score)
    if found is None:
        return Goal(text, "–", None, "no data", src)
    agent, row = found
    multi, single = num(row.get("multi_all@5")) or 0.0, num(row.get("single_all@5")) or 0.0
    measured = f"{agent}: Multi {multi:.3f}, Single {single:.3f}"
    return Goal(text, measured, multi, verdict(multi >= GOAL_LIHUA_MULTI and single >= GOAL_LIHUA_SINGLE), src)


def cmrc_goal(rows: dict[str, Any], src: str) -> Goal:
    text = "CMRC R@1 and R@5 not below BM25 of the same run"
    bm25 = rows.get(BASELINE) or {}
    r1, r5 = num(bm25.get("R@1")), num(bm25.get("R@5"))
    if r1 is None or r5 is None:
        return Goal(text, "–", None, "no data", src)

    def at_least_bm25(row: dict[str, Any]) -> bool:
        return (num(row.get("R@1")) or 0.0) >= r1 and (num(row.get("R@5")) or 0.0) >= r5

    def score(row: dict[str, Any]) -> float | None:  # agents at or above BM25 first, then by R@1 + R@5
        found = num(row.get("R@1"))
        return None if found is None else found + (num(row.get("R@5")) or 0.0) + 10.0 * at_least_bm25(row)

    found = best(rows, score)
    if found is None:
        return Goal(text, "–", None, "no data", src)
    agent, row = found
    passing = sum(at_least_bm25(r) for a, r in rows.items() if a != BASELINE)
    measured = f"{agent}: {fmt(row.get('R@1'), '.3f')} / {fmt(row.get('R@5'), '.3f')} vs BM25 {r1:.3f} / {r5:.3f}"
    note = f"{passing} of {len(rows) - 1} agents at or above BM25 on both"
    return Goal(text, measured, num(row.get("R@1")), verdict(at_least_bm25(row)), src, note)


def retrieval_goals(latest: dict[str, Any]) -> list[Goal]:
    retrieval = latest["retrieval"]
    datasets = retrieval["datasets"]
    return [
        at_least_goal(
            retrieval["2wiki_dev"],
            "perfect@8",
            GOAL_PERFECT_AT_8,
            f"2wiki dev perfect@8 ≥ {GOAL_PERFECT_AT_8} (best agent)",
            source_label(datasets["2wiki_dev"]),
        ),
        at_least_goal(
            retrieval["2wiki_full"],
            "R@5",
            GOAL_R_AT_5,
            f"2wiki R@5 ≥ {GOAL_R_AT_5} (best agent, all {WIKI_PASSAGES:,} passages)",
            source_label(datasets["2wiki_full"]),
        ),
        lihua_goal(retrieval["lihua_dev"], source_label(datasets["lihua_dev"])),
        cmrc_goal(retrieval["cmrc_dev"], source_label(datasets["cmrc_dev"])),
    ]


def streaming_goals(latest: dict[str, Any]) -> list[Goal]:
    streaming, conc = latest["streaming"], latest["concurrency"]
    cpu = streaming["passthrough_ratio"]
    text = f"streaming within {GOAL_RATIO}x of the pass-through (server CPU per token)"
    ok = None if cpu is None else cpu <= GOAL_RATIO
    cpu_goal = Goal(text, f"{fmt(cpu, '.2f')}x", cpu, verdict(ok), source_label(streaming))
    return [cpu_goal, agui_goal(streaming["agui"]), *concurrency_goals(conc)]


def agui_goal(agui: dict[str, Any]) -> Goal:
    whole, structured = agui["us_per_event_whole_run"], agui["us_per_event_structured"]
    worst = None if whole is None or structured is None else max(whole, structured)
    measured = f"{fmt(whole, '.1f')} µs (whole run), {fmt(structured, '.1f')} µs (non-token events)"
    ok = None if worst is None else worst < GOAL_AGUI_US
    text = f"AG-UI overhead per event over the internal stream < {GOAL_AGUI_US:.0f} µs"
    return Goal(text, measured, worst, verdict(ok), source_label(agui))


def concurrency_goals(conc: dict[str, Any]) -> list[Goal]:
    ratios = conc.get("ours_over_passthrough") or {}
    ttft, rate = num(ratios.get("ttft_p99")), num(ratios.get("tokens_per_s"))
    ok = None if ttft is None or rate is None else ttft <= GOAL_RATIO and rate >= 1 / GOAL_RATIO
    measured = f"TTFT p99 {fmt(ttft, '.2f')}x, tokens/s {fmt(rate, '.2f')}x"
    text = f"{conc.get('streams') or GOAL_STREAMS} concurrent streams within {GOAL_RATIO}x of the pass-through"
    ratio_goal = Goal(text, measured, ttft, verdict(ok), source_label(conc))
    streams, errors = conc.get("streams"), conc.get("errors")
    ok = None if streams is None or errors is None else streams >= GOAL_STREAMS and errors == 0
    measured = f"{streams} at once, {conc.get('streams_total')} in all: {errors} errors"
    text = f"{GOAL_STREAMS} concurrent streams, 0 errors"
    return [ratio_goal, Goal(text, measured, errors, verdict(ok), source_label(conc))]


def indexing_goal(text: str, value: float | None, limit: float, whole: bool, note: str, src: str) -> Goal:
    """A goal on indexing the whole corpus: on a part of it the value is shown but the goal is not measured."""
    measured = f"{fmt(value, '.0f')} {'s' if 'min' in text else 'MiB'}"
    if value is None:
        return Goal(text, measured, None, "no data", src, note)
    return Goal(text, measured, value, verdict(value < limit) if whole else "not measured", src, note)


def store_goals(store: str, figures: dict[str, Any], whole: bool, src: str) -> list[Goal]:
    """Indexing (only on the whole corpus) and one-document write goals of one graph store."""
    part = "" if whole else f"on the first {fmt(figures['passages'], ',.0f')} passages only"
    part = "; ".join(filter(None, [part, figures["failed"] and f"store not measured: {figures['failed']}"]))
    jvm = figures["neo4j_jvm_peak_rss_mib"]
    rss_note = "; ".join(filter(None, [part, f"Neo4j JVM {jvm:.0f} MiB more" if jvm else ""]))
    goals = [
        indexing_goal(f"2wiki indexing < 3 min ({store})", figures["wall_s"], GOAL_INDEX_S, whole, part, src),
        indexing_goal(
            f"2wiki indexing < 1.5 GiB ({store})", figures["peak_rss_mib"], GOAL_RSS_MIB, whole, rss_note, src
        ),
    ]
    for kind, goal in (("insert", GOAL_INSERT_P95_MS), ("delete", GOAL_DELETE_P95_MS)):
        p95, full = figures[f"{kind}_p95_ms"], figures[f"{kind}_with_refresh_p95_ms"]
        note = f"the write alone, which the API waits for; with the community refresh (CLI) {fmt(full, '.0f')} ms"
        note = "; ".join(filter(None, [note, part]))
        text = f"{kind} one document p95 < {goal / 1000:g} s ({store})"
        goals.append(Goal(text, f"{fmt(p95, '.0f')} ms", p95, verdict(None if p95 is None else p95 < goal), src, note))
    return goals


def serving_goal(store: str, rows: dict[str, Any], scope: str, src: str) -> Goal:
    text = f"retrieval p95 < 150 ms per agent, deep_research_agent < 500 ms ({store})"
    measured = {a: num(dig(rows, a, "p95_ms")) for a in AGENTS}
    known = {a: v for a, v in measured.items() if v is not None}
    if not known:
        return Goal(text, "–", None, "no data", src)
    over = [f"{a} {v:.0f} ms" for a, v in known.items() if v >= GOAL_RETRIEVAL_P95_MS[a]]
    worst = max(known, key=lambda a: known[a] / GOAL_RETRIEVAL_P95_MS[a])
    summary = f"{len(known) - len(over)} of {len(known)} agents; " + (
        f"over: {', '.join(over)}" if over else f"slowest {worst} {known[worst]:.0f} ms"
    )
    return Goal(text, summary, known[worst], verdict(not over), src, scope)


def graph_goals(latest: dict[str, Any]) -> list[Goal]:
    by_store = latest["indexing"]["2wiki_by_store"]
    described = latest["indexing"]["2wiki_source"] or {}
    whole = described.get("mode") == "full"
    src = source_label({"source": described}) if described else "–"
    scope = "" if whole else f"on {described.get('scope', 'a part of the corpus')}"
    goals: list[Goal] = []
    dates = {store: figures.get("measured_on") for store, figures in by_store.items()}
    for store, figures in by_store.items():
        # A store re-measured alone (`--store neo4j`) carries its own date.
        store_src = (
            src if len(set(dates.values())) < 2 else source_label({"source": described | {"date": dates[store]}})
        )
        # The full suite bounds Neo4j to a part of the corpus (graph_indexing --neo4j-passages): its goals say so.
        bounded = whole and figures.get("passages") not in (None, WIKI_PASSAGES)
        store_scope = f"on the first {fmt(figures['passages'], ',.0f')} passages" if bounded else scope
        goals += store_goals(store, figures, whole and not bounded, store_src)
        goals.append(serving_goal(store, latest["serving_by_store"].get(store) or {}, store_scope, store_src))
    if not by_store:
        for text in (
            "2wiki indexing < 3 min and < 1.5 GiB",
            "insert p95 < 2 s, delete p95 < 1 s",
            "retrieval p95 < 150 ms per agent (deep_research_agent < 500 ms)",
        ):
            goals.append(Goal(text, "–", None, "no data", "–", missing("graph_indexing")))
    return goals


def suite_goals(latest: dict[str, Any]) -> list[Goal]:
    """The suite's own wall time against its budget, for the full run and for `--quick`."""
    goals = []
    for mode, minutes in (("full", GOAL_SUITE_MIN), ("quick", GOAL_SUITE_QUICK_MIN)):
        run = latest["suite"][mode]
        text = f"scripts/bench.sh{' --quick' if mode == 'quick' else ''} < {minutes} min"
        total = num(run.get("total_s"))
        if total is None:
            goals.append(
                Goal(
                    text,
                    "–",
                    None,
                    "no data",
                    "–",
                    f"no suite{'_quick' if mode == 'quick' else ''}.json: run {text.split(' <')[0]}",
                )
            )
            continue
        slowest = max(run.get("steps") or [{}], key=lambda step: step.get("seconds", 0))
        note = f"slowest step: {slowest.get('name')} {fmt(num(slowest.get('seconds')), '.0f')} s" if slowest else ""
        if run.get("reused_index_build_s"):  # honest about the cache: a first run also builds the indexes
            note = f"{note}; retrieval_quality reused cached indexes ({run['reused_index_build_s']:.0f} s to build)"
        failed = [step["name"] for step in run.get("steps") or [] if str(step.get("status")).startswith("FAILED")]
        if failed:  # a suite whose steps failed did not do all its work in that time
            note = f"failed: {', '.join(failed)}; {note}"
        measured = f"{total / 60:.1f} min"
        ok = total < minutes * 60 and not failed
        goals.append(Goal(text, measured, total, verdict(ok), source_label(run), note))
    return goals


def all_goals(latest: dict[str, Any]) -> list[Goal]:
    return retrieval_goals(latest) + streaming_goals(latest) + graph_goals(latest) + suite_goals(latest)


def suite_section(inputs: Inputs) -> dict[str, Any]:
    """scripts/bench.sh's own timing: each step's seconds and the total, full and quick."""

    def one(source: Source | None, retrieval: Source | None) -> dict[str, Any]:
        if source is None:
            return {}
        data = source.data
        return {
            "total_s": data.get("total_s"),
            "steps": data.get("steps"),
            "reused_index_build_s": reused_build_seconds(retrieval, suite_started(data)),
            "source": source.describe(),
        }

    sources = inputs.sources
    return {
        "full": one(sources.get("suite"), sources.get("retrieval_full")),
        "quick": one(sources.get("suite_quick"), sources.get("retrieval_quick")),
    }


def suite_started(suite: dict[str, Any]) -> datetime:
    """When the suite began: its file is written at the end, `total_s` after the start."""
    return when(suite.get("date")) - timedelta(seconds=num(suite.get("total_s")) or 0.0)


def reused_build_seconds(retrieval: Source | None, since: datetime) -> float | None:
    """The build time of the indexes the suite's retrieval run took from its cache (None when it built them all);
    datasets the file kept from an earlier run (dated before `since`) are not the suite's."""
    datasets = (dig(retrieval.data if retrieval else None, "results") or {}).values()
    ran = [d for d in datasets if isinstance(d, dict) and when(d.get("date")) >= since]
    reused = [num(dig(d, "index", "wall_s")) or 0.0 for d in ran if dig(d, "index", "reused")]
    return sum(reused) if reused else None


# -- latest.json ---------------------------------------------------------------------------------------------------


def assemble(inputs: Inputs, now: datetime) -> dict[str, Any]:
    serving, serving_by_store = serving_sections(inputs)
    latest: dict[str, Any] = {
        "generated_by": "python -m benchmarks.report",
        "generated_at": now.isoformat(timespec="seconds"),
        "results_dir": rel(inputs.results),
        "sources": {name: s.describe() if s else None for name, s in inputs.sources.items()},
        "notes": list(inputs.notes),
        "retrieval": retrieval_section(inputs),
        "serving": serving,
        "serving_by_store": serving_by_store,
        "streaming": streaming_section(inputs),
        "concurrency": concurrency_section(inputs),
        "indexing": indexing_section(inputs),
        "history": history_section(inputs),
        "suite": suite_section(inputs),
    }
    latest["goals"] = [goal.to_json() for goal in all_goals(latest)]
    cleaned: dict[str, Any] = clean(latest)
    return cleaned


# -- plots ---------------------------------------------------------------------------------------------------------


def figure(width: float = 8.0, height: float = 4.2) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})
    return path


def hbar_groups(fig: Figure, labels: Sequence[str], series: dict[str, Sequence[float | None]]) -> Any:
    """Horizontal grouped bars, first label on top; None values are left out. Returns the axes."""
    axes = fig.add_subplot()
    height = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        ys = [n + i * height - 0.4 + height / 2 for n in range(len(labels))]
        kept = [(y, v) for y, v in zip(ys, values, strict=True) if v is not None]
        bars = axes.barh([y for y, _ in kept], [v for _, v in kept], height=height * 0.95, label=name)
        axes.bar_label(bars, fmt="%.2f", fontsize=7, padding=2)
    axes.set_yticks(range(len(labels)), labels, fontsize=8)
    axes.invert_yaxis()
    return axes


def retrieval_plot(retrieval: dict[str, Any]) -> Figure | None:
    rows = retrieval["2wiki_dev"]
    ours = [a for a, r in rows.items() if any(num(r.get(f)) is not None for f in ("perfect@8", "R@5"))]
    if not ours:
        return None
    peers = retrieval.get("peers_2wiki_dev") or {}
    published = retrieval.get("hipporag_published_recall@5") or {}
    labels = [a if a != BASELINE else "BM25" for a in ours] + [f"peer: {p}" for p in peers]
    labels += [f"published: {name}" for name in published]
    lines = [rows[a] for a in ours] + list(peers.values()) + [{"R@5": v} for v in published.values()]
    fig = figure(8.5, 0.32 * len(labels) + 1.6)
    axes = hbar_groups(fig, labels, {f: [num(r.get(f)) for r in lines] for f in ("perfect@8", "R@5")})
    axes.axvline(
        GOAL_PERFECT_AT_8, color="C0", linestyle="--", linewidth=1, label=f"goal perfect@8 {GOAL_PERFECT_AT_8}"
    )
    axes.axvline(GOAL_R_AT_5, color="C1", linestyle=":", linewidth=1, label=f"goal R@5 {GOAL_R_AT_5}")
    axes.set_xlim(0, 1.12)
    axes.set_xlabel("share of the 51 2wiki dev questions (perfect@8) / of gold passages (R@5)")
    axes.set_title(
        "2wiki dev: ours and BM25 (same run), peers (recorded upstream, ~425 passages), published (1,000 questions)",
        fontsize=9,
    )
    fig.legend(loc="outside lower center", ncols=4, fontsize=7)
    return fig


def serving_plot(by_store: dict[str, Any]) -> Figure | None:
    stores = {
        s: r for s, r in by_store.items() if isinstance(r, dict) and any(num(dig(r, a, "p95_ms")) for a in AGENTS)
    }
    if not stores:
        return None
    fig = figure()
    axes = fig.add_subplot()
    width = 0.8 / len(stores)
    for i, (store, rows) in enumerate(stores.items()):
        xs = [n + i * width - 0.4 + width / 2 for n in range(len(AGENTS))]
        values = [num(dig(rows, a, "p95_ms")) or 0.0 for a in AGENTS]
        bars = axes.bar(xs, values, width=width * 0.95, label=f"{store} p95")
        axes.bar_label(bars, fmt="%.0f", fontsize=7)
    for n, agent in enumerate(AGENTS):
        axes.hlines(GOAL_RETRIEVAL_P95_MS[agent], n - 0.45, n + 0.45, color="black", linestyle="--", linewidth=1)
    axes.plot([], [], color="black", linestyle="--", linewidth=1, label="goal")
    axes.set_xticks(range(len(AGENTS)), [a.replace("_agent", "") for a in AGENTS], fontsize=8)
    axes.set_ylabel("retrieval latency p95 (ms)")
    axes.set_title("Retrieval latency per agent, one question at a time (51 2wiki dev questions)", fontsize=9)
    axes.legend(fontsize=8)
    return fig


def ratio_rows(latest: dict[str, Any]) -> list[tuple[str, float | None]]:
    """(label, ours / pass-through) where higher is worse; throughput inverted to a slowdown."""
    s, c = latest["streaming"], latest["concurrency"]
    p, r = s["passthrough"], c.get("ours_over_passthrough") or {}
    n = c.get("streams") or GOAL_STREAMS
    rate = num(r.get("tokens_per_s"))
    return [
        ("added latency per token p50, 1 stream", ratio(s["added_us_per_token_p50"], p["added_us_per_token_p50"])),
        ("server CPU per token, 1 stream", s["passthrough_ratio"]),
        ("first token p50, 1 stream", ratio(s["ttft_ms_p50"], p["ttft_ms_p50"])),
        (f"first token p99, {n} streams", num(r.get("ttft_p99"))),
        (f"throughput slowdown, {n} streams", round(1 / rate, 3) if rate else None),
        (f"server CPU per token, {n} streams", num(r.get("server_cpu_per_token"))),
    ]


def streaming_plot(latest: dict[str, Any]) -> Figure | None:
    rows = [(label, value) for label, value in ratio_rows(latest) if value is not None]
    if not rows:
        return None
    fig = figure(8.0, 0.4 * len(rows) + 1.4)
    axes = hbar_groups(fig, [label for label, _ in rows], {"ours / pass-through": [v for _, v in rows]})
    axes.set_xlim(0, max(GOAL_RATIO, *(v for _, v in rows)) * 1.12)
    axes.axvline(1.0, color="grey", linewidth=1)
    axes.axvline(GOAL_RATIO, color="black", linestyle="--", linewidth=1, label=f"goal {GOAL_RATIO}x")
    axes.set_xlabel("ours / bare FastAPI pass-through (1 = as fast; higher is slower)")
    axes.set_title("Streaming: our server relative to a bare FastAPI pass-through of the same model", fontsize=9)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)
    return fig


def podcast_plot(systems: dict[str, Any]) -> Figure:
    fig = figure()
    labels = [f"{'ours ' if n in OURS_MODES else ''}{n}\n{r.get('documents')} pieces" for n, r in systems.items()]
    axes = fig.add_subplot()
    bars = axes.bar(labels, [r["s_per_document"] for r in systems.values()], color="C2")
    axes.bar_label(bars, fmt="%.2f", fontsize=8)
    axes.tick_params(axis="x", labelsize=8)
    axes.set_ylabel("wall seconds per podcast piece")
    axes.set_title("Indexing podcast transcripts through the same scripted model", fontsize=9)
    return fig


def twowiki_plot(stores: dict[str, Any]) -> Figure:
    fig = figure()
    axes = fig.add_subplot()
    bars = axes.bar(list(stores), [f["wall_s"] for f in stores.values()], color="C2")
    axes.bar_label(bars, fmt="%.0f s", fontsize=8)
    axes.axhline(GOAL_INDEX_S, color="black", linestyle="--", linewidth=1, label="goal 3 min")
    axes.set_ylabel("2wiki indexing wall time (s)")
    axes.legend(fontsize=8)
    return fig


def indexing_plot(indexing: dict[str, Any]) -> Figure | None:
    """Podcast seconds per piece per system; without podcast results, 2wiki indexing time per store."""
    systems = {n: r for n, r in indexing["podcast"].items() if num(r.get("s_per_document")) is not None}
    if systems:
        return podcast_plot(systems)
    stores = {s: f for s, f in indexing["2wiki_by_store"].items() if f.get("wall_s") is not None}
    return twowiki_plot(stores) if stores else None


def history_plot(history: dict[str, Any]) -> Figure | None:
    targets = {t: rows for t, rows in history["targets"].items() if rows}
    if not targets:
        return None
    fig = figure()
    axes = fig.add_subplot()
    sessions = sorted({n for rows in targets.values() for n in rows}, key=int)
    for target, rows in targets.items():  # sessions evenly spaced (1, 8, 32): no log axis, whose labels need mathtext
        kept = [(i, rows[n]["turns_per_s"]) for i, n in enumerate(sessions) if n in rows]
        axes.plot([i for i, _ in kept], [v for _, v in kept], marker="o", label=target)
    axes.set_xticks(range(len(sessions)), sessions)
    axes.set_xlabel("concurrent chat sessions")
    axes.set_ylabel("chat turns per second (store calls of one turn)")
    axes.set_ylim(bottom=0)
    axes.set_title("Conversation stores: chat turns per second by concurrent sessions", fontsize=9)
    axes.legend(fontsize=8)
    return fig


PLOTTERS: dict[str, Callable[[dict[str, Any]], Figure | None]] = {
    "retrieval": lambda latest: retrieval_plot(latest["retrieval"]),
    "serving": lambda latest: serving_plot(latest["serving_by_store"]),
    "streaming": streaming_plot,
    "indexing": lambda latest: indexing_plot(latest["indexing"]),
    "history": lambda latest: history_plot(latest["history"]),
}


def draw_all(latest: dict[str, Any], directory: Path) -> dict[str, Path]:
    """One PNG per area that has data; stale PNGs of areas without data are removed."""
    drawn = {}
    for name, plot in PLOTTERS.items():
        fig, path = plot(latest), directory / f"{name}.png"
        if fig is not None:
            drawn[name] = save(fig, path)
        elif path.exists():
            path.unlink()
    return drawn


# -- sentences -----------------------------------------------------------------------------------------------------


def retrieval_sentence(retrieval: dict[str, Any]) -> str:
    rows = retrieval["2wiki_dev"]
    found = best(rows, lambda r: None if num(r.get("perfect@8")) is None else r["perfect@8"] + (r.get("R@5") or 0) / 10)
    if found is None:
        return "No 2wiki dev figures for our agents."
    agent, row = found
    documents = dig(retrieval, "datasets", "2wiki_dev", "documents")
    bm25 = rows.get(BASELINE) or {}
    text = (
        f"On the 51 2wiki dev questions over {fmt(documents, ',.0f')} passages our best agent, {agent}, has all gold "
        f"passages in its first 8 for {fmt(row.get('perfect@8'), '.3f')} of the questions and R@5 "
        f"{fmt(row.get('R@5'), '.3f')} (goals {GOAL_PERFECT_AT_8} and {GOAL_R_AT_5}), against "
        f"{fmt(bm25.get('perfect@8'), '.3f')} and {fmt(bm25.get('R@5'), '.3f')} for BM25"
    )
    peers = retrieval.get("peers_2wiki_dev") or {}
    top = max(peers, key=lambda p: num(peers[p].get("perfect@8")) or 0.0, default=None)
    if top:
        text += (
            f"; the best peer, {top}, recorded {fmt(peers[top].get('perfect@8'), '.3f')} and "
            f"{fmt(peers[top].get('R@5'), '.3f')} on a corpus of about 425 passages"
        )
    published = retrieval.get("hipporag_published_recall@5") or {}
    if "HippoRAG" in published:
        text += f", and HippoRAG published R@5 {fmt(published['HippoRAG'], '.3f')} on 1,000 questions"
    return text + "."


def serving_sentence(by_store: dict[str, Any], scope: str) -> str:
    parts = []
    for store, rows in by_store.items():
        known = {a: num(dig(rows, a, "p95_ms")) for a in AGENTS} if isinstance(rows, dict) else {}
        known_values = {a: v for a, v in known.items() if v is not None}
        if not known_values:
            continue
        met = sum(v < GOAL_RETRIEVAL_P95_MS[a] for a, v in known_values.items())
        slowest = max(known_values, key=lambda a: known_values[a])
        parts.append(
            f"on {store} {met} of {len(known_values)} agents are under their goal and the slowest, {slowest}, "
            f"takes {known_values[slowest]:.0f} ms at p95 (goal {GOAL_RETRIEVAL_P95_MS[slowest]:.0f} ms)"
        )
    if not parts:
        return "No retrieval latencies."
    return f"Retrieval latency per agent over the 51 dev questions on {scope}: " + "; ".join(parts) + "."


def streaming_sentence(latest: dict[str, Any]) -> str:
    s, c = latest["streaming"], latest["concurrency"]
    r = c.get("ours_over_passthrough") or {}
    parts = []
    if s["passthrough_ratio"] is not None:
        parts.append(
            f"One stream at a time our server spends {fmt(s['passthrough_ratio'], '.2f')}x the pass-through's CPU "
            f"per token and adds {fmt(s['added_us_per_token_p50'], '.1f')} µs per token at p50 (pass-through "
            f"{fmt(s['passthrough']['added_us_per_token_p50'], '.1f')} µs)"
        )
    if c.get("streams") is not None:
        parts.append(
            f"with {c['streams']} concurrent streams its first-token p99 is {fmt(r.get('ttft_p99'), '.2f')}x and its "
            f"throughput {fmt(r.get('tokens_per_s'), '.2f')}x the pass-through's, with {c.get('errors')} errors in "
            f"{c.get('streams_total')} streams"
        )
    if not parts:
        return "No streaming figures."
    return "; ".join(parts) + f" (dashed line: the {GOAL_RATIO}x goal)."


def indexing_sentence(indexing: dict[str, Any]) -> str:
    podcast = indexing["podcast"]
    ours = [
        f"{fmt(podcast[m]['s_per_document'], '.2f')} s {m}" for m in OURS_MODES if dig(podcast, m, "s_per_document")
    ]
    peers = [
        f"{fmt(podcast[p]['s_per_document'], '.2f')} s for {p} ({podcast[p].get('documents')} pieces)"
        for p in PEERS
        if dig(podcast, p, "s_per_document")
    ]
    if not ours and not peers:
        stores = [f"{s} {fmt(f.get('wall_s'), '.0f')} s" for s, f in indexing["2wiki_by_store"].items()]
        if not stores:
            return "No indexing figures."
        scope = dig(indexing, "2wiki_source", "scope")
        return f"Indexing {scope} takes " + ", ".join(stores) + f" (goal under {GOAL_INDEX_S:.0f} s on all passages)."
    text = f"Per podcast piece, ours takes {', '.join(ours)} ({indexing.get('podcast_documents')} pieces"
    text += f"; {fmt(indexing.get('calls_per_chunk'), '.2f')} model calls per chunk with the model)"
    return text + (f", against {' and '.join(peers)}." if peers else "; no peer ran.")


def history_sentence(history: dict[str, Any]) -> str:
    targets = history["targets"]
    postgres, raw, sqlite = (targets.get(t) or {} for t in ("postgres", "raw_asyncpg", "sqlite"))
    if not postgres:
        return "No Postgres history-store figures."
    top, low = max(postgres, key=int), min(postgres, key=int)

    def rate(rows: dict[str, Any], n: str) -> str:
        return fmt(dig(rows, n, "turns_per_s"), ".0f")

    text = f"At {top} concurrent sessions the Postgres store completes {rate(postgres, top)} turns/s"
    if raw:
        share = ratio(num(dig(postgres, top, "turns_per_s")), num(dig(raw, top, "turns_per_s")))
        text += f", {fmt(share, '.2f')}x the raw asyncpg loop's {rate(raw, top)}"
    if sqlite:
        text += f" (SQLite {rate(sqlite, top)})"
    return text + f"; with {low} session {rate(postgres, low)} against {rate(raw, low)} raw."


# -- REPORT.md -----------------------------------------------------------------------------------------------------


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def short_date(value: Any) -> str:
    text = str(value or "–")
    return text[:16].replace("T", " ") + (" UTC" if "T" in text and "+00:00" in text else "")


def machine_line(machine: dict[str, Any]) -> str:
    """CPU, cores and Python: what makes two runs comparable."""
    if "cpu_model" not in machine:
        return str(machine.get("description", "–"))
    return f"{machine.get('cpu_model')}, {machine.get('cpus_usable')} cores usable, Python {machine.get('python')}"


def load_line(machine: dict[str, Any]) -> str:
    start, end = machine.get("load_average_1m_at_start"), machine.get("load_average_1m_at_end")
    return "–" if start is None else f"{start}" + (f" → {end}" if end is not None else "")


def sources_table(sources: dict[str, Any], with_machine: bool) -> str:
    rows = []
    for name, s in sources.items():
        if s:
            mode = s["mode"] + (f" ({s['scope']})" if s["scope"] else "")
            row = [name, f"`{s['file']}`", mode, short_date(s["date"]), load_line(s["machine"])]
            rows.append(row + ([machine_line(s["machine"])] if with_machine else []))
    columns = ["source", "file", "mode", "date", "load 1 min"]
    return table(columns + (["machine"] if with_machine else []), rows)


def header(latest: dict[str, Any]) -> str:
    described = [s for s in latest["sources"].values() if s and s["machine"].get("cpu_model")]
    machines = Counter(machine_line(s["machine"]) for s in described)
    machine = machines.most_common(1)[0][0] if machines else "–"
    extra: dict[str, Any] = next((s["machine"] for s in described if s["machine"].get("memory_gib")), {})
    if extra:
        machine += f", {extra['memory_gib']} GiB, {extra.get('platform', '')}".rstrip(", ")
    absent = [name for name, s in latest["sources"].items() if not s]
    lines = [
        "# Benchmark report",
        "",
        f"Generated by `{latest['generated_by']}` (the last step of `scripts/bench.sh`) on "
        f"{short_date(latest['generated_at'])} from `{latest['results_dir']}`; every figure is also in "
        "`latest.json` there. Do not edit this file: rerun the benchmarks or the script.",
        "",
        f"Machine: {machine}." + (" Not every run was on it: see the table." if len(machines) > 1 else ""),
        "It is shared and has 2 cores: compare figures of one run, not across runs.",
        "",
        sources_table(latest["sources"], with_machine=len(machines) > 1) if described else "No result files found.",
    ]
    if absent:
        lines += ["", "Not found: " + ", ".join(absent) + "."]
    if latest["notes"]:
        lines += ["", *[f"- {note}" for note in latest["notes"]]]
    return "\n".join(lines)


def goals_markdown(latest: dict[str, Any]) -> str:
    rows = [[g["goal"], g["measured"], f"**{g['status']}**", g["source"], g["note"]] for g in latest["goals"]]
    return "## Goals\n\n" + table(["goal", "measured", "status", "source", "note"], rows)


def figure_block(name: str, plots: dict[str, Path], report: Path, sentence: str) -> str:
    if name not in plots:
        return f"_No plot: no data._ {sentence}"
    link = Path(os.path.relpath(plots[name], report.parent)).as_posix()
    return f"![{name}]({link})\n\n{sentence}"


def retrieval_table(rows: dict[str, Any], figures: Sequence[str]) -> str:
    body = [
        [
            name if name != BASELINE else "BM25 (bm25s)",
            *[fmt(row.get(f), ".3f") for f in figures],
            f"{fmt(row.get('p50_ms'), '.1f')} / {fmt(row.get('p95_ms'), '.1f')}",
        ]
        for name, row in rows.items()
    ]
    return table(["agent", *figures, "latency p50 / p95 ms"], body)


def dataset_line(retrieval: dict[str, Any], key: str) -> str:
    about = retrieval["datasets"][key]
    if not about.get("source"):
        return f"_{about.get('note', 'no data')}._"
    index = about.get("index") or {}
    built = f"; index built in {index['wall_s']} s" if isinstance(index, dict) and "wall_s" in index else ""
    note = f" {about['note']}." if about.get("note") else ""
    return (
        f"{fmt(about.get('documents'), ',.0f')} documents, {about.get('questions')} questions; "
        f"{source_label(about)}{built}.{note}"
    )


def retrieval_markdown(latest: dict[str, Any], plots: dict[str, Path], report: Path) -> str:
    retrieval = latest["retrieval"]
    parts = ["## Retrieval quality", "", "Zero model calls; offline extractor, local MiniLM, embedded store."]
    titles = {
        "2wiki_dev": "2wiki dev",
        "2wiki_full": "2wiki, all passages",
        "lihua_dev": "LiHua-World dev",
        "cmrc_dev": "CMRC 2018 dev",
    }
    datasets = retrieval["datasets"]
    for key, (_, figures) in RETRIEVAL_SETS.items():
        parts += ["", f"### {titles[key]}", ""]
        if key == "2wiki_full" and datasets[key] == datasets["2wiki_dev"]:
            parts.append("The 2wiki dev run above was over all passages: its R@2 and R@5 are these figures.")
            continue
        parts.append(dataset_line(retrieval, key))
        if datasets[key].get("source"):
            parts += ["", retrieval_table(retrieval[key], figures)]
    peers = retrieval.get("peers_2wiki_dev") or {}
    published = retrieval.get("hipporag_published_recall@5") or {}
    if peers or published:
        rows = [[f"peer: {p}", *[fmt(r.get(f), ".3f") for f in ("perfect@8", "R@2", "R@5")]] for p, r in peers.items()]
        rows += [[f"published: {name}", "–", "–", fmt(v, ".3f")] for name, v in published.items()]
        parts += ["", "### 2wiki peers", "", f"Peer rows: {PEER_CORPUS_NOTE}. Published rows: {HIPPORAG_NOTE}.", ""]
        parts.append(table(["system", "perfect@8", "R@2", "R@5"], rows))
    parts += ["", figure_block("retrieval", plots, report, retrieval_sentence(retrieval))]
    return "\n".join(parts)


def store_header(store: str, passages: float | None) -> str:
    """A store's column: its name, and the passages it ran on when that is not the whole corpus."""
    return store if passages in (None, WIKI_PASSAGES) else f"{store} (first {fmt(passages, ',.0f')} passages)"


def serving_markdown(latest: dict[str, Any], plots: dict[str, Path], report: Path) -> str:
    by_store, indexing = latest["serving_by_store"], latest["indexing"]
    stores = [s for s in indexing["2wiki_by_store"]]
    described = indexing["2wiki_source"] or {}
    scope = described.get("scope") or "–"
    parts = ["## Serving speed", "", f"graph_indexing on {scope}; {source_label({'source': described})}.", ""]
    if not stores:
        return "\n".join([*parts, f"_{missing('graph_indexing')}._"])
    rows = [
        [
            a,
            *[
                f"{fmt(dig(by_store, s, a, 'p50_ms'), '.0f')} / {fmt(dig(by_store, s, a, 'p95_ms'), '.0f')}"
                for s in stores
            ],
            f"< {GOAL_RETRIEVAL_P95_MS[a]:.0f}",
        ]
        for a in AGENTS
    ]
    for label, key in (
        ("insert one document (write alone)", "insert_p95_ms"),
        ("insert + community refresh", "insert_with_refresh_p95_ms"),
        ("delete one document (write alone)", "delete_p95_ms"),
        ("delete + community refresh", "delete_with_refresh_p95_ms"),
    ):
        goal = {"insert_p95_ms": "< 2000", "delete_p95_ms": "< 1000"}.get(key, "")
        rows.append([label, *[f"p95 {fmt(indexing['2wiki_by_store'][s][key], '.0f')}" for s in stores], goal])
    headers = [store_header(s, indexing["2wiki_by_store"][s].get("passages")) for s in stores]
    parts.append(table(["ms, p50 / p95", *headers, "goal p95"], rows))
    for store, why in (latest["serving"].get("stores_not_measured") or {}).items():
        parts += ["", f"{store}: not measured ({why})."]
    sentence = serving_sentence({header: by_store.get(s) for s, header in zip(stores, headers, strict=True)}, scope)
    return "\n".join([*parts, "", figure_block("serving", plots, report, sentence)])


def pair(a: dict[str, Any], b: dict[str, Any], key1: str, key2: str, spec: str) -> tuple[str, str]:
    """`a`'s and `b`'s "x / y" cells of two figures."""
    return f"{fmt(a[key1], spec)} / {fmt(a[key2], spec)}", f"{fmt(b[key1], spec)} / {fmt(b[key2], spec)}"


def single_stream_rows(s: dict[str, Any]) -> list[list[str]]:
    p = s["passthrough"]
    return [
        [
            "added latency per token p50 / p99 (µs)",
            *pair(s, p, "added_us_per_token_p50", "added_us_per_token_p99", ".1f"),
        ],
        ["server CPU per token (µs), 1 stream", fmt(s["cpu_us_per_token"], ".1f"), fmt(p["cpu_us_per_token"], ".1f")],
        ["tokens/s per stream", fmt(s["tokens_per_s"], ",.0f"), fmt(p["tokens_per_s"], ",.0f")],
        ["first token p50 / p99 (ms), 1 stream", *pair(s, p, "ttft_ms_p50", "ttft_ms_p99", ".1f")],
    ]


def concurrent_rows(c: dict[str, Any]) -> list[list[str]]:
    p, n = c["passthrough"], c.get("streams") or "–"
    cpu = "server_cpu_us_per_token"
    return [
        [f"errors, {n} concurrent streams × {c.get('waves') or '–'} waves", str(c["errors"]), str(p["errors"])],
        [f"first token p50 / p99 (ms), {n} streams", *pair(c, p, "ttft_p50_ms", "ttft_p99_ms", ",.0f")],
        [f"tokens/s in all, {n} streams", fmt(c["tokens_per_s"], ",.0f"), fmt(p["tokens_per_s"], ",.0f")],
        [f"server CPU per token (µs), {n} streams", fmt(c[cpu], ".0f"), fmt(p[cpu], ".0f")],
        ["server peak RSS (MiB)", fmt(c["peak_rss_mib"], ".0f"), fmt(p["peak_rss_mib"], ".0f")],
    ]


def streaming_markdown(latest: dict[str, Any], plots: dict[str, Path], report: Path) -> str:
    s, c = latest["streaming"], latest["concurrency"]
    parts = [
        "## Streaming and concurrency",
        "",
        "General chat (no retrieval) with a 0 ms scripted model, our server next to a bare FastAPI pass-through "
        f"of the same model in the same run. Single stream: {source_label(s)}; concurrent: {source_label(c)}, "
        f"history in {c.get('history') or '–'}.",
        "",
        table(["", "ours", "pass-through"], single_stream_rows(s) + concurrent_rows(c)),
    ]
    client = s.get("model_client_cpu_us_per_token") or {}
    if client:
        cells = ", ".join(f"{m} {fmt(v, '.1f')}" for m, v in client.items())
        label = source_label({"source": s["model_client_source"]})
        parts += ["", f"Model client CPU per streamed token (µs, {label}): {cells}."]
    agui = s.get("agui") or {}
    if agui.get("source"):
        parts += [
            "",
            f"AG-UI translation CPU per event ({source_label(agui)}): "
            f"{fmt(agui['us_per_event_whole_run'], '.1f')} µs over a whole run (token frames dominate), "
            f"{fmt(agui['us_per_event_structured'], '.1f')} µs for the other events (steps, tool calls, citations).",
        ]
    return "\n".join([*parts, "", figure_block("streaming", plots, report, streaming_sentence(latest))])


def podcast_rows(indexing: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, r in indexing["podcast"].items():
        if "status" in r:
            rows.append([name, r["status"], *["–"] * 8])
            continue
        label = f"ours {name}" if name in OURS_MODES else name
        rows.append(
            [
                label + (" (failed)" if r.get("failed") else ""),
                str(r.get("documents")),
                str(r.get("chunks")),
                fmt(r.get("wall_s"), ".1f"),
                fmt(r.get("s_per_document"), ".2f"),
                fmt(r.get("minilm_s"), ".1f"),
                fmt(r.get("calls_per_chunk"), ".2f"),
                str(r.get("entities")),
                str(r.get("relations")),
                fmt(r.get("peak_rss_mib"), ".0f"),
            ]
        )
    return rows


def twowiki_rows(indexing: dict[str, Any]) -> list[list[str]]:
    rows = [
        [
            f"ours, {store}",
            fmt(f.get("passages"), ",.0f"),
            fmt(f.get("wall_s"), ".1f"),
            fmt(f.get("peak_rss_mib"), ".0f"),
            fmt(f.get("calls_per_chunk"), ".2f"),
            "–",
        ]
        for store, f in indexing["2wiki_by_store"].items()
    ]
    for peer, f in indexing["peers_2wiki"].items():
        if "status" not in f:
            query = f"{fmt(f.get('query_p50_ms'), '.0f')} / {fmt(f.get('query_p95_ms'), '.0f')}"
            rows.append(
                [
                    f"{peer} (measured)",
                    str(f.get("documents")),
                    fmt(f.get("wall_s"), ".1f"),
                    fmt(f.get("peak_rss_mib"), ".0f"),
                    fmt(f.get("calls_per_chunk"), ".2f"),
                    query,
                ]
            )
    for peer, f in (indexing.get("2wiki_peers_quoted") or {}).items():
        rows.append(
            [
                f"{peer} (quoted in the issue)",
                "800",
                fmt(f.get("wall_s"), ".0f"),
                fmt(f.get("peak_rss_mb"), ".0f"),
                fmt(f.get("model_calls_per_chunk"), ".1f"),
                "–",
            ]
        )
    return rows


def indexing_markdown(latest: dict[str, Any], plots: dict[str, Path], report: Path) -> str:
    indexing = latest["indexing"]
    parts = ["## Indexing cost", ""]
    if indexing["source"]:
        parts += [
            f"Podcast transcripts, ours on the first {indexing.get('podcast_documents')} pieces, the peers on the "
            f"first {indexing.get('podcast_peer_documents')}, through the same scripted model at 0 ms per call "
            f"(ours also at 200 ms); {source_label(indexing)}. The peers embed with a nearly free hashed bag of "
            "words: compare their wall time with ours minus MiniLM.",
            "",
            table(
                [
                    "system",
                    "pieces",
                    "chunks",
                    "wall s",
                    "s / piece",
                    "MiniLM s",
                    "calls / chunk",
                    "entities",
                    "relations",
                    "peak RSS MiB",
                ],
                podcast_rows(indexing),
            ),
        ]
    else:
        parts.append(f"_{indexing.get('note')}._")
    rows = twowiki_rows(indexing)
    if rows:
        parts += [
            "",
            f"2wiki passages ({source_label({'source': indexing['2wiki_source']})}; peers measured on the "
            f"first {indexing.get('peer_passages') or '–'} passages; query = local-mode context only):",
            "",
        ]
        parts.append(
            table(["system", "passages", "index wall s", "peak RSS MiB", "calls / chunk", "query p50 / p95 ms"], rows)
        )
    return "\n".join([*parts, "", figure_block("indexing", plots, report, indexing_sentence(indexing))])


def history_markdown(latest: dict[str, Any], plots: dict[str, Path], report: Path) -> str:
    history = latest["history"]
    parts = ["## History store", ""]
    if not history["source"]:
        return "\n".join([*parts, f"_{history.get('note')}._"])
    rows = [
        [
            target,
            n,
            fmt(r["turns_per_s"], ".1f"),
            f"{fmt(r['start_p50_ms'], '.1f')} / {fmt(r['start_p95_ms'], '.1f')}",
            f"{fmt(r['append_p50_ms'], '.1f')} / {fmt(r['append_p95_ms'], '.1f')}",
            fmt(r["cpu_us_per_turn"], ",.0f"),
        ]
        for target, by_n in history["targets"].items()
        for n, r in sorted(by_n.items(), key=lambda item: int(item[0]))
    ]
    parts += [
        "One turn = the store calls of one chat turn: start (the conversation, the user message and the 20 messages "
        "before it, one statement on Postgres) and append (the answer). The raw asyncpg loop sends one statement per "
        f"call into copies of the same tables: the floor of what a store must send. {source_label(history)}.",
        "",
        table(["target", "sessions", "turns/s", "start p50 / p95 ms", "append p50 / p95 ms", "CPU µs / turn"], rows),
    ]
    return "\n".join([*parts, "", figure_block("history", plots, report, history_sentence(history))])


def suite_markdown(latest: dict[str, Any], plots: dict[str, Path], report: Path) -> str:
    parts = ["## The suite's run time", ""]
    for mode, run in latest["suite"].items():
        if not run:
            parts.append(f"_{mode}: no run recorded._")
            continue
        rows = [[step["name"], step["status"], f"{step['seconds']} s"] for step in run.get("steps") or []]
        total = num(run.get("total_s")) or 0.0
        parts += [
            f"**{mode}** ({source_label(run)}): {total / 60:.1f} min in all, setup and the services' start included.",
            "",
            table(["step", "status", "wall"], rows),
            "",
        ]
    return "\n".join(parts).rstrip()


def render(latest: dict[str, Any], plots: dict[str, Path], report: Path) -> str:
    sections = [header(latest), goals_markdown(latest)]
    writers = (retrieval_markdown, serving_markdown, streaming_markdown, indexing_markdown, history_markdown)
    for write in (*writers, suite_markdown):
        sections.append(write(latest, plots, report))
    return "\n\n".join(sections) + "\n"


# -- main ----------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=RESULTS, help="the per-benchmark JSON files")
    parser.add_argument("--report", type=Path, default=REPORT, help="the Markdown report to write")
    parser.add_argument("--plots", type=Path, default=PLOTS, help="where the PNG plots go")
    args = parser.parse_args()
    results, report = args.results.resolve(), args.report.resolve()
    latest = assemble(load_inputs(results), datetime.now(UTC))
    output = results / "latest.json"
    output.write_text(json.dumps(latest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    plots = draw_all(latest, args.plots.resolve())
    report.write_text(render(latest, plots, report), encoding="utf-8")
    counts = Counter(goal["status"] for goal in latest["goals"])
    print(f"wrote {rel(output)}, {rel(report)} and {len(plots)} plots; goals: {dict(counts)}")


if __name__ == "__main__":
    main()
