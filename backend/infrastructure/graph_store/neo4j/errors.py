"""Driver errors translated into `KnowledgeStoreUnavailable` at the adapter's boundary.

Every exception of the `neo4j` package derives from `GqlError`; socket errors can surface as `OSError`.
Messages name the operation and the server (without credentials) and never carry the password; they are for the
operator's log (a client reads the error's fixed public text, backend/domain/errors.py).
"""

from __future__ import annotations

from typing import Final
from urllib.parse import urlsplit, urlunsplit

from neo4j.exceptions import (
    AuthError,
    ClientError,
    ConfigurationError,
    ConnectionPoolError,
    DatabaseError,
    GqlError,
    Neo4jError,
    ServiceUnavailable,
    SessionExpired,
    TransientError,
)

from backend.domain.errors import KnowledgeStoreUnavailable

# What the adapter catches: everything the driver raises, plus raw socket errors.
DRIVER_ERRORS: Final = (GqlError, OSError)

_MAX_DETAIL = 300

# Most specific first: the first match names the kind of failure.
_KINDS: Final[tuple[tuple[type[BaseException], str], ...]] = (
    (AuthError, "authentication was refused"),
    (ServiceUnavailable, "the server cannot be reached"),
    (SessionExpired, "the connection was lost"),
    (ConnectionPoolError, "no connection became free in time"),
    (TransientError, "a transient failure outlasted the retries"),
    (DatabaseError, "the server failed"),
    (ClientError, "the server refused the request"),
    (ConfigurationError, "the driver is misconfigured"),
    (OSError, "a network error occurred"),
)


def public_uri(uri: str) -> str:
    """The URI without user info (a password can hide there), for messages and logs."""
    try:
        parts = urlsplit(uri)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "<unparsable Neo4j URI>"


def store_unavailable(
    exc: BaseException, operation: str, server: str, secrets: tuple[str, ...] = ()
) -> KnowledgeStoreUnavailable:
    """The domain error for a driver error raised while doing `operation` against `server`."""
    kind = next((text for cls, text in _KINDS if isinstance(exc, cls)), "the driver failed")
    detail = _detail(exc)
    for secret in secrets:
        if len(secret) >= 4:  # a very short secret would redact ordinary words
            detail = detail.replace(secret, "***")
    return KnowledgeStoreUnavailable(f"Neo4j at {server}: {operation} failed: {kind} ({type(exc).__name__}: {detail})")


def _detail(exc: BaseException) -> str:
    if isinstance(exc, Neo4jError):
        text = f"{exc.code}: {exc.message}" if exc.code else str(exc.message or "")
    else:
        text = str(exc)
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


# What `db.index.vector.queryNodes` says of an index that is not there (a bulk load suspended it, maybe in another
# process) or did not come online within the server's wait (still populating). Neo4j has no status code of its own
# for these: the message tells them apart from other procedure failures.
_VECTOR_INDEX_UNAVAILABLE: Final = ("There is no such vector schema index", "Expected index to come online")


def vector_index_unavailable(exc: BaseException | None) -> bool:
    """True when a vector index query failed because the index is missing or not online (not the query)."""
    return (
        isinstance(exc, ClientError)
        and exc.code == "Neo.ClientError.Procedure.ProcedureCallFailed"
        and any(text in (exc.message or "") for text in _VECTOR_INDEX_UNAVAILABLE)
    )
