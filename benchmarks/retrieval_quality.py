"""Retrieval quality with zero model calls, per agent and for a BM25 baseline, on three datasets.

- 2wiki: 51 multi-hop dev questions, over the corpus the peers searched (`2wiki_dev`: the first 425
  passages, which hold every dev question's passages and their distractors) and over all 6,119 passages
  (`2wiki_full`). perfect@8 (every gold title among the
  first 8 distinct titles of the chunk results), R@2 and R@5 (share of gold titles among the first 2 / 5
  distinct titles). Next to it, the same figures computed from the four peers' recorded lists
  (`peer_results_dev.json`, as recorded upstream on the 425 passages: repeated and truncated titles count
  as they are), and next to the full corpus HippoRAG's published recall@5 on 1,000 questions of it.
- LiHua-World dev: 213 questions over 442 chat sessions. single_all@5 / multi_all@5: share of Single /
  Multi questions with every evidence session among the sessions of the first 5 chunks; null_empty_rate:
  share of Null questions (nothing to find) for which the agent returns no chunk at all.
- CMRC 2018 dev: 1,073 Chinese questions, one gold passage each: R@1 and R@5 over distinct passages.

The KBs are built through the product's own wiring (`open_knowledge_service`, offline extractor, local
MiniLM, embedded store), all documents in one `ingest` call, as `python -m backend ingest` does. A built
index is kept under `benchmarks/.cache/quality/` keyed by a hash of the dataset files and of the indexing
code (everything under backend/ except the agents, the server, routing and answering), so changing an agent or
the answerer does not rebuild it; `--rebuild` forces it (each build keeps the dataset's three newest indexes and
removes older ones). The build time recorded with the index is reported next to the figures.

The agents are built as the service builds them (`AGENT_BUILDERS[type](kb, AgentResources(store,
embedder, RAG_TOP_K, model=None))`) and asked one question at a time; their latency is recorded too.
fusion_agent fuses the traces its four members just produced for the question (the same FusionAgent code,
without running each member twice); its latency is theirs summed plus the fusion's, an upper bound (the
service's fusion_agent shares its members' identical reads; graph_indexing measures that one).
`router_choice` is the product's default when a request names no agent: per question, the ranking of the agent
the router picks for its shape (`domain/agent_choice.py`), with how many questions went to each.
BM25 is `bm25s` (Okapi, k1 1.5, b 0.75) over the documents: English words without stopwords, or jieba
words for Chinese; 2wiki and LiHua index title and text, CMRC the passage text (as its published baseline).

Run:  python -m benchmarks.retrieval_quality [--datasets 2wiki_dev,2wiki_full,lihua,cmrc] [--quick] [--rebuild]
                                             [--misses 2wiki_full] [--jobs 2]
`--jobs N` evaluates N datasets at a time, each in its own process (the suite uses 2: the quality figures are the
same, the latencies recorded here then include the other process's load; serving latency is graph_indexing's).
`--reuse-stale` (development only) reuses the newest index of a dataset even when the indexing code changed.
`--quick`: 2wiki_dev only (a `--datasets cmrc --quick` run asks 300 of the CMRC questions).
Writes benchmarks/results/retrieval_quality.json (`--quick`: retrieval_quality_quick.json).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bm25s
import jieba  # type: ignore[import-untyped]

from backend.bootstrap import open_knowledge_service
from backend.domain import ids
from backend.domain.agent_choice import choose_agent
from backend.domain.agent_types import KNOWN_AGENT_TYPES
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.agents import FusionAgent
from backend.graphrag_agent.ports import AgentTrace
from backend.infrastructure.agents.rag_factory.builders import (
    AGENT_BUILDERS,
    FUSION_MEMBERS,
    AgentResources,
    fusion_lead,
)
from benchmarks.goals import AGENTS
from benchmarks.graph_indexing import Wiring, bench_settings
from benchmarks.graph_probes import log, machine, spread_ms, status_kib
from benchmarks.quality_data import (
    DATASETS,
    HIPPORAG_RECALL_AT_5,
    ROOT,
    Dataset,
    Question,
    load_2wiki,
    load_cmrc,
    load_lihua,
)

PEER_CORPUS_PASSAGES = 425
FUSION = "fusion_agent"
CACHE = ROOT / "benchmarks" / ".cache" / "quality"
RESULTS = ROOT / "benchmarks" / "results"
KB = "quality"
CACHE_KEPT = 3  # indexes kept per dataset: the current indexing code's and two older ones
# Indexing code: a change here rebuilds the cached indexes; agents and the server do not.
INDEX_CODE = [ROOT / "backend"]
NOT_INDEX_CODE = (
    "backend/graphrag_agent/agents/",
    "backend/infrastructure/agents/",
    "backend/domain/agent_choice.py",
    "backend/server/",
    "backend/application/chat",
    "backend/application/routing/",
    "backend/infrastructure/routing/",
    "backend/application/answering/",
    "backend/infrastructure/llm/extractive",
)


# -- the index ---------------------------------------------------------------------------------------------------


def signature(dataset: Dataset) -> str:
    digest = hashlib.sha256()
    for path in dataset.files():
        digest.update(path.as_posix().encode() + hashlib.sha256(path.read_bytes()).digest())
    digest.update(str(len(dataset.documents)).encode())
    for path in sorted(p for root in INDEX_CODE for p in root.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if not relative.startswith(NOT_INDEX_CODE):
            digest.update(relative.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def index_dir(dataset: Dataset) -> Path:
    return CACHE / f"{dataset.name}-{len(dataset.documents)}-{signature(dataset)}"


def fresh_directory(directory: Path) -> Path:
    """Empty `directory` with an empty KB registry in it; returns the registry's path."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    registry = directory / "kb_registry.toml"
    registry.write_text("# none: the benchmark creates its KB\n", encoding="utf-8")
    return registry


async def build_index(dataset: Dataset, directory: Path) -> dict[str, Any]:
    """Ingest every document into a fresh KB under `directory`; returns what the build cost."""
    registry = fresh_directory(directory)
    started = time.perf_counter()
    async with open_knowledge_service(bench_settings("embedded", directory, registry, None)) as service:
        await service.create_kb(KnowledgeBase(KB, f"{dataset.name} evaluation", language=dataset.language))
        every = max(1, len(dataset.documents) // 10)

        def progress(done: int, total: int, _title: str) -> None:
            if done % every == 0 or done == total:
                log("quality", f"{dataset.name}: indexed {done}/{total} in {time.perf_counter() - started:.0f} s")

        report = await service.ingest(KB, dataset.documents, progress)
    meta = {
        "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "documents": len(dataset.documents),
        "chunks": report.chunks_written,
        "wall_s": round(time.perf_counter() - started, 1),
        "peak_rss_mib": round(status_kib("self", "VmHWM") / 1024, 1),
        "machine_load_1m": machine()["load_average_1m_at_start"],
    }
    (directory / "index.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return meta


async def ensure_index(dataset: Dataset, rebuild: bool, reuse_stale: bool) -> tuple[Path, dict[str, Any]]:
    directory = index_dir(dataset)
    if reuse_stale and not (directory / "index.json").is_file():
        built = built_indexes(dataset)
        if built:
            stale = built[-1].parent.name
            log("quality", f"{dataset.name}: reusing {stale}, built by other indexing code (--reuse-stale)")
            meta = json.loads(built[-1].read_text(encoding="utf-8"))
            return built[-1].parent, meta | {"reused": True, "stale": True}
    meta_file = directory / "index.json"
    if meta_file.is_file() and not rebuild:
        log("quality", f"{dataset.name}: reusing the index in {directory.name}")
        return directory, json.loads(meta_file.read_text(encoding="utf-8")) | {"reused": True}
    log("quality", f"{dataset.name}: building the index ({len(dataset.documents)} documents)")
    meta = await build_index(dataset, directory) | {"reused": False}
    prune_cache(dataset)
    return directory, meta


def built_indexes(dataset: Dataset) -> list[Path]:
    """The `index.json` of every cached index of this dataset, whatever code built it, oldest first."""
    return sorted(CACHE.glob(f"{dataset.name}-{len(dataset.documents)}-*/index.json"), key=lambda p: p.stat().st_mtime)


def prune_cache(dataset: Dataset) -> None:
    """Keep the CACHE_KEPT newest indexes of this dataset (an index is some hundred MB to GBs; older indexing
    code's ones are only worth keeping for `--reuse-stale` and a quick switch between branches)."""
    for meta in built_indexes(dataset)[:-CACHE_KEPT]:
        log("quality", f"{dataset.name}: removing the old index {meta.parent.name}")
        shutil.rmtree(meta.parent, ignore_errors=True)


# -- rankings ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ranking:
    question: Question
    chunk_keys: list[set[str]]  # per chunk result, in order: the gold keys of its document
    seconds: float

    def distinct(self) -> list[str]:
        return list(dict.fromkeys(key for keys in self.chunk_keys for key in sorted(keys)))


async def agent_rankings(dataset: Dataset, directory: Path, agents: Sequence[str]) -> dict[str, list[Ranking]]:
    registry = directory / "kb_registry.toml"
    rankings: dict[str, list[Ranking]] = {agent: [] for agent in agents}
    settings = bench_settings("embedded", directory, registry, None)
    async with open_knowledge_service(settings) as service:
        wiring = Wiring.of(service)
        kb = next(kb for kb in await service.list_kbs() if kb.kb_prefix == KB)
        resources = AgentResources(wiring.store, wiring.embedder, settings.retrieval.top_k)
        built = {agent: AGENT_BUILDERS[agent](kb, resources) for agent in agents}
        replay = _fusion_replay(agents, kb, resources.top_k)
        if replay is not None:
            built[FUSION] = replay.agent
        await built[agents[0]].retrieve_with_trace("warm up", "warm-up")  # loads the vector index
        for n, question in enumerate(dataset.questions):
            for agent in agents:  # interleaved, so machine-load drift hits every agent alike
                started = time.perf_counter()
                trace = await built[agent].retrieve_with_trace(question.text, f"quality-{n}")
                seconds = time.perf_counter() - started
                if replay is not None and agent in replay.members:
                    replay.record(agent, trace, seconds)
                elif agent == FUSION and replay is not None:
                    seconds += replay.members_seconds()
                chunks = [r for r in trace["retrieval_results"] if r["granularity"] == "Chunk"]
                keys = [dataset.keys_of(r["source"]["doc_id"]) for r in chunks]
                rankings[agent].append(Ranking(question, keys, seconds))
    return rankings


class _Recorded:
    """A member of fusion_agent that hands back the trace its agent just produced for the same question."""

    def __init__(self, agent_type: str, kb_prefix: str) -> None:
        self.agent_type = agent_type
        self.kb_prefix = kb_prefix
        self.trace: AgentTrace | None = None
        self.seconds = 0.0

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace:
        assert self.trace is not None, "the member agent runs before the fusion"
        return self.trace


@dataclass(slots=True)
class _FusionReplay:
    """fusion_agent over the member agents' traces of the same question: the fusion code as the service runs
    it, without running every member twice (it halves the evaluation). Its latency is the members' time
    (they run one after the other here; in the service concurrently, on the same CPU) plus the fusion's."""

    members: dict[str, _Recorded]
    agent: FusionAgent

    def record(self, agent_type: str, trace: AgentTrace, seconds: float) -> None:
        self.members[agent_type].trace = trace
        self.members[agent_type].seconds = seconds

    def members_seconds(self) -> float:
        return sum(member.seconds for member in self.members.values())


def _fusion_replay(agents: Sequence[str], kb: KnowledgeBase, top_k: int) -> _FusionReplay | None:
    """The replay when fusion_agent is evaluated after all of its members; None otherwise."""
    if FUSION not in agents or not set(FUSION_MEMBERS) <= set(agents[: agents.index(FUSION)]):
        return None
    members = {name: _Recorded(name, kb.kb_prefix) for name in FUSION_MEMBERS}
    return _FusionReplay(members, FusionAgent(list(members.values()), top_k=top_k, lead=fusion_lead(kb)))


def bm25_rankings(dataset: Dataset, depth: int = 10) -> list[Ranking]:
    chinese = dataset.language == "zh"

    def text_of(index: int) -> str:
        document = dataset.documents[index]
        return document.text if chinese else f"{document.title}\n{document.text}"

    def words(texts: list[str]) -> list[list[str]]:
        if chinese:
            return [[w.lower() for w in jieba.lcut(t) if w.strip() and any(c.isalnum() for c in w)] for t in texts]
        tokenized = bm25s.tokenize(texts, stopwords="en", show_progress=False, return_ids=False)
        return [list(tokens) for tokens in tokenized]

    retriever = bm25s.BM25()
    retriever.index(words([text_of(i) for i in range(len(dataset.documents))]), show_progress=False)
    keys = [dataset.keys_of(ids.document_id(d.title, d.text)) for d in dataset.documents]
    rankings = []
    for question in dataset.questions:
        started = time.perf_counter()
        found, _ = retriever.retrieve([words([question.text])[0]], k=min(depth, len(keys)), show_progress=False)
        seconds = time.perf_counter() - started
        rankings.append(Ranking(question, [keys[int(i)] for i in found[0]], seconds))
    return rankings


# -- figures -----------------------------------------------------------------------------------------------------


def recall(gold: Sequence[str], found: Sequence[str], k: int) -> float:
    return len(set(gold) & set(found[:k])) / len(set(gold))


def mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 3) if values else float("nan")


def twowiki_figures(rankings: Sequence[Ranking]) -> dict[str, float]:
    pairs = [(r.question.gold, r.distinct()) for r in rankings]
    return {
        "perfect@8": mean([float(set(g) <= set(f[:8])) for g, f in pairs]),
        "R@2": mean([recall(g, f, 2) for g, f in pairs]),
        "R@5": mean([recall(g, f, 5) for g, f in pairs]),
    }


def lihua_figures(rankings: Sequence[Ranking]) -> dict[str, float | None]:
    def all_at_5(kind: str) -> float:
        chosen = [r for r in rankings if r.question.kind == kind]
        return mean([float(set(r.question.gold) <= {k for keys in r.chunk_keys[:5] for k in keys}) for r in chosen])

    nulls = [r for r in rankings if r.question.kind == "Null"]
    return {
        "single_all@5": all_at_5("Single"),
        "multi_all@5": all_at_5("Multi"),
        "null_empty_rate": mean([float(not r.chunk_keys) for r in nulls]),
    }


def cmrc_figures(rankings: Sequence[Ranking]) -> dict[str, float]:
    pairs = [(r.question.gold, r.distinct()) for r in rankings]
    return {
        "R@1": mean([float(bool(set(g) & set(f[:1]))) for g, f in pairs]),
        "R@5": mean([recall(g, f, 5) for g, f in pairs]),
    }


FIGURES: dict[str, Callable[[Sequence[Ranking]], dict[str, Any]]] = {
    "2wiki_dev": twowiki_figures,
    "2wiki_full": twowiki_figures,
    "lihua": lihua_figures,
    "cmrc": cmrc_figures,
}


def peers_2wiki(dataset: Dataset) -> dict[str, dict[str, float]]:
    recorded = json.loads((DATASETS / "2wiki" / "peer_results_dev.json").read_text(encoding="utf-8"))
    systems = sorted({system for lists in recorded.values() for system in lists})
    figures = {}
    for system in systems:
        rankings = [
            Ranking(q, [{title} for title in recorded[q.question_id].get(system, [])], 0.0)
            for q in dataset.questions
            if q.question_id in recorded
        ]
        figures[system] = twowiki_figures(rankings)
    return figures


def misses(rankings: Sequence[Ranking], limit: int = 8) -> list[dict[str, Any]]:
    """Questions whose gold keys are not all among the first `limit` distinct keys."""
    out = []
    for r in rankings:
        found = r.distinct()[:limit]
        if not set(r.question.gold) <= set(found):
            missing = [g for g in r.question.gold if g not in found]
            out.append({"id": r.question.question_id, "question": r.question.text, "missing": missing, "found": found})
    return out


# -- the run -----------------------------------------------------------------------------------------------------

# 2wiki_dev is the corpus the peers searched (the first 425 passages, see the dataset's README); 2wiki_full
# all 6,119 passages. `--quick` runs 2wiki_dev alone; with `--datasets cmrc` it asks 300 of the CMRC questions.
LOADERS: dict[str, Callable[[bool], Dataset]] = {
    "2wiki_dev": lambda quick: load_2wiki(PEER_CORPUS_PASSAGES),
    "2wiki_full": lambda quick: load_2wiki(None),
    "lihua": lambda quick: load_lihua(),
    "cmrc": lambda quick: _first_questions(load_cmrc(), 300 if quick else None),
}
QUICK_DATASETS = ("2wiki_dev",)  # its index builds in under a minute; CMRC's takes four
# With --jobs > 1 the longest runs start first (CMRC: 1,073 questions; 2wiki_full: the largest index to build).
EXPECTED_ORDER = ("cmrc", "2wiki_full", "lihua", "2wiki_dev")


def _first_questions(dataset: Dataset, count: int | None) -> Dataset:
    dataset.questions = dataset.questions[:count]
    return dataset


async def evaluate(name: str, args: argparse.Namespace) -> dict[str, Any]:
    dataset = LOADERS[name](args.quick)
    directory, index = await ensure_index(dataset, args.rebuild, args.reuse_stale)
    log("quality", f"{name}: {len(dataset.questions)} questions x {len(args.agents)} agents")
    rankings = await agent_rankings(dataset, directory, args.agents)
    rankings["bm25"] = bm25_rankings(dataset)
    figures = FIGURES[name]
    chosen, choices = router_choice(dataset, rankings)
    result: dict[str, Any] = {
        "documents": len(dataset.documents),
        "questions": len(dataset.questions),
        "index": index,
        "agents": {agent: figures(ranked) for agent, ranked in rankings.items()},
        "latency": {agent: spread_ms([r.seconds for r in ranked]) for agent, ranked in rankings.items()},
    }
    if chosen:
        result["router_choice"] = figures(chosen) | {"agents": choices}
    if name == "2wiki_dev":
        result["peers"] = peers_2wiki(dataset)
    if name == "2wiki_full":
        result["hipporag_published_recall@5"] = HIPPORAG_RECALL_AT_5
    if name in args.misses:
        result["misses"] = {agent: misses(ranked) for agent, ranked in rankings.items()}
    return result


def router_choice(dataset: Dataset, rankings: dict[str, list[Ranking]]) -> tuple[list[Ranking], dict[str, int]]:
    """The product's default: per question, the ranking of the agent the router chooses when the request names
    none (`domain/agent_choice.py`); empty when that agent was not run."""
    kb = KnowledgeBase(KB, f"{dataset.name} evaluation", language=dataset.language)
    picked = [choose_agent(q.text, kb, KNOWN_AGENT_TYPES).agent_type for q in dataset.questions]
    if any(agent not in rankings for agent in picked):
        return [], {}
    return [rankings[agent][n] for n, agent in enumerate(picked)], dict(Counter(picked))


def evaluate_in_process(name: str, args: argparse.Namespace) -> dict[str, Any]:
    return asyncio.run(evaluate(name, args))


def evaluated(names: Sequence[str], args: argparse.Namespace) -> Iterator[tuple[str, dict[str, Any]]]:
    """(dataset, result) as each finishes: one after another, or `--jobs` datasets at a time, each in its own
    process (the queries are single-threaded Python, so two datasets on two cores take about half the time)."""
    if args.jobs <= 1 or len(names) <= 1:
        for name in names:
            yield name, evaluate_in_process(name, args)
        return
    longest_first = sorted(names, key=lambda n: EXPECTED_ORDER.index(n) if n in EXPECTED_ORDER else len(LOADERS))
    context = multiprocessing.get_context("spawn")  # a clean interpreter each, no forked threads
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
        futures = {pool.submit(evaluate_in_process, name, args): name for name in longest_first}
        for future in as_completed(futures):
            yield futures[future], future.result()


def print_table(results: dict[str, Any]) -> None:
    for name, result in results.items():
        index = result["index"]
        how = "reused" if index.get("reused") else "built"
        sizes = f"{result['documents']} documents, {result['questions']} questions"
        print(f"\n{name}: {sizes} ({how} index: {index['wall_s']} s)")
        rows = {**result["agents"], **{f"peer {k}": v for k, v in result.get("peers", {}).items()}}
        for agent, figures in rows.items():
            cells = "  ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} -" for k, v in figures.items())
            latency = result["latency"].get(agent)
            timing = f"  p50 {latency['p50_ms']:.1f} ms p95 {latency['p95_ms']:.1f} ms" if latency else ""
            print(f"  {agent:<22} {cells}{timing}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=",".join(LOADERS), help=f"any of {', '.join(LOADERS)}")
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached indexes")
    parser.add_argument(
        "--reuse-stale", action="store_true", help="development: reuse an index built by other indexing code"
    )
    parser.add_argument("--misses", default="", help="datasets whose missed questions are listed in the JSON")
    parser.add_argument(
        "--jobs", type=int, default=1, help="datasets evaluated at a time, each in its own process (the suite: 2)"
    )
    args = parser.parse_args()
    args.agents = [a for a in args.agents.split(",") if a]
    args.misses = [m for m in args.misses.split(",") if m]
    output = RESULTS / ("retrieval_quality_quick.json" if args.quick else "retrieval_quality.json")
    # A run of some datasets keeps the others' figures in the file; each dataset records its own run.
    earlier = json.loads(output.read_text(encoding="utf-8")).get("results", {}) if output.is_file() else {}
    document: dict[str, Any] = {
        "benchmark": "retrieval_quality",
        "machine": machine(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "parameters": {"quick": args.quick, "agents": args.agents, "datasets_at_a_time": args.jobs},
        "results": earlier,
    }
    names = [d for d in args.datasets.split(",") if d]
    for name, result in evaluated([n for n in names if n in QUICK_DATASETS] if args.quick else names, args):
        stamp = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), "datasets_at_a_time": args.jobs}
        document["results"][name] = result | stamp
        output.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print_table({name: document["results"][name] for name in names if name in document["results"]})
    print(f"\nwrote {output.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
