"""naive_rag_agent end to end on the sample KB (real MiniLM, the real indexing pipeline, the embedded
graph store), plus the loader it depends on and its concurrency contract."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from backend.application.ports.ingestion import SourceFile
from backend.domain import ids
from backend.domain.errors import InvalidRequest, StoreUnavailable
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.agents import NaiveRagAgent
from backend.graphrag_agent.ports import ChunkHit, Vector
from backend.infrastructure.graph_store.embedded import EmbeddedGraphStore
from backend.infrastructure.knowledge.loaders import FileDocumentLoader, expand_paths, first_heading
from tests.support.embedder import shared_minilm
from tests.support.indexing import make_indexer

SAMPLE = Path(__file__).parents[2] / "samples" / "orchard"
KB = KnowledgeBase("orchard", description="Wrenfield Orchard and Cider Mill")
UNRELATED = [
    "What is the boiling point of mercury?",
    "How do I reset my router password?",
    "Who won the football world cup in 1966?",
]


@dataclass(frozen=True)
class Question:
    text: str
    sources: tuple[str, ...]


def sample_questions() -> list[Question]:
    rows = re.findall(r"^\| \d+ \| (.+?) \| .+? \| (.+?) \|$", (SAMPLE / "QUESTIONS.md").read_text("utf-8"), re.M)
    return [Question(text, tuple(s.strip() for s in sources.split(","))) for text, sources in rows]


@dataclass(frozen=True)
class IngestedKb:
    path: Path
    added: int
    unchanged: int
    chunks_written: int
    progress: list[tuple[int, int, str]]
    doc_by_source: dict[str, str]


async def ingest_sample(path: Path) -> IngestedKb:
    loader = FileDocumentLoader()
    documents = [doc for file in expand_paths([SAMPLE / "documents"], loader) for doc in loader.load(file)]
    store = await EmbeddedGraphStore.open(path)
    try:
        progress: list[tuple[int, int, str]] = []
        indexer = make_indexer(store, shared_minilm())
        report = await indexer.index(KB, documents, lambda done, total, title: progress.append((done, total, title)))
        sources = {d.metadata["source"]: d.doc_id for d in await store.list_documents(KB.kb_prefix)}
    finally:
        await store.close()
    return IngestedKb(
        path, report.documents_added, report.documents_unchanged, report.chunks_written, progress, sources
    )


@pytest.fixture(scope="module")
def orchard(tmp_path_factory: pytest.TempPathFactory) -> IngestedKb:
    return asyncio.run(ingest_sample(tmp_path_factory.mktemp("orchard") / "graph.db"))


@pytest.fixture
async def store(orchard: IngestedKb) -> AsyncIterator[EmbeddedGraphStore]:
    opened = await EmbeddedGraphStore.open(orchard.path)
    yield opened
    await opened.close()


@pytest.fixture
def agent(store: EmbeddedGraphStore) -> NaiveRagAgent:
    return NaiveRagAgent(KB.kb_prefix, store, shared_minilm(), top_k=8)


# --- the sample KB -----------------------------------------------------------------------------------


async def test_sample_kb_is_indexed_with_progress(orchard: IngestedKb, store: EmbeddedGraphStore) -> None:
    assert (orchard.added, orchard.unchanged) == (6, 0)
    assert orchard.chunks_written == (await store.counts(KB.kb_prefix)).chunks > 6
    assert [(done, total) for done, total, _ in orchard.progress] == [(i, 6) for i in range(1, 7)]
    assert "History of Wrenfield Orchard" in {title for _, _, title in orchard.progress}
    assert set(orchard.doc_by_source) == {p.name for p in (SAMPLE / "documents").glob("*.md")}


def test_questions_file_is_parsed() -> None:
    questions = sample_questions()
    assert len(questions) >= 10
    assert all(q.sources and all(s.endswith(".md") for s in q.sources) for q in questions)


@pytest.mark.parametrize("question", sample_questions(), ids=lambda q: q.text[:40])
async def test_expected_sources_rank_in_the_top_three(
    question: Question, agent: NaiveRagAgent, orchard: IngestedKb
) -> None:
    trace = await agent.retrieve_with_trace(question.text, "thread-1")
    top_docs = [r["source"]["doc_id"] for r in trace["retrieval_results"][:3]]
    expected = [orchard.doc_by_source[source] for source in question.sources]
    assert set(expected) <= set(top_docs), (question.text, trace["retrieval_results"][:3])


@pytest.mark.parametrize("question", UNRELATED)
async def test_unrelated_questions_find_nothing_or_only_weak_evidence(question: str, agent: NaiveRagAgent) -> None:
    trace = await agent.retrieve_with_trace(question, "thread-1")
    scores = [r["score"] for r in trace["retrieval_results"]]
    assert scores == [] or max(scores) < 0.3, trace["retrieval_results"]


async def test_trace_has_the_agent_contract_shape(agent: NaiveRagAgent, orchard: IngestedKb) -> None:
    trace = await agent.retrieve_with_trace("How much does the mill tour cost for an adult?", "thread-9")
    results = trace["retrieval_results"]
    assert 0 < len(results) <= 8
    for result in results:
        source = result["source"]
        assert result["result_id"] == f"chunk:{source['chunk_id']}"
        assert result["granularity"] == "Chunk"
        assert 0.0 <= result["score"] <= 1.0
        assert source["chunk_id"] == ids.chunk_id(KB.kb_prefix, source["doc_id"], result["metadata"]["ordinal"])
        assert result["evidence"] in trace["context"]
        assert source["title"] in trace["context"]
        ranks = result["metadata"]
        assert ranks["fulltext_rank"] or ranks["vector_rank"] or ranks["feedback_rank"]
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    assert len({r["result_id"] for r in results}) == len(results)
    reference = trace["reference"]
    assert reference["chunks"] == [r["source"]["chunk_id"] for r in results]
    assert {d["doc_id"] for d in reference["documents"]} == {r["source"]["doc_id"] for r in results}
    assert {"doc_id": orchard.doc_by_source["visiting.md"], "title": "Visiting Wrenfield"} in reference["documents"]
    assert reference["entities"] == reference["relationships"] == reference["communities"] == []
    assert agent.agent_type == "naive_rag_agent"


async def test_result_ids_are_identical_across_runs_and_ingestions(agent: NaiveRagAgent, tmp_path: Path) -> None:
    question = "Which apple variety did Agnes Wren's husband discover?"
    first = await agent.retrieve_with_trace(question, "thread-a")
    second = await agent.retrieve_with_trace(question, "thread-b")  # the thread only labels logs
    rebuilt = await ingest_sample(tmp_path / "again.db")
    fresh_store = await EmbeddedGraphStore.open(rebuilt.path)
    try:
        third = await NaiveRagAgent(KB.kb_prefix, fresh_store, shared_minilm()).retrieve_with_trace(question, "c")
    finally:
        await fresh_store.close()
    ids = [r["result_id"] for r in first["retrieval_results"]]
    assert ids
    assert ids == [r["result_id"] for r in second["retrieval_results"]]
    assert ids == [r["result_id"] for r in third["retrieval_results"]]
    assert first == second


async def test_agent_only_sees_its_own_kb(store: EmbeddedGraphStore) -> None:
    other = NaiveRagAgent("another_kb", store, shared_minilm())
    trace = await other.retrieve_with_trace("When was Wrenfield Orchard founded?", "t")
    assert trace["retrieval_results"] == []
    assert trace["context"] == ""


async def test_reindexing_unchanged_documents_does_no_work(orchard: IngestedKb, store: EmbeddedGraphStore) -> None:
    loader = FileDocumentLoader()
    documents = [doc for file in expand_paths([SAMPLE / "documents"]) for doc in loader.load(file)]
    embedder = CountingEmbedder()
    report = await make_indexer(store, embedder).index(KB, documents)
    assert (report.documents_added, report.documents_unchanged, report.chunks_written) == (0, 6, 0)
    assert set(report.doc_ids) == set(orchard.doc_by_source.values())
    assert embedder.calls == 0


# --- agent contract with controlled fakes ------------------------------------------------------------


class CountingEmbedder:
    """Deterministic 8-dimensional embeddings from a hash; counts calls."""

    def __init__(self) -> None:
        self.calls = 0

    @property
    def dimension(self) -> int:
        return 8

    def covers(self, text: str) -> bool:
        return True  # hashed terms work for any language

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:8], dtype=np.uint8) for t in texts]
        matrix = np.asarray(rows, dtype=np.float32).reshape(len(texts), 8) + 1.0
        return np.asarray(matrix / np.linalg.norm(matrix, axis=1, keepdims=True), dtype=np.float32)


HIT = ChunkHit("c1", "d1", "Doc", "Cider is pressed in October.", 0, 1.0)


class RendezvousIndex:
    """Each search waits for the other to start: only concurrent searches can finish."""

    def __init__(self) -> None:
        self.fulltext_started = asyncio.Event()
        self.vector_started = asyncio.Event()

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        self.fulltext_started.set()
        await self.vector_started.wait()
        return [HIT]

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]:
        self.vector_started.set()
        await self.fulltext_started.wait()
        return [ChunkHit("c1", "d1", "Doc", HIT.text, 0, 0.9), ChunkHit("c2", "d1", "Doc", "Far away.", 1, 0.1)]

    async def chunk_embeddings(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        return {}  # no stored vectors: no feedback search


async def test_both_searches_run_concurrently_and_fuse_by_chunk() -> None:
    agent = NaiveRagAgent("kb", RendezvousIndex(), CountingEmbedder())  # a chunk cosine of 0.3 counts as evidence
    trace = await asyncio.wait_for(agent.retrieve_with_trace("When is cider pressed?", "t"), 5)
    results = trace["retrieval_results"]
    assert [r["result_id"] for r in results] == ["chunk:c1"]  # c2 is below the similarity threshold
    assert results[0]["score"] == pytest.approx(1.0)
    assert results[0]["metadata"]["fulltext_rank"] == results[0]["metadata"]["vector_rank"] == 1
    assert results[0]["metadata"]["cosine"] == pytest.approx(0.9)


class FailingVectorIndex:
    def __init__(self) -> None:
        self.fulltext_cancelled = False

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.fulltext_cancelled = True
            raise
        return []

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]:
        raise StoreUnavailable("vector index is down")


async def test_a_failing_search_raises_and_stops_the_other() -> None:
    index = FailingVectorIndex()
    agent = NaiveRagAgent("kb", index, CountingEmbedder())
    with pytest.raises(StoreUnavailable, match="vector index is down"):
        await asyncio.wait_for(agent.retrieve_with_trace("cider", "t"), 5)
    assert index.fulltext_cancelled


async def test_cancelling_the_agent_cancels_both_searches() -> None:
    index = FailingVectorIndex()
    embedder = CountingEmbedder()
    agent = NaiveRagAgent("kb", index, embedder)
    index.search_chunks_vector = index.search_chunks_fulltext  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(agent.retrieve_with_trace("cider", "t"))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert index.fulltext_cancelled
    assert embedder.calls == 1


async def test_blank_query_returns_an_empty_trace_without_searching() -> None:
    embedder = CountingEmbedder()
    agent = NaiveRagAgent("kb", FailingVectorIndex(), embedder)
    trace = await agent.retrieve_with_trace("   ", "t")
    assert (trace["context"], trace["retrieval_results"]) == ("", [])
    assert trace["reference"] == {
        "documents": [],
        "chunks": [],
        "entities": [],
        "relationships": [],
        "communities": [],
    }
    assert embedder.calls == 0


# --- ingestion pieces --------------------------------------------------------------------------------


def test_loader_takes_the_title_from_the_first_h1(tmp_path: Path) -> None:
    file = tmp_path / "notes.md"
    file.write_text("Intro line\n```\n# not a heading\n```\n## Sub\n# Real Title #\n\nBody.", "utf-8")
    [document] = FileDocumentLoader().load(SourceFile(file, file.name))
    assert document.title == "Real Title"
    assert document.metadata == {"source": "notes.md", "format": "markdown"}
    assert document.text.endswith("Body.")
    assert first_heading("no heading here") is None


def test_loader_falls_back_to_the_file_stem_and_strips_a_bom(tmp_path: Path) -> None:
    file = tmp_path / "opening-hours.txt"
    file.write_bytes("\ufeff# Looks like a heading\nOpen daily.".encode())
    [document] = FileDocumentLoader().load(SourceFile(file, file.name))
    assert document.title == "opening-hours"
    assert document.text.startswith("# Looks")
    assert document.metadata["format"] == "text"


def test_loader_rejects_undecodable_and_unsupported_files(tmp_path: Path) -> None:
    latin1 = tmp_path / "old.txt"
    latin1.write_bytes("Caf\xe9 au lait".encode("latin-1"))
    with pytest.raises(InvalidRequest, match=r"old\.txt is not UTF-8.*offset 3"):
        FileDocumentLoader().load(SourceFile(latin1, latin1.name))
    sheet = tmp_path / "sheet.xlsx"
    sheet.write_bytes(b"PK")
    assert not FileDocumentLoader().supports(sheet)
    with pytest.raises(InvalidRequest, match="unsupported"):
        FileDocumentLoader().load(SourceFile(sheet, sheet.name))
    empty = tmp_path / "empty.md"
    empty.write_text("  \n\n", "utf-8")
    assert FileDocumentLoader().load(SourceFile(empty, empty.name)) == []


def test_expand_paths_is_sorted_recursive_and_skips_hidden(tmp_path: Path) -> None:
    for name in ["b.md", "a.txt", "sub/c.md", "sub/.draft.md", ".git/x.md", "image.png", "Z.MD"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("text", "utf-8")
    files = expand_paths([tmp_path, tmp_path / "b.md"])
    assert [f.name for f in files] == ["Z.MD", "a.txt", "b.md", "sub/c.md"]
    assert [f.path.relative_to(tmp_path).as_posix() for f in files] == [f.name for f in files]
    with pytest.raises(InvalidRequest, match="no such file"):
        expand_paths([tmp_path / "missing"])
    with pytest.raises(InvalidRequest, match="unsupported"):
        expand_paths([tmp_path / "image.png"])


def test_document_id_ignores_line_endings_and_trailing_blanks() -> None:
    assert ids.document_id("Title", "Line one.  \r\nLine two.\r\n\r\n") == ids.document_id(
        "Title", "Line one.\nLine two."
    )
    assert ids.document_id("Title", "Text") != ids.document_id("Other", "Text")
    assert ids.document_id("Title", "Text") != ids.document_id("Title", "Text!")
    assert re.fullmatch(r"[0-9a-f]{64}", ids.document_id("t", "x"))
