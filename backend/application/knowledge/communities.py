"""Keeping a KB's communities in step with its entity graph.

A refresh re-runs community detection over the whole entity graph (hierarchical Leiden: seconds even
for tens of thousands of entities) but only summarizes and embeds communities whose members changed:
the others keep their stored summary and vector. Only the coarse levels get summary vectors, which is
what global search ranks; the fine levels serve local search through memberships.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Protocol

from backend.application.knowledge.locks import KbLocks
from backend.application.ports.graph_store import GraphStore
from backend.application.ports.ingestion import CommunityDetector
from backend.domain.graph import CommunityRecord
from backend.graphrag_agent.ports import TextEmbedder, Vector

logger = logging.getLogger(__name__)

# What global search matches a query against: the title (the central entities' names) and the start of
# the summary. Short texts keep the embedding cost of a refresh small; it grows with text length.
SUMMARY_TEXT_CHARS = 200


@dataclass(frozen=True, slots=True)
class CommunityOptions:
    embedded_levels: int = 2  # levels 0 .. embedded_levels-1 get a summary vector
    # Smaller communities (an entity and a neighbour or two) add nothing to global search that
    # local search does not find through the entities themselves.
    min_embedded_size: int = 3


class CommunityRefresher(Protocol):
    async def refresh(self, kb: str) -> None:
        """Bring the KB's communities up to date, called with the KB's write lock held: now
        (`CommunityMaintainer`) or by a background task that takes the lock itself (`DeferredRefresher`)."""
        ...


class CommunityMaintainer:
    def __init__(
        self,
        store: GraphStore,
        embedder: TextEmbedder,
        detector: CommunityDetector,
        options: CommunityOptions | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._detector = detector
        self._options = options or CommunityOptions()

    async def refresh(self, kb: str) -> None:
        started = time.perf_counter()
        graph = await self._store.entity_graph(kb)
        previous = {community.community_id: community for community in await self._store.list_communities(kb)}
        linked = sorted({entity_id for edge in graph.edges for entity_id in edge[:2]})
        entities = {entity.entity_id: entity for entity in await self._store.get_entities(kb, linked)}
        relations = await self._store.relations_of(kb, linked, limit=max(1, len(graph.edges)))
        built = await self._detector.build(kb, graph, entities, relations, previous)
        vectors = await self._vectors_for_new(built.records, previous)
        await self._store.replace_communities(kb, built.records, vectors)
        logger.info(
            "communities of kb=%s: %d (%d summarized, %d reused) in %.2f s",
            kb,
            len(built.records),
            built.summarized,
            built.reused,
            time.perf_counter() - started,
        )

    async def _vectors_for_new(
        self, records: list[CommunityRecord], previous: dict[str, CommunityRecord]
    ) -> dict[str, Vector]:
        options = self._options
        new = [
            r
            for r in records
            if r.community_id not in previous
            and r.level < options.embedded_levels
            and len(r.entity_ids) >= options.min_embedded_size
        ]
        if not new:
            return {}
        texts = [f"{record.title}\n{record.summary[:SUMMARY_TEXT_CHARS]}" for record in new]
        vectors = await self._embedder.embed(texts)
        return {record.community_id: vector for record, vector in zip(new, vectors, strict=True)}


class DeferredRefresher:
    """Refreshes in the background, a little later, once for a burst of writes (the HTTP API).

    A document is searchable as soon as it is written; its communities follow within
    `delay_s` plus the refresh time. The refresh takes the KB's write lock, so it never
    interleaves with a write.
    """

    def __init__(self, maintainer: CommunityMaintainer, locks: KbLocks, delay_s: float = 2.0) -> None:
        self._maintainer = maintainer
        self._locks = locks
        self._delay_s = delay_s
        self._pending: dict[str, asyncio.Task[None]] = {}

    async def refresh(self, kb: str) -> None:
        if kb not in self._pending:
            task = asyncio.create_task(self._later(kb), name=f"communities:{kb}")
            self._pending[kb] = task
            task.add_done_callback(lambda done: self._forget(kb, done))

    def _forget(self, kb: str, task: asyncio.Task[None]) -> None:
        if self._pending.get(kb) is task:
            del self._pending[kb]

    async def _later(self, kb: str) -> None:
        await asyncio.sleep(self._delay_s)
        self._forget(kb, asyncio.current_task())  # type: ignore[arg-type]  # later writes schedule anew
        try:
            async with self._locks(kb):
                await self._maintainer.refresh(kb)
        except Exception:
            logger.exception("community refresh of kb=%s failed; it is retried after the next write", kb)

    async def drain(self) -> None:
        """Run pending refreshes now (at shutdown), so no write is left without its communities."""
        tasks = list(self._pending.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for kb in [task.get_name().removeprefix("communities:") for task in tasks]:
            async with self._locks(kb):
                await self._maintainer.refresh(kb)
