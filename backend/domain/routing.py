"""What a turn asks of the router, what an intent detector concluded, and the router's output."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from backend.domain.knowledge_base import GENERAL_KB, KbOverview, KnowledgeBase
from backend.domain.worker import Worker


class RouteMethod(StrEnum):
    REQUESTED = "requested"
    HEURISTIC = "heuristic"
    LLM = "llm"
    TIMEOUT = "timeout"
    FALLBACK = "fallback"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class RequestedRoute:
    """The caller's wishes after validation: a known KB, general chat or neither, and a supported agent type."""

    kb_prefix: str | None  # as asked (`general` for general chat): kept with the message, a retry asks the same
    agent_type: str | None  # the first of `agent_types` when several were asked for
    kb: KnowledgeBase | None = None  # the asked KB as the catalog holds it
    agent_types: tuple[str, ...] = ()  # a plan of several agents, run concurrently and fused
    pinned: bool = False  # a worker_name named the KB and agent: no routing policy changes them

    @property
    def general(self) -> bool:
        return self.kb_prefix == GENERAL_KB


@dataclass(frozen=True, slots=True)
class IntentGuess:
    kb_prefix: str  # "" when no KB fits (general chat)
    confidence: float
    method: RouteMethod
    reason: str


@dataclass(frozen=True, slots=True)
class KbProfile:
    """A KB as the model router sees it: its record, and what it holds as its graph store last said."""

    kb: KnowledgeBase
    overview: KbOverview = field(default_factory=KbOverview)


class QueryMethod(StrEnum):
    """How the standalone query was made."""

    AS_WRITTEN = "as_written"  # the message stands alone, or nothing earlier could be carried into it
    OFFLINE = "offline"  # the subject of an earlier turn put in place of what refers back to it
    MODEL = "model"  # the follow-up rewritten by one model call


@dataclass(frozen=True, slots=True)
class StandaloneQuery:
    """What routing and retrieval search for: the message, with what a follow-up refers back to."""

    text: str
    carried: str = ""  # the words carried offline from earlier turns ("" when none were)
    method: QueryMethod = QueryMethod.AS_WRITTEN
    note: str = ""  # why a model's rewrite was not used, when one was asked for ("" otherwise)


@dataclass(frozen=True, slots=True)
class RouteDecision:
    requested_kb_prefix: str
    routed_kb_prefix: str
    kb_prefix: str
    confidence: float
    method: str
    reason: str
    worker: Worker | None  # None: general chat, no retrieval
    query: str = ""  # the standalone query routing used and retrieval searches for ("": the message as written)
    query_method: str = QueryMethod.AS_WRITTEN.value  # how `query` was made
    query_note: str = ""  # why a model's rewrite of the follow-up was not used, when one was asked for
    also: tuple[Worker, ...] = ()  # further workers of a requested plan, run beside `worker`
    agent_reason: str = ""  # why this agent: the request's, or the question's shape

    @property
    def workers(self) -> tuple[Worker, ...]:
        """Every worker of the turn's plan, the first one first (none for general chat)."""
        return () if self.worker is None else (self.worker, *self.also)

    @property
    def is_general(self) -> bool:
        return self.worker is None

    @property
    def worker_name(self) -> str:
        return self.worker.name if self.worker is not None else ""

    def to_dict(self) -> dict[str, Any]:
        """The wire shape: every field, the worker as its name."""
        shown = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("worker", "also")}
        return shown | {"worker_name": self.worker_name, "worker_names": [worker.name for worker in self.workers]}
