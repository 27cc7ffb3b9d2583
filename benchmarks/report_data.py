"""latest.json of the benchmark report: the result files read, one section per area, the goals judged on them.

Each source is the first of its files that exists and reads: a full-mode file before its quick one (retrieval
quality dataset by dataset; graph indexing: `graph_indexing.json`, else the largest `graph_indexing_<N>.json`).
Every section names the file, mode, date and machine of its source run; a missing or unreadable input leaves its
keys null, with a note. `goals`: each goal of the issue (benchmarks/goals.py) with the measured value and met /
missed / no data, judged by benchmarks/report_goals.py. benchmarks/report.py writes this, then REPORT.md and
the plots from it.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.goals import AGENTS
from benchmarks.graph_probes import dig, rel
from benchmarks.quality_data import HIPPORAG_RECALL_AT_5

J = dict[str, Any]  # a JSON object
Data = dict[str, J]  # per source: its JSON document, {} when none was read
About = dict[str, J | None]  # per source: its file, mode, scope, date and machine; None when none was read

BASELINE, WIKI_PASSAGES, OURS_MODES = "bm25", 6119, ("offline", "llm_0ms", "llm_200ms")
CHOICE, FUSION = "router_choice", "fusion_agent"  # the router's per-question pick; the fused agent
CHOICE_FIGURES = (
    ("2wiki_dev", "perfect@8"),
    ("lihua_dev", "multi_all@5"),
    ("lihua_dev", "single_all@5"),
    ("cmrc_dev", "R@1"),
)
PEERS = ("nano_graphrag", "lightrag")
PEER_CORPUS_NOTE = "recorded upstream on about the first 425 passages (fast-graphrag's benchmark), not on ours"
HIPPORAG_NOTE = "from the HippoRAG papers, on 1,000 questions of the same 6,119-passage corpus (not these 51)"
ROUTING_NOTE = "no routing_at_scale in conversation.json: judged on the benchmark's 4 KBs only"

SOURCES = {  # per source its files, in order of preference (`*_quick`: a quick run); graph_indexing: see files()
    "retrieval_full": ("retrieval_quality",),
    "retrieval_quick": ("retrieval_quality_quick",),
    "graph_indexing": (),
    "streaming_latency": ("streaming_latency", "streaming_latency_quick"),
    "llm_token_parse": ("llm_token_parse", "llm_token_parse_quick"),
    "agui_overhead": ("agui_overhead",),
    "concurrency": ("concurrency", "concurrency_quick"),
    "history_store": ("history_store", "history_store_quick"),
    "podcast_indexing": ("podcast_indexing", "podcast_indexing_quick"),
    "conversation": ("conversation", "conversation_quick"),
    "answers": ("answers", "answers_quick"),
    "ingestion_jobs": ("ingestion_jobs", "ingestion_jobs_quick"),
    "suite": ("suite",),
    "suite_quick": ("suite_quick",),
}
RETRIEVAL_SETS = {  # latest.json key → (retrieval_quality dataset, figures, title in REPORT.md)
    "2wiki_dev": ("2wiki_dev", ("perfect@8", "R@2", "R@5"), "2wiki dev"),
    "2wiki_full": ("2wiki_full", ("R@2", "R@5"), "2wiki, all passages"),
    "lihua_dev": ("lihua", ("single_all@5", "multi_all@5", "null_empty_rate"), "LiHua-World dev"),
    "cmrc_dev": ("cmrc", ("R@1", "R@5"), "CMRC 2018 dev"),
}
GRAPH_QUALITY = {"perfect_at_8": "perfect@8", "recall_at_2": "R@2", "recall_at_5": "R@5"}

# The figures pick() reads: "key=dotted.path", "key" alone for the same path, "key=" for one computed after.
COUNTS = ("documents", "chunks", "entities", "relations", "failed", "streams_total", "errors")  # kept as they are
SERVING = "p50_ms=retrieval.{agent}.latency.p50_ms p95_ms=retrieval.{agent}.latency.p95_ms"
STREAMING = (
    "added_us_per_token_p50=added_latency_per_token_us.{side}.p50_us_median "
    "added_us_per_token_p99=added_latency_per_token_us.{side}.p99_us_median "
    "ttft_ms_p50=first_token_ms.{side}/plain.client_ms.p50 ttft_ms_p99=first_token_ms.{side}/plain.client_ms.p99 "
    "cpu_us_per_token=cpu_per_token.{side}.cpu_us_per_token_median "
    "tokens_per_s=cpu_per_token.{side}.tokens_per_s_median"
)
AGUI = (
    "us_per_event_whole_run=results.whole_run.agui_overhead_us_per_event "
    "us_per_event_structured=results.structured_events_only.agui_overhead_us_per_event"
)
CONCURRENT = (
    "streams_total=streams errors ttft_p50_ms=ttft_ms.p50 ttft_p99_ms=ttft_ms.p99 tokens_per_s server_cpu_us_per_token"
)
HISTORY = (
    "turns_per_s start_p50_ms=start_ms.p50 start_p95_ms=start_ms.p95 append_p50_ms=append_ms.p50 "
    "append_p95_ms=append_ms.p95 cpu_us_per_turn"
)
TWOWIKI = (
    "passages=parameters.passages wall_s=index.wall_s peak_rss_mib=index.peak_rss_mib.benchmark_vmhwm "
    "neo4j_jvm_peak_rss_mib=index.peak_rss_mib.neo4j_jvm documents_per_s=index.documents_per_s "
    "calls_per_chunk=index.model_calls_per_chunk insert_p95_ms=insert.write_alone.p95_ms "
    "insert_with_refresh_p95_ms=insert.write_plus_refresh.p95_ms delete_p95_ms=delete.write_alone.p95_ms "
    "delete_with_refresh_p95_ms=delete.write_plus_refresh.p95_ms"
)
OURS_PODCAST = (
    "documents chunks wall_s s_per_document= minilm_s=split_s.embedding_minilm "
    "calls_per_chunk=model_calls_per_chunk entities relations peak_rss_mib failed"
)
PEER_PODCAST = (
    "documents=index.documents chunks=index.chunks wall_s=index.wall_s s_per_document= "
    "calls_per_chunk=index.model_calls_per_chunk entities=index.entities relations=index.relations "
    "peak_rss_mib=peak_rss_mib_vmhwm query_p50_ms=queries.latency.p50_ms query_p95_ms=queries.latency.p95_ms failed"
)


# -- values ------------------------------------------------------------------------------------------------------


def num(value: Any) -> float | None:
    """A finite number as float; anything else (None, NaN, text, bool) as None."""
    finite = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if finite else None


def pick(data: Any, spec: str, **names: str) -> J:
    """The figures of `spec` (see above) in `data`: numbers or None, COUNTS as they are; `names` fill {placeholders}."""
    found = {}
    for item in spec.format(**names).split():
        key, _, path = item.partition("=") if "=" in item else (item, "", item)
        value = dig(data, *path.split(".")) if path else None
        found[key] = value if key in COUNTS else num(value)
    return found


def fmt(value: Any, spec: str = ".2f") -> str:
    """A number for the report; "–" when there is none."""
    return "–" if (found := num(value)) is None else format(found, spec)


def cells(row: Any, *columns: tuple[str, str]) -> list[str]:
    """Per (keys, format) a cell of `row`: "x", or "x / y" for two keys; format "" writes the value as it is."""
    return [" / ".join(fmt(dig(row, k), f) if f else str(dig(row, k)) for k in keys.split()) for keys, f in columns]


def clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become null (json.dumps would write NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    return [clean(v) for v in value] if isinstance(value, list | tuple) else value


def when(stamp: object) -> datetime:
    """An ISO date of a result file; the oldest possible for none (or one that does not parse)."""
    try:
        parsed = datetime.fromisoformat(str(stamp))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def short_date(value: Any) -> str:
    text = str(value or "–")
    return text[:16].replace("T", " ") + (" UTC" if "T" in text and "+00:00" in text else "")


def label(about: Any) -> str:
    """A source (see load()) as "file (mode, date)"."""
    if not isinstance(about, dict):
        return "–"
    return f"{Path(str(about.get('file'))).name} ({about.get('mode')}, {short_date(about.get('date'))})"


def missing(benchmark: str) -> str:
    return f"no {benchmark} results in benchmarks/results: run `python -m benchmarks.{benchmark}`"


def note(about: About, benchmark: str) -> J:
    """A section's note when its benchmark has no results."""
    return {} if about[benchmark] else {"note": missing(benchmark)}


# -- latest.json -------------------------------------------------------------------------------------------------


def files(results: Path, name: str) -> list[tuple[Path, bool, str]]:
    """(path, full mode, scope) of the files a source may come from, in order of preference."""
    if name != "graph_indexing":
        return [(results / f"{stem}.json", not stem.endswith("_quick"), "") for stem in SOURCES[name]]
    scope = f"{WIKI_PASSAGES:,} 2wiki passages"  # all passages, then the largest part first
    parts = (re.fullmatch(r"graph_indexing_(\d+)\.json", p.name) for p in results.glob("graph_indexing_*.json"))
    sizes = sorted(((int(m.group(1)), m.group(0)) for m in parts if m), reverse=True)
    whole = [(results / "graph_indexing.json", True, f"all {scope}")]
    return whole + [(results / file, False, f"the first {n:,} of {scope}") for n, file in sizes]


def read(path: Path, notes: list[str]) -> J | None:
    """A result file's JSON object; None, with a note, when it does not read as one."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        notes.append(f"{rel(path)} could not be read ({error}); ignored")
        return None
    if not isinstance(found, dict):
        notes.append(f"{rel(path)} is not a JSON object; ignored")
        return None
    return found


def load(results: Path, notes: list[str]) -> tuple[Data, About]:
    data: Data = {name: {} for name in SOURCES}
    about: About = dict.fromkeys(SOURCES)
    for name in SOURCES:
        for path, full, scope in files(results, name):
            if not path.is_file() or (found := read(path, notes)) is None:
                continue
            date, machine = found.get("date"), found.get("machine")
            if not isinstance(date, str):
                date = f"{datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec='seconds')} (file time)"
            if not isinstance(machine, dict):
                machine = {"description": str(machine)} if machine else {}
            mode = "full" if full and not dig(found, "parameters", "quick") else "quick"
            data[name] = found
            about[name] = {"file": rel(path), "mode": mode, "scope": scope, "date": date, "machine": machine}
            break
    return data, about


def quality_result(data: Data, dataset: str, whole: bool) -> tuple[str, J] | None:
    """(source, result) of `dataset` in retrieval_quality: from the full-mode file, else the quick one."""
    for name in ("retrieval_full", "retrieval_quick"):
        result = dig(data[name], "results", dataset)
        if isinstance(result, dict) and (not whole or result.get("documents") == WIKI_PASSAGES):
            return name, result
    return None


def retrieval_section(data: Data, about: About) -> J:
    section: J = {"datasets": {}}
    info: J
    stores = data["graph_indexing"].get("stores") or {}
    graph_full = dig(about["graph_indexing"], "mode") == "full"
    graph_date = when(dig(stores, "embedded", "measured_on"))
    for key, (dataset, figures, _) in RETRIEVAL_SETS.items():
        whole = key == "2wiki_full"
        found = quality_result(data, dataset, whole)
        # The full suite measures the whole 2wiki corpus in graph_indexing (same agents and questions, embedded store):
        # a retrieval_quality run over it counts only when it is the newer of the two.
        if found and not (whole and graph_full and graph_date > when(found[1].get("date"))):
            name, result = found
            names = dict.fromkeys([*AGENTS, *(result.get("agents") or {}), BASELINE])
            latency = {n: {f"p{q}_ms": num(dig(result, "latency", n, f"p{q}_ms")) for q in (50, 95)} for n in names}
            rows = {n: {f: num(dig(result, "agents", n, f)) for f in figures} | latency[n] for n in names}
            if isinstance(choice := result.get(CHOICE), dict):  # per question, the agent the router picks
                rows[CHOICE] = {f: num(choice.get(f)) for f in figures} | {"agents": choice.get("agents")}
            info = {"source": about[name], **{k: result.get(k) for k in ("documents", "questions", "index")}}
            if (result.get("datasets_at_a_time") or 1) > 1:  # retrieval_quality --jobs: latency under shared load
                info["note"] = f"Latencies with {result['datasets_at_a_time']} datasets evaluated at a time"
        elif whole and graph_full:  # graph_indexing's retrieval phase, the embedded store first
            store = next((s for s in ("embedded", *stores) if dig(stores, s, "retrieval")), "")
            quality = {a: (dig(stores, store, "retrieval", a, "quality") or {}).items() for a in AGENTS}
            named = {a: {GRAPH_QUALITY.get(k, k): num(v) for k, v in quality[a]} for a in AGENTS}
            rows = {a: {f: named[a].get(f) for f in figures} for a in AGENTS} | {BASELINE: dict.fromkeys(figures)}
            info = {"source": about["graph_indexing"], "documents": WIKI_PASSAGES, "questions": 51}
            info["note"] = "from graph_indexing's retrieval phase on the embedded store (no BM25 row there)"
        else:
            rows = {name: dict.fromkeys(figures) for name in (*AGENTS, BASELINE)}
            text = f"no 2wiki run over all {WIKI_PASSAGES:,} passages" if whole else None
            info = {"source": None, "note": text or f"{missing('retrieval_quality')} ({dataset})"}
        section[key], section["datasets"][key] = rows, info
    dev, full = quality_result(data, "2wiki_dev", False), quality_result(data, "2wiki_full", True)
    return section | {
        "peers_2wiki_dev": dig(dev and dev[1], "peers"),
        "peers_note": PEER_CORPUS_NOTE,
        "hipporag_published_recall@5": dig(full and full[1], "hipporag_published_recall@5") or HIPPORAG_RECALL_AT_5,
        "hipporag_note": HIPPORAG_NOTE,
    }


def graph_stores(data: Data) -> dict[str, J]:
    return {name: r for name, r in (data["graph_indexing"].get("stores") or {}).items() if isinstance(r, dict)}


def serving_sections(data: Data, about: About) -> tuple[J, J]:
    """`serving` (the embedded store, else the first measured one) and `serving_by_store`: latency per agent."""
    stores = graph_stores(data)
    by_store = {name: {a: pick(r, SERVING, agent=a) for a in AGENTS} for name, r in stores.items()}
    measured = [name for name, result in stores.items() if "retrieval" in result]
    store = "embedded" if "embedded" in measured else next(iter(measured), None)
    serving = {a: pick(stores.get(store or ""), SERVING, agent=a) for a in AGENTS} | {"store": store}
    serving |= {"source": about["graph_indexing"]} | note(about, "graph_indexing")
    unmeasured = {name: r.get("failed") or r.get("skipped") for name, r in stores.items() if name not in measured}
    return serving | {"stores_not_measured": unmeasured}, by_store


def streaming_section(data: Data, about: About) -> J:
    stream, results = data["streaming_latency"], dig(data["llm_token_parse"], "results")
    methods = [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []
    section = pick(stream, STREAMING, side="ours") | {
        "passthrough_ratio": num(dig(stream, "cpu_per_token", "ratio")),
        "passthrough_ratio_of": "server CPU per streamed token, ours / bare FastAPI pass-through",
        "passthrough": pick(stream, STREAMING, side="passthrough"),
        "model_client_cpu_us_per_token": {str(r.get("method")): num(r.get("cpu_us_per_token_median")) for r in methods},
        "agui": pick(data["agui_overhead"], AGUI) | {"source": about["agui_overhead"]},
        "source": about["streaming_latency"],
        "model_client_source": about["llm_token_parse"],
    }
    return section | note(about, "streaming_latency")


def concurrency_section(data: Data, about: About) -> J:
    parameters, results = data["concurrency"].get("parameters"), data["concurrency"].get("results")

    def side(name: str) -> J:
        hwm = num(dig(results, name, "rss_kib", "hwm"))
        return pick(dig(results, name), CONCURRENT) | {"peak_rss_mib": None if hwm is None else round(hwm / 1024, 1)}

    section = {"streams": dig(parameters, "streams"), **side("ours")} | {
        "waves": dig(parameters, "waves"),
        "history": dig(parameters, "history"),
        "passthrough": side("passthrough"),
        "ours_over_passthrough": dig(results, "ours_over_passthrough"),
        "every_turn_stored": dig(results, "goals", "every_turn_stored"),
        "source": about["concurrency"],
    }
    return section | note(about, "concurrency")


def podcast_figures(part: Any, spec: str) -> J:
    found = pick(part, spec)
    wall, documents = found["wall_s"], num(found["documents"])
    return found | {"s_per_document": round(wall / documents, 3) if wall is not None and documents else None}


def indexing_section(data: Data, about: About) -> J:
    podcast, parameters = data["podcast_indexing"].get("results"), data["podcast_indexing"].get("parameters")
    ours = {m: podcast_figures(r, OURS_PODCAST) for m, r in (dig(podcast, "ours") or {}).items() if isinstance(r, dict)}
    rss = [r["peak_rss_mib"] for r in ours.values() if r["peak_rss_mib"] is not None]
    systems, wiki = dict(ours), {}  # per peer: its podcast and 2wiki phases; a peer that did not run: its status
    for peer, result in (dig(podcast, "peers") or {}).items():
        if dig(result, "status") == "ran":
            systems[peer] = podcast_figures(result.get("podcast") or {}, PEER_PODCAST)
            wiki[peer] = podcast_figures(result.get("wiki") or {}, PEER_PODCAST)
        else:
            systems[peer] = wiki[peer] = {"status": dig(result, "status") or "not run"}
    modes = zip(("offline", "llm0", "llm200"), OURS_MODES, strict=True)
    section = {f"podcast_{key}_s": dig(ours, mode, "wall_s") for key, mode in modes} | {
        "calls_per_chunk": dig(ours, "llm_0ms", "calls_per_chunk"),
        "peak_rss_mb": max(rss) if rss else None,
        "peak_rss_unit": "MiB (VmHWM, the largest of our modes)",
        "podcast_documents": dig(parameters, "documents"),
        "podcast_peer_documents": dig(parameters, "peer_documents"),
        "peer_passages": dig(parameters, "peer_passages"),
        "podcast": systems,
        "peers_2wiki": wiki,
        "source": about["podcast_indexing"],
        "2wiki_by_store": {
            name: pick(r, TWOWIKI)
            | {"failed": r.get("failed") or r.get("skipped"), "measured_on": r.get("measured_on")}
            for name, r in graph_stores(data).items()
        },
        "2wiki_peers_quoted": dig(data["graph_indexing"], "peers", "indexing_800_passages"),
        "2wiki_source": about["graph_indexing"],
    }
    return section | note(about, "podcast_indexing")


def history_section(data: Data, about: About) -> J:
    results = data["history_store"].get("results")
    stores = dig(results, "stores") or {}
    targets = {t: {str(n): pick(f, HISTORY) for n, f in (by_n or {}).items()} for t, by_n in stores.items()}
    section = {"targets": targets, "postgres_over_raw": dig(results, "postgres_over_raw")}
    return section | {"source": about["history_store"]} | note(about, "history_store")


def conversation_section(data: Data, about: About) -> J:
    """Routing (benchmarks/conversation.py): accuracy per KB of our router and of BM25 as a router ("general": small
    talk), our latency, the orchard served alone, and the first misrouted messages."""
    results = data["conversation"].get("results")

    def accuracy(part: Any) -> J:  # over all KB questions, over small talk, and per KB (its questions, accuracy)
        per_kb = found.items() if isinstance(found := dig(part, "per_kb"), dict) else []
        rows = {str(kb): {"n": dig(r, "n"), "accuracy": num(dig(r, "accuracy"))} for kb, r in per_kb}
        return pick(part, "kb_questions small_talk") | {"per_kb": rows}

    def misrouted(part: Any) -> list[J]:
        rows = part if isinstance(part, list) else []
        return [{k: str(r.get(k)) for k in ("expected", "routed", "message")} for r in rows if isinstance(r, dict)]

    section = {"messages": dig(results, "routing", "messages")}
    section |= {name: accuracy(dig(results, "routing", name)) for name in ("router", "bm25_router")}
    section["router"]["latency_ms"] = pick(dig(results, "routing", "router", "latency_ms"), "p50_ms p95_ms max_ms")
    section["misrouted"] = misrouted(dig(results, "routing", "misrouted"))
    scale = dig(results, "routing_at_scale")
    section["at_scale"] = pick(scale, "kbs chunks_per_kb messages") | {
        "latency_ms": pick(dig(scale, "latency_ms"), "p50_ms p95_ms max_ms") if scale else {}
    }
    alone = dig(results, "orchard_alone")
    section["orchard_alone"] = accuracy(alone) | {"misrouted": misrouted(dig(alone, "misrouted"))}
    section["follow_ups"] = dig(results, "follow_ups") or {}  # per agent: perfect@8 whole, turn 2, standalone
    return section | {"source": about["conversation"]} | note(about, "conversation")


ANSWER_SETS = {"cmrc": "CMRC 2018 dev", "lihua": "LiHua-World dev, single-hop", "orchard": "orchard sample"}
ANSWER_FIGURES = (
    "questions answer_rate ceiling kept baseline_rate median_chars baseline_median_chars headings markdown internal "
    "repeats"
)


def answers_section(data: Data, about: About) -> J:
    """Answers without a chat model (benchmarks/answers.py), per dataset: the answer rate, the ceiling (the retrieved
    text holds the gold answer), the first-sentence baseline, the median length, the answers showing markdown or
    graph-internal text; the figures of each dataset's run before; the orchard's answers that missed."""
    results = data["answers"].get("results") or {}
    datasets = {name: pick(results.get(name), ANSWER_FIGURES) for name in ANSWER_SETS}
    before = {name: pick(dig(results, "previous", name), ANSWER_FIGURES) for name in ANSWER_SETS}
    rows = dig(results, "orchard", "answers")
    missed = [
        {"question": str(r.get("question")), "answer": str(r.get("answer"))}
        for r in (rows if isinstance(rows, list) else [])
        if isinstance(r, dict) and not r.get("ok")
    ]
    section = {"datasets": datasets, "previous": before, "orchard_missed": missed}
    return section | {"source": about["answers"]} | note(about, "answers")


JOB_CASE_FIGURES = "passages documents_per_s working_s submitted_to_done_s model_calls_per_chunk none_twice"


def jobs_section(data: Data, about: About) -> J:
    """Ingestion jobs (benchmarks/ingestion_jobs.py): chat first-token time idle and during an ingestion through the
    API, and indexing throughput per setup, extractor and worker count."""
    serving, throughput = data["ingestion_jobs"].get("serving"), data["ingestion_jobs"].get("throughput") or {}
    ttft = dig(serving, "first_token_ms") or {}
    section = {
        "serving": pick(serving, "passages busy_over_idle_p99 submitted_to_done_s documents_per_s=jobs.documents_per_s")
        | {phase: pick(ttft.get(phase), "n p50 p95 p99 max") for phase in ("idle", "busy")}
        | {"statuses": dig(serving, "jobs", "statuses"), "requests_202_ms": dig(serving, "requests_202_ms")}
        | {"interval_s": num(dig(data["ingestion_jobs"], "parameters", "interval"))},
        "throughput": {
            name: pick(case, JOB_CASE_FIGURES)
            | {"none_twice": case.get("none_twice"), "cpu_s": case.get("worker_cpu_s")}
            for name, case in throughput.items()
            if isinstance(case, dict) and "passages" in case
        },
        "throughput_skipped": throughput.get("skipped") or {},
    }
    return section | {"source": about["ingestion_jobs"]} | note(about, "ingestion_jobs")


def suite_section(data: Data, about: About) -> J:
    """scripts/bench.sh's own timing, full and quick: each step's seconds, the total, and the build time of the
    indexes its retrieval run took from the cache (not of datasets the file kept from an earlier run)."""
    section: J = {}
    for mode, suite, retrieval in (("full", "suite", "retrieval_full"), ("quick", "suite_quick", "retrieval_quick")):
        run, section[mode] = data[suite], {}  # the suite's file is written at the end, `total_s` after the start
        if about[suite]:
            started = when(run.get("date")) - timedelta(seconds=num(run.get("total_s")) or 0.0)
            datasets = (dig(data[retrieval], "results") or {}).values()
            ran = [d for d in datasets if isinstance(d, dict) and when(d.get("date")) >= started]
            reused = [num(dig(d, "index", "wall_s")) or 0.0 for d in ran if dig(d, "index", "reused")]
            section[mode] = {"total_s": run.get("total_s"), "steps": run.get("steps")}
            section[mode] |= {"reused_index_build_s": sum(reused) if reused else None, "source": about[suite]}
    return section


def assemble(results: Path, data: Data, about: About, notes: list[str], now: datetime) -> J:
    latest: J = {"generated_by": "python -m benchmarks.report", "generated_at": now.isoformat(timespec="seconds")}
    latest |= {"results_dir": rel(results), "sources": about, "notes": notes}
    latest |= {"retrieval": retrieval_section(data, about)}
    latest["serving"], latest["serving_by_store"] = serving_sections(data, about)
    latest |= {"streaming": streaming_section(data, about), "concurrency": concurrency_section(data, about)}
    latest |= {"indexing": indexing_section(data, about), "history": history_section(data, about)}
    latest |= {"conversation": conversation_section(data, about), "answers": answers_section(data, about)}
    latest |= {"ingestion_jobs": jobs_section(data, about), "suite": suite_section(data, about)}
    cleaned: J = clean(latest)
    return cleaned
