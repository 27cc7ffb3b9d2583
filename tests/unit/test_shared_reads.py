"""Shared reads: identical reads through one `ReadScope` are done once, every caller gets its own copy, and
nothing is shared outside a scope, after it, or between scopes. The fusion agent opens one scope per question
and builds that question's members over it."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent import text
from backend.graphrag_agent.agents import FusionAgent
from backend.graphrag_agent.agents.local_search import loose_overlap
from backend.graphrag_agent.ports import AgentTrace, ChunkHit, GraphReader, RetrievalAgent, TextEmbedder
from backend.graphrag_agent.shared_reads import ReadScope, SharedReads
from backend.infrastructure.agents.rag_factory.builders import AGENT_BUILDERS, AgentResources
from tests.support.memory_graph import CommunitySpec, Passage, TermEmbedder, memory_graph


class CountingReader:
    """The reads the tests use, each counted; a read waits for `gate` so that callers overlap."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False
        self.limits: list[int] = []

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        self.calls["fulltext"] += 1
        self.limits.append(limit)
        await self.gate.wait()
        if self.fail:
            raise ConnectionError("store down")
        return [ChunkHit(f"{kb}-{query}-{n}", "doc", "title", "text", n, 1.0 / (n + 1)) for n in range(limit)]

    async def entities_in_chunks(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        self.calls["entities_in_chunks"] += 1
        return {chunk_id: ["e1", "e2"] for chunk_id in chunk_ids}


class CountingEmbedder:
    dimension = 3

    def __init__(self) -> None:
        self.calls = 0

    def covers(self, text: str) -> bool:
        return True

    async def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        return np.ones((len(texts), 3), dtype=np.float32)


def shared_over(reader: CountingReader, embedder: CountingEmbedder | None = None, search_depth: int = 0) -> SharedReads:
    fake_reader: Any = reader
    fake_embedder: Any = embedder or CountingEmbedder()
    return SharedReads(fake_reader, fake_embedder, search_depth)


async def test_concurrent_identical_reads_in_one_scope_reach_the_store_once() -> None:
    reader = CountingReader()
    reader.gate.clear()
    with shared_over(reader).scope() as scope:
        first = asyncio.ensure_future(scope.reader.search_chunks_fulltext("kb", "who", 3))
        second = asyncio.ensure_future(scope.reader.search_chunks_fulltext("kb", "who", 3))
        other = asyncio.ensure_future(scope.reader.search_chunks_fulltext("kb", "who", 4))  # other arguments
        await asyncio.sleep(0)
        reader.gate.set()
        results = await asyncio.gather(first, second, other)
    assert reader.calls["fulltext"] == 2
    assert results[0] == results[1]
    assert len(results[2]) == 4


async def test_searches_to_different_depths_share_one_search_at_the_scope_depth() -> None:
    reader = CountingReader()
    reader.gate.clear()
    with shared_over(reader, search_depth=30).scope() as scope:
        searches = [asyncio.ensure_future(scope.reader.search_chunks_fulltext("kb", "who", n)) for n in (20, 30, 40)]
        await asyncio.sleep(0)
        reader.gate.set()
        shallow, deep, deeper = await asyncio.gather(*searches)
    assert reader.limits == [30, 40]  # 20 and 30 from one search 30 deep; 40 is deeper than the scope's depth
    assert len(deep) == 30 and len(deeper) == 40
    assert shallow == deep[:20]

    reader.limits.clear()
    assert len(await scope.reader.search_chunks_fulltext("kb", "who", 20)) == 20
    assert reader.limits == [20]  # once the scope is closed a search goes as deep as it is asked


async def test_every_caller_gets_its_own_containers() -> None:
    reader = CountingReader()
    with shared_over(reader).scope() as scope:
        mine = await scope.reader.entities_in_chunks("kb", ["c1"])
        mine["c1"].append("mutated")
        mine["c2"] = []
        theirs = await scope.reader.entities_in_chunks("kb", ["c1"])
    assert reader.calls["entities_in_chunks"] == 1
    assert theirs == {"c1": ["e1", "e2"]}


async def test_embeddings_are_shared_and_copied() -> None:
    embedder = CountingEmbedder()
    with shared_over(CountingReader(), embedder).scope() as scope:
        first = await scope.embedder.embed(["a question"])
        first[0, 0] = 42.0
        second = await scope.embedder.embed(["a question"])
        await scope.embedder.embed(["another question"])
    assert embedder.calls == 2
    assert second[0, 0] == 1.0


async def test_after_its_scope_every_read_reaches_the_store() -> None:
    reader = CountingReader()
    with shared_over(reader).scope() as scope:
        await scope.reader.search_chunks_fulltext("kb", "who", 3)
    await scope.reader.search_chunks_fulltext("kb", "who", 3)
    await scope.reader.search_chunks_fulltext("kb", "who", 3)
    assert reader.calls["fulltext"] == 3


async def test_two_requests_never_share_a_read() -> None:
    """Each request opens its own scope: the second sees the store, not the first one's result."""
    reader = CountingReader()
    shared = shared_over(reader)

    async def request() -> list[ChunkHit]:
        with shared.scope() as scope:
            return await scope.reader.search_chunks_fulltext("kb", "who", 2)

    await asyncio.gather(request(), request())
    await request()
    assert reader.calls["fulltext"] == 3


async def test_an_open_scope_leaves_every_other_reader_alone() -> None:
    """Only reads through the scope's own reader are shared: the plain store, read in the same task while the
    scope is open, answers every read itself."""
    reader = CountingReader()
    with shared_over(reader).scope() as scope:
        await scope.reader.search_chunks_fulltext("kb", "who", 2)
        await scope.reader.search_chunks_fulltext("kb", "who", 2)
        await reader.search_chunks_fulltext("kb", "who", 2)
        await reader.search_chunks_fulltext("kb", "who", 2)
    assert reader.calls["fulltext"] == 3


async def test_a_cancelled_caller_does_not_cancel_the_read_the_others_await() -> None:
    reader = CountingReader()
    reader.gate.clear()
    with shared_over(reader).scope() as scope:
        impatient = asyncio.ensure_future(scope.reader.search_chunks_fulltext("kb", "who", 2))
        patient = asyncio.ensure_future(scope.reader.search_chunks_fulltext("kb", "who", 2))
        await asyncio.sleep(0)
        impatient.cancel()
        await asyncio.sleep(0)
        reader.gate.set()
        found = await patient
    assert impatient.cancelled()
    assert [hit.ordinal for hit in found] == [0, 1]
    assert reader.calls["fulltext"] == 1


async def test_a_failed_read_reaches_every_caller() -> None:
    reader = CountingReader()
    reader.fail = True
    with shared_over(reader).scope() as scope:
        outcomes = await asyncio.gather(
            scope.reader.search_chunks_fulltext("kb", "who", 2),
            scope.reader.search_chunks_fulltext("kb", "who", 2),
            return_exceptions=True,
        )
    assert all(isinstance(outcome, ConnectionError) for outcome in outcomes)
    assert reader.calls["fulltext"] == 1


async def test_leaving_the_scope_stops_reads_nobody_awaits() -> None:
    reader = CountingReader()
    reader.gate.clear()
    with shared_over(reader).scope() as scope:
        abandoned = asyncio.ensure_future(scope.reader.search_chunks_fulltext("kb", "who", 2))
        await asyncio.sleep(0)
        abandoned.cancel()
        await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert not any(
        not task.done() and "search_chunks_fulltext" in repr(task.get_coro())
        for task in asyncio.all_tasks()
        if task is not asyncio.current_task()
    )


def test_the_shared_reader_and_embedder_implement_the_ports() -> None:
    with shared_over(CountingReader()).scope() as scope:
        reader: GraphReader = scope.reader
        embedder: TextEmbedder = scope.embedder
    missing = [name for name in dir(GraphReader) if not name.startswith("_") and not hasattr(reader, name)]
    assert missing == []
    assert embedder.dimension == 3
    assert embedder.covers("text")


async def test_the_members_of_a_scope_tokenise_each_text_they_score_once(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenised: list[str] = []
    real_index_terms = text.index_terms

    def counting(passage: str) -> list[str]:
        tokenised.append(passage)
        return real_index_terms(passage)

    monkeypatch.setattr(text, "index_terms", counting)
    passage = "Teutberga was a queen of Lotharingia"

    async def member(scope: ReadScope) -> list[float]:
        await asyncio.sleep(0)  # the members interleave, as fused agents do
        return [
            text.overlap_score(["queen", "lotharingia"], passage, scope.term_sets),
            loose_overlap(["queens"], passage, scope.term_sets),
        ]

    with shared_over(CountingReader()).scope() as scope:
        scores = await asyncio.gather(member(scope), member(scope), member(scope))
        assert list(scores) == [[1.0, 1.0]] * 3
        assert tokenised == [passage]

        tokenised.clear()
        assert text.overlap_score(["king"], passage) == 0.0
        assert text.overlap_score(["queen"], passage) == 1.0
        assert tokenised == [passage, passage]  # a scorer not handed the scope's term sets keeps nothing


class _FulltextAgent:
    """A member that searches the question's fulltext hits through the reader it was built with."""

    agent_type = "fulltext"

    def __init__(self, reader: GraphReader) -> None:
        self._reader = reader

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace:
        await self._reader.search_chunks_fulltext("kb", query, 2)
        return {"context": "", "retrieval_results": [], "reference": {}}


async def test_the_fusion_agent_builds_each_question_s_members_over_a_scope_of_its_own() -> None:
    reader = CountingReader()
    scopes: list[ReadScope] = []

    def members(scope: ReadScope) -> list[RetrievalAgent]:
        scopes.append(scope)
        return [_FulltextAgent(scope.reader), _FulltextAgent(scope.reader)]

    fusion = FusionAgent.sharing_reads(shared_over(reader), members)
    await fusion.retrieve_with_trace("who", "t1")
    await fusion.retrieve_with_trace("who", "t2")
    assert reader.calls["fulltext"] == 2  # the two members share their read, the two questions do not
    assert len(scopes) == 2 and scopes[0] is not scopes[1]


PASSAGES = [
    Passage(
        "Lothair II",
        "Lothair II was the king of Lotharingia. He was the son of Emperor Lothair I and Ermengarde of Tours.",
        ("Lotharingia", "Lothair I", "Ermengarde of Tours"),
    ),
    Passage(
        "Ermengarde of Tours",
        "Ermengarde of Tours died in 851. She married the Carolingian Emperor Lothair I of the Franks.",
        ("Lothair I",),
    ),
    Passage("Wrenfield Orchard", "Wrenfield Orchard was founded by Agnes Wren in 1911.", ("Agnes Wren",)),
]
COMMUNITIES = [
    CommunitySpec("Carolingians", "Lothair I, Lothair II and Ermengarde of Tours.", ("Lothair I", "Lothair II")),
]


class _RecordingStore:
    """Every read that reaches the store, with its arguments (vectors by their bytes)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.reads: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        read = getattr(self.store, name)

        async def recorded(*args: Any) -> Any:
            self.reads.append((name, *(arg.tobytes() if isinstance(arg, np.ndarray) else repr(arg) for arg in args)))
            return await read(*args)

        return recorded


@pytest.mark.parametrize("question", ["When did the mother of Lothair II die?", "Who founded Wrenfield Orchard?"])
async def test_the_service_built_fusion_reads_nothing_twice_for_one_question(question: str) -> None:
    graph = await memory_graph("royals", PASSAGES, TermEmbedder(), COMMUNITIES)
    kb = KnowledgeBase("royals")
    shared_store = _RecordingStore(graph)
    shared = AGENT_BUILDERS["fusion_agent"](kb, AgentResources(shared_store, TermEmbedder(), 4))
    await shared.retrieve_with_trace(question, "t")
    assert shared_store.reads and len(set(shared_store.reads)) == len(shared_store.reads)

    plain_store = _RecordingStore(graph)
    members = [AGENT_BUILDERS[name](kb, AgentResources(plain_store, TermEmbedder(), 4)) for name in MEMBERS]
    await FusionAgent(members, top_k=4).retrieve_with_trace(question, "t")
    assert len(set(plain_store.reads)) < len(plain_store.reads)  # members on their own repeat each other's reads


MEMBERS = ("naive_rag_agent", "graph_agent", "hybrid_agent", "deep_research_agent")
