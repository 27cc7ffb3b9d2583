"""Recent turns as the routing prompts show them: a few, one line each, cut short."""

from __future__ import annotations

from collections.abc import Sequence

from backend.domain.conversation import Message


def one_line(text: str, limit: int) -> str:
    """`text` on one line (whitespace collapsed), cut to at most `limit` characters, marked with "…"."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)].rstrip() + "…"


def recent_turns(history: Sequence[Message], messages: int, chars: int) -> str:
    """The last `messages` turns of `history`, oldest first, as "user: …" / "assistant: …" lines."""
    shown = history[-messages:] if messages > 0 else ()
    return "\n".join(f"{turn.role.value}: {one_line(turn.content, chars)}" for turn in shown)
