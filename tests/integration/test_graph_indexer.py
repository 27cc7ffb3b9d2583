"""The indexing pipeline on every GraphStore adapter: incremental, replace by source, delete, isolation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from backend.application.ports.graph_store import BulkLoad, DocumentWrite, GraphStore
from backend.application.ports.ingestion import SourceDocument
from backend.domain import ids
from backend.domain.errors import StoreUnavailable
from backend.domain.graph import ChunkRecord, DocumentRecord, Extraction
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.extraction.offline import OfflineExtractor
from backend.graphrag_agent.text import mostly_cjk
from backend.infrastructure.knowledge.loaders import FileDocumentLoader
from tests.support.hash_embedder import HashEmbedder
from tests.support.indexing import make_indexer

KB = KnowledgeBase("people")
OTHER_KB = KnowledgeBase("archive")

ADA = SourceDocument(
    "Ada Lovelace",
    "Ada Lovelace worked with Charles Babbage on the Analytical Engine. "
    "Ada Lovelace was born in London. Charles Babbage taught in Cambridge.",
    source="ada.md",
)
GRACE = SourceDocument(
    "Grace Hopper",
    "Grace Hopper wrote the first compiler. Grace Hopper served in the United States Navy. "
    "Grace Hopper admired Charles Babbage.",
    source="grace.md",
)
ALAN = SourceDocument(
    "Alan Turing",
    "Alan Turing studied in Cambridge. Alan Turing worked at Bletchley Park with Joan Clarke.",
    source="alan.md",
)


class CountingExtractor:
    def __init__(self) -> None:
        self.inner = OfflineExtractor()
        self.documents: list[str] = []

    async def extract(self, kb: str, document: DocumentRecord, chunks: Sequence[ChunkRecord]) -> Extraction:
        self.documents.append(document.title)
        return await self.inner.extract(kb, document, chunks)


async def entity_names(store: GraphStore, kb: str) -> set[str]:
    graph = await store.entity_graph(kb)
    return {entity.name for entity in await store.get_entities(kb, graph.entity_ids)}


async def test_ingest_builds_chunks_entities_relations_and_communities(graph_store: GraphStore) -> None:
    embedder = HashEmbedder()
    report = await make_indexer(graph_store, embedder).index(KB, [ADA, GRACE, ALAN])
    assert (report.documents_added, report.documents_unchanged) == (3, 0)
    counts = await graph_store.counts(KB.kb_prefix)
    assert counts.documents == 3 and counts.chunks == report.chunks_written >= 3
    assert counts.entities > 6 and counts.relations > 6
    names = await entity_names(graph_store, KB.kb_prefix)
    assert {"Ada Lovelace", "Charles Babbage", "Grace Hopper", "Cambridge", "Alan Turing"} <= names
    babbage = ids.entity_id(KB.kb_prefix, "Charles Babbage")
    chunks = await graph_store.chunks_mentioning(KB.kb_prefix, [babbage], limit=10)
    assert {hit.title for hit in chunks} == {"Ada Lovelace", "Grace Hopper"}  # one entity, two documents
    communities = await graph_store.list_communities(KB.kb_prefix)
    assert communities and all(c.title and c.summary for c in communities)


async def test_reingesting_unchanged_documents_does_no_work(graph_store: GraphStore) -> None:
    embedder, extractor = HashEmbedder(), CountingExtractor()
    indexer = make_indexer(graph_store, embedder, extractor)
    first = await indexer.index(KB, [ADA, GRACE])
    calls_before, extracted_before = embedder.calls, list(extractor.documents)
    again = await indexer.index(KB, [ADA, GRACE])
    assert (again.documents_added, again.documents_unchanged, again.chunks_written) == (0, 2, 0)
    assert again.doc_ids == first.doc_ids
    assert embedder.calls == calls_before and extractor.documents == extracted_before


async def test_changed_content_under_the_same_source_replaces_the_old_version(graph_store: GraphStore) -> None:
    indexer = make_indexer(graph_store, HashEmbedder())
    await indexer.index(KB, [ADA, GRACE])
    old_id = ids.document_id(ADA.title, ADA.text)
    edited = SourceDocument(ADA.title, "Ada Lovelace wrote notes on the Analytical Engine in Paris.", source="ada.md")
    report = await indexer.index(KB, [edited])
    assert (report.documents_added, report.documents_replaced, report.documents_unchanged) == (0, 1, 0)
    assert await graph_store.get_document(KB.kb_prefix, old_id) is None
    assert [d.title for d in await graph_store.list_documents(KB.kb_prefix)] == ["Ada Lovelace", "Grace Hopper"]
    names = await entity_names(graph_store, KB.kb_prefix)
    assert "London" not in names  # only the old version mentioned it
    assert {"Paris", "Charles Babbage"} <= names  # new mention; still mentioned by Grace Hopper


async def test_a_folder_ingested_again_from_elsewhere_replaces_its_changed_file(
    graph_store: GraphStore, tmp_path: Path
) -> None:
    folder = tmp_path / "first" / "people"
    (folder / "computing").mkdir(parents=True)
    (folder / "computing" / "ada.md").write_text(f"# Ada Lovelace\n\n{ADA.text}", "utf-8")
    (folder / "grace.md").write_text(f"# Grace Hopper\n\n{GRACE.text}", "utf-8")
    indexer = make_indexer(graph_store, HashEmbedder())
    first = await indexer.index(KB, load_folder(folder))
    assert (first.documents_added, first.documents_replaced) == (2, 0)

    moved = folder.rename(tmp_path / "people")  # the same folder, somewhere else: its sources do not change
    (moved / "computing" / "ada.md").write_text(f"# Ada Lovelace\n\n{ADA.text} She died in 1852.", "utf-8")
    again = await indexer.index(KB, load_folder(moved))

    assert (again.documents_added, again.documents_replaced, again.documents_unchanged) == (0, 1, 1)
    stored = await graph_store.list_documents(KB.kb_prefix)
    assert [(d.title, d.source) for d in stored] == [("Ada Lovelace", "computing/ada.md"), ("Grace Hopper", "grace.md")]


def load_folder(folder: Path) -> list[SourceDocument]:
    loader = FileDocumentLoader()
    return [document for file in loader.files([folder]) for document in loader.load(file)]


async def test_deleting_a_document_removes_what_only_it_supported(graph_store: GraphStore) -> None:
    indexer = make_indexer(graph_store, HashEmbedder())
    await indexer.index(KB, [ADA, GRACE, ALAN])
    alan_id = ids.document_id(ALAN.title, ALAN.text)
    before = await graph_store.counts(KB.kb_prefix)
    assert await indexer.delete_document(KB, alan_id) is True
    assert await indexer.delete_document(KB, alan_id) is False
    after = await graph_store.counts(KB.kb_prefix)
    assert (after.documents, after.entities < before.entities, after.relations < before.relations) == (2, True, True)
    names = await entity_names(graph_store, KB.kb_prefix)
    assert not names & {"Alan Turing", "Bletchley Park", "Joan Clarke"}
    assert "Cambridge" in names  # Ada's document still mentions it
    cambridge = (await graph_store.get_entities(KB.kb_prefix, [ids.entity_id(KB.kb_prefix, "Cambridge")]))[0]
    assert cambridge.mention_count == 1
    members = {entity for c in await graph_store.list_communities(KB.kb_prefix) for entity in c.entity_ids}
    assert ids.entity_id(KB.kb_prefix, "Alan Turing") not in members


async def test_the_same_document_in_two_kbs_stays_separate(graph_store: GraphStore) -> None:
    indexer = make_indexer(graph_store, HashEmbedder())
    await indexer.index(KB, [ADA, GRACE])
    await indexer.index(OTHER_KB, [ADA])
    ada_id = ids.document_id(ADA.title, ADA.text)
    assert await indexer.delete_document(OTHER_KB, ada_id)
    assert await graph_store.get_document(KB.kb_prefix, ada_id) is not None
    assert (await graph_store.counts(OTHER_KB.kb_prefix)).entities == 0
    assert await graph_store.list_communities(OTHER_KB.kb_prefix) == []
    assert "Ada Lovelace" in await entity_names(graph_store, KB.kb_prefix)


@pytest.mark.parametrize("title", ["", "   "])
async def test_untitled_documents_are_named(graph_store: GraphStore, title: str) -> None:
    report = await make_indexer(graph_store, HashEmbedder()).index(KB, [SourceDocument(title, "Some text here.")])
    (document,) = await graph_store.list_documents(KB.kb_prefix)
    assert document.title == "untitled" and report.doc_ids == (document.doc_id,)


class EnglishOnlyEmbedder(HashEmbedder):
    """Covers what MiniLM covers (not mostly-CJK text) and records what it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []

    def covers(self, text: str) -> bool:
        return not mostly_cjk(text)

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.embedded.extend(texts)
        return await super().embed(texts)


async def test_text_the_embedder_does_not_cover_is_indexed_without_vectors(graph_store: GraphStore) -> None:
    chinese = SourceDocument("长城", "长城是中国古代的军事防御工程。长城东起山海关，西至嘉峪关。", source="wall.md")
    embedder = EnglishOnlyEmbedder()
    report = await make_indexer(graph_store, embedder).index(KB, [chinese, ADA])
    assert report.documents_added == 2
    # No Chinese chunk or entity name reached the model (its vectors would be noise); the English ones did.
    # (Community summaries are embedded whatever their language: community search always runs.)
    indexed = [text for text in embedder.embedded if not text.startswith("A community") and "\nA community" not in text]
    assert not [text for text in indexed if mostly_cjk(text)], indexed
    assert {"Ada Lovelace", "Charles Babbage"} <= set(indexed)
    documents = {d.title: d for d in await graph_store.list_documents(KB.kb_prefix)}
    wall_chunks, ada_chunks = (
        [ids.chunk_id(KB.kb_prefix, documents[title].doc_id, i) for i in range(documents[title].chunk_count)]
        for title in ("长城", "Ada Lovelace")
    )
    assert await graph_store.chunk_embeddings(KB.kb_prefix, wall_chunks) == {}
    assert set(await graph_store.chunk_embeddings(KB.kb_prefix, ada_chunks)) == set(ada_chunks)
    # The Chinese chunks are still found by their words.
    hits = await graph_store.search_chunks_fulltext(KB.kb_prefix, "长城 山海关", 5)
    assert {hit.title for hit in hits} == {"长城"}


class _HeardLoad:
    def __init__(self, load: BulkLoad, heard: list[tuple[str, int]], store: GraphStore) -> None:
        self._load, self._heard, self._store = load, heard, store

    async def documents_written(self) -> None:
        self._heard.append(("documents written", (await self._store.counts(KB.kb_prefix)).documents))
        await self._load.documents_written()


def _listen_to_bulk_loads(graph_store: GraphStore, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """What the indexer tells the store's bulk_load: (event, documents asked for / stored / communities stored)."""
    heard: list[tuple[str, int]] = []
    real = graph_store.bulk_load

    @asynccontextmanager
    async def spy(documents: int) -> AsyncIterator[BulkLoad]:
        heard.append(("enter", documents))
        try:
            async with real(documents) as load:
                yield _HeardLoad(load, heard, graph_store)
        finally:
            heard.append(("exit", (await graph_store.counts(KB.kb_prefix)).communities))

    monkeypatch.setattr(graph_store, "bulk_load", spy)
    return heard


async def test_a_load_that_writes_runs_inside_the_stores_bulk_load(
    graph_store: GraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    heard = _listen_to_bulk_loads(graph_store, monkeypatch)
    indexer = make_indexer(graph_store, HashEmbedder(), batch_size=1)
    await indexer.index(KB, [ADA])
    assert heard[:2] == [("enter", 1), ("documents written", 1)]
    assert heard[2][0] == "exit" and heard[2][1] > 0  # the communities were refreshed inside
    heard.clear()
    # Entered at the first batch with something to write, for the documents from there on.
    await indexer.index(KB, [ADA, GRACE, ALAN])
    assert [event for event, _ in heard] == ["enter", "documents written", "exit"]
    assert heard[:2] == [("enter", 2), ("documents written", 3)]
    heard.clear()
    await indexer.index(KB, [ADA, GRACE])  # nothing to write: no bulk load
    assert heard == []


async def test_a_failed_load_still_leaves_the_stores_bulk_load(
    graph_store: GraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    heard = _listen_to_bulk_loads(graph_store, monkeypatch)
    writes = 0
    real = graph_store.upsert_documents

    async def second_write_fails(kb: str, documents: Sequence[DocumentWrite]) -> None:
        nonlocal writes
        writes += 1
        if writes == 2:
            raise StoreUnavailable("the second write failed")
        await real(kb, documents)

    monkeypatch.setattr(graph_store, "upsert_documents", second_write_fails)
    with pytest.raises(StoreUnavailable, match="second write"):
        await make_indexer(graph_store, HashEmbedder(), batch_size=1).index(KB, [ADA, GRACE, ALAN])
    assert heard == [("enter", 3), ("exit", 0)]  # no refresh: the load failed
    assert (await graph_store.counts(KB.kb_prefix)).documents == 1


# -- batches pipelined: the next batch is staged while the one before it is written ----------------------------


async def test_batches_of_one_give_the_graph_one_batch_gives(graph_store: GraphStore) -> None:
    alone, together = HashEmbedder(), HashEmbedder()
    await make_indexer(graph_store, alone, batch_size=1).index(KB, [ADA, GRACE, ALAN])
    await make_indexer(graph_store, together).index(OTHER_KB, [ADA, GRACE, ALAN])
    mine, theirs = await graph_store.counts(KB.kb_prefix), await graph_store.counts(OTHER_KB.kb_prefix)
    assert (mine.documents, mine.chunks, mine.entities, mine.relations) == (
        theirs.documents,
        theirs.chunks,
        theirs.entities,
        theirs.relations,
    )
    # Charles Babbage, new in the first batch and mentioned again in the second while the first may still be
    # being written, is embedded once, like every entity: as many texts as in one batch.
    assert alone.texts == together.texts
    babbage = ids.entity_id(KB.kb_prefix, "Charles Babbage")
    [vector] = await together.embed(["Charles Babbage"])
    hits = await graph_store.search_entities_vector(KB.kb_prefix, vector, limit=3)
    assert hits and hits[0].entity.entity_id == babbage and hits[0].score > 0.99


async def test_two_versions_of_a_source_in_consecutive_batches_leave_the_last(graph_store: GraphStore) -> None:
    newer = SourceDocument("Ada Lovelace", ADA.text + " Ada Lovelace wrote the first program.", source="ada.md")
    report = await make_indexer(graph_store, HashEmbedder(), batch_size=1).index(KB, [ADA, newer])
    assert (report.documents_added, report.documents_replaced) == (1, 1)
    stored = await graph_store.list_documents(KB.kb_prefix)
    assert [d.doc_id for d in stored] == [report.doc_ids[1]]


async def test_the_same_document_in_consecutive_batches_is_written_once(graph_store: GraphStore) -> None:
    extractor = CountingExtractor()
    report = await make_indexer(graph_store, HashEmbedder(), extractor, batch_size=1).index(KB, [ADA, ADA, GRACE])
    assert (report.documents_added, report.documents_unchanged) == (2, 1)
    assert extractor.documents == ["Ada Lovelace", "Grace Hopper"]
    assert report.doc_ids[0] == report.doc_ids[1]
