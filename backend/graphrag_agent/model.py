"""The little the core needs from a language model, and a tolerant reader of its JSON answers.

The core cannot import the infrastructure's chat model; the composition root adapts it to
`CompletionModel`. Model failures are expected to surface as `ModelError` (or `TimeoutError` when
the core's own time limit expires); callers fall back to their offline method on either.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from backend.domain.errors import ModelError

# What a caller treats as "the model did not help": fall back instead of failing the retrieval.
MODEL_FAILURES: tuple[type[Exception], ...] = (ModelError, TimeoutError)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class PromptMessage:
    """One message to the model; `role` is "system", "user" or "assistant"."""

    role: str
    content: str


class CompletionModel(Protocol):
    async def complete(self, messages: Sequence[PromptMessage]) -> str:
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
