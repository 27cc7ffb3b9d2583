"""What both GraphStore adapters do alike: the cap on what a read returns, and the document upserts."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Final

from backend.application.ports.graph_store import DocumentWrite
from backend.domain.graph import DocumentGraph
from backend.graphrag_agent.ports import Vector

MAX_LIMIT: Final = 1000  # no search or listing returns more rows than this, whatever the caller asks


def capped(limit: int) -> int:
    """A caller's `limit` within [0, MAX_LIMIT]."""
    return max(0, min(limit, MAX_LIMIT))


class GraphStoreBase(ABC):
    """The upserts of `GraphStore`: one document is a batch of one, and each adapter writes a batch its way."""

    async def upsert_document(
        self,
        kb: str,
        graph: DocumentGraph,
        chunk_vectors: Sequence[Vector],
        entity_vectors: Mapping[str, Vector],
    ) -> None:
        await self._upsert("upsert_document", kb, [DocumentWrite(graph, chunk_vectors, entity_vectors)])

    async def upsert_documents(self, kb: str, documents: Sequence[DocumentWrite]) -> None:
        if documents:
            await self._upsert("upsert_documents", kb, documents)

    @abstractmethod
    async def _upsert(self, operation: str, kb: str, documents: Sequence[DocumentWrite]) -> None:
        """Write `documents` (not empty) to the KB, in order; `operation` names the write in errors."""
