"""The project's exception tree.

One root (`GraphRagError`); each subclass says what went wrong in domain terms. Adapters translate
driver errors into these; only `backend.server` maps them to HTTP status codes.
"""

from __future__ import annotations


class GraphRagError(Exception):
    """Root of every error this service raises on purpose."""

    code: str = "internal_error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(GraphRagError):
    """The caller sent something malformed (empty message, bad identifier, ...)."""

    code = "invalid_request"


class InvalidWorkerName(InvalidRequest):
    code = "invalid_worker_name"


class UnknownKnowledgeBase(InvalidRequest):
    code = "unknown_kb"


class UnknownAgentType(InvalidRequest):
    code = "unknown_agent_type"


class AgentUnavailable(GraphRagError):
    """A known agent type that this deployment cannot build (not implemented or not configured)."""

    code = "agent_unavailable"


class NotFound(GraphRagError):
    """The resource does not exist for this caller (also used for other users' resources)."""

    code = "not_found"


class Conflict(GraphRagError):
    """The resource already exists (e.g. a KB prefix that is taken)."""

    code = "conflict"


class Forbidden(GraphRagError):
    """The caller is known but may not do this (e.g. a non-admin creating a KB)."""

    code = "forbidden"


class Unauthenticated(GraphRagError):
    code = "unauthenticated"


class StoreUnavailable(GraphRagError):
    """A backing store (Postgres, SQLite, the knowledge store) cannot be reached or failed."""

    code = "store_unavailable"


class ModelError(GraphRagError):
    """The language model failed: HTTP error, dropped connection, stall, malformed stream."""

    code = "model_error"


class RetrievalFailed(GraphRagError):
    """Every retrieval agent of a plan failed or timed out."""

    code = "retrieval_failed"


class BudgetExceeded(GraphRagError):
    """A request used up one of its budgets (model calls, time); what it produced so far is kept."""

    code = "budget_exceeded"
