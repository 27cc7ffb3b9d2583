"""What the core needs from the outside world."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

import numpy as np
import numpy.typing as npt

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class ChunkHit:
    """A chunk found by one search. `score` is the search's own score (BM25 or cosine)."""

    chunk_id: str
    doc_id: str
    title: str
    text: str
    ordinal: int
    score: float


class ChunkIndex(Protocol):
    """Chunk search inside one KB. Implementations never format `query` into query text."""

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]: ...

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]: ...


class TextEmbedder(Protocol):
    """Dense, L2-normalised sentence embeddings."""

    @property
    def dimension(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One row per text, shape (len(texts), dimension)."""
        ...


class AgentTrace(TypedDict):
    context: str
    retrieval_results: list[dict[str, Any]]
    reference: dict[str, Any]


class RetrievalAgent(Protocol):
    """The agent contract (SPEC §3): stateless, retrieve-only."""

    @property
    def agent_type(self) -> str: ...

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace: ...
