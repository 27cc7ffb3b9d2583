"""Reads shared by the agents of one fused request.

fusion_agent runs its members on the same question at once, and they ask the store and the embedder much the
same things: the question's embedding, its fulltext and vector hits, the entities it names and their chunks,
and a large share of the members' reads repeat a read of another member. Inside `SharedReads.scope()`, the reader and
embedder of a `SharedReads` perform each distinct read once and hand every caller its own copy of the result;
outside a scope they pass each call straight through. The scope also tokenises each text the members score
once (`text.shared_term_sets`), a large part of a fused question's CPU otherwise.

The members also run the same searches to different depths (naive_rag_agent 20 chunks, local graph search 30).
With a `search_depth`, every chunk and entity search in a scope fetches at least that many hits once and each caller
takes the head it asked for. Every store ranks a search in one total order (score, then id), so the head of a
deeper exact search is the shallower search; an approximate vector index searched deeper can only find more.

The memo lives in a context variable that the scope sets and the member tasks inherit, so it lasts for one
request: two requests never share a read, and a read after a write always reaches the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from backend.domain.graph import CommunityRecord, EntityRecord, RelationRecord
from backend.graphrag_agent.ports import ChunkHit, CommunityHit, EntityHit, GraphReader, TextEmbedder, Vector
from backend.graphrag_agent.text import shared_term_sets

T = TypeVar("T")

_MEMO: ContextVar[_Memo | None] = ContextVar("shared_reads_memo", default=None)


class _Memo:
    """One request's reads, by operation and arguments; each a task that every caller awaits."""

    def __init__(self) -> None:
        self._reads: dict[tuple[Any, ...], asyncio.Future[Any]] = {}

    async def read(self, key: tuple[Any, ...], perform: Callable[[], Awaitable[T]]) -> T:
        found = self._reads.get(key)
        if found is None:
            found = self._reads[key] = asyncio.ensure_future(perform())
        # Shielded: one caller cancelled (a member timing out) must not cancel the read the others await.
        result: T = await asyncio.shield(found)
        return _copy(result)

    def close(self) -> None:
        """Stop reads nobody awaits any more (the request was cancelled while they ran)."""
        for read in self._reads.values():
            if not read.done():
                read.cancel()
            elif not read.cancelled():
                read.exception()  # retrieved, so an error every caller already saw is not logged again


class SharedReads:
    """A reader and an embedder whose identical reads are done once per `scope()`."""

    def __init__(self, reader: GraphReader, embedder: TextEmbedder, search_depth: int = 0) -> None:
        """`search_depth`: how many hits a ranked search inside a scope fetches at least (0: what it is asked)."""
        self.reader: GraphReader = _SharedReader(reader, search_depth)
        self.embedder: TextEmbedder = _SharedEmbedder(embedder)

    @staticmethod
    @contextmanager
    def scope() -> Iterator[None]:
        """Share reads among the tasks started inside this block (a nested scope joins the outer one)."""
        if _MEMO.get() is not None:
            yield
            return
        memo = _Memo()
        token = _MEMO.set(memo)
        try:
            with shared_term_sets():  # the members also score the same texts against the question
                yield
        finally:
            _MEMO.reset(token)
            memo.close()


async def _shared(operation: str, arguments: tuple[Any, ...], perform: Callable[[], Awaitable[T]]) -> T:
    memo = _MEMO.get()
    if memo is None:
        return await perform()
    return await memo.read((operation, *map(_hashable, arguments)), perform)


async def _ranked(
    operation: str,
    arguments: tuple[Any, ...],
    limit: int,
    depth: int,
    search: Callable[[int], Awaitable[list[T]]],
) -> list[T]:
    """A ranked search's first `limit` hits; in a scope, from one shared search at least `depth` deep."""
    if _MEMO.get() is None or not 0 < limit < depth:
        return await _shared(operation, (*arguments, limit), lambda: search(limit))
    return (await _shared(operation, (*arguments, depth), lambda: search(depth)))[:limit]


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
    def __init__(self, embedder: TextEmbedder) -> None:
        self._embedder = embedder

    @property
    def dimension(self) -> int:
        return self._embedder.dimension

    def covers(self, text: str) -> bool:
        return self._embedder.covers(text)

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return await _shared("embed", (tuple(texts),), lambda: self._embedder.embed(texts))


class _SharedReader:
    """Every read of `GraphReader`, through the request's memo."""

    def __init__(self, reader: GraphReader, search_depth: int) -> None:
        self._reader = reader
        self._depth = search_depth

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        return await _ranked(
            "chunks_fulltext",
            (kb, query),
            limit,
            self._depth,
            lambda depth: self._reader.search_chunks_fulltext(kb, query, depth),
        )

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]:
        return await _ranked(
            "chunks_vector",
            (kb, embedding),
            limit,
            self._depth,
            lambda depth: self._reader.search_chunks_vector(kb, embedding, depth),
        )

    async def chunk_embeddings(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        return await _shared("chunk_embeddings", (kb, chunk_ids), lambda: self._reader.chunk_embeddings(kb, chunk_ids))

    async def search_entities_fulltext(self, kb: str, query: str, limit: int) -> list[EntityHit]:
        return await _ranked(
            "entities_fulltext",
            (kb, query),
            limit,
            self._depth,
            lambda depth: self._reader.search_entities_fulltext(kb, query, depth),
        )

    async def search_entities_vector(self, kb: str, embedding: Vector, limit: int) -> list[EntityHit]:
        return await _ranked(
            "entities_vector",
            (kb, embedding),
            limit,
            self._depth,
            lambda depth: self._reader.search_entities_vector(kb, embedding, depth),
        )

    async def get_entities(self, kb: str, entity_ids: Sequence[str]) -> list[EntityRecord]:
        return await _shared("get_entities", (kb, entity_ids), lambda: self._reader.get_entities(kb, entity_ids))

    async def relations_of(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[RelationRecord]:
        return await _shared(
            "relations_of", (kb, entity_ids, limit), lambda: self._reader.relations_of(kb, entity_ids, limit)
        )

    async def chunks_mentioning(self, kb: str, entity_ids: Sequence[str], limit: int) -> list[ChunkHit]:
        return await _shared(
            "chunks_mentioning", (kb, entity_ids, limit), lambda: self._reader.chunks_mentioning(kb, entity_ids, limit)
        )

    async def get_chunks(self, kb: str, chunk_ids: Sequence[str]) -> list[ChunkHit]:
        return await _shared("get_chunks", (kb, chunk_ids), lambda: self._reader.get_chunks(kb, chunk_ids))

    async def entities_in_chunks(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, list[str]]:
        return await _shared(
            "entities_in_chunks", (kb, chunk_ids), lambda: self._reader.entities_in_chunks(kb, chunk_ids)
        )

    async def chunks_of_entities(
        self, kb: str, entity_ids: Sequence[str], per_entity_limit: int
    ) -> dict[str, list[str]]:
        return await _shared(
            "chunks_of_entities",
            (kb, entity_ids, per_entity_limit),
            lambda: self._reader.chunks_of_entities(kb, entity_ids, per_entity_limit),
        )

    async def communities_of(self, kb: str, entity_ids: Sequence[str]) -> list[CommunityRecord]:
        return await _shared("communities_of", (kb, entity_ids), lambda: self._reader.communities_of(kb, entity_ids))

    async def search_communities(self, kb: str, embedding: Vector, level: int | None, limit: int) -> list[CommunityHit]:
        return await _shared(
            "search_communities",
            (kb, embedding, level, limit),
            lambda: self._reader.search_communities(kb, embedding, level, limit),
        )

    async def list_communities(self, kb: str, level: int | None = None) -> list[CommunityRecord]:
        return await _shared("list_communities", (kb, level), lambda: self._reader.list_communities(kb, level))
