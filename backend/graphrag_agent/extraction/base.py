"""What every entity/relation extractor returns, and the builder that keeps its invariants.

Invariants of an `Extraction` (both extractors rely on `ExtractionBuilder` for them):

- every mention's `entity_id` is `ids.entity_id(kb, name)` and its `chunk_id` the chunk it comes from;
- names are stripped and non-empty, types lower-case;
- at most one entity mention per (entity, chunk) and one relation mention per unordered pair and chunk;
- a relation mention's endpoints both have an entity mention in the same chunk; no self-relations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from backend.domain import ids
from backend.domain.graph import EntityMention, Extraction, RelationMention

OTHER = "other"
ENTITY_TYPES: tuple[str, ...] = (
    "person",
    "organization",
    "location",
    "event",
    "date",
    "work",
    "concept",
    "product",
    OTHER,
)
# Spellings models and taggers use for the same kinds; everything else is kept as written (lower-case).
_TYPE_ALIASES: dict[str, str] = {
    "geo": "location",
    "place": "location",
    "gpe": "location",
    "loc": "location",
    "organisation": "organization",
    "org": "organization",
    "per": "person",
    "people": "person",
    "time": "date",
    "unknown": OTHER,
    "misc": OTHER,
}
MAX_DESCRIPTION_CHARS = 600
_LOOSE_SPACE = re.compile(r"^\s|\s$|\s\s|[^\S ]")  # leading/trailing/double spaces, tabs, line breaks


def normalise_type(raw: str) -> str:
    """A lower-case entity type with common synonyms folded ("geo" → "location"); "other" when empty."""
    cleaned = " ".join(raw.strip().strip("\"'“”`*").lower().split())
    return _TYPE_ALIASES.get(cleaned, cleaned) or OTHER


def trim(text: str, limit: int) -> str:
    """`text` on one line, cut at a word boundary to at most `limit` characters."""
    flat = _one_line(text)
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


@dataclass(slots=True)
class _Entity:
    name: str
    type: str
    descriptions: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Relation:
    source_id: str
    target_id: str
    weight: float
    descriptions: list[str] = field(default_factory=list)


class ExtractionBuilder:
    """Collects the mentions of one document chunk by chunk and merges repeats within a chunk."""

    def __init__(self, kb: str) -> None:
        self._kb = kb
        self._entities: dict[tuple[str, str], _Entity] = {}
        self._relations: dict[tuple[str, str, str], _Relation] = {}

    def add_entity(self, chunk_id: str, name: str, type_: str, description: str = "") -> str | None:
        """Record a mention; returns its entity id, or None when the name is empty after normalisation."""
        name = " ".join(name.split())
        if not ids.normalise_entity_name(name):
            return None
        entity_id = ids.entity_id(self._kb, name)
        kind = normalise_type(type_)
        entity = self._entities.setdefault((chunk_id, entity_id), _Entity(name, kind))
        if entity.type == OTHER and kind != OTHER:
            entity.type = kind  # a specific type beats the fallback
        _add_distinct(entity.descriptions, description)
        return entity_id

    def entity_id(self, name: str) -> str:
        return ids.entity_id(self._kb, name)

    def has_entity(self, chunk_id: str, entity_id: str) -> bool:
        return (chunk_id, entity_id) in self._entities

    def add_relation(
        self, chunk_id: str, source_id: str, target_id: str, description: str = "", weight: float = 1.0
    ) -> None:
        """Record (or strengthen) a relation between two entities already mentioned in `chunk_id`."""
        if source_id == target_id:
            return
        if not (self.has_entity(chunk_id, source_id) and self.has_entity(chunk_id, target_id)):
            raise ValueError("a relation's endpoints must be mentioned in the same chunk first")
        pair = (source_id, target_id) if source_id <= target_id else (target_id, source_id)
        relation = self._relations.setdefault((chunk_id, *pair), _Relation(source_id, target_id, 0.0))
        relation.weight += weight
        _add_distinct(relation.descriptions, description)

    def build(self, model_calls: int = 0, cache_hits: int = 0) -> Extraction:
        entities = tuple(
            EntityMention(
                entity_id=entity_id,
                name=entity.name,
                type=entity.type,
                description=_joined(entity.descriptions),
                chunk_id=chunk_id,
            )
            for (chunk_id, entity_id), entity in self._entities.items()
        )
        relations = tuple(
            RelationMention(
                source_id=relation.source_id,
                target_id=relation.target_id,
                description=_joined(relation.descriptions),
                weight=round(relation.weight, 6),
                chunk_id=chunk_id,
            )
            for (chunk_id, _, _), relation in self._relations.items()
        )
        return Extraction(entities, relations, model_calls=model_calls, cache_hits=cache_hits)


def _one_line(text: str) -> str:
    # The common case (already one clean line) skips the split and join: this runs once per mention.
    if _LOOSE_SPACE.search(text) is None:
        return text
    return " ".join(text.split())


def _add_distinct(descriptions: list[str], description: str) -> None:
    text = _one_line(description)
    if text and text not in descriptions:
        descriptions.append(text)


def _joined(descriptions: list[str]) -> str:
    return trim(" ".join(descriptions), MAX_DESCRIPTION_CHARS)
