"""The parts of a chat turn around its stream: validating the input, the user message, the answer's record.

Order matters: validate everything (nothing is written for bad input), store the user message, and only then
route and generate.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from backend.application.chat.inputs import SESSION_ID_PATTERN, ChatInput
from backend.application.ports.conversation_store import ConversationStore
from backend.application.ports.generation import GenerationRequest
from backend.application.ports.knowledge_bases import KnowledgeBaseCatalog
from backend.domain.agent_types import require_available
from backend.domain.citations import CitationMarkers
from backend.domain.context import RequestContext
from backend.domain.conversation import Citation, Message, NewMessage, Role, StoredMessage
from backend.domain.errors import InvalidRequest, InvalidWorkerName, RequestIdReused, UnknownKnowledgeBase
from backend.domain.generation import GenerationMode
from backend.domain.knowledge_base import GENERAL_KB
from backend.domain.retrieval import RagRunSpec
from backend.domain.routing import RequestedRoute, RouteDecision
from backend.domain.worker import parse_worker_name

_HISTORY_ROLES = frozenset({Role.USER, Role.ASSISTANT})


MAX_PLAN = 5  # agents one turn may ask for (agent_types)


@dataclass(frozen=True, slots=True)
class TurnLimits:
    max_message_chars: int = 8000
    history_max_messages: int = 20


@dataclass(frozen=True, slots=True)
class PreparedTurn:
    context: RequestContext
    conversation_id: str
    user_message: StoredMessage
    requested: RequestedRoute
    history: tuple[Message, ...]

    @property
    def message(self) -> str:
        return self.user_message.content


@dataclass(slots=True)
class AssistantDraft:
    """The assistant message as it builds up; stored once at the end, complete or not."""

    decision: RouteDecision | None = None
    mode: GenerationMode | None = None
    tokens: list[str] = field(default_factory=list)
    markers: CitationMarkers | None = None  # once the sources the answer is written against are known
    cited: bool = False  # the `citations` event is sent
    error: str | None = None
    completed: bool = False
    execution_log: list[dict[str, Any]] = field(default_factory=list)
    debug: dict[str, Any] = field(default_factory=dict)  # what middlewares record about the run

    @property
    def content(self) -> str:
        return "".join(self.tokens)

    @property
    def citations(self) -> tuple[Citation, ...]:
        return self.markers.cited if self.markers else ()

    @property
    def consulted(self) -> tuple[Citation, ...]:
        return self.markers.consulted if self.markers else ()


class TurnService:
    def __init__(
        self,
        store: ConversationStore,
        catalog: KnowledgeBaseCatalog,
        supported_agent_types: Collection[str],
        limits: TurnLimits,
    ) -> None:
        self._store = store
        self._catalog = catalog
        self._supported = frozenset(supported_agent_types)
        self._limits = limits

    async def validate(self, chat_input: ChatInput) -> RequestedRoute:
        message = chat_input.message.strip()
        if not message:
            raise InvalidRequest("message must not be empty")
        if len(message) > self._limits.max_message_chars:
            raise InvalidRequest(f"message is longer than {self._limits.max_message_chars} characters")
        validate_session_id(chat_input.session_id)
        if chat_input.history is not None and any(turn.role not in _HISTORY_ROLES for turn in chat_input.history):
            raise InvalidRequest("history may only hold user and assistant turns")
        kb_prefix, agent_type = self._requested(chat_input)
        kb = None
        if kb_prefix not in (None, "", GENERAL_KB):
            kb = await self._catalog.get(kb_prefix)
            if kb is None:
                raise UnknownKnowledgeBase(f"unknown knowledge base {kb_prefix!r}")
        agent_types = self._plan(chat_input, agent_type)
        for each in agent_types or ((agent_type,) if agent_type else ()):
            require_available(each, self._supported)
        pinned = chat_input.worker_name is not None and kb is not None
        first = agent_types[0] if agent_types else agent_type or None
        return RequestedRoute(kb_prefix or None, first, kb, agent_types, pinned)

    @staticmethod
    def _plan(chat_input: ChatInput, agent_type: str | None) -> tuple[str, ...]:
        """The requested agent types when several were asked for (`agent_types`), in order, without repeats."""
        if not chat_input.agent_types:
            return ()
        if agent_type:
            raise InvalidRequest("ask for agent_type (or a worker_name) or for agent_types, not both")
        if len(chat_input.agent_types) > MAX_PLAN:
            raise InvalidRequest(f"agent_types may name at most {MAX_PLAN} agents")
        return tuple(dict.fromkeys(chat_input.agent_types))

    @staticmethod
    def _requested(chat_input: ChatInput) -> tuple[str | None, str | None]:
        if chat_input.worker_name is None:
            return chat_input.kb_prefix, chat_input.agent_type
        try:
            parsed = parse_worker_name(chat_input.worker_name)
        except ValueError as error:
            raise InvalidWorkerName(str(error)) from error
        if not parsed.kb_prefix and not parsed.agent_type:
            return GENERAL_KB, None
        return parsed.kb_prefix or chat_input.kb_prefix, parsed.agent_type or chat_input.agent_type

    async def prepare(self, context: RequestContext, chat_input: ChatInput) -> PreparedTurn:
        requested = await self.validate(chat_input)
        given = chat_input.history
        asked = NewMessage(
            Role.USER, chat_input.message.strip(), debug=_requested_record(requested), request_id=context.request_id
        )
        started = await self._store.start_turn(
            context.user_id,
            context.session_id,
            asked,
            history_limit=self._limits.history_max_messages if given is None else 0,
        )
        if not _same_request(started.message, asked):
            raise RequestIdReused(
                f"request id {context.request_id!r} was already used for another message in this conversation; "
                "send a new message with a new request id"
            )
        if given is None:
            history = tuple(Message(message.role, message.content) for message in started.earlier if message.content)
        else:
            history = self._given_history(given)
        return PreparedTurn(context, started.conversation_id, started.message, requested, history)

    def _given_history(self, given: tuple[Message, ...]) -> tuple[Message, ...]:
        """The caller's turns under the same limit as stored history, so both paths prompt alike."""
        if self._limits.history_max_messages == 0:
            return ()
        return tuple(turn for turn in given if turn.content)[-self._limits.history_max_messages :]

    async def save_answer(self, turn: PreparedTurn, draft: AssistantDraft) -> StoredMessage:
        return await self._store.append_message(
            turn.conversation_id,
            NewMessage(
                Role.ASSISTANT,
                draft.content,
                citations=draft.citations,
                consulted=draft.consulted,
                debug=debug_record(draft),
                completed=draft.completed,
                request_id=turn.context.request_id,
                reply_to=turn.user_message.id,
            ),
        )


def validate_session_id(session_id: str) -> None:
    if not SESSION_ID_PATTERN.fullmatch(session_id):
        raise InvalidRequest("session_id must be 1-128 characters of letters, digits and . _ : @ -")


def plan_for(decision: RouteDecision) -> tuple[RagRunSpec, ...]:
    """One retrieval per worker of a KB route; none (general chat) when the router chose no worker."""
    return tuple(RagRunSpec(worker) for worker in decision.workers)


def generation_request(turn: PreparedTurn, decision: RouteDecision) -> GenerationRequest:
    return GenerationRequest(
        context=turn.context,
        message=turn.message,
        query=decision.query or turn.message,
        kb_prefix="" if decision.is_general else decision.kb_prefix,
        plan=plan_for(decision),
        history=turn.history,
    )


def _requested_record(requested: RequestedRoute) -> dict[str, Any] | None:
    """What the caller asked for besides the message, kept with it: a retry must ask for the same."""
    if requested.kb_prefix is None and requested.agent_type is None:
        return None
    asked: dict[str, Any] = {"kb_prefix": requested.kb_prefix, "agent_type": requested.agent_type}
    if requested.agent_types:
        asked["agent_types"] = list(requested.agent_types)
    return {"requested": asked}


def _same_request(stored: StoredMessage, asked: NewMessage) -> bool:
    """Whether the user message stored under the request id is this request's (a retry) rather than another's."""
    return stored.content == asked.content and (stored.debug or None) == asked.debug


def debug_record(draft: AssistantDraft) -> dict[str, Any]:
    """What is stored as the assistant message's `debug`."""
    record: dict[str, Any] = {
        "route": draft.decision.to_dict() if draft.decision else None,
        "generation_mode": draft.mode.value if draft.mode else None,
    }
    if draft.error:
        record["error"] = draft.error
    if draft.execution_log:
        record["execution_log"] = draft.execution_log
    return record | draft.debug
