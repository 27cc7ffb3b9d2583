"""Per-message routing: which KB and which agent serve it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from backend.domain.conversation import Message
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.routing import IntentGuess, KbProfile, RequestedRoute, RouteDecision, StandaloneQuery
from backend.domain.worker import Worker


class RouterPort(Protocol):
    async def route(
        self, *, message: str, session_id: str, requested: RequestedRoute, history: Sequence[Message] = ()
    ) -> RouteDecision:
        """Where the message goes; `history` (oldest first) lets a follow-up that refers back stand alone."""
        ...


class FollowUps(Protocol):
    """Makes a follow-up that refers back to earlier turns ("that person", "它") a query that stands alone."""

    def asks_model(self, message: str, history: Sequence[Message]) -> bool:
        """Whether `standalone` would call a model for this message (the router then runs it alone, so no other
        message waits for the call)."""
        ...

    async def standalone(self, message: str, history: Sequence[Message]) -> StandaloneQuery: ...


class IntentDetector(Protocol):
    """Guesses which KB a message belongs to, offline (`infrastructure/routing/content.py`)."""

    async def guess(self, message: str, knowledge_bases: Sequence[KnowledgeBase]) -> IntentGuess: ...


class KbProfiles(Protocol):
    """What each KB holds, for the model router's catalog (`infrastructure/routing/profiles.py`)."""

    async def profiles(self, knowledge_bases: Sequence[KnowledgeBase]) -> list[KbProfile]:
        """One per KB, in order; a KB whose overview cannot be read now has its record alone, or an older one."""
        ...


class RoutePolicy(Protocol):
    """The decisions the router applies after intent detection (`application/routing/policy.py`)."""

    def may_reroute(self, requested: RequestedRoute) -> bool:
        """Whether a guess can change where the turn goes (else the request decides it)."""
        ...

    def trusts(self, guess: IntentGuess) -> bool:
        """Whether a guess is confident enough to route by (else a model is asked, when there is one)."""
        ...

    def decide_kb(self, requested: RequestedRoute, guess: IntentGuess) -> str:
        """The prefix of the KB that serves the turn, or `GENERAL_KB`."""
        ...

    def select_workers(
        self, requested: RequestedRoute, kb: KnowledgeBase | None, question: str
    ) -> tuple[tuple[Worker, ...], str]:
        """The plan's workers for the chosen KB (none for general chat) and why those agents. Raises the 4xx-type
        error of an unavailable agent."""
        ...
