"""The benchmark report: `results/latest.json` and `REPORT.md` with one PNG plot per area, from the results.

Reads the per-benchmark files in the results directory, a full-mode file before its quick one (retrieval quality
dataset by dataset; graph indexing: `graph_indexing.json`, else the largest `graph_indexing_<N>.json`), and
assembles `latest.json`: one section per area, each naming the file, mode, date and machine of its source run,
and `goals`, each goal of the issue with the measured value and met / missed / no data (a missing or unreadable
input leaves its keys null, with a note). Then `REPORT.md`: a header, the goals table and per area the tables, a
plot under `report/` (matplotlib, Agg) and a sentence from the numbers. Nothing is measured here; scripts/bench.sh
runs this last.

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
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from benchmarks.quality_data import HIPPORAG_RECALL_AT_5

J = dict[str, Any]  # a JSON object
Data = dict[str, J]  # per source: its JSON document, {} when none was read
About = dict[str, J | None]  # per source: its file, mode, scope, date and machine; None when none was read

ROOT = Path(__file__).resolve().parent.parent
AGENTS = ("naive_rag_agent", "graph_agent", "hybrid_agent", "deep_research_agent", "fusion_agent")
BASELINE, WIKI_PASSAGES, OURS_MODES = "bm25", 6119, ("offline", "llm_0ms", "llm_200ms")
PEERS = ("nano_graphrag", "lightrag")
PEER_CORPUS_NOTE = "recorded upstream on about the first 425 passages (fast-graphrag's benchmark), not on ours"
HIPPORAG_NOTE = "from the HippoRAG papers, on 1,000 questions of the same 6,119-passage corpus (not these 51)"
GOAL_PERFECT_AT_8, GOAL_R_AT_5, GOAL_LIHUA_MULTI, GOAL_LIHUA_SINGLE = 0.95, 0.90, 0.60, 0.90
GOAL_RATIO, GOAL_AGUI_US, GOAL_STREAMS, GOAL_INDEX_S, GOAL_RSS_MIB = 1.5, 50.0, 200, 180.0, 1536.0
GOAL_WRITE_P95_MS, GOAL_SUITE_MIN = {"insert": 2000.0, "delete": 1000.0}, {"full": 30, "quick": 5}
GOAL_RETRIEVAL_P95_MS = {agent: 150.0 for agent in AGENTS} | {"deep_research_agent": 500.0}

# Each source is the first of its files that exists and reads (`*_quick`: a quick run); graph_indexing: see load().
SOURCE_FILES = {"retrieval_full": "retrieval_quality", "retrieval_quick": "retrieval_quality_quick"}
SOURCE_FILES |= {"graph_indexing": ""}
SOURCE_FILES |= {name: f"{name} {name}_quick" for name in ("streaming_latency", "llm_token_parse")}
SOURCE_FILES |= {"agui_overhead": "agui_overhead"}
SOURCE_FILES |= {name: f"{name} {name}_quick" for name in ("concurrency", "history_store", "podcast_indexing")}
SOURCE_FILES |= {"suite": "suite", "suite_quick": "suite_quick"}
RETRIEVAL_SETS = {  # latest.json key → (retrieval_quality dataset, figures, title in REPORT.md)
    "2wiki_dev": ("2wiki_dev", ("perfect@8", "R@2", "R@5"), "2wiki dev"),
    "2wiki_full": ("2wiki_full", ("R@2", "R@5"), "2wiki, all passages"),
    "lihua_dev": ("lihua", ("single_all@5", "multi_all@5", "null_empty_rate"), "LiHua-World dev"),
    "cmrc_dev": ("cmrc", ("R@1", "R@5"), "CMRC 2018 dev"),
}
GRAPH_QUALITY = {"perfect_at_8": "perfect@8", "recall_at_2": "R@2", "recall_at_5": "R@5"}
# Figures for pick(): "key=dotted.path", "key" alone for the same path, "key=" for one computed after.
COUNTS = ("documents", "chunks", "entities", "relations", "failed", "streams_total", "errors")  # kept as they are
SERVING = "p50_ms=retrieval.{agent}.latency.p50_ms p95_ms=retrieval.{agent}.latency.p95_ms"
STREAMING = "added_us_per_token_p50=added_latency_per_token_us.{side}.p50_us_median "
STREAMING += "added_us_per_token_p99=added_latency_per_token_us.{side}.p99_us_median "
STREAMING += "ttft_ms_p50=first_token_ms.{side}/plain.client_ms.p50 "
STREAMING += "ttft_ms_p99=first_token_ms.{side}/plain.client_ms.p99 "
STREAMING += "cpu_us_per_token=cpu_per_token.{side}.cpu_us_per_token_median "
STREAMING += "tokens_per_s=cpu_per_token.{side}.tokens_per_s_median"
AGUI = "us_per_event_whole_run=results.whole_run.agui_overhead_us_per_event "
AGUI += "us_per_event_structured=results.structured_events_only.agui_overhead_us_per_event"
CONCURRENT = "streams_total=streams errors ttft_p50_ms=ttft_ms.p50 ttft_p99_ms=ttft_ms.p99 tokens_per_s "
CONCURRENT += "server_cpu_us_per_token"
HISTORY = "turns_per_s start_p50_ms=start_ms.p50 start_p95_ms=start_ms.p95 append_p50_ms=append_ms.p50"
HISTORY += " append_p95_ms=append_ms.p95 cpu_us_per_turn"
TWOWIKI = "passages=parameters.passages wall_s=index.wall_s peak_rss_mib=index.peak_rss_mib.benchmark_vmhwm "
TWOWIKI += "neo4j_jvm_peak_rss_mib=index.peak_rss_mib.neo4j_jvm documents_per_s=index.documents_per_s "
TWOWIKI += "calls_per_chunk=index.model_calls_per_chunk insert_p95_ms=insert.write_alone.p95_ms "
TWOWIKI += "insert_with_refresh_p95_ms=insert.write_plus_refresh.p95_ms delete_p95_ms=delete.write_alone.p95_ms "
TWOWIKI += "delete_with_refresh_p95_ms=delete.write_plus_refresh.p95_ms"
OURS_PODCAST = "documents chunks wall_s s_per_document= minilm_s=split_s.embedding_minilm "
OURS_PODCAST += "calls_per_chunk=model_calls_per_chunk entities relations peak_rss_mib failed"
PEER_PODCAST = "documents=index.documents chunks=index.chunks wall_s=index.wall_s s_per_document= "
PEER_PODCAST += "calls_per_chunk=index.model_calls_per_chunk entities=index.entities relations=index.relations "
PEER_PODCAST += "peak_rss_mib=peak_rss_mib_vmhwm query_p50_ms=queries.latency.p50_ms "
PEER_PODCAST += "query_p95_ms=queries.latency.p95_ms failed"


# -- values ------------------------------------------------------------------------------------------------------


def dig(value: Any, *path: Any) -> Any:
    """`value[path[0]][path[1]]...`, or None where a level is missing or not a dict."""
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


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


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


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


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def when(stamp: object) -> datetime:
    """An ISO date of a result file; the oldest possible for none (or one that does not parse)."""
    try:
        parsed = datetime.fromisoformat(str(stamp))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def missing(benchmark: str) -> str:
    return f"no {benchmark} results in benchmarks/results: run `python -m benchmarks.{benchmark}`"


def note(about: About, benchmark: str) -> J:
    return {} if about[benchmark] else {"note": missing(benchmark)}


def short_date(value: Any) -> str:
    text = str(value or "–")
    return text[:16].replace("T", " ") + (" UTC" if "T" in text and "+00:00" in text else "")


def source_label(section: J | None) -> str:
    """A section's source as "file (mode, date)"."""
    if not isinstance(about := dig(section, "source"), dict):
        return "–"
    return f"{Path(str(about.get('file'))).name} ({about.get('mode')}, {short_date(about.get('date'))})"


# -- latest.json -------------------------------------------------------------------------------------------------


def load(results: Path, notes: list[str]) -> tuple[Data, About]:
    data: Data = {}
    about: About = {}
    for name, stems in SOURCE_FILES.items():
        data[name], about[name] = {}, None
        candidates = [(results / f"{stem}.json", not stem.endswith("_quick"), "") for stem in stems.split()]
        if name == "graph_indexing":  # all passages, then the largest part first
            scope = f"{WIKI_PASSAGES:,} 2wiki passages"
            parts = (re.fullmatch(r"graph_indexing_(\d+)\.json", p.name) for p in results.glob("graph_indexing_*.json"))
            sizes = sorted(((int(m.group(1)), m.group(0)) for m in parts if m), reverse=True)
            candidates = [(results / "graph_indexing.json", True, f"all {scope}")]
            candidates += [(results / file, False, f"the first {n:,} of {scope}") for n, file in sizes]
        for path, full, scope in candidates:
            if not path.is_file():
                continue
            try:
                found = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                notes.append(f"{rel(path)} could not be read ({error}); ignored")
                continue
            if not isinstance(found, dict):
                notes.append(f"{rel(path)} is not a JSON object; ignored")
                continue
            date, machine = found.get("date"), found.get("machine")
            if not isinstance(date, str):
                date = f"{datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(timespec='seconds')} (file time)"
            if not isinstance(machine, dict):
                machine = {"description": str(machine)} if machine else {}
            mode = "full" if full and not dig(found, "parameters", "quick") else "quick"
            described = {"file": rel(path), "mode": mode, "scope": scope, "date": date, "machine": machine}
            data[name], about[name] = found, described
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
    graph_full = dig(about["graph_indexing"], "mode") == "full"
    graph_date = when(dig(data["graph_indexing"], "stores", "embedded", "measured_on"))
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
            info = {"source": about[name], **{k: result.get(k) for k in ("documents", "questions", "index")}}
            if (result.get("datasets_at_a_time") or 1) > 1:  # retrieval_quality --jobs: latency under shared load
                info["note"] = f"Latencies with {result['datasets_at_a_time']} datasets evaluated at a time"
        elif whole and graph_full:  # graph_indexing's retrieval phase, the embedded store first
            stores = data["graph_indexing"].get("stores") or {}
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
    published = dig(full and full[1], "hipporag_published_recall@5") or HIPPORAG_RECALL_AT_5
    section |= {"peers_2wiki_dev": dig(dev and dev[1], "peers"), "peers_note": PEER_CORPUS_NOTE}
    return section | {"hipporag_published_recall@5": published, "hipporag_note": HIPPORAG_NOTE}


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
    section = pick(stream, STREAMING, side="ours") | {"passthrough_ratio": num(dig(stream, "cpu_per_token", "ratio"))}
    section["passthrough_ratio_of"] = "server CPU per streamed token, ours / bare FastAPI pass-through"
    section["passthrough"] = pick(stream, STREAMING, side="passthrough")
    client = {str(r.get("method")): num(r.get("cpu_us_per_token_median")) for r in methods}
    section |= {"model_client_cpu_us_per_token": client}
    section["agui"] = pick(data["agui_overhead"], AGUI) | {"source": about["agui_overhead"]}
    section |= {"source": about["streaming_latency"], "model_client_source": about["llm_token_parse"]}
    return section | note(about, "streaming_latency")


def concurrency_section(data: Data, about: About) -> J:
    parameters, results = data["concurrency"].get("parameters"), data["concurrency"].get("results")

    def side(name: str) -> J:
        hwm = num(dig(results, name, "rss_kib", "hwm"))
        return pick(dig(results, name), CONCURRENT) | {"peak_rss_mib": None if hwm is None else round(hwm / 1024, 1)}

    section = {"streams": dig(parameters, "streams"), **side("ours")}
    section |= {key: dig(parameters, key) for key in ("waves", "history")} | {"passthrough": side("passthrough")}
    section |= {"ours_over_passthrough": dig(results, "ours_over_passthrough")}
    section |= {"every_turn_stored": dig(results, "goals", "every_turn_stored"), "source": about["concurrency"]}
    return section | note(about, "concurrency")


def indexing_section(data: Data, about: About) -> J:
    podcast, parameters = data["podcast_indexing"].get("results"), data["podcast_indexing"].get("parameters")

    def figures(part: Any, spec: str) -> J:
        found = pick(part, spec)
        wall, documents = found["wall_s"], num(found["documents"])
        return found | {"s_per_document": round(wall / documents, 3) if wall is not None and documents else None}

    ours = {mode: figures(r, OURS_PODCAST) for mode, r in (dig(podcast, "ours") or {}).items() if isinstance(r, dict)}
    rss = [r["peak_rss_mib"] for r in ours.values() if r["peak_rss_mib"] is not None]
    systems, wiki = dict(ours), {}  # per peer: its podcast and 2wiki phases; a peer that did not run: its status
    for peer, result in (dig(podcast, "peers") or {}).items():
        if dig(result, "status") == "ran":
            systems[peer], wiki[peer] = (figures(result.get(p) or {}, PEER_PODCAST) for p in ("podcast", "wiki"))
        else:
            systems[peer] = wiki[peer] = {"status": dig(result, "status") or "not run"}
    section = {
        f"podcast_{k}_s": dig(ours, m, "wall_s") for k, m in zip(("offline", "llm0", "llm200"), OURS_MODES, strict=True)
    }
    section |= {"calls_per_chunk": dig(ours, "llm_0ms", "calls_per_chunk"), "peak_rss_mb": max(rss) if rss else None}
    section |= {"peak_rss_unit": "MiB (VmHWM, the largest of our modes)"}
    for key, found in (("podcast_documents", "documents"), ("podcast_peer_documents", "peer_documents")):
        section[key] = dig(parameters, found)
    section |= {"peer_passages": dig(parameters, "peer_passages"), "podcast": systems, "peers_2wiki": wiki}
    section |= {"source": about["podcast_indexing"], "2wiki_by_store": {}}
    for name, r in graph_stores(data).items():
        status = {"failed": r.get("failed") or r.get("skipped"), "measured_on": r.get("measured_on")}
        section["2wiki_by_store"][name] = pick(r, TWOWIKI) | status
    section["2wiki_peers_quoted"] = dig(data["graph_indexing"], "peers", "indexing_800_passages")
    return section | {"2wiki_source": about["graph_indexing"]} | note(about, "podcast_indexing")


def history_section(data: Data, about: About) -> J:
    results = data["history_store"].get("results")
    stores = dig(results, "stores") or {}
    targets = {t: {str(n): pick(f, HISTORY) for n, f in (by_n or {}).items()} for t, by_n in stores.items()}
    section = {"targets": targets, "postgres_over_raw": dig(results, "postgres_over_raw")}
    return section | {"source": about["history_store"]} | note(about, "history_store")


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


# -- goals ---------------------------------------------------------------------------------------------------------


def goal(text: str, measured: str, value: Any, ok: bool | str | None, src: str, note: str = "") -> J:
    """One goal of the issue as measured: met or missed by `ok`, no data when it is None, or the status given."""
    status = ok if isinstance(ok, str) else "no data" if ok is None else "met" if ok else "missed"
    measured = "–" if status == "no data" else measured
    return {"goal": text, "measured": measured, "value": value, "status": status, "source": src, "note": note}


def best(rows: J, key: Callable[[J], float | None]) -> tuple[str, J]:
    """The agent (not BM25) whose row scores highest by `key`, among those with a value; ("", {}) for none."""
    scored = [(key(r), a, r) for a, r in rows.items() if a != BASELINE and isinstance(r, dict) and key(r) is not None]
    _, agent, row = max(scored, key=lambda t: t[0] or 0.0, default=(None, "", {}))
    return agent, row


def retrieval_goals(latest: J) -> list[J]:
    retrieval, goals = latest["retrieval"], []
    src = {key: source_label(info) for key, info in retrieval["datasets"].items()}

    def by(figure: str) -> Callable[[J], float | None]:
        return lambda row: num(row.get(figure))

    for key, figure, limit, text in (
        ("2wiki_dev", "perfect@8", GOAL_PERFECT_AT_8, f"2wiki dev perfect@8 ≥ {GOAL_PERFECT_AT_8} (best agent)"),
        ("2wiki_full", "R@5", GOAL_R_AT_5, f"2wiki R@5 ≥ {GOAL_R_AT_5} (best agent, all {WIKI_PASSAGES:,} passages)"),
    ):
        agent, row = best(retrieval[key], by(figure))
        value = num(row.get(figure))
        ok = None if value is None else value >= limit
        goals.append(goal(text, f"{agent}: {fmt(value, '.3f')}", value, ok, src[key]))

    def lihua(row: J) -> float | None:  # the best Multi among Single ≥ goal first
        multi, single = num(row.get("multi_all@5")), num(row.get("single_all@5"))
        return None if multi is None or single is None else multi + (1.0 if single >= GOAL_LIHUA_SINGLE else 0.0)

    agent, row = best(retrieval["lihua_dev"], lihua)
    multi, single = (num(row.get(f)) or 0.0 for f in ("multi_all@5", "single_all@5"))
    text = f"LiHua Multi all-evidence@5 ≥ {GOAL_LIHUA_MULTI} while Single ≥ {GOAL_LIHUA_SINGLE}"
    ok = multi >= GOAL_LIHUA_MULTI and single >= GOAL_LIHUA_SINGLE if agent else None
    measured = f"{agent}: Multi {multi:.3f}, Single {single:.3f}"
    goals.append(goal(text, measured, multi if agent else None, ok, src["lihua_dev"]))
    rows, text = retrieval["cmrc_dev"], "CMRC R@1 and R@5 not below BM25 of the same run"
    r1, r5 = (num(dig(rows, BASELINE, f)) for f in ("R@1", "R@5"))
    if r1 is None or r5 is None:
        return [*goals, goal(text, "", None, None, src["cmrc_dev"])]

    def at_least_bm25(row: J) -> bool:
        return (num(row.get("R@1")) or 0.0) >= r1 and (num(row.get("R@5")) or 0.0) >= r5

    def score(row: J) -> float | None:  # agents at or above BM25 first, then by R@1 + R@5
        found = num(row.get("R@1"))
        return None if found is None else found + (num(row.get("R@5")) or 0.0) + 10.0 * at_least_bm25(row)

    agent, row = best(rows, score)
    passing = sum(at_least_bm25(r) for a, r in rows.items() if a != BASELINE)
    measured = f"{agent}: {cells(row, ('R@1 R@5', '.3f'))[0]} vs BM25 {r1:.3f} / {r5:.3f}"
    note = f"{passing} of {len(rows) - 1} agents at or above BM25 on both" if agent else ""
    ok = at_least_bm25(row) if agent else None
    return [*goals, goal(text, measured, num(row.get("R@1")), ok, src["cmrc_dev"], note)]


def streaming_goals(latest: J) -> list[J]:
    streaming, conc = latest["streaming"], latest["concurrency"]
    cpu, agui = streaming["passthrough_ratio"], streaming["agui"]
    whole, structured = agui["us_per_event_whole_run"], agui["us_per_event_structured"]
    worst = None if whole is None or structured is None else max(whole, structured)
    ttft, rate = (num(dig(conc, "ours_over_passthrough", k)) for k in ("ttft_p99", "tokens_per_s"))
    streams, errors, src = conc.get("streams"), conc.get("errors"), source_label(conc)
    text = f"streaming within {GOAL_RATIO}x of the pass-through (server CPU per token)"
    goals = [goal(text, f"{fmt(cpu)}x", cpu, None if cpu is None else cpu <= GOAL_RATIO, source_label(streaming))]
    text = f"AG-UI overhead per event over the internal stream < {GOAL_AGUI_US:.0f} µs"
    measured = f"{fmt(whole, '.1f')} µs (whole run), {fmt(structured, '.1f')} µs (non-token events)"
    goals.append(goal(text, measured, worst, None if worst is None else worst < GOAL_AGUI_US, source_label(agui)))
    text = f"{streams or GOAL_STREAMS} concurrent streams within {GOAL_RATIO}x of the pass-through"
    ok = None if ttft is None or rate is None else ttft <= GOAL_RATIO and rate >= 1 / GOAL_RATIO
    goals.append(goal(text, f"TTFT p99 {fmt(ttft)}x, tokens/s {fmt(rate)}x", ttft, ok, src))
    ok = None if streams is None or errors is None else streams >= GOAL_STREAMS and errors == 0
    measured = f"{streams} at once, {conc.get('streams_total')} in all: {errors} errors"
    return [*goals, goal(f"{GOAL_STREAMS} concurrent streams, 0 errors", measured, errors, ok, src)]


def graph_goals(latest: J) -> list[J]:
    """Per graph store: indexing (on a part of the corpus shown, not measured), writes and retrieval latency."""
    by_store, about, goals = latest["indexing"]["2wiki_by_store"], latest["indexing"]["2wiki_source"] or {}, []
    whole, dates = about.get("mode") == "full", {store: f.get("measured_on") for store, f in by_store.items()}
    for store, f in by_store.items():
        # A store re-measured alone (`--store neo4j`) carries its own date.
        src = source_label({"source": about | ({"date": dates[store]} if len(set(dates.values())) > 1 else {})})
        # The full suite bounds Neo4j to a part of the corpus (graph_indexing --neo4j-passages): its goals say so.
        bounded = whole and f.get("passages") not in (None, WIKI_PASSAGES)
        counts, first = whole and not bounded, f"on the first {fmt(f['passages'], ',.0f')} passages"
        failed = f["failed"] and f"store not measured: {f['failed']}"
        part = "; ".join(filter(None, ["" if counts else f"{first} only", failed]))
        jvm = f["neo4j_jvm_peak_rss_mib"] and f"Neo4j JVM {f['neo4j_jvm_peak_rss_mib']:.0f} MiB more"
        checks = [("2wiki indexing < 3 min", "wall_s", GOAL_INDEX_S, "s", part, counts)]
        rss_note = "; ".join(filter(None, [part, jvm]))
        checks += [("2wiki indexing < 1.5 GiB", "peak_rss_mib", GOAL_RSS_MIB, "MiB", rss_note, counts)]
        for kind, limit in GOAL_WRITE_P95_MS.items():
            refresh = f"with the community refresh (CLI) {fmt(f[f'{kind}_with_refresh_p95_ms'], '.0f')} ms"
            text = "; ".join(filter(None, [f"the write alone, which the API waits for; {refresh}", part]))
            checks += [(f"{kind} one document p95 < {limit / 1000:g} s", f"{kind}_p95_ms", limit, "ms", text, True)]
        for text, key, limit, unit, why, counted in checks:
            ok = None if f[key] is None else (f[key] < limit if counted else "not measured")
            goals.append(goal(f"{text} ({store})", f"{fmt(f[key], '.0f')} {unit}", f[key], ok, src, why))
        known = {a: v for a in AGENTS if (v := num(dig(latest["serving_by_store"], store, a, "p95_ms"))) is not None}
        over = [f"{a} {v:.0f} ms" for a, v in known.items() if v >= GOAL_RETRIEVAL_P95_MS[a]]
        worst = max(known, key=lambda a: known[a] / GOAL_RETRIEVAL_P95_MS[a], default="")
        summary = f"over: {', '.join(over)}" if over else f"slowest {worst} {known.get(worst, 0):.0f} ms"
        scope = first if bounded else "" if whole else f"on {about.get('scope', 'a part of the corpus')}"
        text = f"retrieval p95 < 150 ms per agent, deep_research_agent < 500 ms ({store})"
        measured = f"{len(known) - len(over)} of {len(known)} agents; {summary}"
        goals.append(goal(text, measured, known.get(worst), not over if known else None, src, scope if known else ""))
    texts = ["2wiki indexing < 3 min and < 1.5 GiB", "insert p95 < 2 s, delete p95 < 1 s"]
    texts += ["retrieval p95 < 150 ms per agent (deep_research_agent < 500 ms)"]
    return goals or [goal(text, "", None, None, "–", missing("graph_indexing")) for text in texts]


def suite_goals(latest: J) -> list[J]:
    """The suite's own wall time against its budget, for the full run and for `--quick`."""
    goals = []
    for mode, minutes in GOAL_SUITE_MIN.items():
        run, flag = latest["suite"][mode], " --quick" if mode == "quick" else ""
        text, total, steps = f"scripts/bench.sh{flag} < {minutes} min", num(run.get("total_s")), run.get("steps") or []
        if total is None:
            why = f"no suite{flag and '_quick'}.json: run scripts/bench.sh{flag}"
            goals.append(goal(text, "", None, None, "–", why))
            continue
        slowest = max(steps or [{}], key=lambda step: step.get("seconds", 0))
        why = f"slowest step: {slowest.get('name')} {fmt(slowest.get('seconds'), '.0f')} s" if slowest else ""
        if run.get("reused_index_build_s"):  # honest about the cache: a first run also builds the indexes
            why += f"; retrieval_quality reused cached indexes ({run['reused_index_build_s']:.0f} s to build)"
        # A suite whose steps failed did not do all its work in that time.
        failed = [step["name"] for step in steps if str(step.get("status")).startswith("FAILED")]
        why = f"failed: {', '.join(failed)}; {why}" if failed else why
        ok = total < minutes * 60 and not failed
        goals.append(goal(text, f"{total / 60:.1f} min", total, ok, source_label(run), why))
    return goals


def assemble(results: Path, data: Data, about: About, notes: list[str], now: datetime) -> J:
    latest: J = {"generated_by": "python -m benchmarks.report", "generated_at": now.isoformat(timespec="seconds")}
    latest |= {"results_dir": rel(results), "sources": about, "notes": notes}
    latest["retrieval"] = retrieval_section(data, about)
    latest["serving"], latest["serving_by_store"] = serving_sections(data, about)
    latest |= {"streaming": streaming_section(data, about), "concurrency": concurrency_section(data, about)}
    latest |= {"indexing": indexing_section(data, about), "history": history_section(data, about)}
    latest["suite"] = suite_section(data, about)
    areas = (retrieval_goals, streaming_goals, graph_goals, suite_goals)
    latest["goals"] = [found for goals in areas for found in goals(latest)]
    cleaned: J = clean(latest)
    return cleaned


# -- plots ---------------------------------------------------------------------------------------------------------


def chart(width: float = 8.0, height: float = 4.2) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def bars(axes: Axes, labels: Sequence[str], series: Mapping[str, Sequence[float | None]], across: bool) -> None:
    """One group of bars per label, one bar per series (`across`: horizontal, first label on top); None left out."""
    size = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        kept = [(n + i * size - 0.4 + size / 2, v) for n, v in enumerate(values) if v is not None]
        at, lengths = [p for p, _ in kept], [v for _, v in kept]
        if across:
            drawn = axes.barh(at, lengths, height=size * 0.95, label=name)
        else:
            drawn = axes.bar(at, lengths, width=size * 0.95, label=name)
        axes.bar_label(drawn, fmt="%.2f" if across else "%.0f", fontsize=7, padding=2 if across else 0)
    if across:
        axes.set_yticks(range(len(labels)), labels, fontsize=8)
        axes.invert_yaxis()


def retrieval_plot(latest: J) -> Figure | None:
    retrieval, figures = latest["retrieval"], ("perfect@8", "R@5")
    rows, peers = retrieval["2wiki_dev"], retrieval.get("peers_2wiki_dev") or {}
    published = retrieval.get("hipporag_published_recall@5") or {}
    if not (ours := [a for a, r in rows.items() if any(num(r.get(f)) is not None for f in figures)]):
        return None
    labels = [a if a != BASELINE else "BM25" for a in ours] + [f"peer: {p}" for p in peers]
    labels += [f"published: {name}" for name in published]
    lines = [rows[a] for a in ours] + list(peers.values()) + [{"R@5": v} for v in published.values()]
    fig, axes = chart(8.5, 0.32 * len(labels) + 1.6)
    bars(axes, labels, {f: [num(r.get(f)) for r in lines] for f in figures}, across=True)
    goal_8 = f"goal perfect@8 {GOAL_PERFECT_AT_8}"
    axes.axvline(GOAL_PERFECT_AT_8, color="C0", linestyle="--", linewidth=1, label=goal_8)
    axes.axvline(GOAL_R_AT_5, color="C1", linestyle=":", linewidth=1, label=f"goal R@5 {GOAL_R_AT_5}")
    axes.set_xlim(0, 1.12)
    axes.set_xlabel("share of the 51 2wiki dev questions (perfect@8) / of gold passages (R@5)")
    peers_text = "peers (recorded upstream, ~425 passages), published (1,000 questions)"
    axes.set_title(f"2wiki dev: ours and BM25 (same run), {peers_text}", fontsize=9)
    fig.legend(loc="outside lower center", ncols=4, fontsize=7)
    return fig


def serving_plot(latest: J) -> Figure | None:
    p95 = {store: [num(dig(r, a, "p95_ms")) for a in AGENTS] for store, r in latest["serving_by_store"].items()}
    if not (stores := {f"{s} p95": [v or 0.0 for v in values] for s, values in p95.items() if any(values)}):
        return None
    fig, axes = chart()
    bars(axes, AGENTS, stores, across=False)
    for n, agent in enumerate(AGENTS):
        axes.hlines(GOAL_RETRIEVAL_P95_MS[agent], n - 0.45, n + 0.45, color="black", linestyle="--", linewidth=1)
    axes.plot([], [], color="black", linestyle="--", linewidth=1, label="goal")
    axes.set_xticks(range(len(AGENTS)), [a.replace("_agent", "") for a in AGENTS], fontsize=8)
    axes.set_ylabel("retrieval latency p95 (ms)")
    axes.set_title("Retrieval latency per agent, one question at a time (51 2wiki dev questions)", fontsize=9)
    axes.legend(fontsize=8)
    return fig


def streaming_plot(latest: J) -> Figure | None:
    """Ours / pass-through where higher is worse (throughput inverted to a slowdown)."""
    s, p, r = latest["streaming"], latest["streaming"]["passthrough"], latest["concurrency"]["ours_over_passthrough"]
    n, rate, r = latest["concurrency"]["streams"] or GOAL_STREAMS, num(dig(r, "tokens_per_s")), r or {}
    rows = {"added latency per token p50, 1 stream": ratio(s["added_us_per_token_p50"], p["added_us_per_token_p50"])}
    rows |= {"server CPU per token, 1 stream": s["passthrough_ratio"]}
    rows |= {"first token p50, 1 stream": ratio(s["ttft_ms_p50"], p["ttft_ms_p50"])}
    rows |= {f"first token p99, {n} streams": num(r.get("ttft_p99"))}
    rows |= {f"throughput slowdown, {n} streams": round(1 / rate, 3) if rate else None}
    rows |= {f"server CPU per token, {n} streams": num(r.get("server_cpu_per_token"))}
    if not (rows := {label: value for label, value in rows.items() if value is not None}):
        return None
    fig, axes = chart(8.0, 0.4 * len(rows) + 1.4)
    bars(axes, list(rows), {"ours / pass-through": list(rows.values())}, across=True)
    axes.set_xlim(0, max(GOAL_RATIO, *rows.values()) * 1.12)
    axes.axvline(1.0, color="grey", linewidth=1)
    axes.axvline(GOAL_RATIO, color="black", linestyle="--", linewidth=1, label=f"goal {GOAL_RATIO}x")
    axes.set_xlabel("ours / bare FastAPI pass-through (1 = as fast; higher is slower)")
    axes.set_title("Streaming: our server relative to a bare FastAPI pass-through of the same model", fontsize=9)
    fig.legend(loc="outside lower center", ncols=2, fontsize=8)
    return fig


def indexing_plot(latest: J) -> Figure | None:
    """Podcast seconds per piece per system; without podcast results, 2wiki indexing time per store."""
    systems = {n: r for n, r in latest["indexing"]["podcast"].items() if num(r.get("s_per_document")) is not None}
    stores = {s: f["wall_s"] for s, f in latest["indexing"]["2wiki_by_store"].items() if f.get("wall_s") is not None}
    if not systems and not stores:
        return None
    fig, axes = chart()
    if not systems:
        axes.bar_label(axes.bar(list(stores), list(stores.values()), color="C2"), fmt="%.0f s", fontsize=8)
        axes.axhline(GOAL_INDEX_S, color="black", linestyle="--", linewidth=1, label="goal 3 min")
        axes.set_ylabel("2wiki indexing wall time (s)")
        axes.legend(fontsize=8)
        return fig
    labels = [f"{'ours ' if n in OURS_MODES else ''}{n}\n{r.get('documents')} pieces" for n, r in systems.items()]
    drawn = axes.bar(labels, [r["s_per_document"] for r in systems.values()], color="C2")
    axes.bar_label(drawn, fmt="%.2f", fontsize=8)
    axes.tick_params(axis="x", labelsize=8)
    axes.set_ylabel("wall seconds per podcast piece")
    axes.set_title("Indexing podcast transcripts through the same scripted model", fontsize=9)
    return fig


def history_plot(latest: J) -> Figure | None:
    if not (targets := {t: rows for t, rows in latest["history"]["targets"].items() if rows}):
        return None
    fig, axes = chart()
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


PLOTS = {"retrieval": retrieval_plot, "serving": serving_plot, "streaming": streaming_plot}
PLOTS |= {"indexing": indexing_plot, "history": history_plot}


# -- REPORT.md -----------------------------------------------------------------------------------------------------


def table(header: Sequence[str] | str, rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table; a header given as text has its cells between "|"."""
    header = header.split("|") if isinstance(header, str) else header
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |" for row in rows])


def plot_block(name: str, links: dict[str, str], sentence: str) -> str:
    return f"![{name}]({links[name]})\n\n{sentence}" if name in links else f"_No plot: no data._ {sentence}"


def machine_line(machine: J) -> str:
    """CPU, cores and Python: what makes two runs comparable."""
    if "cpu_model" not in machine:
        return str(machine.get("description", "–"))
    return f"{machine.get('cpu_model')}, {machine.get('cpus_usable')} cores usable, Python {machine.get('python')}"


def header(latest: J, links: dict[str, str]) -> str:
    sources = {name: s for name, s in latest["sources"].items() if s}
    described = [s["machine"] for s in sources.values() if s["machine"].get("cpu_model")]
    machines = Counter(machine_line(m) for m in described)
    machine, many = machines.most_common(1)[0][0] if machines else "–", len(machines) > 1
    extra: J = next((m for m in described if m.get("memory_gib")), {})
    if extra:
        machine += f", {extra['memory_gib']} GiB, {extra.get('platform', '')}".rstrip(", ")
    rows = []
    for name, s in sources.items():
        start, end = s["machine"].get("load_average_1m_at_start"), s["machine"].get("load_average_1m_at_end")
        load = "–" if start is None else f"{start}" + (f" → {end}" if end is not None else "")
        mode = s["mode"] + (f" ({s['scope']})" if s["scope"] else "")
        rows.append([name, f"`{s['file']}`", mode, short_date(s["date"]), load, *[machine_line(s["machine"])] * many])
    text = f"Generated by `{latest['generated_by']}` (the last step of `scripts/bench.sh`) on "
    text += f"{short_date(latest['generated_at'])} from `{latest['results_dir']}`; every figure is also in "
    text += "`latest.json` there. Do not edit this file: rerun the benchmarks or the script."
    lines = ["# Benchmark report", "", text, "", f"Machine: {machine}."]
    lines[-1] += " Not every run was on it: see the table." if many else ""
    lines += ["It is shared and has 2 cores: compare figures of one run, not across runs.", ""]
    columns = ["source", "file", "mode", "date", "load 1 min", *["machine"] * many]
    lines += [table(columns, rows) if described else "No result files found."]
    if absent := [name for name, s in latest["sources"].items() if not s]:
        lines += ["", "Not found: " + ", ".join(absent) + "."]
    lines += ["", *[f"- {note}" for note in latest["notes"]]] if latest["notes"] else []
    goals = [[g["goal"], g["measured"], f"**{g['status']}**", g["source"], g["note"]] for g in latest["goals"]]
    return "\n".join([*lines, "", "## Goals", "", table("goal|measured|status|source|note", goals)])


def retrieval_markdown(latest: J, links: dict[str, str]) -> str:
    retrieval = latest["retrieval"]
    datasets, rows = retrieval["datasets"], retrieval["2wiki_dev"]
    parts = ["## Retrieval quality", "", "Zero model calls; offline extractor, local MiniLM, embedded store."]
    for key, (_, figures, title) in RETRIEVAL_SETS.items():
        about, index = datasets[key], datasets[key].get("index")
        parts += ["", f"### {title}", ""]
        if key == "2wiki_full" and about == datasets["2wiki_dev"]:
            parts.append("The 2wiki dev run above was over all passages: its R@2 and R@5 are these figures.")
        elif not about.get("source"):
            parts.append(f"_{about.get('note', 'no data')}._")
        else:
            built = f"; index built in {index['wall_s']} s" if isinstance(index, dict) and "wall_s" in index else ""
            text = f"{fmt(about.get('documents'), ',.0f')} documents, {about.get('questions')} questions; "
            text += f"{source_label(about)}{built}." + (f" {about['note']}." if about.get("note") else "")
            columns = [*((f, ".3f") for f in figures), ("p50_ms p95_ms", ".1f")]
            body = [[n if n != BASELINE else "BM25 (bm25s)", *cells(r, *columns)] for n, r in retrieval[key].items()]
            parts += [text, "", table(["agent", *figures, "latency p50 / p95 ms"], body)]
    peers, published = retrieval.get("peers_2wiki_dev") or {}, retrieval.get("hipporag_published_recall@5") or {}
    if peers or published:
        columns = [(f, ".3f") for f in ("perfect@8", "R@2", "R@5")]
        body = [[f"peer: {p}", *cells(r, *columns)] for p, r in peers.items()]
        body += [[f"published: {name}", "–", "–", fmt(v, ".3f")] for name, v in published.items()]
        parts += ["", "### 2wiki peers", "", f"Peer rows: {PEER_CORPUS_NOTE}. Published rows: {HIPPORAG_NOTE}.", ""]
        parts.append(table("system|perfect@8|R@2|R@5", body))

    def by_perfect_then_r5(r: J) -> float | None:
        return None if num(r.get("perfect@8")) is None else r["perfect@8"] + (r.get("R@5") or 0) / 10

    agent, row = best(rows, by_perfect_then_r5)
    bm25, top = rows.get(BASELINE) or {}, max(peers, key=lambda p: num(peers[p].get("perfect@8")) or 0.0, default=None)
    text = f"On the 51 2wiki dev questions over {fmt(datasets['2wiki_dev'].get('documents'), ',.0f')} passages "
    text += f"our best agent, {agent}, has all gold passages in its first 8 for {fmt(row.get('perfect@8'), '.3f')} "
    text += (
        f"of the questions and R@5 {fmt(row.get('R@5'), '.3f')} (goals {GOAL_PERFECT_AT_8} and {GOAL_R_AT_5}), against "
    )
    text += f"{fmt(bm25.get('perfect@8'), '.3f')} and {fmt(bm25.get('R@5'), '.3f')} for BM25"
    if top:
        text += f"; the best peer, {top}, recorded {fmt(dig(peers, top, 'perfect@8'), '.3f')} and "
        text += f"{fmt(dig(peers, top, 'R@5'), '.3f')} on a corpus of about 425 passages"
    if "HippoRAG" in published:
        text += f", and HippoRAG published R@5 {fmt(published['HippoRAG'], '.3f')} on 1,000 questions"
    sentence = text + "." if agent else "No 2wiki dev figures for our agents."
    return "\n".join([*parts, "", plot_block("retrieval", links, sentence)])


def serving_markdown(latest: J, links: dict[str, str]) -> str:
    by_store, figures = latest["serving_by_store"], latest["indexing"]["2wiki_by_store"]
    about = latest["indexing"]["2wiki_source"] or {}
    scope = about.get("scope") or "–"
    parts = ["## Serving speed", "", f"graph_indexing on {scope}; {source_label({'source': about})}.", ""]
    if not figures:
        return "\n".join([*parts, f"_{missing('graph_indexing')}._"])
    rows = []
    for a in AGENTS:
        latency = [cells(dig(by_store, s, a), ("p50_ms p95_ms", ".0f"))[0] for s in figures]
        rows.append([a, *latency, f"< {GOAL_RETRIEVAL_P95_MS[a]:.0f}"])
    for kind, limit in GOAL_WRITE_P95_MS.items():
        alone, refresh = f"{kind}_p95_ms", f"{kind}_with_refresh_p95_ms"
        rows.append([f"{kind} one document (write alone)", *(f"p95 {fmt(f[alone], '.0f')}" for f in figures.values())])
        rows[-1].append(f"< {limit:.0f}")
        rows.append([f"{kind} + community refresh", *(f"p95 {fmt(f[refresh], '.0f')}" for f in figures.values()), ""])
    # A store's column: its name, and the passages it ran on when that is not the whole corpus.
    passages = {s: f.get("passages") for s, f in figures.items()}
    headers = {s: f"{s} (first {fmt(n, ',.0f')} passages)" for s, n in passages.items()}
    headers |= {s: s for s, n in passages.items() if n in (None, WIKI_PASSAGES)}
    parts.append(table(["ms, p50 / p95", *headers.values(), "goal p95"], rows))
    for store, why in (latest["serving"].get("stores_not_measured") or {}).items():
        parts += ["", f"{store}: not measured ({why})."]
    said = []
    for store, column in headers.items():
        if known := {a: v for a in AGENTS if (v := num(dig(by_store, store, a, "p95_ms"))) is not None}:
            met = sum(v < GOAL_RETRIEVAL_P95_MS[a] for a, v in known.items())
            slowest = max(known, key=lambda a: known[a])
            said.append(f"on {column} {met} of {len(known)} agents are under their goal and the slowest, {slowest}, ")
            said[-1] += f"takes {known[slowest]:.0f} ms at p95 (goal {GOAL_RETRIEVAL_P95_MS[slowest]:.0f} ms)"
    sentence = f"Retrieval latency per agent over the 51 dev questions on {scope}: " + "; ".join(said) + "."
    return "\n".join([*parts, "", plot_block("serving", links, sentence if said else "No retrieval latencies.")])


# (label, section, figure keys, format) of the streaming table's rows, cells as cells() makes them.
STREAMING_ROWS = (
    ("added latency per token p50 / p99 (µs)", "streaming", "added_us_per_token_p50 added_us_per_token_p99", ".1f"),
    ("server CPU per token (µs), 1 stream", "streaming", "cpu_us_per_token", ".1f"),
    ("tokens/s per stream", "streaming", "tokens_per_s", ",.0f"),
    ("first token p50 / p99 (ms), 1 stream", "streaming", "ttft_ms_p50 ttft_ms_p99", ".1f"),
    ("errors, {n} concurrent streams × {waves} waves", "concurrency", "errors", ""),
    ("first token p50 / p99 (ms), {n} streams", "concurrency", "ttft_p50_ms ttft_p99_ms", ",.0f"),
    ("tokens/s in all, {n} streams", "concurrency", "tokens_per_s", ",.0f"),
    ("server CPU per token (µs), {n} streams", "concurrency", "server_cpu_us_per_token", ".0f"),
    ("server peak RSS (MiB)", "concurrency", "peak_rss_mib", ".0f"),
)


def streaming_markdown(latest: J, links: dict[str, str]) -> str:
    s, c, agui = latest["streaming"], latest["concurrency"], latest["streaming"]["agui"]
    n, waves, r = c.get("streams") or "–", c.get("waves") or "–", c.get("ours_over_passthrough") or {}
    rows = []
    for label, area, keys, spec in STREAMING_ROWS:
        ours, theirs = cells(latest[area], (keys, spec)), cells(latest[area]["passthrough"], (keys, spec))
        rows.append([label.format(n=n, waves=waves), *ours, *theirs])
    text = "General chat (no retrieval) with a 0 ms scripted model, our server next to a bare FastAPI pass-through "
    text += f"of the same model in the same run. Single stream: {source_label(s)}; concurrent: {source_label(c)}, "
    text += f"history in {c.get('history') or '–'}."
    parts = ["## Streaming and concurrency", "", text, "", table(["", "ours", "pass-through"], rows)]
    if client := s.get("model_client_cpu_us_per_token") or {}:
        methods = ", ".join(f"{m} {fmt(v, '.1f')}" for m, v in client.items())
        label = source_label({"source": s["model_client_source"]})
        parts += ["", f"Model client CPU per streamed token (µs, {label}): {methods}."]
    if agui.get("source"):
        text = f"AG-UI translation CPU per event ({source_label(agui)}): "
        text += f"{fmt(agui['us_per_event_whole_run'], '.1f')} µs over a whole run (token frames dominate), "
        text += f"{fmt(agui['us_per_event_structured'], '.1f')} µs for the other events (steps, tool calls, citations)."
        parts += ["", text]
    said = []
    if s["passthrough_ratio"] is not None:
        said.append(f"One stream at a time our server spends {fmt(s['passthrough_ratio'])}x the pass-through's CPU ")
        said[-1] += f"per token and adds {fmt(s['added_us_per_token_p50'], '.1f')} µs per token at p50 (pass-through "
        said[-1] += f"{fmt(s['passthrough']['added_us_per_token_p50'], '.1f')} µs)"
    if c.get("streams") is not None:
        said.append(f"with {c['streams']} concurrent streams its first-token p99 is {fmt(r.get('ttft_p99'))}x and its ")
        said[-1] += f"throughput {fmt(r.get('tokens_per_s'))}x the pass-through's, with {c.get('errors')} errors in "
        said[-1] += f"{c.get('streams_total')} streams"
    sentence = "; ".join(said) + f" (dashed line: the {GOAL_RATIO}x goal)." if said else "No streaming figures."
    return "\n".join([*parts, "", plot_block("streaming", links, sentence)])


PODCAST = [("documents", ""), ("chunks", ""), ("wall_s", ".1f"), ("s_per_document", ".2f"), ("minilm_s", ".1f")]
PODCAST += [("calls_per_chunk", ".2f"), ("entities", ""), ("relations", ""), ("peak_rss_mib", ".0f")]


def indexing_markdown(latest: J, links: dict[str, str]) -> str:
    indexing = latest["indexing"]
    podcast, stores = indexing["podcast"], indexing["2wiki_by_store"]
    parts = ["## Indexing cost", ""]
    if indexing["source"]:
        rows = []
        for name, r in podcast.items():
            label = f"{'ours ' * (name in OURS_MODES)}{name}{' (failed)' * bool(r.get('failed'))}"
            rows.append([name, r["status"], *["–"] * 8] if "status" in r else [label, *cells(r, *PODCAST)])
        text = f"Podcast transcripts, ours on the first {indexing.get('podcast_documents')} pieces, the peers on the "
        text += f"first {indexing.get('podcast_peer_documents')}, through the same scripted model at 0 ms per call "
        text += f"(ours also at 200 ms); {source_label(indexing)}. The peers embed with a nearly free hashed bag of "
        text += "words: compare their wall time with ours minus MiniLM."
        columns = "system|pieces|chunks|wall s|s / piece|MiniLM s|calls / chunk|entities|relations|peak RSS MiB"
        parts += [text, "", table(columns, rows)]
    else:
        parts.append(f"_{indexing.get('note')}._")
    index = (("wall_s", ".1f"), ("peak_rss_mib", ".0f"), ("calls_per_chunk", ".2f"))
    rows = [[f"ours, {store}", *cells(f, ("passages", ",.0f"), *index), "–"] for store, f in stores.items()]
    for peer, f in ((peer, f) for peer, f in indexing["peers_2wiki"].items() if "status" not in f):
        rows.append([f"{peer} (measured)", *cells(f, ("documents", ""), *index, ("query_p50_ms query_p95_ms", ".0f"))])
    quoted = (("wall_s", ".0f"), ("peak_rss_mb", ".0f"), ("model_calls_per_chunk", ".1f"))
    for peer, f in (indexing.get("2wiki_peers_quoted") or {}).items():
        rows.append([f"{peer} (quoted in the issue)", "800", *cells(f, *quoted), "–"])
    if rows:
        text = f"2wiki passages ({source_label({'source': indexing['2wiki_source']})}; peers measured on the first "
        text += f"{indexing.get('peer_passages') or '–'} passages; query = local-mode context only):"
        columns = "system|passages|index wall s|peak RSS MiB|calls / chunk|query p50 / p95 ms"
        parts += ["", text, "", table(columns, rows)]
    ours = [f"{fmt(podcast[m]['s_per_document'])} s {m}" for m in OURS_MODES if dig(podcast, m, "s_per_document")]
    peers = [
        f"{fmt(podcast[p]['s_per_document'])} s for {p} ({podcast[p].get('documents')} pieces)"
        for p in PEERS
        if dig(podcast, p, "s_per_document")
    ]
    if ours or peers:
        text = f"Per podcast piece, ours takes {', '.join(ours)} ({indexing.get('podcast_documents')} pieces; "
        text += f"{fmt(indexing.get('calls_per_chunk'))} model calls per chunk with the model)"
        sentence = text + (f", against {' and '.join(peers)}." if peers else "; no peer ran.")
    elif stores:
        times = ", ".join(f"{s} {fmt(f.get('wall_s'), '.0f')} s" for s, f in stores.items())
        sentence = f"Indexing {dig(indexing, '2wiki_source', 'scope')} takes {times} "
        sentence += f"(goal under {GOAL_INDEX_S:.0f} s on all passages)."
    else:
        sentence = "No indexing figures."
    return "\n".join([*parts, "", plot_block("indexing", links, sentence)])


def history_markdown(latest: J, links: dict[str, str]) -> str:
    history, parts = latest["history"], ["## History store", ""]
    if not history["source"]:
        return "\n".join([*parts, f"_{history.get('note')}._"])
    figures = (("turns_per_s", ".1f"), ("start_p50_ms start_p95_ms", ".1f"), ("append_p50_ms append_p95_ms", ".1f"))
    rows = []
    for target, by_n in history["targets"].items():
        for n, r in sorted(by_n.items(), key=lambda item: int(item[0])):
            rows.append([target, n, *cells(r, *figures, ("cpu_us_per_turn", ",.0f"))])
    text = "One turn = the store calls of one chat turn: start (the conversation, the user message and the 20 "
    text += "messages before it, one statement on Postgres) and append (the answer). The raw asyncpg loop sends one "
    text += "statement per call into copies of the same tables: the floor of what a store must send. "
    text += f"{source_label(history)}."
    parts += [text, "", table("target|sessions|turns/s|start p50 / p95 ms|append p50 / p95 ms|CPU µs / turn", rows), ""]
    postgres, raw, sqlite = (history["targets"].get(t) or {} for t in ("postgres", "raw_asyncpg", "sqlite"))
    if not postgres:
        return "\n".join([*parts, plot_block("history", links, "No Postgres history-store figures.")])
    top, low = max(postgres, key=int), min(postgres, key=int)

    def rate(rows: J, n: str) -> str:
        return fmt(dig(rows, n, "turns_per_s"), ".0f")

    text = f"At {top} concurrent sessions the Postgres store completes {rate(postgres, top)} turns/s"
    if raw:
        share = ratio(num(dig(postgres, top, "turns_per_s")), num(dig(raw, top, "turns_per_s")))
        text += f", {fmt(share)}x the raw asyncpg loop's {rate(raw, top)}"
    text += f" (SQLite {rate(sqlite, top)})" if sqlite else ""
    text += f"; with {low} session {rate(postgres, low)} against {rate(raw, low)} raw."
    return "\n".join([*parts, plot_block("history", links, text)])


def suite_markdown(latest: J, links: dict[str, str]) -> str:
    parts = ["## The suite's run time", ""]
    for mode, run in latest["suite"].items():
        if not run:
            parts.append(f"_{mode}: no run recorded._")
            continue
        rows = [[step["name"], step["status"], f"{step['seconds']} s"] for step in run.get("steps") or []]
        total = (num(run.get("total_s")) or 0.0) / 60
        text = f"**{mode}** ({source_label(run)}): {total:.1f} min in all, setup and the services' start included."
        parts += [text, "", table("step|status|wall", rows), ""]
    return "\n".join(parts).rstrip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for option, default, what in (
        ("--results", "results", "the per-benchmark JSON files"),
        ("--report", "REPORT.md", "the Markdown report to write"),
        ("--plots", "report", "where the PNG plots go"),
    ):
        parser.add_argument(option, type=Path, default=ROOT / "benchmarks" / default, help=what)
    args = parser.parse_args()
    results, report, notes = args.results.resolve(), args.report.resolve(), list[str]()
    latest = assemble(results, *load(results, notes), notes, datetime.now(UTC))
    (results / "latest.json").write_text(json.dumps(latest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    links = {}
    for name, plot in PLOTS.items():  # one PNG per area with data; a stale one of an area without is removed
        fig, path = plot(latest), args.plots.resolve() / f"{name}.png"
        if fig is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, format="png", metadata={"Software": None})
            links[name] = Path(os.path.relpath(path, report.parent)).as_posix()
        elif path.exists():
            path.unlink()
    writers = (header, retrieval_markdown, serving_markdown, streaming_markdown, indexing_markdown, history_markdown)
    text = "\n\n".join(write(latest, links) for write in (*writers, suite_markdown))
    report.write_text(text + "\n", encoding="utf-8")
    counts = Counter(goal["status"] for goal in latest["goals"])
    print(f"wrote {rel(results / 'latest.json')}, {rel(report)} and {len(links)} plots; goals: {dict(counts)}")


if __name__ == "__main__":
    main()
