"""The little the core needs from a language model, and a tolerant reader of its JSON answers.

The core cannot import the application's chat model port, so it declares the one method it uses,
`CompletionModel`; a chat model is one as it is (both speak the domain's `Message`), and the composition
root hands it over unwrapped. Model failures are expected to surface as `ModelError` (or `TimeoutError` when
the core's own time limit expires); callers fall back to their offline method on either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Protocol

from backend.domain.conversation import Message
from backend.domain.errors import ModelError

# What a caller treats as "the model did not help": fall back instead of failing the retrieval.
MODEL_FAILURES: tuple[type[Exception], ...] = (ModelError, TimeoutError)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


class CompletionModel(Protocol):
    async def complete(self, messages: Sequence[Message]) -> str:
        """The model's whole answer; raises `ModelError` on any failure."""
        ...


def parse_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model's answer (inside code fences or prose), or None."""
    for candidate in (*_FENCE.findall(text), text):
        found = _first_object(candidate)
        if found is not None:
            return found
    return None


def _first_object(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def string_list(value: Any, limit: int) -> list[str]:
    """A model's list of strings, tolerating one comma-separated string; stripped, deduplicated."""
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else []
    cleaned = [item.strip() for item in items if isinstance(item, str) and item.strip()]
    return list(dict.fromkeys(cleaned))[:limit]
