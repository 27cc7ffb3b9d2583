"""Fakes of ports and core protocols for use-case tests (the real adapters have their own suites)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from backend.application.ports.chat_model import ModelDelta
from backend.domain.conversation import Message
from backend.domain.errors import ModelError
from backend.domain.retrieval import EvidenceSource, Granularity, RetrievalResult
from backend.domain.tokens import TokenUsage
from backend.graphrag_agent.ports import AgentTrace


def evidence(result_id: str, text: str, score: float = 0.8, title: str = "Doc") -> RetrievalResult:
    return RetrievalResult(
        result_id, Granularity.CHUNK, text, EvidenceSource("doc-" + result_id, title, result_id), score
    )


@dataclass
class FakeAgent:
    """A retrieve-only agent with scripted results, delay or failure; records cancellations."""

    agent_type: str = "naive_rag_agent"
    results: Sequence[RetrievalResult] = ()
    delay_s: float = 0.0
    fail: Exception | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)
    cancelled: int = 0
    finished: int = 0

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace:
        self.calls.append((query, thread_id))
        try:
            await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.fail is not None:
            raise self.fail
        self.finished += 1
        return {
            "context": "\n".join(r.evidence for r in self.results),
            "retrieval_results": [r.to_dict() for r in self.results],
            "reference": {"chunks": [r.source.chunk_id for r in self.results]},
        }


@dataclass
class FakeChatModel:
    """Streams scripted deltas (then the `usage` it reports, if any); can fail after N deltas or stall before the
    next one."""

    deltas: Sequence[str] = ("Hello", " there", "!")
    usage: TokenUsage | None = None
    fail_after: int | None = None
    delay_s: float = 0.0
    prompts: list[list[Message]] = field(default_factory=list)
    closed_streams: int = 0

    @property
    def model_name(self) -> str:
        return "fake"

    async def complete(self, messages: Sequence[Message]) -> str:
        self.prompts.append(list(messages))
        if self.fail_after is not None:
            raise ModelError("model returned HTTP 500")
        return "".join(self.deltas)

    async def stream(self, messages: Sequence[Message]) -> AsyncIterator[ModelDelta]:
        self.prompts.append(list(messages))
        try:
            for index, text in enumerate(self.deltas):
                if self.fail_after is not None and index == self.fail_after:
                    raise ModelError("model connection dropped mid-stream")
                await asyncio.sleep(self.delay_s)
                yield ModelDelta(content=text)
            if self.usage is not None:
                yield ModelDelta(usage=self.usage)
        finally:
            self.closed_streams += 1

    async def aclose(self) -> None:
        return None
