"""Response bodies."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from backend.application.chat.chat_handler import ChatResult
from backend.domain.conversation import Citation, StoredMessage
from backend.domain.routing import RouteDecision


class CitationOut(BaseModel):
    id: str
    title: str
    doc_id: str
    chunk_id: str
    snippet: str

    @classmethod
    def of(cls, citation: Citation) -> CitationOut:
        return cls(**citation.to_dict())


class RouteOut(BaseModel):
    requested_kb_prefix: str
    routed_kb_prefix: str
    kb_prefix: str
    confidence: float
    method: str
    reason: str
    worker_name: str
    worker_names: list[str]  # every worker of the plan: one, or several when `agent_types` asked for them
    query: str  # what routing and retrieval searched for: the message, or a follow-up made to stand alone
    query_method: str  # how: `as_written`, `offline` (an earlier turn's subject carried) or `model` (rewritten)
    query_note: str  # why the model's rewrite was not used, when it was asked for one ("" otherwise)
    agent_reason: str  # why this agent: the request named it, or the question's shape chose it

    @classmethod
    def of(cls, decision: RouteDecision) -> RouteOut:
        return cls(**decision.to_dict())


class ChatResponse(BaseModel):
    answer: str
    citations: list[CitationOut]  # the sources the answer cites: its `[n]` markers count from 1 in this order
    consulted: list[CitationOut]  # the other sources it was given, not cited
    route: RouteOut
    generation_mode: str
    session_id: str
    request_id: str
    message_id: str
    user_message_id: str
    # With `debug` in the request: the stored answer's `debug` (route, generation_mode, debug_level and the
    # execution_log, as GET .../messages shows it); null without.
    debug: dict[str, Any] | None = None

    @classmethod
    def of(cls, result: ChatResult, session_id: str, request_id: str) -> ChatResponse:
        return cls(
            answer=result.answer,
            citations=[CitationOut.of(c) for c in result.citations],
            consulted=[CitationOut.of(c) for c in result.consulted],
            route=RouteOut.of(result.route),
            generation_mode=result.generation_mode.value,
            session_id=session_id,
            request_id=request_id,
            message_id=result.message_id,
            user_message_id=result.user_message_id,
            debug=result.debug,
        )


class MessageOut(BaseModel):
    id: str
    role: str
    content: str
    created_at: datetime
    citations: list[CitationOut]
    consulted: list[CitationOut]
    completed: bool
    request_id: str | None
    debug: dict[str, Any] | None

    @classmethod
    def of(cls, message: StoredMessage) -> MessageOut:
        return cls(
            id=message.id,
            role=message.role.value,
            content=message.content,
            created_at=message.created_at,
            citations=[CitationOut.of(c) for c in message.citations],
            consulted=[CitationOut.of(c) for c in message.consulted],
            completed=message.completed,
            request_id=message.request_id,
            debug=message.debug,
        )


class MessagesResponse(BaseModel):
    session_id: str
    messages: list[MessageOut]


class ClearResponse(BaseModel):
    status: str = "ok"
    remaining_messages: str = "0"
    cleared_messages: int


class FeedbackResponse(BaseModel):
    status: str = "ok"
    feedback_id: str


class ReadyResponse(BaseModel):
    """`GET /ready`: 200 when every store answers, else 503 with the same body."""

    ready: bool
    checks: dict[str, str] = Field(
        description="each store's name → `ok`, `unavailable` or `timed out after 2s` (the cause is in the log)",
        examples=[{"conversation_store": "ok", "knowledge_store": "ok", "job_store": "unavailable"}],
    )
