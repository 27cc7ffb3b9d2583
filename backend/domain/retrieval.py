"""Evidence returned by the retrieve-only agents and the plan that asks for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypedDict

from backend.domain.worker import Worker


class Granularity(StrEnum):
    CHUNK = "Chunk"
    ENTITY = "Entity"
    RELATIONSHIP = "Relationship"
    COMMUNITY = "Community"


@dataclass(frozen=True, slots=True)
class RagRunSpec:
    """One retrieval to run: a resolved worker."""

    worker: Worker

    @property
    def agent_type(self) -> str:
        return self.worker.agent_type

    @property
    def worker_name(self) -> str:
        return self.worker.name


@dataclass(frozen=True, slots=True)
class EvidenceSource:
    doc_id: str
    title: str
    chunk_id: str = ""


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    result_id: str  # stable: derived from the source ids, never random
    granularity: Granularity
    evidence: str
    source: EvidenceSource
    score: float  # in [0, 1]
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "result_id": self.result_id,
            "granularity": self.granularity.value,
            "evidence": self.evidence,
            "source": {"doc_id": self.source.doc_id, "title": self.source.title, "chunk_id": self.source.chunk_id},
            "score": self.score,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> RetrievalResult:
        source = raw.get("source") or {}
        return cls(
            result_id=str(raw["result_id"]),
            granularity=Granularity(raw.get("granularity", Granularity.CHUNK.value)),
            evidence=str(raw.get("evidence", "")),
            source=EvidenceSource(
                doc_id=str(source.get("doc_id", "")),
                title=str(source.get("title", "")),
                chunk_id=str(source.get("chunk_id", "")),
            ),
            score=min(1.0, max(0.0, float(raw.get("score", 0.0)))),
            metadata=dict(raw.get("metadata") or {}),
        )


class AgentTrace(TypedDict):
    """What a retrieve-only agent returns: its context text, its results as `RetrievalResult.to_dict()`
    rows, and its reference data."""

    context: str
    retrieval_results: list[dict[str, Any]]
    reference: dict[str, Any]


@dataclass(frozen=True, slots=True)
class AgentRun:
    """The outcome of one agent's retrieval within a plan."""

    agent_type: str
    worker_name: str
    results: tuple[RetrievalResult, ...] = ()
    context: str = ""
    reference: dict[str, Any] = field(default_factory=dict)
    duration_ms: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None
