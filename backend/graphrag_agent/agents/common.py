"""Pieces every retrieve-only agent shares: structured concurrency, evidence items, the trace and the agent
template (`RetrieveOnlyAgent`)."""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar, overload

from backend.domain.agent_types import AgentType
from backend.domain.graph import CommunityRecord, EntityRecord, RelationRecord
from backend.domain.retrieval import EvidenceSource, Granularity, RetrievalResult
from backend.graphrag_agent.ports import AgentTrace, ChunkHit

A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
D = TypeVar("D")
T = TypeVar("T")

_REFERENCE_KEYS: dict[Granularity, str] = {
    Granularity.CHUNK: "chunks",
    Granularity.ENTITY: "entities",
    Granularity.RELATIONSHIP: "relationships",
    Granularity.COMMUNITY: "communities",
}


# --- structured concurrency ----------------------------------------------------------------------


@overload
async def concurrently(a: Awaitable[A], b: Awaitable[B], /) -> tuple[A, B]: ...


@overload
async def concurrently(a: Awaitable[A], b: Awaitable[B], c: Awaitable[C], /) -> tuple[A, B, C]: ...


@overload
async def concurrently(a: Awaitable[A], b: Awaitable[B], c: Awaitable[C], d: Awaitable[D], /) -> tuple[A, B, C, D]: ...


async def concurrently(*awaitables: Awaitable[Any]) -> tuple[Any, ...]:
    """Run awaitables concurrently; on failure or cancellation stop the others and await them.

    Unlike a TaskGroup, the first error is raised as itself (not wrapped in an ExceptionGroup).
    """
    return tuple(await all_of(awaitables))


async def nothing() -> list[Any]:
    """An empty search result, where a search is skipped but its place in `concurrently` stays."""
    return []


async def all_of(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """`concurrently` for any number of awaitables of one type, results in their order."""
    tasks = [asyncio.ensure_future(awaitable) for awaitable in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# --- evidence items ------------------------------------------------------------------------------


def unit(score: float) -> float:
    """A score clamped to [0, 1] and rounded so traces compare equal across runs."""
    return round(min(1.0, max(0.0, score)), 6)


def relation_id(source_id: str, target_id: str) -> str:
    """Relations are undirected: one id per unordered pair."""
    low, high = sorted((source_id, target_id))
    return f"{low}|{high}"


def chunk_result(hit: ChunkHit, score: float, metadata: dict[str, Any]) -> RetrievalResult:
    return RetrievalResult(
        result_id=f"chunk:{hit.chunk_id}",
        granularity=Granularity.CHUNK,
        evidence=hit.text,
        source=EvidenceSource(doc_id=hit.doc_id, title=hit.title, chunk_id=hit.chunk_id),
        score=unit(score),
        metadata={**metadata, "ordinal": hit.ordinal},
    )


def entity_result(
    entity: EntityRecord, home: ChunkHit | None, score: float, metadata: dict[str, Any]
) -> RetrievalResult:
    """An entity as evidence; its source is the document of its best chunk."""
    kind = f" ({entity.type})" if entity.type and entity.type != "unknown" else ""
    description = f": {entity.description}" if entity.description else ""
    return RetrievalResult(
        result_id=f"entity:{entity.entity_id}",
        granularity=Granularity.ENTITY,
        evidence=f"{entity.name}{kind}{description}",
        source=_source_of(home, fallback_title=entity.name),
        score=unit(score),
        metadata={**metadata, "entity_id": entity.entity_id, "name": entity.name, "type": entity.type},
    )


def relation_result(
    relation: RelationRecord, names: dict[str, str], home: ChunkHit | None, score: float, metadata: dict[str, Any]
) -> RetrievalResult:
    source_name = names.get(relation.source_id, relation.source_id)
    target_name = names.get(relation.target_id, relation.target_id)
    description = f": {relation.description}" if relation.description else ""
    return RetrievalResult(
        result_id=f"relation:{relation_id(relation.source_id, relation.target_id)}",
        granularity=Granularity.RELATIONSHIP,
        evidence=f"{source_name} — {target_name}{description}",
        source=_source_of(home, fallback_title=f"{source_name} — {target_name}"),
        score=unit(score),
        metadata={
            **metadata,
            "source_id": relation.source_id,
            "target_id": relation.target_id,
            "weight": relation.weight,
        },
    )


def community_result(community: CommunityRecord, score: float, metadata: dict[str, Any]) -> RetrievalResult:
    return RetrievalResult(
        result_id=f"community:{community.community_id}",
        granularity=Granularity.COMMUNITY,
        evidence=community.summary,
        source=EvidenceSource(doc_id="", title=community.title or f"Community {community.community_id[:8]}"),
        score=unit(score),
        metadata={**metadata, "level": community.level, "rank": community.rank, "size": len(community.entity_ids)},
    )


def _source_of(home: ChunkHit | None, fallback_title: str) -> EvidenceSource:
    if home is None:
        return EvidenceSource(doc_id="", title=fallback_title)
    return EvidenceSource(doc_id=home.doc_id, title=home.title, chunk_id=home.chunk_id)


def source_key(result: RetrievalResult | dict[str, Any]) -> str:
    """The id a result stands for inside its granularity (`chunk:abc` → `abc`)."""
    result_id = result.result_id if isinstance(result, RetrievalResult) else str(result["result_id"])
    return result_id.split(":", 1)[1] if ":" in result_id else result_id


# --- the trace -----------------------------------------------------------------------------------


def build_trace(results: Sequence[RetrievalResult]) -> AgentTrace:
    """The agent contract's trace; a result id appears once (its first, best-ranked occurrence)."""
    results = list({result.result_id: result for result in reversed(results)}.values())[::-1]
    return {
        "context": build_context(results),
        "retrieval_results": [result.to_dict() for result in results],
        "reference": build_reference(results),
    }


def build_context(results: Sequence[RetrievalResult]) -> str:
    return "\n\n".join(f"[{n}] {_heading(r)}\n{r.evidence}" for n, r in enumerate(results, start=1))


def _heading(result: RetrievalResult) -> str:
    if result.granularity is Granularity.CHUNK:
        return result.source.title
    return f"{result.granularity.value}: {result.source.title}"


def build_reference(results: Sequence[RetrievalResult]) -> dict[str, Any]:
    documents: dict[str, str] = {}
    reference: dict[str, Any] = {key: [] for key in ("documents", *_REFERENCE_KEYS.values())}
    for result in results:
        if result.source.doc_id:
            documents.setdefault(result.source.doc_id, result.source.title)
        reference[_REFERENCE_KEYS[result.granularity]].append(source_key(result))
    reference["documents"] = [{"doc_id": doc_id, "title": title} for doc_id, title in documents.items()]
    return reference


def merge_references(references: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The union of several references, first occurrence first."""
    documents: dict[str, str] = {}
    merged: dict[str, dict[str, None]] = {key: {} for key in _REFERENCE_KEYS.values()}
    for reference in references:
        for document in reference.get("documents", []):
            documents.setdefault(str(document.get("doc_id", "")), str(document.get("title", "")))
        for key, seen in merged.items():
            seen.update(dict.fromkeys(str(item) for item in reference.get(key, [])))
    return {
        "documents": [{"doc_id": doc_id, "title": title} for doc_id, title in documents.items() if doc_id],
        **{key: list(seen) for key, seen in merged.items()},
    }


def log_retrieval(
    logger: logging.Logger, agent_type: str, kb: str, thread_id: str, started: float, kept: int, **details: object
) -> None:
    """One debug line per retrieval; the thread id only labels it."""
    if logger.isEnabledFor(logging.DEBUG):
        summary = " ".join(f"{key}={value}" for key, value in details.items())
        elapsed_ms = (time.perf_counter() - started) * 1000
        logger.debug("%s kb=%s thread=%s %s kept=%d in %.1f ms", agent_type, kb, thread_id, summary, kept, elapsed_ms)


# --- the agent template --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Retrieved:
    """What an agent's search step found: its results, best first, and what the debug line reports about them."""

    results: list[RetrievalResult]
    details: Mapping[str, object] = field(default_factory=dict)


class RetrieveOnlyAgent(ABC):
    """The template of the single-KB agents (SPEC §9): question → `_retrieve` → results → trace.

    A subclass names its `AGENT` type and supplies only `_retrieve`. The template times the call, answers a blank
    question with an empty trace without searching, builds the trace and logs one debug line under the
    subclass's module logger. Agents keep no per-request state; `thread_id` only labels that line.
    """

    AGENT: ClassVar[AgentType]

    def __init__(self, kb_prefix: str) -> None:
        self._kb = kb_prefix

    @property
    def agent_type(self) -> str:
        return self.AGENT.value

    @property
    def kb_prefix(self) -> str:
        return self._kb

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace:
        started = time.perf_counter()
        if not query.strip():
            return build_trace([])
        found = await self._retrieve(query)
        logger = logging.getLogger(type(self).__module__)
        log_retrieval(logger, self.agent_type, self._kb, thread_id, started, len(found.results), **found.details)
        return build_trace(found.results)

    @abstractmethod
    async def _retrieve(self, query: str) -> Retrieved:
        """The agent's own search step, for a question that is not blank."""
