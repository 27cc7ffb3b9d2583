"""The conversation around retrieval: does a message reach the knowledge base that can answer it?

Routing set: one server with four KBs created with a plain description and no keyword list, as a new user
creates them: English encyclopedia passages (2wiki, the 425 passages of retrieval_quality's `2wiki_dev`), a
year of chat logs (LiHua-World), Chinese encyclopedia passages (CMRC 2018 dev) and the orchard sample. Each
dataset's dev questions should reach its KB; the orchard's are its QUESTIONS.md and paraphrases written here;
small talk and requests no KB covers (`benchmarks/data/conversation.json`, written here) should reach general
chat. A second check serves the orchard alone, marked default, as `scripts/run.sh` does.

The router is the product's (`RouterGraph` with its policy, keyword heuristic and `ContentRouter`: the KBs'
routing profiles, then the fulltext index of the likeliest), offline (no model), over the indexes
retrieval_quality builds and caches (built here when missing). The baseline is
BM25 as a router: every KB's documents in a `bm25s` index, the message goes to the KB whose best document
scores highest, and to general chat when no KB has a document sharing a word with it.

Routing latency is the router's `route()` per message, over the embedded store (p50/p95): on the four KBs
above, and at scale, on one embedded store (as the service keeps them) with ten KBs of 5,000 chunks each. Those
are cut from every passage of the three datasets by the product's chunker; each KB takes another window of
them, so their indexes differ. They are written as documents through the store's upserts, which keep the KBs'
routing profiles as the indexer's writes do. The scale run routes a sample of the routing set's messages, spread
over it.

Follow-ups: each 2wiki dev question that names its subjects (gold passage titles written in it) is asked in
two turns: "Tell me about X." (or "X and Y"), then the question with X referred to ("their" for "X's",
"that one" for X; "the first one" and "the second one" for two). The second turn goes through the product's
`OfflineFollowUps` with the first in its history; perfect@8 (every gold passage among the first 8) of the
standalone query it builds is compared per agent with the whole question's and with the second turn as
written.

Run:  python -m benchmarks.conversation [--quick] [--reuse-stale]
`--quick`: the first 100 CMRC questions instead of all 1,073. `--reuse-stale`: route over the newest cached
quality indexes even when other indexing code built them (retrieval_quality's option; a store opened by newer
code brings its schema up to date).
Writes benchmarks/results/conversation.json (`--quick`: conversation_quick.json).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import bm25s
import jieba  # type: ignore[import-untyped]
import numpy as np

from backend.application.ports.graph_store import DocumentWrite, GraphStore
from backend.application.routing.policy import RoutingPolicy, RoutingSettings
from backend.bootstrap import open_knowledge_service
from backend.domain import ids
from backend.domain.agent_types import DEFAULT_AGENT_TYPE, KNOWN_AGENT_TYPES
from backend.domain.conversation import Message, Role
from backend.domain.graph import ChunkRecord, DocumentGraph, DocumentRecord
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.routing import RequestedRoute
from backend.graphrag_agent.chunking import chunk_text
from backend.graphrag_agent.ports import ChunkHit, TermCounts, Vector
from backend.infrastructure.knowledge.loaders import FileDocumentLoader
from backend.infrastructure.knowledge_bases.catalog import static_catalog
from backend.infrastructure.routing.background import WordfreqRarity
from backend.infrastructure.routing.content import ContentRouter, KbContents
from backend.infrastructure.routing.followups import OfflineFollowUps
from backend.infrastructure.routing.router_graph import RouterGraph
from benchmarks.graph_indexing import Wiring, bench_settings
from benchmarks.graph_probes import log, machine, result_path, save_result, spread_ms
from benchmarks.quality_data import ROOT, Dataset, Question, load_2wiki, load_cmrc, load_lihua
from benchmarks.retrieval_quality import KB as QUALITY_KB
from benchmarks.retrieval_quality import (
    PEER_CORPUS_PASSAGES,
    agent_rankings,
    ensure_index,
    fresh_directory,
    twowiki_figures,
)

GENERAL = "general"
ORCHARD = ROOT / "samples" / "orchard"
WRITTEN = json.loads((ROOT / "benchmarks" / "data" / "conversation.json").read_text(encoding="utf-8"))
_QUESTION_ROW = re.compile(r"^\| \d+ \| (.+?) \|")


@dataclass(frozen=True, slots=True)
class RoutingKb:
    kb: KnowledgeBase
    dataset: Dataset | None  # None: the orchard sample, indexed here from its folder


def routing_kbs(quick: bool) -> list[RoutingKb]:
    cmrc = load_cmrc()
    if quick:
        cmrc.questions = cmrc.questions[:100]
    return [
        RoutingKb(KnowledgeBase("wiki", "English encyclopedia passages"), load_2wiki(PEER_CORPUS_PASSAGES)),
        RoutingKb(KnowledgeBase("chats", "A year of chat logs between friends and neighbours"), load_lihua()),
        RoutingKb(KnowledgeBase("baike", "Chinese encyclopedia passages", language="zh"), cmrc),
        RoutingKb(KnowledgeBase("orchard", "A cider farm's handbook for visitors and staff"), None),
    ]


def orchard_questions() -> list[str]:
    table = (ORCHARD / "QUESTIONS.md").read_text(encoding="utf-8").splitlines()
    listed = [m.group(1) for line in table if (m := _QUESTION_ROW.match(line))]
    return listed + list(WRITTEN["orchard_paraphrases"])


def routing_set(kbs: Sequence[RoutingKb]) -> list[tuple[str, str]]:
    """(expected KB or `general`, message) for every message of the set."""
    asked = [
        (entry.kb.kb_prefix, question)
        for entry in kbs
        for question in ([q.text for q in entry.dataset.questions] if entry.dataset else orchard_questions())
    ]
    return asked + [(GENERAL, message) for message in WRITTEN["small_talk"]]


class KbIndexes:
    """The profiles and chunk indexes of several embedded stores as one, one KB per store (the cached quality
    indexes)."""

    def __init__(self) -> None:
        self._stores: dict[str, tuple[GraphStore, str]] = {}

    def add(self, kb_prefix: str, store: GraphStore, stored_as: str) -> None:
        self._stores[kb_prefix] = (store, stored_as)

    async def term_frequencies(self, kbs: Sequence[str], terms: Sequence[str]) -> dict[str, TermCounts]:
        known = [kb for kb in kbs if kb in self._stores]
        found = await asyncio.gather(
            *(self._stores[kb][0].term_frequencies([self._stores[kb][1]], terms) for kb in known)
        )
        counts = {kb: next(iter(one.values())) for kb, one in zip(known, found, strict=True)}
        return {kb: counts.get(kb, TermCounts(0, {})) for kb in kbs}

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        store, stored_as = self._stores[kb]
        return await store.search_chunks_fulltext(stored_as, query, limit)

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]:
        store, stored_as = self._stores[kb]
        return await store.search_chunks_vector(stored_as, embedding, limit)

    async def chunk_embeddings(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        store, stored_as = self._stores[kb]
        return await store.chunk_embeddings(stored_as, chunk_ids)


async def open_indexes(
    kbs: Sequence[RoutingKb], stack: AsyncExitStack, scratch: Path, reuse_stale: bool = False
) -> KbIndexes:
    indexes = KbIndexes()
    for entry in kbs:
        if entry.dataset is not None:
            directory, _ = await ensure_index(entry.dataset, rebuild=False, reuse_stale=reuse_stale)
            settings = bench_settings("embedded", directory, directory / "kb_registry.toml", None)
            service = await stack.enter_async_context(open_knowledge_service(settings))
            indexes.add(entry.kb.kb_prefix, Wiring.of(service).store, QUALITY_KB)
            continue
        registry = fresh_directory(scratch / entry.kb.kb_prefix)
        settings = bench_settings("embedded", scratch / entry.kb.kb_prefix, registry, None)
        service = await stack.enter_async_context(open_knowledge_service(settings))
        await service.create_kb(entry.kb)
        loader = FileDocumentLoader()
        await service.ingest(
            entry.kb.kb_prefix, [d for f in loader.files([ORCHARD / "documents"]) for d in loader.load(f)]
        )
        indexes.add(entry.kb.kb_prefix, Wiring.of(service).store, entry.kb.kb_prefix)
    return indexes


def product_router(kbs: Sequence[KnowledgeBase], indexes: KbContents) -> RouterGraph:
    policy = RoutingPolicy(RoutingSettings(), KNOWN_AGENT_TYPES)
    rarity = WordfreqRarity()
    return RouterGraph(static_catalog(kbs), policy, ContentRouter(indexes, rarity), OfflineFollowUps(rarity))


async def route_all(router: RouterGraph, messages: Sequence[tuple[str, str]]) -> tuple[list[str], list[float]]:
    routed, seconds = [], []
    for n, (_, message) in enumerate(messages):
        started = time.perf_counter()
        decision = await router.route(message=message, session_id=f"s{n}", requested=RequestedRoute(None, None))
        seconds.append(time.perf_counter() - started)
        routed.append(decision.worker.kb.kb_prefix if decision.worker is not None else GENERAL)
    return routed, seconds


# -- the baseline ---------------------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    """bm25s's English words without stopwords, jieba words for Chinese (as retrieval_quality's BM25)."""
    if any("\u4e00" <= ch <= "\u9fff" for ch in text):
        return [w.lower() for w in jieba.lcut(text) if w.strip() and any(c.isalnum() for c in w)]
    return list(bm25s.tokenize([text], stopwords="en", show_progress=False, return_ids=False)[0])


def bm25_router(kbs: Sequence[RoutingKb]) -> Any:
    indexes: dict[str, bm25s.BM25] = {}
    for entry in kbs:
        if entry.dataset is not None:
            texts = [f"{d.title}\n{d.text}" for d in entry.dataset.documents]
        else:
            texts = [f.read_text(encoding="utf-8") for f in sorted((ORCHARD / "documents").glob("*.md"))]
        index = bm25s.BM25()
        index.index([_words(t) for t in texts], show_progress=False)
        indexes[entry.kb.kb_prefix] = index

    def route(message: str) -> str:
        words = _words(message)
        best, best_score = GENERAL, 0.0
        for prefix, index in indexes.items():
            if not words:
                break
            _, scores = index.retrieve([words], k=1, show_progress=False)
            if float(scores[0][0]) > best_score:
                best, best_score = prefix, float(scores[0][0])
        return best

    return route


# -- follow-ups ----------------------------------------------------------------------------------------------

FOLLOW_UP_AGENTS = ("graph_agent", "naive_rag_agent", DEFAULT_AGENT_TYPE)


def two_turns(question: Question) -> tuple[str, str] | None:
    """("Tell me about X.", the question referring to X), or None when the question names none of its titles."""
    text = question.text
    named = [t for t in question.gold if t.lower() in text.lower()]
    named = sorted(named, key=lambda t: text.lower().index(t.lower()))[:2]
    if not named:
        return None
    stand_ins = ["that one"] if len(named) == 1 else ["the first one", "the second one"]
    for title, stand_in in zip(named, stand_ins, strict=True):
        possessive = re.compile(re.escape(title) + r"['’]s\b", re.IGNORECASE)
        text = possessive.sub("their" if len(named) == 1 else f"{stand_in}'s", text)
        text = re.compile(re.escape(title), re.IGNORECASE).sub(stand_in, text)
    return f"Tell me about {' and '.join(named)}.", text


async def follow_ups() -> dict[str, Any]:
    dataset = load_2wiki(PEER_CORPUS_PASSAGES)
    pairs = {q.question_id: turns for q in dataset.questions if (turns := two_turns(q)) is not None}
    asked = [q for q in dataset.questions if q.question_id in pairs]
    followups = OfflineFollowUps(WordfreqRarity())
    standalone = {
        qid: (await followups.standalone(second, (Message(Role.USER, first), Message(Role.ASSISTANT, "…")))).text
        for qid, (first, second) in pairs.items()
    }
    variants = {
        "whole": asked,
        "turn2_as_written": [replace(q, text=pairs[q.question_id][1]) for q in asked],
        "turn2_standalone": [replace(q, text=standalone[q.question_id]) for q in asked],
    }
    directory, _ = await ensure_index(dataset, rebuild=False, reuse_stale=False)
    figures: dict[str, dict[str, float]] = {}
    for variant, questions in variants.items():
        rankings = await agent_rankings(replace(dataset, questions=questions), directory, FOLLOW_UP_AGENTS)
        for agent, ranked in rankings.items():
            figures.setdefault(agent, {})[variant] = twowiki_figures(ranked)["perfect@8"]
    for row in figures.values():
        row["ratio"] = round(row["turn2_standalone"] / row["whole"], 3) if row["whole"] else float("nan")
    example = next(iter(pairs.items()))
    return {
        "questions": len(asked),
        "skipped": len(dataset.questions) - len(asked),
        "default_agent": DEFAULT_AGENT_TYPE,
        "perfect_at_8": figures,
        "example": {"turn1": example[1][0], "turn2": example[1][1], "standalone": standalone[example[0]]},
    }


# -- figures --------------------------------------------------------------------------------------------------


def accuracy(messages: Sequence[tuple[str, str]], routed: Sequence[str]) -> dict[str, Any]:
    per: dict[str, list[bool]] = {}
    for (expected, _), got in zip(messages, routed, strict=True):
        per.setdefault(expected, []).append(got == expected)
    kb_rows = [ok for expected, rows in per.items() if expected != GENERAL for ok in rows]
    return {
        "per_kb": {name: {"n": len(rows), "accuracy": round(sum(rows) / len(rows), 3)} for name, rows in per.items()},
        "kb_questions": round(sum(kb_rows) / len(kb_rows), 3),
        "small_talk": per[GENERAL] and round(sum(per[GENERAL]) / len(per[GENERAL]), 3),
    }


def misrouted(messages: Sequence[tuple[str, str]], routed: Sequence[str], limit: int = 12) -> list[dict[str, str]]:
    wrong = [
        {"expected": expected, "routed": got, "message": message[:100]}
        for (expected, message), got in zip(messages, routed, strict=True)
        if got != expected
    ]
    return wrong[:limit]


async def run(quick: bool, reuse_stale: bool = False) -> dict[str, Any]:
    started = time.perf_counter()
    kbs = routing_kbs(quick)
    messages = routing_set(kbs)
    with tempfile.TemporaryDirectory(prefix="conversation-") as scratch:
        async with AsyncExitStack() as stack:
            indexes = await open_indexes(kbs, stack, Path(scratch), reuse_stale)
            router = product_router([entry.kb for entry in kbs], indexes)
            await route_all(router, messages[:5])  # warm: word lists, jieba, the stores' first reads
            log("conversation", f"routing {len(messages)} messages over {len(kbs)} KBs")
            routed, seconds = await route_all(router, messages)
            orchard_kb = next(e.kb for e in kbs if e.kb.kb_prefix == "orchard")
            alone = product_router([KnowledgeBase(**_fields(orchard_kb), is_default=True)], indexes)
            single = [("orchard", q) for q in orchard_questions()] + [(GENERAL, m) for m in WRITTEN["small_talk"]]
            routed_alone, _ = await route_all(alone, single)
        at_scale = await routing_at_scale(messages, Path(scratch))
    baseline = bm25_router(kbs)
    by_bm25 = [baseline(message) for _, message in messages]
    log("conversation", "follow-ups: 2wiki questions in two turns")
    two_turn = await follow_ups()
    return {
        "follow_ups": two_turn,
        "routing": {
            "messages": len(messages),
            "router": accuracy(messages, routed) | {"latency_ms": spread_ms(seconds)},
            "bm25_router": accuracy(messages, by_bm25),
            "misrouted": misrouted(messages, routed),
        },
        "routing_at_scale": at_scale,
        "orchard_alone": accuracy(single, routed_alone) | {"misrouted": misrouted(single, routed_alone)},
        "duration_s": round(time.perf_counter() - started, 1),
    }


# -- routing at scale ------------------------------------------------------------------------------------------

SCALE_KBS = 10
SCALE_CHUNKS = 5_000
SCALE_MESSAGES = 400
_WRITE_BATCH = 500


def passage_chunks() -> list[tuple[str, str]]:
    """(title, chunk text) of every passage of the three datasets, cut by the product's chunker."""
    documents = [d for dataset in (load_2wiki(), load_lihua(), load_cmrc()) for d in dataset.documents]
    return [(d.title, chunk.text) for d in documents for chunk in chunk_text(d.text)]


async def fill_scale_kbs(store: GraphStore, pool: Sequence[tuple[str, str]]) -> list[KnowledgeBase]:
    """SCALE_KBS KBs of SCALE_CHUNKS chunks each (one chunk per document), each a window of the pool."""
    kbs, unit = [], np.array([1.0, 0.0], dtype=np.float32)  # routing reads no vector
    for n in range(SCALE_KBS):
        kb = KnowledgeBase(f"scale{n}", f"Passages, window {n}")
        await store.create_knowledge_base(kb)
        start = n * len(pool) // SCALE_KBS
        window = [pool[(start + i) % len(pool)] for i in range(SCALE_CHUNKS)]
        writes = []
        for ordinal, (title, text) in enumerate(window):
            doc_id = ids.document_id(f"{title} #{ordinal}", text)
            chunk = ChunkRecord(ids.chunk_id(kb.kb_prefix, doc_id, 0), doc_id, 0, text, 0, len(text))
            graph = DocumentGraph(DocumentRecord(doc_id, title, chunk_count=1), (chunk,))
            writes.append(DocumentWrite(graph, [unit], {}))
        for batch in range(0, len(writes), _WRITE_BATCH):
            await store.upsert_documents(kb.kb_prefix, writes[batch : batch + _WRITE_BATCH])
        kbs.append(kb)
    return kbs


async def routing_at_scale(messages: Sequence[tuple[str, str]], scratch: Path) -> dict[str, Any]:
    pool = passage_chunks()
    sample = [messages[i * len(messages) // SCALE_MESSAGES] for i in range(min(SCALE_MESSAGES, len(messages)))]
    registry = fresh_directory(scratch / "scale")
    settings = bench_settings("embedded", scratch / "scale", registry, None)
    async with open_knowledge_service(settings) as service:
        store = Wiring.of(service).store
        started = time.perf_counter()
        kbs = await fill_scale_kbs(store, pool)
        filled_s = time.perf_counter() - started
        router = product_router(kbs, store)
        await route_all(router, sample[:5])
        log("conversation", f"routing {len(sample)} messages over {len(kbs)} KBs of {SCALE_CHUNKS} chunks")
        routed, seconds = await route_all(router, sample)
    return {
        "kbs": len(kbs),
        "chunks_per_kb": SCALE_CHUNKS,
        "pool_chunks": len(pool),
        "messages": len(sample),
        "to_general": routed.count(GENERAL),
        "filled_s": round(filled_s, 1),
        "latency_ms": spread_ms(seconds),
    }


def _fields(kb: KnowledgeBase) -> dict[str, Any]:
    return {"kb_prefix": kb.kb_prefix, "description": kb.description, "language": kb.language}


def print_table(results: dict[str, Any]) -> None:
    routing = results["routing"]
    ours, bm25 = routing["router"], routing["bm25_router"]
    print(f"{'routing accuracy':<18}{'router':>10}{'BM25':>10}")
    for name, row in ours["per_kb"].items():
        print(f"{name:<18}{row['accuracy']:>10.3f}{bm25['per_kb'][name]['accuracy']:>10.3f}   (n={row['n']})")
    print(f"{'KB questions':<18}{ours['kb_questions']:>10.3f}{bm25['kb_questions']:>10.3f}")
    print(f"{'small talk':<18}{ours['small_talk']:>10.3f}{bm25['small_talk']:>10.3f}")
    print(f"routing latency p50 {ours['latency_ms']['p50_ms']} ms, p95 {ours['latency_ms']['p95_ms']} ms")
    scale = results["routing_at_scale"]
    print(
        f"routing latency with {scale['kbs']} KBs of {scale['chunks_per_kb']} chunks: "
        f"p50 {scale['latency_ms']['p50_ms']} ms, p95 {scale['latency_ms']['p95_ms']} ms"
    )
    alone = results["orchard_alone"]
    print(f"orchard alone: questions {alone['kb_questions']:.3f}, small talk {alone['small_talk']:.3f}")
    for row in routing["misrouted"]:
        print(f"  {row['expected']:>8} → {row['routed']:<8} {row['message']}")


def print_follow_ups(results: dict[str, Any]) -> None:
    follow = results["follow_ups"]
    print(f"\nfollow-ups: {follow['questions']} 2wiki questions in two turns ({follow['skipped']} name no title)")
    print(f"{'perfect@8':<20}{'whole':>8}{'turn 2':>8}{'standalone':>12}{'ratio':>8}")
    for agent, row in follow["perfect_at_8"].items():
        cells = (
            f"{row['whole']:>8.3f}{row['turn2_as_written']:>8.3f}{row['turn2_standalone']:>12.3f}{row['ratio']:>8.3f}"
        )
        print(f"{agent:<20}{cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--reuse-stale", action="store_true", help="use cached indexes built by other indexing code (routing work)"
    )
    args = parser.parse_args()
    started = datetime.now(UTC)
    results = asyncio.run(run(args.quick, args.reuse_stale))
    print_table(results)
    print_follow_ups(results)
    save_result(result_path("conversation", args.quick), "conversation", machine(), started, vars(args), results)


if __name__ == "__main__":
    main()
