"""Titles, summaries and ranks of communities: the offline (extractive) way, and the port for others.

The extractive summary needs no model: its title names the community's most central entities
(weighted degree inside the community), and its summary strings together the first sentences of
the top entities' descriptions and of the strongest internal relations' descriptions.

Rank (0–10) measures how much a community holds, from structure alone:

    rank = 5 · min(1, ln(1 + size) / ln(1 + 50)) + 5 · min(1, ln(1 + internal weight) / ln(1 + 100))

Both halves grow on a log scale and saturate: at 50 members, and at a total internal relation weight
of 100 (e.g. 10 relations of LLM strength 10, or 100 co-occurrences). Two entities with one weight-1
relation rank 2.15.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple, Protocol

from backend.domain.graph import EntityRecord, RelationRecord
from backend.graphrag_agent.communities import CommunityDraft
from backend.graphrag_agent.text import split_sentences

MAX_TITLE_CHARS = 120
MAX_SUMMARY_CHARS = 1200
MAX_RANK = 10.0
_FULL_RANK_SIZE = 50
_FULL_RANK_WEIGHT = 100.0
_TITLE_ENTITIES = 3
_SUMMARY_ENTITIES = 5
_SUMMARY_RELATIONS = 4
_MAX_SENTENCE_CHARS = 300


class CommunitySummary(NamedTuple):
    title: str
    summary: str
    rank: float  # 0..10


class CommunitySummarizer(Protocol):
    async def summarize(
        self,
        kb: str,
        draft: CommunityDraft,
        entities: Mapping[str, EntityRecord],
        relations: Sequence[RelationRecord],
    ) -> CommunitySummary:
        """Title, summary and rank of one community.

        `entities` holds (at least) the members' records; `relations` may hold any relations, only
        those between two members are used.
        """
        ...


def extractive_summary(
    draft: CommunityDraft, entities: Mapping[str, EntityRecord], relations: Sequence[RelationRecord]
) -> CommunitySummary:
    inside = internal_relations(draft, relations)
    central = central_entities(draft, entities, inside)
    return CommunitySummary(_title(draft, central), _summary(draft, central, inside, entities), structural_rank(draft))


def internal_relations(draft: CommunityDraft, relations: Sequence[RelationRecord]) -> list[RelationRecord]:
    """Relations between two members, strongest first (ties by ids, for a stable order)."""
    members = set(draft.entity_ids)
    inside = [r for r in relations if r.source_id in members and r.target_id in members and r.source_id != r.target_id]
    return sorted(inside, key=lambda r: (-r.weight, r.source_id, r.target_id))


def central_entities(
    draft: CommunityDraft, entities: Mapping[str, EntityRecord], inside: Sequence[RelationRecord]
) -> list[EntityRecord]:
    """The members that have records, most central first: weighted degree over `inside` relations."""
    degree: dict[str, float] = dict.fromkeys(draft.entity_ids, 0.0)
    for relation in inside:
        for end in (relation.source_id, relation.target_id):
            if end in degree:
                degree[end] += relation.weight
    known = [entities[e] for e in draft.entity_ids if e in entities]
    return sorted(known, key=lambda e: (-degree[e.entity_id], -e.mention_count, e.name, e.entity_id))


def structural_rank(draft: CommunityDraft) -> float:
    """The formula in the module docstring."""
    size_part = min(1.0, math.log1p(draft.size) / math.log1p(_FULL_RANK_SIZE))
    weight_part = min(1.0, math.log1p(max(draft.internal_weight, 0.0)) / math.log1p(_FULL_RANK_WEIGHT))
    return round(MAX_RANK * (size_part + weight_part) / 2, 2)


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, at a word boundary when one is near, marked with "…"."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def _title(draft: CommunityDraft, central: Sequence[EntityRecord]) -> str:
    names = [e.name.strip() for e in central[:_TITLE_ENTITIES] if e.name.strip()]
    if not names:
        return f"Community of {draft.size} entities"
    return clip(", ".join(names), MAX_TITLE_CHARS)


def _summary(
    draft: CommunityDraft,
    central: Sequence[EntityRecord],
    inside: Sequence[RelationRecord],
    entities: Mapping[str, EntityRecord],
) -> str:
    names = [e.name for e in central[:_TITLE_ENTITIES]]
    opening = f"A community of {draft.size} entities"
    sentences = [f"{opening} centred on {_enumerate(names)}." if names else f"{opening}."]
    sentences += [_entity_sentence(e) for e in central[:_SUMMARY_ENTITIES]]
    sentences += [s for s in (_relation_sentence(r, entities) for r in inside[:_SUMMARY_RELATIONS]) if s]
    return _join_within(sentences, MAX_SUMMARY_CHARS)


def _enumerate(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _first_sentence(text: str) -> str:
    sentences = split_sentences(text)
    return clip(sentences[0], _MAX_SENTENCE_CHARS) if sentences else ""


def _entity_sentence(entity: EntityRecord) -> str:
    kind = f" ({entity.type})" if entity.type and entity.type not in ("unknown", "other") else ""
    description = _first_sentence(entity.description)
    return f"{entity.name}{kind}: {_as_sentence(description)}" if description else f"{entity.name}{kind}."


def _relation_sentence(relation: RelationRecord, entities: Mapping[str, EntityRecord]) -> str:
    description = _first_sentence(relation.description)
    source, target = entities.get(relation.source_id), entities.get(relation.target_id)
    if not description or source is None or target is None:
        return ""
    return f"{source.name} – {target.name}: {_as_sentence(description)}"


def _as_sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?", "…", "。", "！", "？")) else f"{text}."


def _join_within(sentences: Sequence[str], limit: int) -> str:
    """Whole sentences while they fit; the first one is clipped if it alone is too long."""
    text = clip(sentences[0], limit)
    for sentence in sentences[1:]:
        if len(text) + 1 + len(sentence) > limit:
            break
        text = f"{text} {sentence}"
    return text
