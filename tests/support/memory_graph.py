"""An in-memory GraphReader for fast agent tests, plus deterministic embeddings and a tiny graph builder.

`MemoryGraph` follows the ordering rules of the `GraphReader` docstrings and of the embedded store
(ties broken by id), merges mentions with the stores' own rules (`graph_store/merge.py`), and records
every call with its KB so tests can check that an agent never leaves its KB.

`TermEmbedder` hashes each content term to a fixed random direction and sums them: texts that share
words are close, others nearly orthogonal. `passage_graph` builds what the offline extractor would
write for a passage: its title and the given names as entities, related when they share a sentence,
and the title related to every name.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from backend.domain import ids
from backend.domain.graph import (
    ChunkRecord,
    CommunityRecord,
    DocumentGraph,
    DocumentRecord,
    EntityMention,
    EntityRecord,
    RelationMention,
    RelationRecord,
)
from backend.domain.knowledge_base import KbOverview
from backend.graphrag_agent.ports import ChunkHit, CommunityHit, EntityHit, TermCounts, Vector
from backend.graphrag_agent.routing_terms import routing_terms
from backend.graphrag_agent.text import content_terms, fulltext_query_terms, fulltext_terms, split_sentences
from backend.infrastructure.graph_store.merge import merge_entity, merge_relation, relation_key

_MAX_QUERY_TERMS = 32
_K1, _B = 1.2, 0.75  # FTS5's BM25 constants


# --- deterministic embeddings ---------------------------------------------------------------------


class TermEmbedder:
    """Bag-of-words embeddings from hashed term directions: deterministic and cheap; counts calls."""

    def __init__(self, dimension: int = 256, delay_s: float = 0.0) -> None:
        self._dimension = dimension
        self._delay_s = delay_s
        self.calls = 0

    @property
    def dimension(self) -> int:
        return self._dimension

    def covers(self, text: str) -> bool:
        return True  # hashed terms work for any language

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        if self._delay_s:
            await asyncio.sleep(self._delay_s)
        return np.stack([self.vector(text) for text in texts]) if texts else np.zeros((0, self._dimension), np.float32)

    def vector(self, text: str) -> Vector:
        total = np.zeros(self._dimension, dtype=np.float64)
        for term in content_terms(text):
            total += _direction(term.removesuffix("'s"), self._dimension)
        norm = float(np.linalg.norm(total))
        if norm == 0:
            total[0], norm = 1.0, 1.0
        return np.asarray(total / norm, dtype=np.float32)


def _direction(term: str, dimension: int) -> npt.NDArray[np.float64]:
    seed = int.from_bytes(hashlib.sha256(term.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dimension)


# --- building graphs ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Passage:
    """One single-chunk document: its title and the names it mentions besides the title."""

    title: str
    text: str
    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CommunitySpec:
    title: str
    summary: str
    members: tuple[str, ...]  # entity names
    level: int = 0


def passage_graph(kb: str, passage: Passage) -> DocumentGraph:
    doc_id = ids.document_id(passage.title, passage.text)
    chunk = ChunkRecord(ids.chunk_id(kb, doc_id, 0), doc_id, 0, passage.text, 0, len(passage.text))
    sentences = split_sentences(passage.text)
    title_id = ids.entity_id(kb, passage.title)
    lead = sentences[0] if sentences else passage.text
    entities = [EntityMention(title_id, passage.title, "other", lead, chunk.chunk_id)]
    relations: dict[tuple[str, str], RelationMention] = {}
    for name in passage.names:
        said = [s for s in sentences if name.lower() in s.lower()]
        entity = ids.entity_id(kb, name)
        entities.append(EntityMention(entity, name, "other", said[0] if said else "", chunk.chunk_id))
        relations[relation_key(title_id, entity)] = RelationMention(
            *relation_key(title_id, entity), said[0] if said else "", 0.5, chunk.chunk_id
        )
    for sentence in sentences:
        present = [n for n in passage.names if n.lower() in sentence.lower()]
        for n, first in enumerate(present):
            for second in present[n + 1 :]:
                key = relation_key(ids.entity_id(kb, first), ids.entity_id(kb, second))
                weight = relations[key].weight + 1.0 if key in relations else 1.0
                relations[key] = RelationMention(*key, sentence, weight, chunk.chunk_id)
    document = DocumentRecord(doc_id, passage.title, source=passage.title, chunk_count=1)
    return DocumentGraph(document, (chunk,), tuple(entities), tuple(relations.values()))


async def memory_graph(
    kb: str,
    passages: Sequence[Passage],
    embedder: TermEmbedder,
    communities: Sequence[CommunitySpec] = (),
    graph: MemoryGraph | None = None,
) -> MemoryGraph:
    """Passages and communities embedded and written into a (new or given) MemoryGraph."""
    graph = graph or MemoryGraph()
    for passage in passages:
        document = passage_graph(kb, passage)
        chunk_vectors = await embedder.embed([f"{passage.title}\n{c.text}" for c in document.chunks])
        names = {m.entity_id: f"{m.name}: {m.description}" for m in document.entity_mentions}
        entity_vectors = dict(zip(names, await embedder.embed(list(names.values())), strict=True))
        graph.add(kb, document, list(chunk_vectors), entity_vectors)
    records = [
        CommunityRecord(
            community_id=ids.community_id(kb, spec.level, [ids.entity_id(kb, n) for n in spec.members]),
            level=spec.level,
            title=spec.title,
            summary=spec.summary,
            rank=float(len(spec.members)),
            entity_ids=tuple(sorted(ids.entity_id(kb, n) for n in spec.members)),
        )
        for spec in communities
    ]
    if records:
        summaries = await embedder.embed([f"{c.title}\n{c.summary}" for c in records])
        graph.set_communities(kb, records, dict(zip((c.community_id for c in records), summaries, strict=True)))
    return graph


# --- the reader -----------------------------------------------------------------------------------


@dataclass
class _Chunk:
    record: ChunkRecord
    title: str
    vector: Vector
    tokens: Counter[str]


@dataclass
class _Kb:
    chunks: dict[str, _Chunk] = field(default_factory=dict)
    entity_mentions: dict[str, list[EntityMention]] = field(default_factory=lambda: defaultdict(list))
    relation_mentions: dict[tuple[str, str], list[RelationMention]] = field(default_factory=lambda: defaultdict(list))
    entity_vectors: dict[str, Vector] = field(default_factory=dict)
    communities: list[CommunityRecord] = field(default_factory=list)
    community_vectors: dict[str, Vector] = field(default_factory=dict)
    profile: Counter[str] = field(default_factory=Counter)  # routing term → chunks holding it
    entities: dict[str, EntityRecord] = field(default_factory=dict)
    entity_tokens: dict[str, Counter[str]] = field(default_factory=dict)
    relations: dict[tuple[str, str], RelationRecord] = field(default_factory=dict)
    mentions_of_chunk: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    chunks_of_entity: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))


class MemoryGraph:
    """The agents' side of a GraphStore, in memory. Write with `add` / `set_communities`."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self._kbs: dict[str, _Kb] = defaultdict(_Kb)
        self._delay_s = delay_s
        self.calls: list[tuple[str, str]] = []  # (method, kb) of every read
        self.fulltext_queries: list[str] = []  # every chunk fulltext query, in order

    # -- writes ------------------------------------------------------------------------------------

    def add(
        self, kb: str, graph: DocumentGraph, chunk_vectors: Sequence[Vector], entity_vectors: Mapping[str, Vector]
    ) -> None:
        state = self._kbs[kb]
        for chunk, vector in zip(graph.chunks, chunk_vectors, strict=True):
            tokens = Counter(_fts_tokens(f"{graph.document.title}\n{chunk.text}"))
            state.chunks[chunk.chunk_id] = _Chunk(chunk, graph.document.title, np.asarray(vector, np.float32), tokens)
            state.profile.update(routing_terms(f"{graph.document.title}\n{chunk.text}"))
        for mention in graph.entity_mentions:
            state.entity_mentions[mention.entity_id].append(mention)
            state.mentions_of_chunk[mention.chunk_id].add(mention.entity_id)
            state.chunks_of_entity[mention.entity_id].add(mention.chunk_id)
            state.entity_vectors.setdefault(mention.entity_id, np.asarray(entity_vectors[mention.entity_id]))
        for relation in graph.relation_mentions:
            state.relation_mentions[relation_key(relation.source_id, relation.target_id)].append(relation)
        self._merge(state)

    def set_communities(self, kb: str, communities: Sequence[CommunityRecord], vectors: Mapping[str, Vector]) -> None:
        state = self._kbs[kb]
        state.communities = sorted(communities, key=lambda c: (c.level, -c.rank, c.community_id))
        state.community_vectors = {key: np.asarray(vector, np.float32) for key, vector in vectors.items()}

    @staticmethod
    def _merge(state: _Kb) -> None:
        for entity_id, mentions in state.entity_mentions.items():
            merged = merge_entity(mentions)
            state.entities[entity_id] = EntityRecord(
                entity_id, merged.name, merged.type, merged.description, merged.mention_count
            )
            state.entity_tokens[entity_id] = Counter(_fts_tokens(merged.name))
        for key, relation_mentions in state.relation_mentions.items():
            merged_relation = merge_relation(relation_mentions)
            state.relations[key] = RelationRecord(
                *key, merged_relation.description, merged_relation.weight, merged_relation.chunk_ids
            )

    # -- reads -------------------------------------------------------------------------------------

    async def _enter(self, method: str, kb: str) -> _Kb:
        self.calls.append((method, kb))
        await asyncio.sleep(self._delay_s)
        return self._kbs[kb] if kb in self._kbs else _Kb()

    async def term_frequencies(self, kbs: Sequence[str], terms: Sequence[str]) -> dict[str, TermCounts]:
        self.calls.extend(("term_frequencies", kb) for kb in kbs)
        await asyncio.sleep(self._delay_s)
        found = {kb: self._kbs[kb] if kb in self._kbs else _Kb() for kb in kbs}
        return {
            kb: TermCounts(len(state.chunks), {t: state.profile[t] for t in terms if state.profile[t] > 0})
            for kb, state in found.items()
        }

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        state = await self._enter("search_chunks_fulltext", kb)
        self.fulltext_queries.append(query)
        scores = _bm25(query, {cid: c.tokens for cid, c in state.chunks.items()})
        best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]
        return [_hit(state.chunks[cid], score) for cid, score in best]

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]:
        state = await self._enter("search_chunks_vector", kb)
        best = _nearest({cid: c.vector for cid, c in state.chunks.items()}, embedding, limit)
        return [_hit(state.chunks[cid], score) for cid, score in best]

    async def chunk_embeddings(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        state = await self._enter("chunk_embeddings", kb)
        return {cid: state.chunks[cid].vector for cid in dict.fromkeys(chunk_ids) if cid in state.chunks}

    async def search_entities_fulltext(self, kb: str, query: str, limit: int) -> list[EntityHit]:
        state = await self._enter("search_entities_fulltext", kb)
        best = sorted(_bm25(query, state.entity_tokens).items(), key=lambda item: (-item[1], item[0]))[:limit]
        return [EntityHit(state.entities[eid], score) for eid, score in best]

    async def search_entities_vector(self, kb: str, embedding: Vector, limit: int) -> list[EntityHit]:
        state = await self._enter("search_entities_vector", kb)
        best = _nearest(state.entity_vectors, embedding, limit)
        return [EntityHit(state.entities[eid], score) for eid, score in best]

    async def get_entities(self, kb: str, entity_ids: Sequence[str]) -> list[EntityRecord]:
        state = await self._enter("get_entities", kb)
        return [state.entities[eid] for eid in dict.fromkeys(entity_ids) if eid in state.entities]

    async def relations_of(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[RelationRecord]:
        state = await self._enter("relations_of", kb)
        wanted = set(entity_ids)
        touching = [r for r in state.relations.values() if r.source_id in wanted or r.target_id in wanted]
        return sorted(touching, key=lambda r: (-r.weight, r.source_id, r.target_id))[:limit]

    async def chunks_mentioning(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[ChunkHit]:
        state = await self._enter("chunks_mentioning", kb)
        counts = Counter(cid for eid in set(entity_ids) for cid in state.chunks_of_entity.get(eid, ()))
        chunks = [state.chunks[cid] for cid in counts]
        chunks.sort(key=lambda c: (-counts[c.record.chunk_id], c.title, c.record.ordinal, c.record.chunk_id))
        return [_hit(c, float(counts[c.record.chunk_id])) for c in chunks[:limit]]

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        state = await self._enter("get_chunks", kb)
        return [_hit(state.chunks[cid], 0.0) for cid in dict.fromkeys(chunk_ids) if cid in state.chunks]

    async def entities_in_chunks(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        state = await self._enter("entities_in_chunks", kb)
        found = {cid: sorted(state.mentions_of_chunk.get(cid, ())) for cid in dict.fromkeys(chunk_ids)}
        return {cid: entity_ids for cid, entity_ids in found.items() if entity_ids}

    async def chunks_of_entities(
        self, kb: str, entity_ids: Sequence[str], per_entity_limit: int
    ) -> dict[str, list[str]]:
        state = await self._enter("chunks_of_entities", kb)
        found: dict[str, list[str]] = {}
        for eid in dict.fromkeys(entity_ids):
            chunks = [state.chunks[cid] for cid in state.chunks_of_entity.get(eid, ())]
            chunks.sort(key=lambda c: (c.title, c.record.ordinal, c.record.chunk_id))
            if chunks:
                found[eid] = [c.record.chunk_id for c in chunks[:per_entity_limit]]
        return found

    async def communities_of(self, kb: str, entity_ids: Sequence[str]) -> list[CommunityRecord]:
        state = await self._enter("communities_of", kb)
        wanted = set(entity_ids)
        return [c for c in state.communities if wanted.intersection(c.entity_ids)]

    async def search_communities(self, kb: str, embedding: Vector, level: int | None, limit: int) -> list[CommunityHit]:
        state = await self._enter("search_communities", kb)
        by_id = {c.community_id: c for c in state.communities if level is None or c.level == level}
        vectors = {cid: v for cid, v in state.community_vectors.items() if cid in by_id}
        return [CommunityHit(by_id[cid], score) for cid, score in _nearest(vectors, embedding, limit)]

    async def list_communities(self, kb: str, level: int | None = None) -> list[CommunityRecord]:
        state = await self._enter("list_communities", kb)
        return [c for c in state.communities if level is None or c.level == level]

    async def overview(self, kb: str, entities: int, titles: int) -> KbOverview:
        """`GraphStore.overview`: the KB's document count, most mentioned names and longest documents' titles."""
        state = await self._enter("overview", kb)
        named = sorted(state.entities.values(), key=lambda e: (-e.mention_count, e.name, e.entity_id))
        documents = Counter((c.record.doc_id, c.title) for c in state.chunks.values())
        longest = sorted((-n, title, doc_id) for (doc_id, title), n in documents.items() if title)
        names = tuple(e.name for e in named[:entities])
        return KbOverview(len(documents), names, tuple(title for _, title, _ in longest[:titles]))


def _hit(chunk: _Chunk, score: float) -> ChunkHit:
    record = chunk.record
    return ChunkHit(record.chunk_id, record.doc_id, chunk.title, record.text, record.ordinal, score)


def _fts_tokens(text: str) -> list[str]:
    """What FTS5's unicode61 tokenizer makes of the stored index terms (apostrophes split words)."""
    return re.findall(r"[^\W_]+", " ".join(fulltext_terms(text)))


def _bm25(query: str, documents: Mapping[str, Counter[str]]) -> dict[str, float]:
    """FTS5-style BM25 of documents containing any of the query's content terms (higher is better).

    A query term the tokenizer splits ("ii's") must have all its parts in the document.
    """
    terms = [tuple(_fts_tokens(term)) for term in fulltext_query_terms(query)[:_MAX_QUERY_TERMS]]
    terms = [term for term in terms if term]
    if not documents or not terms:
        return {}
    lengths = {key: sum(counts.values()) for key, counts in documents.items()}
    average = sum(lengths.values()) / len(documents)
    scores: dict[str, float] = {}
    for term in terms:
        containing = [key for key, counts in documents.items() if all(part in counts for part in term)]
        idf = max(1e-6, math.log((len(documents) - len(containing) + 0.5) / (len(containing) + 0.5)))
        for key in containing:
            tf = min(documents[key][part] for part in term)
            norm = tf + _K1 * (1 - _B + _B * lengths[key] / average)
            scores[key] = scores.get(key, 0.0) + idf * tf * (_K1 + 1) / norm
    return scores


def _nearest(vectors: Mapping[str, Vector], query: Vector, limit: int) -> list[tuple[str, float]]:
    scored = [(key, float(np.dot(vector, query))) for key, vector in vectors.items()]
    return sorted(scored, key=lambda item: (-item[1], item[0]))[:limit]
