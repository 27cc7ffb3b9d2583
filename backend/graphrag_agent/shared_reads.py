"""Reads shared by the agents of one fused request.

fusion_agent runs its members on the same question at once, and they ask the store and the embedder much the
same things: the question's embedding, its fulltext and vector hits, the entities it names and their chunks,
and a large share of the members' reads repeat a read of another member. For each request the fusion agent
opens a `ReadScope` of its `SharedReads` and builds that request's members over it: the scope's reader and
embedder perform each distinct read once and hand every caller its own copy of the result, and its
`term_sets` tokenises each text the members score once (`text.TermSetCache`), a large part of a fused
question's CPU otherwise.

The members also run the same searches to different depths (naive_rag_agent 20 chunks, local graph search 30).
With a `search_depth`, every chunk and entity search in a scope fetches at least that many hits once and each caller
takes the head it asked for. Every store ranks a search in one total order (score, then id), so the head of a
deeper exact search is the shallower search; an approximate vector index searched deeper can only find more.

Only what reads through a scope's own reader and embedder shares anything, and only while the scope is open: two
requests never share a read, a read after a write always reaches the store, and an agent built over the plain
store is never affected.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from backend.domain.graph import CommunityRecord, EntityRecord, RelationRecord
from backend.graphrag_agent.ports import ChunkHit, CommunityHit, EntityHit, GraphReader, TextEmbedder, Vector
from backend.graphrag_agent.text import TermSetCache, TermSets

T = TypeVar("T")


class SharedReads:
    """The store and the embedder a fused agent's members read, and how deep their shared searches go.

    It keeps no reads itself: each request opens its own `scope()`.
    """

    def __init__(self, reader: GraphReader, embedder: TextEmbedder, search_depth: int = 0) -> None:
        """`search_depth`: how many hits a ranked search in a scope fetches at least (0: what it is asked)."""
        self._reader = reader
        self._embedder = embedder
        self._depth = search_depth

    @contextmanager
    def scope(self) -> Iterator[ReadScope]:
        """A new `ReadScope` for one request; leaving the block closes it."""
        scope = ReadScope(self._reader, self._embedder, self._depth)
        try:
            yield scope
        finally:
            scope.close()


class ReadScope:
    """One request's shared reads: hand `reader`, `embedder` and `term_sets` to the agents that should share them.

    Identical reads through `reader` and `embedder` reach the store and the embedder once, and `term_sets`
    tokenises each text once. Once closed, the scope shares nothing more: every read reaches the store.
    """

    def __init__(self, reader: GraphReader, embedder: TextEmbedder, search_depth: int = 0) -> None:
        self._memo = _Memo()
        self.reader: GraphReader = _SharedReader(reader, self._memo, search_depth)
        self.embedder: TextEmbedder = _SharedEmbedder(embedder, self._memo)
        self.term_sets: TermSets = TermSetCache()

    def close(self) -> None:
        """Stop the reads nobody awaits any more (the request was cancelled while they ran); share no more."""
        self._memo.close()


class _Memo:
    """One request's reads, by operation and arguments; each a task that every caller awaits."""

    def __init__(self) -> None:
        self._reads: dict[tuple[Any, ...], asyncio.Future[Any]] = {}
        self.open = True

    async def read(self, operation: str, arguments: tuple[Any, ...], perform: Callable[[], Awaitable[T]]) -> T:
        """`perform()`'s result, done once per distinct read while the memo is open; straight through once closed."""
        if not self.open:
            return await perform()
        key = (operation, *map(_hashable, arguments))
        found = self._reads.get(key)
        if found is None:
            found = self._reads[key] = asyncio.ensure_future(perform())
        # Shielded: one caller cancelled (a member timing out) must not cancel the read the others await.
        result: T = await asyncio.shield(found)
        return _copy(result)

    async def ranked(
        self,
        operation: str,
        arguments: tuple[Any, ...],
        limit: int,
        depth: int,
        search: Callable[[int], Awaitable[list[T]]],
    ) -> list[T]:
        """A ranked search's first `limit` hits; while open, from one shared search at least `depth` deep."""
        if not self.open or not 0 < limit < depth:
            return await self.read(operation, (*arguments, limit), lambda: search(limit))
        return (await self.read(operation, (*arguments, depth), lambda: search(depth)))[:limit]

    def close(self) -> None:
        self.open = False
        for read in self._reads.values():
            if not read.done():
                read.cancel()
            elif not read.cancelled():
                read.exception()  # retrieved, so an error every caller already saw is not logged again
        self._reads.clear()


def _hashable(argument: Any) -> Any:
    if isinstance(argument, np.ndarray):
        return (argument.dtype.str, argument.shape, argument.tobytes())
    if isinstance(argument, list | tuple):
        return tuple(argument)
    return argument


def _copy(value: T) -> T:
    """A caller's own copy of the containers of a shared result (their items are immutable records)."""
    copied: Any
    if isinstance(value, list):
        copied = list(value)
    elif isinstance(value, dict):
        copied = {key: list(item) if isinstance(item, list) else item for key, item in value.items()}
    elif isinstance(value, np.ndarray):
        copied = value.copy()
    else:
        copied = value
    return copied  # type: ignore[no-any-return]


class _SharedEmbedder:
    """`TextEmbedder` through one request's memo."""

    def __init__(self, embedder: TextEmbedder, memo: _Memo) -> None:
        self._embedder = embedder
        self._memo = memo

    @property
    def dimension(self) -> int:
        return self._embedder.dimension

    def covers(self, text: str) -> bool:
        return self._embedder.covers(text)

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return await self._memo.read("embed", (tuple(texts),), lambda: self._embedder.embed(texts))


class _SharedReader:
    """Every read of `GraphReader`, through one request's memo."""

    def __init__(self, reader: GraphReader, memo: _Memo, search_depth: int) -> None:
        self._reader = reader
        self._memo = memo
        self._depth = search_depth

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        return await self._memo.ranked(
            "chunks_fulltext",
            (kb, query),
            limit,
            self._depth,
            lambda depth: self._reader.search_chunks_fulltext(kb, query, depth),
        )

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]:
        return await self._memo.ranked(
            "chunks_vector",
            (kb, embedding),
            limit,
            self._depth,
            lambda depth: self._reader.search_chunks_vector(kb, embedding, depth),
        )

    async def chunk_embeddings(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        return await self._memo.read(
            "chunk_embeddings", (kb, chunk_ids), lambda: self._reader.chunk_embeddings(kb, chunk_ids)
        )

    async def search_entities_fulltext(self, kb: str, query: str, limit: int) -> list[EntityHit]:
        return await self._memo.ranked(
            "entities_fulltext",
            (kb, query),
            limit,
            self._depth,
            lambda depth: self._reader.search_entities_fulltext(kb, query, depth),
        )

    async def search_entities_vector(self, kb: str, embedding: Vector, limit: int) -> list[EntityHit]:
        return await self._memo.ranked(
            "entities_vector",
            (kb, embedding),
            limit,
            self._depth,
            lambda depth: self._reader.search_entities_vector(kb, embedding, depth),
        )

    async def get_entities(self, kb: str, entity_ids: Sequence[str]) -> list[EntityRecord]:
        return await self._memo.read(
            "get_entities", (kb, entity_ids), lambda: self._reader.get_entities(kb, entity_ids)
        )

    async def relations_of(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[RelationRecord]:
        return await self._memo.read(
            "relations_of", (kb, entity_ids, limit), lambda: self._reader.relations_of(kb, entity_ids, limit)
        )

    async def chunks_mentioning(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[ChunkHit]:
        return await self._memo.read(
            "chunks_mentioning", (kb, entity_ids, limit), lambda: self._reader.chunks_mentioning(kb, entity_ids, limit)
        )

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        return await self._memo.read("get_chunks", (kb, chunk_ids), lambda: self._reader.get_chunks(kb, chunk_ids))

    async def entities_in_chunks(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        return await self._memo.read(
            "entities_in_chunks", (kb, chunk_ids), lambda: self._reader.entities_in_chunks(kb, chunk_ids)
        )

    async def chunks_of_entities(
        self, kb: str, entity_ids: Sequence[str], per_entity_limit: int
    ) -> dict[str, list[str]]:
        return await self._memo.read(
            "chunks_of_entities",
            (kb, entity_ids, per_entity_limit),
            lambda: self._reader.chunks_of_entities(kb, entity_ids, per_entity_limit),
        )

    async def communities_of(self, kb: str, entity_ids: Sequence[str]) -> list[CommunityRecord]:
        return await self._memo.read(
            "communities_of", (kb, entity_ids), lambda: self._reader.communities_of(kb, entity_ids)
        )

    async def search_communities(self, kb: str, embedding: Vector, level: int | None, limit: int) -> list[CommunityHit]:
        return await self._memo.read(
            "search_communities",
            (kb, embedding, level, limit),
            lambda: self._reader.search_communities(kb, embedding, level, limit),
        )

    async def list_communities(self, kb: str, level: int | None = None) -> list[CommunityRecord]:
        return await self._memo.read("list_communities", (kb, level), lambda: self._reader.list_communities(kb, level))
