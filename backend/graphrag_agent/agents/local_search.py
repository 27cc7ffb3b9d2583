"""Local graph search, the building blocks the graph, hybrid and deep-research agents share.

1. `EntityLinker`: text → seed entities, by name (entity fulltext, kept only when the whole name
   occurs in the text; strongest when the text writes it as a proper name), and by entity vector
   search for variants of a name partly in the text.
2. `GraphExpander`: seeds → their strongest relations → neighbour entities → the chunks that
   mention seeds and neighbours, ranked by the weight of what they mention.
3. `EvidenceAssembler`: ranked chunks plus the top entities, relations and communities as
   `RetrievalResult`s, each with the title of a document it comes from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from backend.domain.graph import CommunityRecord, EntityRecord, RelationRecord
from backend.domain.ids import normalise_entity_name
from backend.domain.retrieval import RetrievalResult
from backend.graphrag_agent.agents.common import (
    chunk_result,
    community_result,
    concurrently,
    entity_result,
    relation_id,
    relation_result,
    unit,
)
from backend.graphrag_agent.agents.tuning import GraphSearchSettings
from backend.graphrag_agent.keywords import extract_keywords
from backend.graphrag_agent.ports import ChunkHit, EntityHit, GraphReader, Vector
from backend.graphrag_agent.text import STOPWORDS, TermSets, content_terms, index_term_set, index_terms


@dataclass(frozen=True, slots=True)
class Seed:
    entity: EntityRecord
    weight: float  # in (0, 1]: how sure the link is
    name_match: float  # share of the name's terms found in the linked text (0 when found by vector only)
    cosine: float | None


@dataclass(frozen=True, slots=True)
class WeightedEntity:
    entity_id: str
    weight: float
    is_seed: bool
    record: EntityRecord | None = None


@dataclass(frozen=True, slots=True)
class ScoredRelation:
    relation: RelationRecord
    score: float


@dataclass(frozen=True, slots=True)
class GraphChunk:
    hit: ChunkHit
    score: float  # weighted mentions, divided by the best chunk's
    entity_ids: tuple[str, ...]  # the weighted entities it mentions


@dataclass(frozen=True, slots=True)
class Expansion:
    """What the graph says around the seeds."""

    entities: tuple[WeightedEntity, ...] = ()  # seeds then neighbours, heaviest first
    relations: tuple[ScoredRelation, ...] = ()
    chunks: tuple[GraphChunk, ...] = ()
    mentions: Mapping[str, Sequence[str]] = field(default_factory=dict)  # chunk id → entity ids
    communities: tuple[CommunityRecord, ...] = ()

    def chunk_ids(self) -> list[str]:
        return [c.hit.chunk_id for c in self.chunks]


@dataclass(frozen=True, slots=True)
class RankedChunk:
    """A chunk in an agent's final order, with what the trace should say about it."""

    hit: ChunkHit
    score: float
    metadata: dict[str, Any]


# --- seeds ----------------------------------------------------------------------------------------


def query_term_set(text: str) -> set[str]:
    """The text's index terms, with English possessives also stripped ("Lothair II's" → "ii")."""
    terms = set(index_terms(text))
    return terms | {term.removesuffix("'s") for term in terms}


def name_match(name: str, text_terms: set[str]) -> float:
    """Share of the name's terms in the text; 0 for names made only of stopwords."""
    terms = set(index_terms(name))
    if not terms or terms <= STOPWORDS:
        return 0.0
    return len(terms & text_terms) / len(terms)


class EntityLinker:
    """Text → seed entities of one KB."""

    def __init__(self, kb: str, reader: GraphReader, settings: GraphSearchSettings) -> None:
        self._kb = kb
        self._reader = reader
        self._settings = settings

    async def by_name(self, text: str) -> list[EntityHit]:
        return await self._reader.search_entities_fulltext(self._kb, text, self._settings.candidates)

    async def by_vector(self, embedding: Vector) -> list[EntityHit]:
        return await self._reader.search_entities_vector(self._kb, embedding, self._settings.candidates)

    def link(self, text: str, name_hits: Sequence[EntityHit], vector_hits: Sequence[EntityHit]) -> list[Seed]:
        """Seeds by weight: a name written as a proper name in the text 1, a name in its plain words less,
        a vector match sharing half its name with the text's proper names half its cosine. Entity vectors
        embed a description too, so a vector match alone ("1988" for a question about a 1988 film) is no seed.
        """
        weights: dict[str, float] = {}
        records: dict[str, EntityRecord] = {}
        matches: dict[str, float] = {}
        named = self._named(text, name_hits)
        for hit, match, proper in named:
            weights[hit.entity.entity_id] = 1.0 if proper else self._settings.plain_name_weight
            records[hit.entity.entity_id], matches[hit.entity.entity_id] = hit.entity, match
        for hit in self._variants(text, vector_hits, [hit for hit, _, _ in named]):
            weights[hit.entity.entity_id] = max(weights.get(hit.entity.entity_id, 0.0), 0.5 * hit.score)
            records.setdefault(hit.entity.entity_id, hit.entity)
        cosines = {h.entity.entity_id: h.score for h in vector_hits}
        ranked = sorted(weights, key=lambda e: (-weights[e], -cosines.get(e, 0.0), e))[: self._settings.max_seeds]
        return [Seed(records[e], weights[e], matches.get(e, 0.0), cosines.get(e)) for e in ranked]

    def _variants(self, text: str, hits: Sequence[EntityHit], named: Sequence[EntityHit]) -> list[EntityHit]:
        """Vector hits with half their name among the text's proper names: variants ("Heart of Dorean").

        A name inside one already linked is no variant ("Lothair" beside "Lothair II").
        """
        proper = _proper_terms(text)
        linked = [set(index_terms(hit.entity.name)) for hit in named]
        return [
            hit
            for hit in hits
            if hit.score >= self._settings.min_entity_similarity
            and name_match(hit.entity.name, proper) >= 0.5
            and not any(set(index_terms(hit.entity.name)) <= words for words in linked)
        ]

    def _named(self, text: str, hits: Sequence[EntityHit]) -> list[tuple[EntityHit, float, bool]]:
        """Name hits whose whole name occurs in the text, longest first, without names inside a longer one.

        Each comes with its match share and whether the text writes it as a proper name (capitalised,
        quoted or a number) rather than in ordinary words ("Mother" the film in "his mother").
        """
        terms = query_term_set(text)
        proper = _proper_terms(text)
        scored = [(hit, name_match(hit.entity.name, terms)) for hit in hits]
        kept = [(hit, m) for hit, m in scored if m >= self._settings.min_name_match]
        kept.sort(key=lambda pair: (-pair[1], -len(index_terms(pair[0].entity.name)), -pair[0].score))
        linked: list[tuple[EntityHit, float, bool]] = []
        for hit, match in kept:
            words = set(index_terms(hit.entity.name))
            if not any(words < set(index_terms(other.entity.name)) for other, _, _ in linked):
                linked.append((hit, match, words <= proper))
        return linked


def _proper_terms(text: str) -> set[str]:
    """The terms of what the text writes as proper names: capitalised phrases, quotes, numbers."""
    return {term for phrase in extract_keywords(text).low_level for term in query_term_set(phrase)}


# --- expansion ------------------------------------------------------------------------------------


def relation_terms(query: str, seeds: Sequence[Seed]) -> list[str]:
    """The question's terms that are not part of a seed's name: what a relation should be about."""
    named = {term for seed in seeds for term in index_terms(seed.entity.name)}
    return [term.removesuffix("'s") for term in content_terms(query) if term.removesuffix("'s") not in named]


def relation_strength(
    relation: RelationRecord, heaviest: float, terms: Sequence[str], term_sets: TermSets = index_term_set
) -> float:
    """Half the relation's weight (relative to the heaviest), half how much it talks about the question."""
    weight = relation.weight / heaviest if heaviest > 0 else 0.0
    return 0.5 * weight + 0.5 * loose_overlap(terms, relation.description, term_sets)


def _stem(term: str) -> str:
    """A crude stem: "directed" and "director" share "direc" (no stemmer offline; CJK terms are short)."""
    return term[:5] if len(term) > 5 else term


def loose_overlap(terms: Sequence[str], text: str, term_sets: TermSets = index_term_set) -> float:
    """Share of `terms` whose stem occurs in `text` (whose words `term_sets` gives: see `text.TermSetCache`)."""
    wanted = {_stem(t) for t in terms}
    if not wanted:
        return 0.0
    return len(wanted & {_stem(t) for t in term_sets(text)}) / len(wanted)


class GraphExpander:
    """Seeds → relations → neighbours → chunks ranked by weighted mentions."""

    def __init__(
        self, kb: str, reader: GraphReader, settings: GraphSearchSettings, term_sets: TermSets = index_term_set
    ) -> None:
        self._kb = kb
        self._reader = reader
        self._settings = settings
        self._term_sets = term_sets

    async def expand(self, query: str, seeds: Sequence[Seed]) -> Expansion:
        if not seeds:
            return Expansion()
        seed_ids = [seed.entity.entity_id for seed in seeds]
        relations, communities = await concurrently(
            self._reader.relations_of(self._kb, seed_ids, self._settings.relation_candidates),
            self._reader.communities_of(self._kb, seed_ids),
        )
        scored, reach = self._neighbourhood(query, seeds, relations)
        records = {r.entity_id: r for r in await self._reader.get_entities(self._kb, list(reach))}
        neighbours = self._specific(reach, records)
        weights = _seed_weights(seeds) | neighbours
        hits, mentions = await self._chunks_around(list(weights))
        names = {seed.entity.entity_id: seed.entity for seed in seeds} | records
        entities = _weighted_entities(seeds, neighbours, names)
        chunks = rank_chunks(hits, mentions, weights, names, self._settings.home_bonus)
        return Expansion(entities, tuple(scored), tuple(chunks), mentions, tuple(communities))

    def _specific(self, reach: Mapping[str, float], records: Mapping[str, EntityRecord]) -> dict[str, float]:
        """The best neighbours once hubs ("1988", "American") are discounted by how often they are mentioned."""
        weights = {e: w * specificity(records[e].mention_count) for e, w in reach.items() if e in records}
        best = sorted(weights.items(), key=lambda item: (-item[1], item[0]))[: self._settings.max_neighbours]
        return dict(best)

    async def _chunks_around(self, entity_ids: list[str]) -> tuple[list[ChunkHit], dict[str, list[str]]]:
        """Chunks mentioning the most of the entities, plus a few of each entity's own (so a rarely
        mentioned neighbour is not crowded out by chunks that mention hubs), with what each mentions."""
        hits, chunks_of = await concurrently(
            self._reader.chunks_mentioning(self._kb, entity_ids, self._settings.candidates),
            self._reader.chunks_of_entities(self._kb, entity_ids, self._settings.chunks_per_neighbour),
        )
        known = {hit.chunk_id for hit in hits}
        extra = list(dict.fromkeys(c for ids in chunks_of.values() for c in ids if c not in known))
        mentions, extra_hits = await concurrently(
            self._reader.entities_in_chunks(self._kb, [*known, *extra]),
            self._reader.get_chunks(self._kb, extra),
        )
        return [*hits, *extra_hits], mentions

    def _neighbourhood(
        self, query: str, seeds: Sequence[Seed], relations: Sequence[RelationRecord]
    ) -> tuple[list[ScoredRelation], dict[str, float]]:
        """Relations scored by strength and by the weight of the seeds they touch; the best neighbours."""
        seed_weights = {seed.entity.entity_id: seed.weight for seed in seeds}
        terms = relation_terms(query, seeds)
        heaviest = max((r.weight for r in relations), default=0.0)
        scored: list[ScoredRelation] = []
        neighbours: dict[str, float] = {}
        for relation in relations:
            strength = relation_strength(relation, heaviest, terms, self._term_sets)
            ends = (relation.source_id, relation.target_id)
            scored.append(ScoredRelation(relation, unit(strength * sum(seed_weights.get(e, 0.0) for e in ends))))
            for near, far in (ends, ends[::-1]):
                if near in seed_weights and far not in seed_weights:
                    reach = self._settings.neighbour_decay * seed_weights[near] * strength
                    neighbours[far] = max(neighbours.get(far, 0.0), reach)
        scored.sort(key=lambda s: -s.score)  # stable: ties keep the store's order
        # Twice as many as kept, so that hubs can be discounted without leaving the neighbourhood empty.
        best = sorted(neighbours.items(), key=lambda item: (-item[1], item[0]))[: 2 * self._settings.max_neighbours]
        return scored, dict(best)


def _seed_weights(seeds: Sequence[Seed]) -> dict[str, float]:
    """Seed weights for ranking chunks, hubs discounted against the question's most specific seed: in a chat
    log the speaker named in a question is mentioned in every session and says nothing about which one."""
    most_specific = max(specificity(seed.entity.mention_count) for seed in seeds)
    return {s.entity.entity_id: s.weight * specificity(s.entity.mention_count) / most_specific for s in seeds}


def seed_confidence(expansion: Expansion, specific_mentions: int) -> float:
    """How much a ranking grown from the seeds can say, in (0, 1]: 1 when the most specific seed is specific
    (mentioned in at most `specific_mentions` chunks), less when even it is a hub (a chat log's speakers, "2026"),
    whose neighbourhood is half the KB."""
    counts = [e.record.mention_count for e in expansion.entities if e.is_seed and e.record is not None]
    if not counts:
        return 1.0
    return min(1.0, specificity(min(counts)) / specificity(specific_mentions))


def specificity(mention_count: int) -> float:
    """How much a mention of an entity says: one mentioned everywhere ("1988", "American") says little."""
    return 1.0 / math.log2(1 + max(1, mention_count))


def _weighted_entities(
    seeds: Sequence[Seed], neighbours: Mapping[str, float], records: Mapping[str, EntityRecord]
) -> tuple[WeightedEntity, ...]:
    seeded = [WeightedEntity(s.entity.entity_id, s.weight, True, s.entity) for s in seeds]
    near = [WeightedEntity(e, w, False, records.get(e)) for e, w in neighbours.items() if e in records]
    return tuple(sorted([*seeded, *near], key=lambda e: (-e.weight, not e.is_seed, e.entity_id)))


def rank_chunks(
    hits: Sequence[ChunkHit],
    mentions: Mapping[str, Sequence[str]],
    weights: Mapping[str, float],
    records: Mapping[str, EntityRecord],
    home_bonus: float,
) -> list[GraphChunk]:
    """Chunks by the summed weight of the entities they mention; an entity's own document counts more."""
    scored: list[tuple[ChunkHit, float, tuple[str, ...]]] = []
    for hit in hits:
        mentioned = tuple(e for e in mentions.get(hit.chunk_id, ()) if e in weights)
        title = normalise_entity_name(hit.title)
        total = sum(weights[e] * (1 + home_bonus * _is_home(records.get(e), title)) for e in mentioned)
        scored.append((hit, total, mentioned))
    best = max((total for _, total, _ in scored), default=0.0)
    ranked = [GraphChunk(hit, total / best, mentioned) for hit, total, mentioned in scored if total > 0]
    ranked.sort(key=lambda c: -c.score)  # stable: ties keep the store's order
    return ranked


def _is_home(record: EntityRecord | None, normalised_title: str) -> bool:
    return record is not None and normalise_entity_name(record.name) == normalised_title


# --- evidence -------------------------------------------------------------------------------------


def community_scores(
    query: str, seeds: Sequence[Seed], communities: Iterable[CommunityRecord], term_sets: TermSets = index_term_set
) -> list[tuple[CommunityRecord, float]]:
    """Communities by the share of seed weight they hold and how much their summary talks about the question.

    Ties go to the finer level (a smaller, more specific community), then the higher rank.
    """
    weights = {seed.entity.entity_id: seed.weight for seed in seeds}
    total = sum(weights.values()) or 1.0
    terms = content_terms(query)
    scored = []
    for community in communities:
        # The seeds it holds, found from the seeds' side: a top-level community has thousands of members.
        held = sum(weights[e] for e in weights.keys() & community.entity_ids) / total
        about = loose_overlap(terms, f"{community.title}\n{community.summary}", term_sets)
        scored.append((community, held * (0.5 + 0.5 * about)))
    scored.sort(key=lambda pair: (-pair[1], -pair[0].level, -pair[0].rank, pair[0].community_id))
    return scored


class EvidenceAssembler:
    """Ranked chunks and graph items → results, resolving the document each graph item comes from."""

    def __init__(
        self,
        kb: str,
        reader: GraphReader,
        settings: GraphSearchSettings,
        agent_type: str,
        term_sets: TermSets = index_term_set,
    ) -> None:
        self._kb = kb
        self._reader = reader
        self._settings = settings
        self._agent_type = agent_type
        self._term_sets = term_sets

    def base_metadata(self) -> dict[str, Any]:
        return {"agent_type": self._agent_type, "kb": self._kb}

    def chunks(self, ranked: Sequence[RankedChunk]) -> list[RetrievalResult]:
        return [chunk_result(c.hit, c.score, self.base_metadata() | c.metadata) for c in ranked]

    def communities(self, scored: Iterable[tuple[CommunityRecord, float]], how: str) -> list[RetrievalResult]:
        return [community_result(c, s, self.base_metadata() | {"search": how}) for c, s in scored]

    async def entities_and_relations(
        self, ranked: Sequence[RankedChunk], expansion: Expansion
    ) -> tuple[list[RetrievalResult], list[RetrievalResult]]:
        """The heaviest entities and strongest relations, each with the document of its best chunk."""
        entities = [e for e in expansion.entities if e.record is not None][: self._settings.entity_limit]
        relations = [r for r in expansion.relations if r.score > 0][: self._settings.relation_limit]
        homes = await self._homes(ranked, expansion, entities, relations)
        names = {e.entity_id: e.record.name for e in expansion.entities if e.record is not None}
        meta = self.base_metadata()
        entity_results = [
            entity_result(e.record, homes.get(e.entity_id), e.weight, meta | {"seed": e.is_seed})
            for e in entities
            if e.record is not None
        ]
        relation_results = [
            relation_result(r.relation, names, homes.get(_key(r.relation)), r.score, meta) for r in relations
        ]
        return entity_results, relation_results

    def local_communities(
        self, query: str, seeds: Sequence[Seed], expansion: Expansion
    ) -> list[tuple[CommunityRecord, float]]:
        return community_scores(query, seeds, expansion.communities, self._term_sets)[: self._settings.community_limit]

    async def _homes(
        self,
        ranked: Sequence[RankedChunk],
        expansion: Expansion,
        entities: Sequence[WeightedEntity],
        relations: Sequence[ScoredRelation],
    ) -> dict[str, ChunkHit]:
        """Entity id / relation id → its best chunk: the best-ranked known chunk it appears in, else any."""
        known: dict[str, ChunkHit] = {}
        for hit in (*(c.hit for c in ranked), *(c.hit for c in expansion.chunks)):
            known.setdefault(hit.chunk_id, hit)
        best = _best_known_chunks(list(known), expansion.mentions, entities, relations)
        missing = [e.entity_id for e in entities if e.entity_id not in best]
        if missing:
            fetched = await self._reader.chunks_of_entities(self._kb, missing, 1)
            best |= {entity_id: ids[0] for entity_id, ids in fetched.items() if ids}
        unknown = sorted({chunk_id for chunk_id in best.values() if chunk_id not in known})
        if unknown:
            known |= {hit.chunk_id: hit for hit in await self._reader.get_chunks(self._kb, unknown)}
        return {key: known[chunk_id] for key, chunk_id in best.items() if chunk_id in known}


def _best_known_chunks(
    order: Sequence[str],
    mentions: Mapping[str, Sequence[str]],
    entities: Sequence[WeightedEntity],
    relations: Sequence[ScoredRelation],
) -> dict[str, str]:
    """Entity id / relation id → the first chunk of `order` it appears in (a relation: any of its chunks)."""
    position = {chunk_id: n for n, chunk_id in enumerate(order)}
    best: dict[str, str] = {}
    for entity in entities:
        found = next((c for c in order if entity.entity_id in mentions.get(c, ())), None)
        if found is not None:
            best[entity.entity_id] = found
    for scored in relations:
        if scored.relation.chunk_ids:
            chunk_ids = scored.relation.chunk_ids
            best[_key(scored.relation)] = min(chunk_ids, key=lambda c: (position.get(c, len(position)), c))
    return best


def _key(relation: RelationRecord) -> str:
    return relation_id(relation.source_id, relation.target_id)
