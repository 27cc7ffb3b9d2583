"""One contract for every GraphStore adapter (SPEC §8): the embedded SQLite store and Neo4j.

The graphs are small and hand-made (no embedder, no extractor); ids come from `backend.domain.ids`
and vectors are one-hot or fixed mixes of 8 axes, so every ranking below has one right answer.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from backend.application.ports.graph_store import DocumentWrite, GraphCounts, GraphStore
from backend.domain import ids
from backend.domain.errors import InvalidRequest
from backend.domain.graph import (
    ChunkRecord,
    CommunityRecord,
    DocumentGraph,
    DocumentRecord,
    EntityGraph,
    EntityMention,
    EntityRecord,
    RelationMention,
    RelationRecord,
)
from backend.domain.knowledge_base import KbOverview, KnowledgeBase
from backend.graphrag_agent.ports import Vector
from backend.infrastructure.graph_store.embedded import EmbeddedGraphStore
from backend.infrastructure.graph_store.merge import merge_entity, merge_relation, relation_key
from tests.support.neo4j import open_test_store

KB = "orchard"
OTHER_KB = "meadow"
DIM = 8
Reopen = Callable[[], Awaitable[GraphStore]]


# -- fixtures ------------------------------------------------------------------------------------------------


@pytest.fixture
async def reopen(request: pytest.FixtureRequest, graph_store: GraphStore, tmp_path: Path) -> AsyncIterator[Reopen]:
    """Close the store and open a new instance on the same data (embedded only: its data is a file)."""
    if request.node.callspec.params["graph_store"] != "embedded":
        pytest.skip("the Neo4j factory gives a fresh database each time; durability is the server's")
    opened: list[GraphStore] = []

    async def again() -> GraphStore:
        await (opened[-1] if opened else graph_store).close()
        opened.append(await EmbeddedGraphStore.open(tmp_path / "graph.db"))
        return opened[-1]

    yield again
    for store in opened:
        await store.close()


@pytest.fixture
async def same_store_again(
    request: pytest.FixtureRequest, graph_store: GraphStore, tmp_path: Path
) -> AsyncIterator[GraphStore]:
    """A second instance on `graph_store`'s data, opened as another server process would open it."""
    if request.node.callspec.params["graph_store"] == "embedded":
        other: GraphStore = await EmbeddedGraphStore.open(tmp_path / "graph.db")
    else:
        other = await open_test_store(request.getfixturevalue("neo4j_server"))
    yield other
    await other.close()


# -- hand-made graphs ----------------------------------------------------------------------------------------


def axis(index: int) -> Vector:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[index] = 1.0
    return vector


def mix(*weights: float) -> Vector:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(weights)] = weights
    return vector / np.float32(np.linalg.norm(vector))


ENTITY_AXES = {"apple": 0, "mill": 1, "yeast": 2, "barrel": 3, "bee": 4, "beekeeper": 5, "blossom": 6}


def entity_vector(name: str) -> Vector:
    key = ids.normalise_entity_name(name)
    if key in ENTITY_AXES:
        return axis(ENTITY_AXES[key])
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    return rng.standard_normal(DIM).astype(np.float32)


@dataclass(frozen=True)
class Mention:
    name: str
    type: str
    description: str


@dataclass(frozen=True)
class Link:
    source: str
    target: str
    description: str
    weight: float


@dataclass(frozen=True)
class ChunkSpec:
    text: str
    vector: Vector
    entities: tuple[Mention, ...] = ()
    relations: tuple[Link, ...] = ()


@dataclass(frozen=True)
class Doc:
    """A DocumentGraph of one KB with the vectors the ingestion pipeline would pass along."""

    kb: str
    graph: DocumentGraph
    chunk_vectors: list[Vector]
    entity_vectors: dict[str, Vector] = field(default_factory=dict)

    @property
    def doc_id(self) -> str:
        return self.graph.document.doc_id

    @property
    def title(self) -> str:
        return self.graph.document.title

    def chunk(self, ordinal: int) -> str:
        return self.graph.chunks[ordinal].chunk_id


def build(
    kb: str,
    title: str,
    chunks: Sequence[ChunkSpec],
    *,
    source: str = "",
    metadata: dict[str, Any] | None = None,
    doc_id: str | None = None,
) -> Doc:
    did = doc_id or ids.document_id(title, "\n\n".join(spec.text for spec in chunks))
    records: list[ChunkRecord] = []
    mentions: list[EntityMention] = []
    relations: list[RelationMention] = []
    offset = 0
    for ordinal, spec in enumerate(chunks):
        cid = ids.chunk_id(kb, did, ordinal)
        records.append(ChunkRecord(cid, did, ordinal, spec.text, offset, offset + len(spec.text)))
        offset += len(spec.text) + 2
        mentions += [EntityMention(eid(kb, m.name), m.name, m.type, m.description, cid) for m in spec.entities]
        relations += [
            RelationMention(eid(kb, r.source), eid(kb, r.target), r.description, r.weight, cid) for r in spec.relations
        ]
    record = DocumentRecord(did, title, metadata or {}, source, len(records))
    graph = DocumentGraph(record, tuple(records), tuple(mentions), tuple(relations))
    vectors = {eid(kb, m.name): entity_vector(m.name) for spec in chunks for m in spec.entities}
    return Doc(kb, graph, [spec.vector for spec in chunks], vectors)


def eid(kb: str, name: str) -> str:
    return ids.entity_id(kb, name)


APPLE_PRESSED = Mention("Apple", "fruit", "Fruit pressed for cider.")
APPLE_JUICED = Mention("Apple", "Fruit", "Its juice ferments.")
APPLE_BLOSSOM = Mention("apple", "plant", "Its blossom feeds bees.")
MILL_PRESS = Mention("Mill", "place", "Where apples are pressed.")
MILL_HIVES = Mention("Mill", "place", "Stands beside the hives.")
YEAST = Mention("Yeast", "organism", "Turns juice into cider.")
BARREL = Mention("Barrel", "container", "Oak barrel for fermenting.")
BEE = Mention("Bee", "insect", "Pollinates the blossom.")
BEE_KEPT = Mention("Bee", "insect", "Kept in hives.")
BEEKEEPER = Mention("Beekeeper", "person", "Keeps the hives.")
BLOSSOM = Mention("Blossom", "", "Apple flowers in May.")


def cider(kb: str = KB) -> Doc:
    return build(
        kb,
        "Making cider",
        [
            ChunkSpec(
                "Apples are pressed in October at the old mill.",
                axis(0),
                (APPLE_PRESSED, MILL_PRESS),
                (Link("Apple", "Mill", "pressed at", 2.0),),
            ),
            ChunkSpec(
                "The juice of the apples ferments with wild yeast in oak barrels.",
                axis(2),
                (APPLE_JUICED, YEAST, BARREL),
                (Link("Yeast", "Barrel", "ferments in", 1.0),),
            ),
        ],
        source="cider.md",
        metadata={"lang": "en", "pages": 2, "tags": ["press", "ferment"]},
    )


def bees(kb: str = KB) -> Doc:
    return build(
        kb,
        "The bees",
        [
            ChunkSpec(
                "Bees pollinate the apple blossom in May.",
                axis(4),
                (BEE, APPLE_BLOSSOM, BLOSSOM),
                (Link("Bee", "apple", "pollinates", 1.5), Link("Bee", "Blossom", "visits", 1.0)),
            ),
            ChunkSpec(
                "The beekeeper keeps thirty hives beside the mill.",
                axis(5),
                (BEEKEEPER, BEE_KEPT, MILL_HIVES),
                # Stated the other way round: relations are undirected.
                (Link("Beekeeper", "Bee", "keeps", 1.0), Link("Mill", "Apple", "grows near", 0.5)),
            ),
        ],
        source="bees.md",
    )


async def write(store: GraphStore, *docs: Doc) -> None:
    for doc in docs:
        await store.upsert_document(doc.kb, doc.graph, doc.chunk_vectors, doc.entity_vectors)


def merged_entity(kb: str, name: str, *docs: Doc) -> EntityRecord:
    """What the merge rule makes of the entity's mentions in `docs`."""
    wanted = eid(kb, name)
    found = [m for doc in docs for m in doc.graph.entity_mentions if m.entity_id == wanted]
    merged = merge_entity(found)
    return EntityRecord(wanted, merged.name, merged.type, merged.description, merged.mention_count)


def merged_relation(kb: str, a: str, b: str, *docs: Doc) -> RelationRecord:
    key = relation_key(eid(kb, a), eid(kb, b))
    found = [m for doc in docs for m in doc.graph.relation_mentions if relation_key(m.source_id, m.target_id) == key]
    merged = merge_relation(found)
    return RelationRecord(key[0], key[1], merged.description, merged.weight, merged.chunk_ids)


ALL_NAMES = ("Apple", "Mill", "Yeast", "Barrel", "Bee", "Beekeeper", "Blossom")
ALL_PAIRS = (
    ("Apple", "Mill"),
    ("Yeast", "Barrel"),
    ("Bee", "Apple"),
    ("Bee", "Blossom"),
    ("Beekeeper", "Bee"),
)


@pytest.fixture
async def orchard(graph_store: GraphStore) -> GraphStore:
    await write(graph_store, cider(), bees())
    return graph_store


# -- documents and chunks ------------------------------------------------------------------------------------


async def test_documents_read_back(orchard: GraphStore) -> None:
    await orchard.ping()
    doc = await orchard.get_document(KB, cider().doc_id)
    assert doc is not None
    assert (doc.doc_id, doc.title, doc.source, doc.chunk_count) == (cider().doc_id, "Making cider", "cider.md", 2)
    assert doc.metadata == {"lang": "en", "pages": 2, "tags": ["press", "ferment"]}
    assert doc.created_at is not None and doc.created_at.tzinfo is not None
    assert await orchard.get_document(KB, "no-such-document") is None
    assert [d.title for d in await orchard.list_documents(KB)] == ["Making cider", "The bees"]
    assert [d.doc_id for d in await orchard.find_documents_by_source(KB, "bees.md")] == [bees().doc_id]
    assert await orchard.find_documents_by_source(KB, "nowhere.md") == []


async def test_list_and_find_order_by_title_then_id(orchard: GraphStore) -> None:
    second = build(KB, "Making cider", [ChunkSpec("A second edition about pressing.", axis(1))], source="cider.md")
    first = build(KB, "A cider primer", [ChunkSpec("A primer.", axis(3))], source="cider.md")
    await write(orchard, second, first)
    making = sorted([cider().doc_id, second.doc_id])
    expected = [first.doc_id, *making, bees().doc_id]
    assert [d.doc_id for d in await orchard.list_documents(KB)] == expected
    assert [d.doc_id for d in await orchard.find_documents_by_source(KB, "cider.md")] == [first.doc_id, *making]


async def test_get_chunks_in_the_order_asked_with_score_zero(orchard: GraphStore) -> None:
    c, b = cider(), bees()
    hits = await orchard.get_chunks(KB, [b.chunk(1), "no-such-chunk", c.chunk(0), b.chunk(1)])
    assert [h.chunk_id for h in hits] == [b.chunk(1), c.chunk(0)]
    assert hits[0].doc_id == b.doc_id
    assert hits[0].title == "The bees"
    assert hits[0].text == "The beekeeper keeps thirty hives beside the mill."
    assert hits[0].ordinal == 1
    assert all(h.score == 0 for h in hits)
    assert await orchard.get_chunks(KB, []) == []


async def test_document_chunks_come_back_in_order_with_their_offsets(orchard: GraphStore) -> None:
    assert await orchard.document_chunks(KB, cider().doc_id) == list(cider().graph.chunks)
    long = build(KB, "A long read", [ChunkSpec(f"Part {n} of the long read.", axis(n % DIM)) for n in range(12)])
    await write(orchard, long)
    chunks = await orchard.document_chunks(KB, long.doc_id)
    assert [c.ordinal for c in chunks] == list(range(12))  # by number, not as text ("10" < "2")
    assert chunks == list(long.graph.chunks)
    assert await orchard.document_chunks(KB, "no-such-document") == []
    assert await orchard.document_chunks(OTHER_KB, cider().doc_id) == []


async def test_chunk_embeddings_are_the_stored_vectors(orchard: GraphStore) -> None:
    c, b = cider(), bees()
    vectors = await orchard.chunk_embeddings(KB, [b.chunk(1), "no-such-chunk", c.chunk(0)])
    assert set(vectors) == {b.chunk(1), c.chunk(0)}
    assert np.allclose(vectors[c.chunk(0)], axis(0)) and np.allclose(vectors[b.chunk(1)], axis(5))
    assert await orchard.chunk_embeddings(OTHER_KB, [c.chunk(0)]) == {}
    assert await orchard.chunk_embeddings(KB, []) == {}


async def test_counts(orchard: GraphStore) -> None:
    assert await orchard.counts(KB) == GraphCounts(documents=2, chunks=4, entities=7, relations=5, communities=0)
    assert await orchard.counts(OTHER_KB) == GraphCounts()


async def test_overview_names_the_most_mentioned_entities_and_the_longest_documents(orchard: GraphStore) -> None:
    # Apple is mentioned three times, Bee and Mill twice, the others once: ties go by name.
    overview = await orchard.overview(KB, entities=4, titles=5)
    assert overview == KbOverview(2, ("Apple", "Bee", "Mill", "Barrel"), ("Making cider", "The bees"))
    longer = build(KB, "Pressing", [ChunkSpec(f"Press {n}.", axis(n)) for n in range(3)], source="press.md")
    await write(orchard, longer)
    assert (await orchard.overview(KB, entities=0, titles=1)) == KbOverview(3, (), ("Pressing",))
    assert await orchard.overview(OTHER_KB, entities=4, titles=5) == KbOverview()


# -- merged entities and relations ---------------------------------------------------------------------------


async def test_entities_are_merged_over_documents(orchard: GraphStore) -> None:
    names = ["Bee", "Apple", "Unknown thing", "Mill"]
    entities = await orchard.get_entities(KB, [eid(KB, n) for n in names])
    assert [e.entity_id for e in entities] == [eid(KB, "Bee"), eid(KB, "Apple"), eid(KB, "Mill")]
    apple = entities[1]
    assert apple == merged_entity(KB, "Apple", cider(), bees())
    assert (apple.type, apple.mention_count) == ("fruit", 3)
    assert set(apple.description.split("\n")) == {
        "Fruit pressed for cider.",
        "Its juice ferments.",
        "Its blossom feeds bees.",
    }
    assert entities[0] == merged_entity(KB, "Bee", bees())
    assert entities[0].mention_count == 2
    blossom = (await orchard.get_entities(KB, [eid(KB, "Blossom")]))[0]
    assert (blossom.name, blossom.type, blossom.mention_count) == ("Blossom", "other", 1)


def as_write(doc: Doc) -> DocumentWrite:
    return DocumentWrite(doc.graph, doc.chunk_vectors, doc.entity_vectors)


async def test_a_batch_writes_what_writing_one_by_one_writes(graph_store: GraphStore) -> None:
    await graph_store.upsert_documents(KB, [as_write(cider()), as_write(bees())])
    assert await graph_store.counts(KB) == GraphCounts(documents=2, chunks=4, entities=7, relations=5, communities=0)
    names = sorted(ENTITY_AXES, key=str)
    entities = await graph_store.get_entities(KB, [eid(KB, n.capitalize()) for n in names])
    # Mentions of one entity in two documents of the batch are merged as if written one after the other.
    assert entities == [merged_entity(KB, n.capitalize(), cider(), bees()) for n in names]
    assert entities[names.index("apple")].mention_count == 3
    relations = await graph_store.relations_of(KB, [eid(KB, n.capitalize()) for n in names], 10)
    expected = [merged_relation(KB, a, b, cider(), bees()) for a, b in ALL_PAIRS]
    assert sorted(relations, key=lambda r: (r.source_id, r.target_id)) == sorted(
        expected, key=lambda r: (r.source_id, r.target_id)
    )
    await graph_store.upsert_documents(KB, [])  # nothing to write
    assert (await graph_store.counts(KB)).documents == 2


async def test_a_later_document_of_a_batch_replaces_an_earlier_one_with_its_id(graph_store: GraphStore) -> None:
    first = cider()
    second = build(
        KB, "Making perry", [ChunkSpec("Pears are pressed at the mill.", axis(1), (MILL_PRESS,))], doc_id=first.doc_id
    )
    await graph_store.upsert_documents(KB, [as_write(first), as_write(second)])
    assert await graph_store.counts(KB) == GraphCounts(documents=1, chunks=1, entities=1, relations=0, communities=0)
    stored = await graph_store.get_document(KB, first.doc_id)
    assert stored is not None and stored.title == "Making perry"
    assert await graph_store.existing_entity_ids(KB, [eid(KB, "Apple"), eid(KB, "Mill")]) == {eid(KB, "Mill")}


async def test_existing_document_ids(orchard: GraphStore) -> None:
    asked = [cider().doc_id, "no-such-document", bees().doc_id, cider().doc_id]
    assert await orchard.existing_document_ids(KB, asked) == {cider().doc_id, bees().doc_id}
    assert await orchard.existing_document_ids(OTHER_KB, [cider().doc_id]) == set()
    assert await orchard.existing_document_ids(KB, []) == set()


async def test_existing_entity_ids(orchard: GraphStore) -> None:
    asked = [eid(KB, "Apple"), eid(KB, "Pear"), eid(OTHER_KB, "Apple")]
    assert await orchard.existing_entity_ids(KB, asked) == {eid(KB, "Apple")}
    assert await orchard.existing_entity_ids(KB, []) == set()


async def test_relations_are_undirected_and_merged_with_summed_weights(orchard: GraphStore) -> None:
    apple_mill = (await orchard.relations_of(KB, [eid(KB, "Mill")], 10))[0]
    assert apple_mill == merged_relation(KB, "Apple", "Mill", cider(), bees())
    assert apple_mill.source_id < apple_mill.target_id
    assert {apple_mill.source_id, apple_mill.target_id} == {eid(KB, "Apple"), eid(KB, "Mill")}
    assert apple_mill.weight == pytest.approx(2.5)
    assert set(apple_mill.description.split("\n")) == {"pressed at", "grows near"}
    assert apple_mill.chunk_ids == tuple(sorted([cider().chunk(0), bees().chunk(1)]))


async def test_relations_of_strongest_first_ties_by_ids(orchard: GraphStore) -> None:
    found = await orchard.relations_of(KB, [eid(KB, "Apple"), eid(KB, "Bee")], 10)
    expected = sorted(
        (merged_relation(KB, a, b, cider(), bees()) for a, b in ALL_PAIRS if {a, b} & {"Apple", "Bee"}),
        key=lambda r: (-r.weight, r.source_id, r.target_id),
    )
    assert found == expected
    assert [r.weight for r in found] == [2.5, 1.5, 1.0, 1.0]
    assert await orchard.relations_of(KB, [eid(KB, "Apple"), eid(KB, "Bee")], 2) == expected[:2]
    assert await orchard.relations_of(KB, [eid(KB, "Nobody")], 10) == []
    assert await orchard.relations_of(KB, [], 10) == []


async def test_entity_graph(orchard: GraphStore) -> None:
    graph = await orchard.entity_graph(KB)
    assert graph.entity_ids == tuple(sorted(eid(KB, n) for n in ALL_NAMES))
    assert graph == expected_graph(cider(), bees())
    assert len(graph.edges) == len(ALL_PAIRS)
    assert all(source < target for source, target, _ in graph.edges)
    empty = await orchard.entity_graph(OTHER_KB)
    assert (empty.entity_ids, empty.edges) == ((), ())


# -- entities around chunks ----------------------------------------------------------------------------------


async def test_chunks_mentioning_scores_by_how_many_entities(orchard: GraphStore) -> None:
    c, b = cider(), bees()
    hits = await orchard.chunks_mentioning(KB, [eid(KB, "Apple"), eid(KB, "Mill"), eid(KB, "Bee")], 10)
    # Score 2: cider 0 (apple, mill), bees 0 (bee, apple), bees 1 (bee, mill); then cider 1 (apple).
    # Equal scores by title, then ordinal.
    assert [(h.chunk_id, h.score) for h in hits] == [
        (c.chunk(0), 2.0),
        (b.chunk(0), 2.0),
        (b.chunk(1), 2.0),
        (c.chunk(1), 1.0),
    ]
    assert (hits[0].doc_id, hits[0].title, hits[0].ordinal) == (c.doc_id, "Making cider", 0)
    assert hits[0].text == "Apples are pressed in October at the old mill."
    limited = await orchard.chunks_mentioning(KB, [eid(KB, "Apple"), eid(KB, "Mill"), eid(KB, "Bee")], 2)
    assert [h.chunk_id for h in limited] == [c.chunk(0), b.chunk(0)]
    apple = await orchard.chunks_mentioning(KB, [eid(KB, "Apple")], 10)
    assert [h.chunk_id for h in apple] == [c.chunk(0), c.chunk(1), b.chunk(0)]  # title before ordinal
    assert await orchard.chunks_mentioning(KB, [eid(KB, "Nobody")], 10) == []


async def test_chunks_of_entities(orchard: GraphStore) -> None:
    c, b = cider(), bees()
    asked = [eid(KB, "Apple"), eid(KB, "Bee"), eid(KB, "Nobody")]
    assert await orchard.chunks_of_entities(KB, asked, 2) == {
        eid(KB, "Apple"): [c.chunk(0), c.chunk(1)],  # by title ("Making cider" < "The bees"), then ordinal
        eid(KB, "Bee"): [b.chunk(0), b.chunk(1)],
    }
    assert await orchard.chunks_of_entities(KB, asked, 10) == {
        eid(KB, "Apple"): [c.chunk(0), c.chunk(1), b.chunk(0)],
        eid(KB, "Bee"): [b.chunk(0), b.chunk(1)],
    }


async def test_chunks_of_entities_put_the_entitys_own_document_first(orchard: GraphStore) -> None:
    """A document titled with the entity's name (after an article, before a "(…)") comes before the
    alphabetical order, so a small per-entity limit still reaches it."""
    own_apple = build(KB, "The Apple", [ChunkSpec("The apple is a fruit.", axis(6), (APPLE_PRESSED,), ())])
    own_mill = build(KB, "Mill (building)", [ChunkSpec("A mill grinds.", axis(7), (MILL_PRESS,), ())])
    await write(orchard, own_apple, own_mill)
    found = await orchard.chunks_of_entities(KB, [eid(KB, "Apple"), eid(KB, "Mill"), eid(KB, "Bee")], 2)
    assert found == {
        eid(KB, "Apple"): [own_apple.chunk(0), cider().chunk(0)],
        eid(KB, "Mill"): [own_mill.chunk(0), cider().chunk(0)],
        eid(KB, "Bee"): [bees().chunk(0), bees().chunk(1)],  # "The bees" is not titled "Bee"
    }


async def test_entities_in_chunks(orchard: GraphStore) -> None:
    c, b = cider(), bees()
    found = await orchard.entities_in_chunks(KB, [b.chunk(1), c.chunk(0), "no-such-chunk"])
    assert found == {
        b.chunk(1): sorted([eid(KB, "Beekeeper"), eid(KB, "Bee"), eid(KB, "Mill")]),
        c.chunk(0): sorted([eid(KB, "Apple"), eid(KB, "Mill")]),
    }
    assert await orchard.entities_in_chunks(KB, []) == {}


async def test_chunks_without_mentions_are_absent_from_the_map(graph_store: GraphStore) -> None:
    plain = build(KB, "Plain", [ChunkSpec("Nothing to see.", axis(7))])
    await write(graph_store, plain)
    assert await graph_store.entities_in_chunks(KB, [plain.chunk(0)]) == {}


# -- search --------------------------------------------------------------------------------------------------


async def test_chunk_fulltext_ranks_the_clear_match_first(orchard: GraphStore) -> None:
    hits = await orchard.search_chunks_fulltext(KB, "When does the wild yeast ferment in oak barrels?", 10)
    assert hits[0].chunk_id == cider().chunk(1)
    assert (hits[0].doc_id, hits[0].title, hits[0].ordinal) == (cider().doc_id, "Making cider", 1)
    assert hits[0].score > 0
    assert all(h.score <= hits[0].score for h in hits)
    beekeeper = await orchard.search_chunks_fulltext(KB, "thirty hives beekeeper", 10)
    assert [h.chunk_id for h in beekeeper] == [bees().chunk(1)]
    assert len(await orchard.search_chunks_fulltext(KB, "apples apple blossom mill juice", 1)) == 1
    assert await orchard.search_chunks_fulltext(KB, "yeast", 0) == []
    assert await orchard.search_chunks_fulltext(KB, "bananas", 10) == []


async def test_chunk_vector_search_orders_by_cosine(orchard: GraphStore) -> None:
    query = mix(1.0, 0.0, 0.5, 0.0, 0.2, 0.1)
    hits = await orchard.search_chunks_vector(KB, query, 10)
    c, b = cider(), bees()
    assert [h.chunk_id for h in hits] == [c.chunk(0), c.chunk(1), b.chunk(0), b.chunk(1)]
    assert [h.score for h in hits] == pytest.approx([float(query[i]) for i in (0, 2, 4, 5)], abs=1e-5)
    assert (hits[0].title, hits[0].text) == ("Making cider", "Apples are pressed in October at the old mill.")
    assert [h.chunk_id for h in await orchard.search_chunks_vector(KB, query * 7, 2)] == [c.chunk(0), c.chunk(1)]
    assert await orchard.search_chunks_vector(KB, query, 0) == []


async def test_entity_fulltext_search(orchard: GraphStore) -> None:
    hits = await orchard.search_entities_fulltext(KB, "Where does the yeast live?", 10)
    assert [h.entity.entity_id for h in hits] == [eid(KB, "Yeast")]
    assert hits[0].entity == merged_entity(KB, "Yeast", cider())
    assert hits[0].score > 0
    both = await orchard.search_entities_fulltext(KB, "the beekeeper and the barrel", 10)
    assert {h.entity.entity_id for h in both} == {eid(KB, "Beekeeper"), eid(KB, "Barrel")}
    assert await orchard.search_entities_fulltext(KB, "bananas", 10) == []


async def test_entity_vector_search_orders_by_cosine(orchard: GraphStore) -> None:
    query = mix(0.0, 0.0, 0.0, 0.0, 1.0, 0.5)  # mostly the bee, a little the beekeeper
    hits = await orchard.search_entities_vector(KB, query, 2)
    assert [h.entity.entity_id for h in hits] == [eid(KB, "Bee"), eid(KB, "Beekeeper")]
    assert [h.score for h in hits] == pytest.approx([float(query[4]), float(query[5])], abs=1e-5)
    assert hits[0].entity == merged_entity(KB, "Bee", bees())


async def test_equal_cosines_are_ordered_by_id(orchard: GraphStore) -> None:
    tied = sorted([eid(KB, "Apple"), eid(KB, "Mill")])
    for limit in (1, 2):
        hits = await orchard.search_entities_vector(KB, mix(1.0, 1.0), limit)
        assert [h.entity.entity_id for h in hits] == tied[:limit]
        assert hits[0].score == pytest.approx(float(mix(1.0, 1.0)[0]), abs=1e-5)


async def test_existing_entities_keep_their_vector(graph_store: GraphStore) -> None:
    await write(graph_store, cider())
    moved = bees()
    # The pipeline offers vectors for new entities only; a vector offered for an existing one is not taken.
    await write(graph_store, replace(moved, entity_vectors={**moved.entity_vectors, eid(KB, "Apple"): axis(7)}))
    hits = await graph_store.search_entities_vector(KB, axis(0), 1)
    assert hits[0].entity.entity_id == eid(KB, "Apple")
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)


async def test_zero_query_vector_finds_nothing(orchard: GraphStore) -> None:
    zero = np.zeros(DIM, dtype=np.float32)
    assert await orchard.search_chunks_vector(KB, zero, 5) == []
    assert await orchard.search_entities_vector(KB, zero, 5) == []
    assert await orchard.search_communities(KB, zero, None, 5) == []


HOSTILE_QUERIES = [
    '" OR 1=1 --',
    "NEAR(",
    "NEAR(apple mill, 2)",
    "*",
    "apple*",
    '"',
    '"""',
    "'",
    "`",
    "\\",
    "MATCH (n) DETACH DELETE n",
    "title:foo AND bar~",
    "text:apple^3 OR mill~0.5",
    "{terms kb}: apple",
    "(apple OR",
    "AND OR NOT",
    "-apple +bee",
    "/.*/",
    "[* TO *]",
    "'; DROP TABLE chunks; --",
    "apple\x00bee",
    "苹果\"酒'",
    "🍎🍏",
    "apple " * 500,
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
async def test_hostile_fulltext_queries_never_raise(orchard: GraphStore, query: str) -> None:
    known_chunks = {cider().chunk(i) for i in range(2)} | {bees().chunk(i) for i in range(2)}
    chunk_hits = await orchard.search_chunks_fulltext(KB, query, 10)
    entity_hits = await orchard.search_entities_fulltext(KB, query, 10)
    assert {h.chunk_id for h in chunk_hits} <= known_chunks
    assert {h.entity.entity_id for h in entity_hits} <= {eid(KB, n) for n in ALL_NAMES}
    assert await orchard.counts(KB) == GraphCounts(documents=2, chunks=4, entities=7, relations=5)


async def test_operators_are_plain_words(orchard: GraphStore) -> None:
    # In FTS5 or Lucene syntax "NOT bees" would exclude the bees; here it is just more words.
    hits = await orchard.search_chunks_fulltext(KB, "yeast NOT pollinate", 10)
    assert {h.chunk_id for h in hits} == {cider().chunk(1), bees().chunk(0)}
    assert await orchard.search_chunks_fulltext(KB, "* NEAR( ^ : ~ ( )", 10) == []


@pytest.mark.parametrize("kb", ["orchard' OR '1'='1", "orchard; DROP TABLE chunks", "%", "*", "", "ORCHARD"])
async def test_kb_names_are_values_not_syntax(orchard: GraphStore, kb: str) -> None:
    assert await orchard.search_chunks_fulltext(kb, "yeast", 10) == []
    assert await orchard.search_chunks_vector(kb, axis(0), 10) == []
    assert await orchard.get_entities(kb, [eid(KB, "Apple")]) == []
    assert await orchard.list_documents(kb) == []
    assert await orchard.counts(KB) == GraphCounts(documents=2, chunks=4, entities=7, relations=5)


async def test_kb_names_that_share_a_prefix_stay_apart(graph_store: GraphStore) -> None:
    await write(graph_store, cider("a_b"), cider("a_b_c"), bees("a"))
    for kb in ("a_b", "a_b_c"):
        own = {cider(kb).chunk(0), cider(kb).chunk(1)}
        assert {h.chunk_id for h in await graph_store.search_chunks_fulltext(kb, "apples yeast", 10)} == own
        assert {h.entity.entity_id for h in await graph_store.search_entities_fulltext(kb, "yeast", 10)} == {
            eid(kb, "Yeast")
        }
    assert await graph_store.search_chunks_fulltext("a", "yeast", 10) == []


async def test_chinese_text_is_searchable(graph_store: GraphStore) -> None:
    mill = Mention("石头磨坊", "地点", "酿造苹果酒的地方。")
    zh = build(
        "zh",
        "果园历史",
        [
            ChunkSpec("苹果酒在石头磨坊里酿造。", axis(0), (mill,)),
            ChunkSpec("蜜蜂在五月为花授粉。", axis(1), (Mention("蜜蜂", "昆虫", "为花授粉。"),)),
        ],
    )
    await write(graph_store, zh)
    assert (await graph_store.search_chunks_fulltext("zh", "苹果酒在哪里酿造？", 10))[0].chunk_id == zh.chunk(0)
    assert [h.chunk_id for h in await graph_store.search_chunks_fulltext("zh", "授粉", 10)] == [zh.chunk(1)]
    assert await graph_store.search_chunks_fulltext("zh", "香蕉", 10) == []
    entities = await graph_store.search_entities_fulltext("zh", "磨坊", 10)
    assert [h.entity.entity_id for h in entities] == [eid("zh", "石头磨坊")]


# -- replacing and deleting documents ------------------------------------------------------------------------


async def test_upserting_the_same_document_again_changes_nothing(orchard: GraphStore) -> None:
    before = (await orchard.entity_graph(KB), await orchard.get_entities(KB, [eid(KB, n) for n in ALL_NAMES]))
    first = await orchard.get_document(KB, cider().doc_id)
    assert first is not None
    await write(orchard, cider(), bees(), cider())
    assert await orchard.counts(KB) == GraphCounts(documents=2, chunks=4, entities=7, relations=5)
    after = (await orchard.entity_graph(KB), await orchard.get_entities(KB, [eid(KB, n) for n in ALL_NAMES]))
    assert after == before
    assert len(await orchard.search_chunks_fulltext(KB, "yeast", 10)) == 1
    assert len(await orchard.chunks_mentioning(KB, [eid(KB, "Apple")], 10)) == 3
    stored = await orchard.get_document(KB, cider().doc_id)
    assert stored is not None and stored.created_at == first.created_at


async def test_a_new_version_under_the_same_id_replaces_the_old(orchard: GraphStore) -> None:
    short = build(
        KB,
        "Making cider, abridged",
        [ChunkSpec("Apples are pressed at the mill.", axis(1), (APPLE_PRESSED, MILL_PRESS))],
        doc_id=cider().doc_id,
        source="cider.md",
    )
    await write(orchard, short)
    assert await orchard.counts(KB) == GraphCounts(documents=2, chunks=3, entities=5, relations=4)
    doc = await orchard.get_document(KB, cider().doc_id)
    assert doc is not None and (doc.title, doc.chunk_count, doc.metadata) == ("Making cider, abridged", 1, {})
    assert await orchard.document_chunks(KB, cider().doc_id) == list(short.graph.chunks)
    assert await orchard.search_chunks_fulltext(KB, "yeast barrels", 10) == []
    assert await orchard.get_chunks(KB, [cider().chunk(1)]) == []
    assert await orchard.existing_entity_ids(KB, [eid(KB, "Yeast"), eid(KB, "Barrel")]) == set()
    apple = (await orchard.get_entities(KB, [eid(KB, "Apple")]))[0]
    assert apple == merged_entity(KB, "Apple", short, bees())
    assert apple.mention_count == 2


async def test_delete_document_removes_what_only_it_supported(orchard: GraphStore) -> None:
    await orchard.search_chunks_vector(KB, axis(0), 10)  # a cached matrix must not outlive the delete
    await orchard.search_entities_vector(KB, axis(2), 10)
    assert await orchard.delete_document(KB, cider().doc_id) is True

    assert await orchard.get_document(KB, cider().doc_id) is None
    assert await orchard.get_chunks(KB, [cider().chunk(0), cider().chunk(1)]) == []
    assert await orchard.document_chunks(KB, cider().doc_id) == []
    assert await orchard.search_chunks_fulltext(KB, "yeast barrels pressed october", 10) == []
    assert {h.doc_id for h in await orchard.search_chunks_vector(KB, axis(0), 10)} == {bees().doc_id}
    assert await orchard.counts(KB) == GraphCounts(documents=1, chunks=2, entities=5, relations=4)
    # Entities only the deleted document mentioned are gone, from reads and searches.
    assert await orchard.existing_entity_ids(KB, [eid(KB, "Yeast"), eid(KB, "Barrel")]) == set()
    assert await orchard.search_entities_fulltext(KB, "yeast", 10) == []
    assert eid(KB, "Yeast") not in {h.entity.entity_id for h in await orchard.search_entities_vector(KB, axis(2), 10)}
    assert await orchard.relations_of(KB, [eid(KB, "Yeast"), eid(KB, "Barrel")], 10) == []


async def test_delete_document_recomputes_what_remains(orchard: GraphStore) -> None:
    assert await orchard.delete_document(KB, cider().doc_id)
    apple, mill = await orchard.get_entities(KB, [eid(KB, "Apple"), eid(KB, "Mill")])
    assert (apple.name, apple.type, apple.description, apple.mention_count) == (
        "apple",
        "plant",
        "Its blossom feeds bees.",
        1,
    )
    assert (mill.description, mill.mention_count) == ("Stands beside the hives.", 1)
    apple_mill = (await orchard.relations_of(KB, [eid(KB, "Mill")], 10))[0]
    assert (apple_mill.weight, apple_mill.description, apple_mill.chunk_ids) == (0.5, "grows near", (bees().chunk(1),))
    assert await orchard.chunks_of_entities(KB, [eid(KB, "Apple")], 10) == {eid(KB, "Apple"): [bees().chunk(0)]}
    assert await orchard.entity_graph(KB) == expected_graph(bees())


def expected_graph(*docs: Doc) -> EntityGraph:
    """The entity graph that `docs` alone make, by the merge rules."""
    entity_ids = sorted({m.entity_id for d in docs for m in d.graph.entity_mentions})
    by_key: dict[tuple[str, str], list[RelationMention]] = {}
    for m in (m for d in docs for m in d.graph.relation_mentions):
        by_key.setdefault(relation_key(m.source_id, m.target_id), []).append(m)
    edges = [(key[0], key[1], merge_relation(found).weight) for key, found in sorted(by_key.items())]
    return EntityGraph(tuple(entity_ids), tuple(edges))


async def test_delete_unknown_document_returns_false(orchard: GraphStore) -> None:
    assert await orchard.delete_document(KB, "no-such-document") is False
    assert await orchard.delete_document(OTHER_KB, cider().doc_id) is False
    assert await orchard.delete_document(KB, bees().doc_id) is True
    assert await orchard.delete_document(KB, bees().doc_id) is False
    assert (await orchard.counts(KB)).documents == 1


async def test_deleting_every_document_empties_the_kb(orchard: GraphStore) -> None:
    await orchard.delete_document(KB, cider().doc_id)
    await orchard.delete_document(KB, bees().doc_id)
    assert await orchard.counts(KB) == GraphCounts()
    assert await orchard.search_entities_vector(KB, axis(0), 10) == []
    assert await orchard.search_chunks_vector(KB, axis(0), 10) == []


# -- communities ---------------------------------------------------------------------------------------------


def community(
    level: int, names: Sequence[str], rank: float, title: str, parent: CommunityRecord | None = None
) -> CommunityRecord:
    members = tuple(sorted(eid(KB, n) for n in names))
    return CommunityRecord(
        ids.community_id(KB, level, members),
        level,
        title,
        f"Summary of {title}.",
        rank,
        members,
        parent.community_id if parent else None,
    )


TOP = community(0, ALL_NAMES, 5.0, "The orchard")
CIDER_C = community(1, ["Apple", "Mill", "Yeast", "Barrel"], 3.0, "Cider making", TOP)
BEES_C = community(1, ["Bee", "Beekeeper", "Blossom", "Apple"], 2.0, "Bees", TOP)
BLOSSOM_C = community(2, ["Blossom"], 2.0, "Blossom", BEES_C)
COMMUNITY_VECTORS = {
    TOP.community_id: axis(7),
    CIDER_C.community_id: axis(0),
    BEES_C.community_id: mix(0.5, 0, 0, 0, 1.0),
    BLOSSOM_C.community_id: axis(6),
}


@pytest.fixture
async def with_communities(orchard: GraphStore) -> GraphStore:
    await orchard.replace_communities(KB, [BLOSSOM_C, BEES_C, TOP, CIDER_C], COMMUNITY_VECTORS)
    return orchard


async def test_communities_read_back_with_levels_parents_and_members(with_communities: GraphStore) -> None:
    assert await with_communities.list_communities(KB) == [TOP, CIDER_C, BEES_C, BLOSSOM_C]
    assert await with_communities.list_communities(KB, level=1) == [CIDER_C, BEES_C]
    assert await with_communities.list_communities(KB, level=3) == []
    assert (await with_communities.counts(KB)).communities == 4


async def test_list_communities_ties_by_id(with_communities: GraphStore) -> None:
    bees_alone = replace(BEES_C, parent_id=None)
    twin = community(1, ["Mill"], 2.0, "The mill")
    await with_communities.replace_communities(KB, [bees_alone, twin], {})
    assert await with_communities.list_communities(KB) == sorted([bees_alone, twin], key=lambda c: c.community_id)
    tied = sorted([bees_alone, twin], key=lambda c: c.community_id)
    assert await with_communities.communities_of(KB, [eid(KB, "Mill"), eid(KB, "Bee")]) == tied


async def test_communities_of(with_communities: GraphStore) -> None:
    assert await with_communities.communities_of(KB, [eid(KB, "Apple")]) == [TOP, CIDER_C, BEES_C]
    assert await with_communities.communities_of(KB, [eid(KB, "Yeast"), eid(KB, "Blossom")]) == [
        TOP,
        CIDER_C,
        BEES_C,
        BLOSSOM_C,
    ]
    assert await with_communities.communities_of(KB, [eid(KB, "Nobody")]) == []
    assert await with_communities.communities_of(KB, []) == []


async def test_search_communities_by_summary_vector(with_communities: GraphStore) -> None:
    hits = await with_communities.search_communities(KB, axis(4), None, 10)
    assert hits[0].community == BEES_C
    assert hits[0].score == pytest.approx(float(mix(0.5, 0, 0, 0, 1.0)[4]), abs=1e-5)
    assert [h.community for h in await with_communities.search_communities(KB, axis(0), 1, 1)] == [CIDER_C]
    top_level = await with_communities.search_communities(KB, axis(0), 0, 10)
    assert [h.community for h in top_level] == [TOP]
    ranked = await with_communities.search_communities(KB, mix(1.0, 0, 0, 0, 0, 0, 0.1, 0.01), None, 10)
    assert [h.community for h in ranked] == [CIDER_C, BEES_C, BLOSSOM_C, TOP]


async def test_replace_communities_replaces_the_whole_set(with_communities: GraphStore) -> None:
    only = community(0, ["Apple", "Bee"], 1.0, "Apple and bee")
    await with_communities.replace_communities(KB, [only], {only.community_id: axis(3)})
    assert await with_communities.list_communities(KB) == [only]
    assert await with_communities.communities_of(KB, [eid(KB, "Yeast")]) == []
    assert [h.community for h in await with_communities.search_communities(KB, axis(0), None, 10)] == [only]
    await with_communities.replace_communities(KB, [], {})
    assert await with_communities.list_communities(KB) == []
    assert await with_communities.search_communities(KB, axis(3), None, 10) == []
    assert (await with_communities.counts(KB)).communities == 0


async def test_a_community_kept_by_id_keeps_its_summary_vector(with_communities: GraphStore) -> None:
    renamed = replace(CIDER_C, parent_id=None, title="Cider making, again", rank=9.0)
    fresh = community(1, ["Beekeeper"], 1.0, "The beekeeper")
    await with_communities.replace_communities(KB, [renamed, fresh], {})  # no vectors: only CIDER_C has one stored
    hits = await with_communities.search_communities(KB, axis(0), None, 10)
    assert [h.community for h in hits] == [renamed]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    await with_communities.replace_communities(KB, [renamed], {renamed.community_id: axis(3)})
    assert [h.community for h in await with_communities.search_communities(KB, axis(3), None, 1)] == [renamed]
    assert (await with_communities.search_communities(KB, axis(3), None, 1))[0].score == pytest.approx(1.0, abs=1e-5)


async def test_a_community_kept_by_id_takes_the_members_and_parent_it_is_given(with_communities: GraphStore) -> None:
    moved = replace(
        BLOSSOM_C, entity_ids=tuple(sorted([eid(KB, "Blossom"), eid(KB, "Bee")])), parent_id=TOP.community_id
    )
    await with_communities.replace_communities(KB, [TOP, CIDER_C, BEES_C, moved], {})
    listed = {c.community_id: c for c in await with_communities.list_communities(KB)}
    assert listed == {c.community_id: c for c in (TOP, CIDER_C, BEES_C, moved)}
    await with_communities.replace_communities(KB, [TOP, CIDER_C, BEES_C, BLOSSOM_C], {})
    assert await with_communities.list_communities(KB) == [TOP, CIDER_C, BEES_C, BLOSSOM_C]


async def test_entities_written_again_rejoin_the_communities_they_are_members_of(with_communities: GraphStore) -> None:
    assert await with_communities.delete_document(KB, cider().doc_id)  # Yeast and Barrel are gone, with their links
    await write(with_communities, cider())
    await with_communities.replace_communities(KB, [BLOSSOM_C, BEES_C, TOP, CIDER_C], {})  # the same ids
    assert await with_communities.list_communities(KB) == [TOP, CIDER_C, BEES_C, BLOSSOM_C]


async def test_members_that_are_not_entities_are_skipped(orchard: GraphStore) -> None:
    ghost = CommunityRecord("ghostly", 0, "Ghosts", "", 1.0, tuple(sorted([eid(KB, "Apple"), eid(KB, "Ghost")])))
    await orchard.replace_communities(KB, [ghost], {})
    assert [c.entity_ids for c in await orchard.list_communities(KB)] == [(eid(KB, "Apple"),)]


async def test_deleting_a_document_drops_the_memberships_of_removed_entities(with_communities: GraphStore) -> None:
    assert await with_communities.delete_document(KB, cider().doc_id)
    listed = {c.community_id: c for c in await with_communities.list_communities(KB)}
    assert listed[CIDER_C.community_id].entity_ids == tuple(sorted([eid(KB, "Apple"), eid(KB, "Mill")]))
    assert set(listed[TOP.community_id].entity_ids) == {eid(KB, n) for n in ALL_NAMES} - {
        eid(KB, "Yeast"),
        eid(KB, "Barrel"),
    }
    assert listed[BEES_C.community_id] == BEES_C  # every member is still mentioned
    assert await with_communities.communities_of(KB, [eid(KB, "Yeast")]) == []


# -- isolation between knowledge bases -----------------------------------------------------------------------


@pytest.fixture
async def two_kbs(with_communities: GraphStore) -> GraphStore:
    """The same documents in a second KB: the same doc ids, other chunk, entity and community ids."""
    await write(with_communities, cider(OTHER_KB), bees(OTHER_KB))
    return with_communities


async def test_the_same_content_in_two_kbs_gets_different_ids(two_kbs: GraphStore) -> None:
    assert cider(OTHER_KB).doc_id == cider().doc_id
    assert cider(OTHER_KB).chunk(0) != cider().chunk(0)
    assert await two_kbs.counts(OTHER_KB) == GraphCounts(documents=2, chunks=4, entities=7, relations=5)
    assert await two_kbs.counts(KB) == GraphCounts(documents=2, chunks=4, entities=7, relations=5, communities=4)


async def test_searches_stay_inside_their_kb(two_kbs: GraphStore) -> None:
    other_chunks = {cider(OTHER_KB).chunk(i) for i in range(2)} | {bees(OTHER_KB).chunk(i) for i in range(2)}
    other_entities = {eid(OTHER_KB, n) for n in ALL_NAMES}
    assert {h.chunk_id for h in await two_kbs.search_chunks_fulltext(OTHER_KB, "apples yeast bees", 10)} <= other_chunks
    assert {h.chunk_id for h in await two_kbs.search_chunks_vector(OTHER_KB, axis(0), 10)} == other_chunks
    entity_hits = await two_kbs.search_entities_fulltext(OTHER_KB, "apple mill yeast", 10)
    assert {h.entity.entity_id for h in entity_hits} == {eid(OTHER_KB, n) for n in ("Apple", "Mill", "Yeast")}
    assert {h.entity.entity_id for h in await two_kbs.search_entities_vector(OTHER_KB, axis(0), 10)} == other_entities
    assert await two_kbs.search_communities(OTHER_KB, axis(0), None, 10) == []


async def test_ids_of_one_kb_mean_nothing_in_another(two_kbs: GraphStore) -> None:
    mine = [eid(KB, n) for n in ALL_NAMES]
    assert await two_kbs.get_entities(OTHER_KB, mine) == []
    assert await two_kbs.existing_entity_ids(OTHER_KB, mine) == set()
    assert await two_kbs.relations_of(OTHER_KB, mine, 10) == []
    assert await two_kbs.chunks_mentioning(OTHER_KB, mine, 10) == []
    assert await two_kbs.chunks_of_entities(OTHER_KB, mine, 10) == {}
    assert await two_kbs.communities_of(OTHER_KB, mine) == []
    assert await two_kbs.get_chunks(OTHER_KB, [cider().chunk(0)]) == []
    assert await two_kbs.entities_in_chunks(OTHER_KB, [cider().chunk(0)]) == {}
    assert await two_kbs.list_communities(OTHER_KB) == []


async def test_writes_in_one_kb_leave_the_other_untouched(two_kbs: GraphStore) -> None:
    before = (
        await two_kbs.entity_graph(OTHER_KB),
        await two_kbs.get_entities(OTHER_KB, [eid(OTHER_KB, n) for n in ALL_NAMES]),
        await two_kbs.list_documents(OTHER_KB),
    )
    assert await two_kbs.delete_document(KB, cider().doc_id)
    await two_kbs.replace_communities(KB, [], {})
    await write(two_kbs, build(KB, "More", [ChunkSpec("Pears too.", axis(3), (Mention("Pear", "fruit", ""),))]))
    after = (
        await two_kbs.entity_graph(OTHER_KB),
        await two_kbs.get_entities(OTHER_KB, [eid(OTHER_KB, n) for n in ALL_NAMES]),
        await two_kbs.list_documents(OTHER_KB),
    )
    assert after == before
    assert await two_kbs.get_document(OTHER_KB, cider().doc_id) is not None
    assert await two_kbs.counts(OTHER_KB) == GraphCounts(documents=2, chunks=4, entities=7, relations=5)
    assert await two_kbs.delete_document(OTHER_KB, bees().doc_id)
    assert (await two_kbs.counts(KB)).documents == 2  # bees and "More" are still in KB


# -- knowledge base registry, durability ---------------------------------------------------------------------


CIDER_KB = KnowledgeBase(
    "cider", "All about cider.", ("cider", "apples"), "en", "hybrid_agent", False, ("docs/cider",), ""
)
TEA_KB = KnowledgeBase("tea", "茶", ("茶", "tea"), "zh", "graph_agent", True, (), "pkg.tea:handler")


async def test_knowledge_bases_round_trip(graph_store: GraphStore) -> None:
    assert await graph_store.list_knowledge_bases() == []
    assert await graph_store.create_knowledge_base(TEA_KB)
    assert await graph_store.create_knowledge_base(CIDER_KB)
    assert await graph_store.list_knowledge_bases() == [CIDER_KB, TEA_KB]


async def test_a_stored_knowledge_base_is_never_replaced(graph_store: GraphStore) -> None:
    assert await graph_store.create_knowledge_base(CIDER_KB)
    rival = replace(CIDER_KB, description="Cider, perry and more.", keywords=("cider", "perry"), is_default=True)
    assert not await graph_store.create_knowledge_base(rival)
    assert await graph_store.list_knowledge_bases() == [CIDER_KB]


async def test_of_concurrent_creations_of_one_knowledge_base_exactly_one_wins(
    graph_store: GraphStore, same_store_again: GraphStore
) -> None:
    for round_ in range(3):
        rivals = [replace(CIDER_KB, kb_prefix=f"cider_{round_}", description=f"Definition {i}.") for i in range(10)]
        # Half through a second instance on the same data, as a second server process would write.
        stores = [graph_store, same_store_again] * 5
        created = await asyncio.gather(
            *(store.create_knowledge_base(kb) for store, kb in zip(stores, rivals, strict=True))
        )
        assert created.count(True) == 1
        winner = rivals[created.index(True)]
        stored = {kb.kb_prefix: kb for kb in await same_store_again.list_knowledge_bases()}
        assert stored[winner.kb_prefix] == winner


async def test_everything_survives_close_and_reopen(with_communities: GraphStore, reopen: Reopen) -> None:
    assert await with_communities.create_knowledge_base(TEA_KB)
    before = (
        await with_communities.list_documents(KB),
        await with_communities.entity_graph(KB),
        await with_communities.list_communities(KB),
        await with_communities.get_entities(KB, [eid(KB, n) for n in ALL_NAMES]),
    )
    store = await reopen()
    after = (
        await store.list_documents(KB),
        await store.entity_graph(KB),
        await store.list_communities(KB),
        await store.get_entities(KB, [eid(KB, n) for n in ALL_NAMES]),
    )
    assert after == before
    assert await store.list_knowledge_bases() == [TEA_KB]
    assert [h.chunk_id for h in await store.search_chunks_fulltext(KB, "yeast", 10)] == [cider().chunk(1)]
    assert (await store.search_chunks_vector(KB, axis(5), 1))[0].chunk_id == bees().chunk(1)
    assert (await store.search_communities(KB, axis(0), 1, 1))[0].community == CIDER_C


# -- consistency under concurrency, malformed input ----------------------------------------------------------


def big_document(chunks: int) -> Doc:
    specs = [
        ChunkSpec(f"Chunk number {i} about apples.", mix(1.0, float(i % 7)), (Mention("Apple", "fruit", f"Part {i}."),))
        for i in range(chunks)
    ]
    return build(KB, "Big", specs)


async def test_readers_never_see_a_half_written_document(graph_store: GraphStore) -> None:
    big = big_document(300)
    chunk_ids = [c.chunk_id for c in big.graph.chunks]
    seen: set[int] = set()
    reads = 0
    done = asyncio.Event()

    async def writer() -> None:
        for _ in range(4):
            await write(graph_store, big)
            await asyncio.sleep(0)
            assert await graph_store.delete_document(KB, big.doc_id)
        done.set()

    async def reader() -> None:
        nonlocal reads
        while not done.is_set():
            seen.add(len(await graph_store.get_chunks(KB, chunk_ids)))
            seen.add((await graph_store.counts(KB)).chunks)
            seen.add(len(await graph_store.chunks_mentioning(KB, [eid(KB, "Apple")], 1000)))
            seen.update(e.mention_count for e in await graph_store.get_entities(KB, [eid(KB, "Apple")]))
            reads += 1

    await asyncio.gather(writer(), reader(), reader())
    assert reads > 0
    assert seen <= {0, 300}


def _without_vectors(doc: Doc) -> Doc:
    return replace(doc, chunk_vectors=doc.chunk_vectors[:-1])


def _with_foreign_relation(doc: Doc) -> Doc:
    stray = RelationMention(eid(KB, "Apple"), eid(KB, "Unmentioned"), "?", 1.0, doc.chunk(0))
    return replace(doc, graph=replace(doc.graph, relation_mentions=(*doc.graph.relation_mentions, stray)))


def _with_self_relation(doc: Doc) -> Doc:
    loop = RelationMention(eid(KB, "Apple"), eid(KB, "Apple"), "itself", 1.0, doc.chunk(0))
    return replace(doc, graph=replace(doc.graph, relation_mentions=(loop,)))


def _with_foreign_chunk_mention(doc: Doc) -> Doc:
    stray = EntityMention(eid(KB, "Pear"), "Pear", "fruit", "", bees().chunk(0))
    return replace(doc, graph=replace(doc.graph, entity_mentions=(*doc.graph.entity_mentions, stray)))


@pytest.mark.parametrize(
    "malform", [_without_vectors, _with_foreign_relation, _with_self_relation, _with_foreign_chunk_mention]
)
async def test_malformed_documents_are_refused_whole(orchard: GraphStore, malform: Callable[[Doc], Doc]) -> None:
    changed = build(KB, "Making cider", [ChunkSpec("Apples again.", axis(0), (APPLE_PRESSED,))], doc_id=cider().doc_id)
    with pytest.raises(InvalidRequest):
        await write(orchard, malform(changed))
    assert await orchard.counts(KB) == GraphCounts(documents=2, chunks=4, entities=7, relations=5)
    assert (await orchard.get_entities(KB, [eid(KB, "Apple")]))[0].mention_count == 3


async def test_a_community_parent_must_be_in_the_set(orchard: GraphStore) -> None:
    with pytest.raises(InvalidRequest):
        await orchard.replace_communities(KB, [CIDER_C], {})  # its parent TOP is not in the set
    assert await orchard.list_communities(KB) == []
