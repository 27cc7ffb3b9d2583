"""What the page's KB views read of the graph store: the few reads the agents make too, typed here so that the
use case (and the server that calls it) never imports the core's contract."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from backend.domain.graph import CommunityRecord, EntityRecord, RelationRecord
from backend.domain.knowledge_base import KbOverview


class ChunkView(Protocol):
    @property
    def chunk_id(self) -> str: ...

    @property
    def doc_id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def ordinal(self) -> int: ...


class GraphViews(Protocol):
    """As `GraphReader` (graphrag_agent/ports.py) and `GraphStore.overview` say; every GraphStore conforms."""

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> Sequence[ChunkView]: ...

    async def entities_in_chunks(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]: ...

    async def get_entities(self, kb: str, entity_ids: Sequence[str]) -> list[EntityRecord]: ...

    async def relations_of(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[RelationRecord]: ...

    async def list_communities(self, kb: str, level: int | None = None) -> list[CommunityRecord]: ...

    async def overview(self, kb: str, entities: int, titles: int) -> KbOverview: ...
