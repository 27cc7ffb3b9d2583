"""The small rules all conversation-store adapters share, so that they behave identically
(the contract suite checks that they do). It imports no driver."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from backend.domain.conversation import Citation
from backend.domain.errors import InvalidRequest, NotFound

__all__ = [
    "PageRequest",
    "check_limit",
    "citations_from_json",
    "citations_to_json",
    "dump_json",
    "page_request",
    "parse_id",
    "plain_json",
]

_MAX_ECHO = 64  # never echo an arbitrarily long caller value back in an error message


def parse_id(value: str, what: str) -> uuid.UUID:
    """A caller-supplied id as a UUID; anything malformed cannot exist, so it is `NotFound`, not a 500."""
    try:
        return uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        raise NotFound(f"{what} {value!r:.{_MAX_ECHO}} not found") from None


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise InvalidRequest(f"limit must be zero or positive, got {limit}")


@dataclass(frozen=True, slots=True)
class PageRequest:
    """The validated arguments of `list_messages`."""

    conversation: uuid.UUID
    limit: int | None
    before: uuid.UUID | None


def page_request(conversation_id: str, limit: int | None, before: str | None) -> PageRequest:
    check_limit(limit)
    cursor = None if before is None else parse_id(before, "message")
    return PageRequest(parse_id(conversation_id, "conversation"), limit, cursor)


def citations_to_json(citations: Iterable[Citation]) -> list[dict[str, str]]:
    return [citation.to_dict() for citation in citations]


def citations_from_json(raw: Iterable[Mapping[str, Any]] | None) -> tuple[Citation, ...]:
    return tuple(Citation.from_dict(dict(item)) for item in raw or ())


def dump_json(value: Any) -> str:
    """JSON text for a jsonb/text column; odd values in debug data (datetimes, ...) become strings."""
    return json.dumps(value, ensure_ascii=False, default=str)


def plain_json(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a durable store gives back for `value`, so the memory store returns the same shapes."""
    return None if value is None else dict(json.loads(dump_json(value)))
