"""How mentions merge into entities and relations: one rule for every store.

Both adapters call these functions on the mentions that remain after a write or a delete, so the
Neo4j and the embedded store report identical merged values. Mentions are ordered by chunk id
first, which makes the result independent of insertion order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from backend.domain.graph import EntityMention, RelationMention

MAX_DESCRIPTION_CHARS = 1200
# The extractors' fallback type; a specific type from any mention beats it.
FALLBACK_TYPE = "other"
_UNSPECIFIC_TYPES = frozenset({"", "other", "unknown"})


@dataclass(frozen=True, slots=True)
class MergedEntity:
    name: str
    type: str
    description: str
    mention_count: int


@dataclass(frozen=True, slots=True)
class MergedRelation:
    description: str
    weight: float
    chunk_ids: tuple[str, ...]


def relation_key(source_id: str, target_id: str) -> tuple[str, str]:
    """Relations are undirected for retrieval: one record per unordered pair."""
    return (source_id, target_id) if source_id <= target_id else (target_id, source_id)


def _most_common(values: Iterable[str]) -> str:
    counts = Counter(value for value in values if value)
    if not counts:
        return ""
    # Most frequent, then shortest, then alphabetical: deterministic whatever the order of writes.
    return min(counts, key=lambda value: (-counts[value], len(value), value))


def _joined_descriptions(descriptions: Iterable[str]) -> str:
    distinct = list(dict.fromkeys(d.strip() for d in descriptions if d and d.strip()))
    joined = "\n".join(distinct)
    if len(joined) <= MAX_DESCRIPTION_CHARS:
        return joined
    return joined[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"


def merge_entity(mentions: Sequence[EntityMention]) -> MergedEntity:
    ordered = sorted(mentions, key=lambda m: (m.chunk_id, m.name))
    types = [m.type.strip().lower() for m in ordered if m.type.strip().lower() not in _UNSPECIFIC_TYPES]
    return MergedEntity(
        name=_most_common(m.name.strip() for m in ordered),
        type=_most_common(types) or FALLBACK_TYPE,
        description=_joined_descriptions(m.description for m in ordered),
        mention_count=len({m.chunk_id for m in ordered}),
    )


def merge_relation(mentions: Sequence[RelationMention]) -> MergedRelation:
    ordered = sorted(mentions, key=lambda m: (m.chunk_id, m.description))
    return MergedRelation(
        description=_joined_descriptions(m.description for m in ordered),
        weight=round(sum(m.weight for m in ordered), 6),
        chunk_ids=tuple(sorted({m.chunk_id for m in ordered})),
    )
