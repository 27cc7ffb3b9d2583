"""What a page shows of a KB beside the chat: the graph behind an answer's sources, and example questions.

Both are reads of the graph store through the agents' read port; nothing here writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from backend.application.ports.graph_views import ChunkView, GraphViews
from backend.application.ports.knowledge_bases import KnowledgeBaseCatalog
from backend.domain.errors import InvalidRequest, UnknownKnowledgeBase
from backend.domain.graph import CommunityRecord, EntityRecord, RelationRecord
from backend.domain.knowledge_base import KnowledgeBase

MAX_IDS = 100  # the sources of one answer are far fewer
MENTIONS_PER_CHUNK = 6  # entities a chunk mentions, drawn beside it
MEMBERS_PER_COMMUNITY = 6  # a community's entities drawn beside it, when fewer of them are drawn already
MAX_RELATIONS = 200
SNIPPET_CHARS = 400
EXAMPLES = 3
# One template per language the registry names; a KB in another language gets its entities' names as they are.
EXAMPLE_TEMPLATES = {
    "en": ("What is {}?", "What does “{}” say?"),
    "zh": ("{}是什么？", "《{}》讲了什么？"),
}


@dataclass(frozen=True, slots=True)
class EvidenceNode:
    node_id: str  # as the sources name it: "entity:<id>", "chunk:<id>" or "community:<id>"
    kind: str  # entity, chunk, community
    label: str
    detail: str  # an entity's type and description, a chunk's text, a community's summary (cut)
    source: bool  # one of the asked ids (an answer's source), not only drawn beside one
    doc_id: str = ""


@dataclass(frozen=True, slots=True)
class EvidenceEdge:
    source: str
    target: str
    kind: str  # relation (entity — entity), mentions (chunk → entity), contains (community → entity)
    label: str
    weight: float
    edge_source: bool  # a relation that is itself one of the asked ids


@dataclass(frozen=True, slots=True)
class EvidenceGraph:
    nodes: tuple[EvidenceNode, ...] = ()
    edges: tuple[EvidenceEdge, ...] = ()
    skipped: tuple[str, ...] = field(default=())  # asked ids the KB no longer holds, or of another kind


@dataclass(frozen=True, slots=True)
class _Asked:
    chunks: tuple[str, ...]
    entities: tuple[str, ...]
    relations: tuple[tuple[str, str], ...]
    communities: tuple[str, ...]
    other: tuple[str, ...]


class KnowledgeViews:
    def __init__(self, catalog: KnowledgeBaseCatalog, reader: GraphViews) -> None:
        self._catalog = catalog
        self._reader = reader

    async def evidence(self, kb_prefix: str, source_ids: Sequence[str]) -> EvidenceGraph:
        """The entities, relations, chunks and communities of `source_ids` (the `id` of an answer's cited and consulted
        sources: `chunk:…`, `entity:…`, `relation:<a>|<b>`, `community:…`), with the entities the chunks mention
        and the communities contain, and the relations among everything drawn."""
        kb = await self._knowledge_base(kb_prefix)
        asked = _parse(source_ids)
        chunks = await self._reader.get_chunks(kb.kb_prefix, asked.chunks)
        mentioned = await self._reader.entities_in_chunks(kb.kb_prefix, [c.chunk_id for c in chunks])
        shown = {chunk.chunk_id: mentioned.get(chunk.chunk_id, [])[:MENTIONS_PER_CHUNK] for chunk in chunks}
        wanted = _unique([*asked.entities, *(e for pair in asked.relations for e in pair), *_flat(shown.values())])
        communities = await self._communities(kb.kb_prefix, asked.communities)
        members = {c.community_id: _members(c, wanted) for c in communities}
        entities = await self._reader.get_entities(kb.kb_prefix, _unique([*wanted, *_flat(members.values())]))
        known = {entity.entity_id for entity in entities}
        relations = await self._reader.relations_of(kb.kb_prefix, sorted(known), MAX_RELATIONS)
        nodes = [_entity_node(e, e.entity_id in asked.entities or _in_pairs(e.entity_id, asked)) for e in entities]
        nodes += [_chunk_node(chunk) for chunk in chunks] + [_community_node(c) for c in communities]
        edges = [_relation_edge(r, asked) for r in relations if r.source_id in known and r.target_id in known]
        edges += [_mention_edge(c, e) for c, ids in shown.items() for e in ids if e in known]
        edges += [_contains_edge(c, e) for c, ids in members.items() for e in ids if e in known]
        return EvidenceGraph(tuple(nodes), tuple(edges), _skipped(asked, chunks, communities, known))

    async def examples(self, kb_prefix: str) -> list[str]:
        """A few questions the KB can answer, made from what it holds: its most mentioned entities and its
        longest documents' titles, in the KB's language where a template exists."""
        kb = await self._knowledge_base(kb_prefix)
        overview = await self._reader.overview(kb.kb_prefix, 2 * EXAMPLES, EXAMPLES)
        about, titled = EXAMPLE_TEMPLATES.get(kb.language.split("-")[0].lower(), ("{}", "{}"))
        titles = {title.casefold() for title in overview.titles}
        names = [name for name in overview.entities if name.casefold() not in titles]  # a title is asked below
        questions = [about.format(name) for name in names[:2]] + [titled.format(title) for title in overview.titles]
        return _unique(questions)[:EXAMPLES]

    async def _communities(self, kb_prefix: str, community_ids: Sequence[str]) -> list[CommunityRecord]:
        """The asked communities the KB holds, in the order asked (read only when a community was asked for)."""
        if not community_ids:
            return []
        held = {c.community_id: c for c in await self._reader.list_communities(kb_prefix)}
        return [held[community_id] for community_id in community_ids if community_id in held]

    async def _knowledge_base(self, kb_prefix: str) -> KnowledgeBase:
        kb = await self._catalog.get(kb_prefix)
        if kb is None:
            raise UnknownKnowledgeBase(f"unknown knowledge base {kb_prefix!r}")
        return kb


def _parse(source_ids: Sequence[str]) -> _Asked:
    if len(source_ids) > MAX_IDS:
        raise InvalidRequest(f"at most {MAX_IDS} ids at once")
    chunks: list[str] = []
    entities: list[str] = []
    relations: list[tuple[str, str]] = []
    communities: list[str] = []
    other: list[str] = []
    for source_id in _unique(source_ids):
        kind, _, key = source_id.partition(":")
        low, bar, high = key.partition("|")
        if kind == "chunk" and key:
            chunks.append(key)
        elif kind == "entity" and key:
            entities.append(key)
        elif kind == "relation" and bar and low and high:
            relations.append((low, high))
        elif kind == "community" and key:
            communities.append(key)
        else:
            other.append(source_id)  # not a source id at all
    return _Asked(tuple(chunks), tuple(entities), tuple(relations), tuple(communities), tuple(other))


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _flat(lists: Iterable[list[str]]) -> list[str]:
    return [item for items in lists for item in items]


def _in_pairs(entity_id: str, asked: _Asked) -> bool:
    return any(entity_id in pair for pair in asked.relations)


def _cut(text: str) -> str:
    return text if len(text) <= SNIPPET_CHARS else text[:SNIPPET_CHARS].rsplit(" ", 1)[0] + "…"


def _entity_node(entity: EntityRecord, source: bool) -> EvidenceNode:
    kind = f"{entity.type}: " if entity.type and entity.type != "unknown" else ""
    return EvidenceNode(f"entity:{entity.entity_id}", "entity", entity.name, _cut(kind + entity.description), source)


def _chunk_node(chunk: ChunkView) -> EvidenceNode:
    label = f"{chunk.title or 'untitled'} #{chunk.ordinal + 1}"
    return EvidenceNode(f"chunk:{chunk.chunk_id}", "chunk", label, _cut(chunk.text), True, chunk.doc_id)


def _community_node(community: CommunityRecord) -> EvidenceNode:
    label = community.title or f"Community {community.community_id[:8]}"  # as its source is titled
    return EvidenceNode(f"community:{community.community_id}", "community", label, _cut(community.summary), True)


def _members(community: CommunityRecord, drawn: Sequence[str]) -> list[str]:
    """The community's entities already drawn, and others up to MEMBERS_PER_COMMUNITY in all."""
    inside = [e for e in community.entity_ids if e in set(drawn)]
    others = [e for e in community.entity_ids if e not in set(inside)]
    return inside + others[: max(0, MEMBERS_PER_COMMUNITY - len(inside))]


def _relation_edge(relation: RelationRecord, asked: _Asked) -> EvidenceEdge:
    pair = tuple(sorted((relation.source_id, relation.target_id)))
    return EvidenceEdge(
        f"entity:{relation.source_id}",
        f"entity:{relation.target_id}",
        "relation",
        _cut(relation.description),
        relation.weight,
        pair in asked.relations,
    )


def _mention_edge(chunk_id: str, entity_id: str) -> EvidenceEdge:
    return EvidenceEdge(f"chunk:{chunk_id}", f"entity:{entity_id}", "mentions", "mentions", 1.0, False)


def _contains_edge(community_id: str, entity_id: str) -> EvidenceEdge:
    return EvidenceEdge(f"community:{community_id}", f"entity:{entity_id}", "contains", "contains", 1.0, False)


def _skipped(
    asked: _Asked, chunks: Sequence[ChunkView], communities: Sequence[CommunityRecord], known: set[str]
) -> tuple[str, ...]:
    found = {chunk.chunk_id for chunk in chunks}
    held = {community.community_id for community in communities}
    missing = [f"chunk:{c}" for c in asked.chunks if c not in found]
    missing += [f"entity:{e}" for e in asked.entities if e not in known]
    missing += [f"relation:{a}|{b}" for a, b in asked.relations if a not in known or b not in known]
    missing += [f"community:{c}" for c in asked.communities if c not in held]
    return (*missing, *asked.other)
