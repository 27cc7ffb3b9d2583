"""What a caller asks for, before validation, free of any web framework."""

from __future__ import annotations

import re
from dataclasses import dataclass

from backend.domain.conversation import Message

SESSION_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")


@dataclass(frozen=True, slots=True)
class ChatInput:
    session_id: str
    message: str
    kb_prefix: str | None = None
    agent_type: str | None = None
    # `{kb}:{agent}:retrieve_only`; when given it is authoritative over kb_prefix and agent_type,
    # and "" explicitly asks for general chat.
    worker_name: str | None = None
    # Several agents for one turn: run concurrently, their results fused (instead of agent_type).
    agent_types: tuple[str, ...] | None = None
    # Earlier turns (oldest first, user and assistant only) supplied by the caller. When given they are
    # what the model sees instead of the stored conversation: stateless callers (the OpenAI facade)
    # carry the conversation in each request. The turn itself is still stored as usual.
    history: tuple[Message, ...] | None = None
