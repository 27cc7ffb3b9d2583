"""What an intent detector concluded about a message."""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.routing import RouteMethod


@dataclass(frozen=True, slots=True)
class IntentGuess:
    kb_prefix: str  # "" when no KB fits (general chat)
    confidence: float
    method: RouteMethod
    reason: str
