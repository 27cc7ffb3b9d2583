"""Bridges: from the documents of the entities a question names to the documents of the entities they
introduce for the question's relation.

"Where was the director of film Blood Street born?" names Blood Street; its document says "directed by Leo
Fong", and Leo Fong's own document holds the answer. Chunk search finds the first document, not the second,
and a plain graph walk ranks Leo Fong's many neighbours alike. Here the words that introduce each entity
in the seed's document ("directed by") are read against the question's own relation words ("director"),
so the entity the question is about comes first. The ranking this gives — the seeds' documents, then for
each seed its bridges best first, seeds taking turns — is one more list for the agent's rank fusion.

Works on any KB where entities have documents of their own (wikis, product catalogues, people
directories); elsewhere it finds no home document and contributes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest

from backend.domain.graph import EntityRecord
from backend.domain.ids import normalise_entity_name
from backend.graphrag_agent.agents.local_search import Seed, loose_overlap, name_match, query_term_set, relation_terms
from backend.graphrag_agent.agents.tuning import BridgeSettings
from backend.graphrag_agent.extraction.offline import title_entity_name
from backend.graphrag_agent.ports import ChunkHit, GraphReader
from backend.graphrag_agent.text import STOPWORDS, TermSets, index_term_set, index_terms

_ARTICLES = frozenset({"the", "a", "an"})


@dataclass(frozen=True, slots=True)
class _Candidate:
    entity: EntityRecord
    seed_id: str
    cue: float  # share of the question's relation words in the words that introduce the entity
    position: int  # where the seed's document first mentions it


def is_home(entity_name: str, title: str) -> bool:
    """Is a document with this title the entity's own ("Frank Lloyd", "The Heart of Doreon" for "Heart of
    Doreon", "William Duncan (actor)" for "William Duncan")?"""
    name = normalise_entity_name(entity_name)
    return bool(name) and name in (normalise_entity_name(title), normalise_entity_name(title_entity_name(title)))


def bridge_terms(query: str, seeds: Sequence[Seed]) -> list[str]:
    """The question's relation words: not the seeds' names, nor the word right before a seed's name, which
    says what the seed is ("the director of film X": "film" describes X, "director" is the relation)."""
    lowered = query.casefold()
    described: set[str] = set()
    for seed in seeds:
        at = lowered.find(seed.entity.name.casefold())
        before = [t for t in index_terms(query[:at]) if t not in _ARTICLES] if at > 0 else []
        if before and before[-1] not in STOPWORDS:
            described.add(before[-1])
    return [term for term in relation_terms(query, seeds) if term not in described]


def introducing_words(text: str, name: str, words: int) -> tuple[int, str]:
    """The first mention of `name` in `text` (ignoring case) and the `words` words before it; (-1, "") if absent."""
    at = text.casefold().find(name.casefold())
    if at < 0:
        return -1, ""
    return at, " ".join(text[max(0, at - 12 * words) : at].split()[-words:])


class BridgeFinder:
    """Seeds → their own documents' chunks → the entities those introduce → the entities' own documents."""

    def __init__(
        self, kb: str, reader: GraphReader, settings: BridgeSettings, term_sets: TermSets = index_term_set
    ) -> None:
        self._kb = kb
        self._reader = reader
        self._settings = settings
        self._term_sets = term_sets

    async def ranking(self, query: str, seeds: Sequence[Seed]) -> list[ChunkHit]:
        """The seeds' own chunks, then their bridges' own chunks (best first, seeds taking turns)."""
        strong = [s for s in seeds if s.weight >= self._settings.min_seed_weight]
        if not strong:
            return []
        seed_homes = await self._homes({s.entity.entity_id: s.entity.name for s in strong}, self._settings.seed_chunks)
        home_chunks = [hit for s in strong for hit in seed_homes.get(s.entity.entity_id, [])]
        if not home_chunks:
            return []
        candidates = await self._candidates(query, strong, seed_homes)
        bridge_homes = await self._homes({c.entity.entity_id: c.entity.name for c in candidates}, 1)
        per_seed: dict[str, list[ChunkHit]] = {s.entity.entity_id: [] for s in strong}
        for candidate in candidates:
            per_seed[candidate.seed_id].extend(bridge_homes.get(candidate.entity.entity_id, []))
        turns = [hit for round_ in zip_longest(*per_seed.values()) for hit in round_ if hit is not None]
        return list({hit.chunk_id: hit for hit in [*home_chunks, *turns]}.values())

    async def _homes(self, names: Mapping[str, str], per_entity: int) -> dict[str, list[ChunkHit]]:
        """entity id → chunks of its own document (the store lists those first)."""
        if not names:
            return {}
        chunk_ids = await self._reader.chunks_of_entities(self._kb, list(names), per_entity)
        hits = {hit.chunk_id: hit for hit in await self._reader.get_chunks(self._kb, _flat(chunk_ids))}
        return {
            entity_id: [hits[c] for c in ids if c in hits and is_home(names[entity_id], hits[c].title)]
            for entity_id, ids in chunk_ids.items()
        }

    async def _candidates(
        self, query: str, seeds: Sequence[Seed], seed_homes: Mapping[str, Sequence[ChunkHit]]
    ) -> list[_Candidate]:
        """Entities the seeds' chunks mention and the question does not, best cue first, then earliest."""
        chunk_seed = {hit.chunk_id: seed_id for seed_id, hits in seed_homes.items() for hit in hits}
        texts = {hit.chunk_id: hit.text for hits in seed_homes.values() for hit in hits}
        mentions = await self._reader.entities_in_chunks(self._kb, list(chunk_seed))
        seed_ids = {s.entity.entity_id for s in seeds}
        wanted = sorted({e for ids in mentions.values() for e in ids} - seed_ids)
        records = {r.entity_id: r for r in await self._reader.get_entities(self._kb, wanted)}
        terms, question = bridge_terms(query, seeds), query_term_set(query)
        best: dict[str, _Candidate] = {}
        for chunk_id, entity_ids in mentions.items():
            for entity_id in entity_ids:
                record = records.get(entity_id)
                if record is None or entity_id in seed_ids or name_match(record.name, question) >= 1.0:
                    continue
                at, before = introducing_words(texts[chunk_id], record.name, self._settings.cue_words)
                if at < 0 or not index_terms(record.name):
                    continue
                found = _Candidate(record, chunk_seed[chunk_id], loose_overlap(terms, before, self._term_sets), at)
                known = best.get(entity_id)
                if known is None or (found.cue, -found.position) > (known.cue, -known.position):
                    best[entity_id] = found
        ranked = sorted(best.values(), key=lambda c: (-c.cue, c.position, c.entity.entity_id))
        return ranked[: self._settings.candidates]


def _flat(chunk_ids: Mapping[str, Sequence[str]]) -> list[str]:
    return list(dict.fromkeys(c for ids in chunk_ids.values() for c in ids))
