"""The project's exception tree.

One root (`GraphRagError`); each subclass says what went wrong in domain terms. Adapters translate
driver errors into these; only `backend.server` maps them to HTTP status codes.

What a client reads is `public_message`. An error about the caller's own request (a 4xx: bad input, not found,
not allowed) says its `message`, which is written for the caller. Every other error says its class's fixed
`public_text`: its `message` may name hosts, ports, drivers and their errors, and goes to the operator's log only
(with the request id). The root's `public_text` is set, so an error class is safe unless it opts out.
"""

from __future__ import annotations

from typing import ClassVar


class GraphRagError(Exception):
    """Root of every error this service raises on purpose."""

    code: str = "internal_error"
    # What a client is told instead of `message`; None for errors whose `message` is meant for the caller.
    public_text: ClassVar[str | None] = "internal server error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    @property
    def public_message(self) -> str:
        """The text a client may read: `message` for errors about the caller's request, else `public_text`."""
        return self.message if self.public_text is None else self.public_text


class InvalidRequest(GraphRagError):
    """The caller sent something malformed (empty message, bad identifier, ...)."""

    code = "invalid_request"
    public_text = None


class InvalidWorkerName(InvalidRequest):
    code = "invalid_worker_name"


class UnknownKnowledgeBase(InvalidRequest):
    code = "unknown_kb"


class UnknownAgentType(InvalidRequest):
    code = "unknown_agent_type"


class AgentUnavailable(GraphRagError):
    """A known agent type that this deployment cannot build (not implemented or not configured)."""

    code = "agent_unavailable"
    public_text = "the requested agent type is not available in this deployment"


class NotFound(GraphRagError):
    """The resource does not exist for this caller (also used for other users' resources)."""

    code = "not_found"
    public_text = None


class Conflict(GraphRagError):
    """The resource already exists (e.g. a KB prefix that is taken)."""

    code = "conflict"
    public_text = None


class RequestIdReused(Conflict):
    """A request id that names another message: a retry must repeat its request, a new message needs a new id."""

    code = "request_id_reused"


class QuestionCleared(Conflict):
    """An answer whose question was cleared from the conversation while it was being produced: it is not kept."""

    code = "conversation_cleared"

    def __init__(
        self, message: str = "the conversation was cleared while this answer was being written; it was not kept"
    ) -> None:
        super().__init__(message)


class Forbidden(GraphRagError):
    """The caller is known but may not do this (e.g. a non-admin creating a KB)."""

    code = "forbidden"
    public_text = None


class Unauthenticated(GraphRagError):
    code = "unauthenticated"
    public_text = None


class StoreUnavailable(GraphRagError):
    """A backing store (Postgres, SQLite, the knowledge store) cannot be reached or failed."""

    code = "store_unavailable"
    public_text = "a store this service needs is unavailable; try again shortly"


class ConversationStoreUnavailable(StoreUnavailable):
    """The conversation store (history of chats) cannot be reached or failed."""

    public_text = "the conversation store is unavailable; try again shortly"


class AnswerNotSaved(ConversationStoreUnavailable):
    """An answer was produced (and maybe sent) but the conversation store would not take it."""

    public_text = "the answer could not be saved to the conversation history"


class JobStoreUnavailable(StoreUnavailable):
    """The store of ingestion jobs cannot be reached or failed."""

    public_text = "the ingestion job store is unavailable; try again shortly"


class KnowledgeStoreUnavailable(StoreUnavailable):
    """The knowledge store (the graph store holding the knowledge bases) cannot be reached or failed."""

    public_text = "the knowledge store is unavailable; try again shortly"


class ModelError(GraphRagError):
    """The language model failed: HTTP error, dropped connection, stall, malformed stream."""

    code = "model_error"
    public_text = "the language model failed or could not be reached; try again shortly"


class RetrievalFailed(GraphRagError):
    """Every retrieval agent of a plan failed or timed out."""

    code = "retrieval_failed"
    public_text = "retrieval failed: no search of the knowledge base succeeded; try again shortly"


class BudgetExceeded(GraphRagError):
    """A request used up one of its budgets (model calls, time); what it produced so far is kept."""

    code = "budget_exceeded"
    public_text = "this request needed more model calls or time than one request may use"


class ShuttingDown(GraphRagError):
    """The service ended a turn still running at the end of its shutdown grace period; what it produced is kept."""

    code = "shutting_down"
    public_text = "the service is shutting down; what was generated so far has been kept"


def error_type_for(code: str, public_message: str | None = None) -> type[GraphRagError]:
    """The class of the errors that carry `code` (the root for a code no class has), for errors that travel as
    their code and public message (a stream's `error` event). A subclass that only changes the text keeps its
    parent's code: `public_message` then picks the class whose `public_text` it is."""
    matching: list[type[GraphRagError]] = []
    pending: list[type[GraphRagError]] = [GraphRagError]
    while pending:  # a class comes before its subclasses
        error_type = pending.pop(0)
        if error_type.code == code:
            matching.append(error_type)
        pending.extend(error_type.__subclasses__())
    if not matching:
        return GraphRagError
    return next((t for t in matching if t.public_text is not None and t.public_text == public_message), matching[0])


def error_from(code: str, public_message: str) -> GraphRagError:
    """The error a stream's `error` event stands for, to raise where the turn is not streamed: the class of
    `error_type_for`, with the event's text as its message (what a 4xx says; a 5xx says its class's text)."""
    error_type = error_type_for(code, public_message)
    error = error_type.__new__(error_type)  # whatever the class's own constructor takes
    GraphRagError.__init__(error, public_message)
    return error
