"""Per-message routing: which KB and which agent serve it."""

from __future__ import annotations

from typing import Protocol

from backend.domain.routing import RouteDecision


class RouterPort(Protocol):
    async def route(
        self, *, message: str, session_id: str, requested_kb: str | None, agent_type: str | None
    ) -> RouteDecision: ...
