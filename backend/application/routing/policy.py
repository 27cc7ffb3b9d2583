"""The routing policy (SPEC §4): when the router may choose the KB, which KB a turn goes to, which worker serves it.

Pure decisions over the request, the intent detector's guess and the settings. `RouterGraph`, the LangGraph
adapter in `infrastructure/routing/`, runs them as its `apply_override_policy` and `worker_select` nodes.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from backend.domain.agent_choice import choose_agent
from backend.domain.agent_types import require_available
from backend.domain.knowledge_base import GENERAL_KB, KnowledgeBase
from backend.domain.routing import IntentGuess, RequestedRoute
from backend.domain.worker import Worker


@dataclass(frozen=True, slots=True)
class RoutingSettings:
    auto_route: bool = True  # KB_AUTO_ROUTE
    allow_override: bool = False  # KB_AUTO_ROUTE_OVERRIDE
    min_confidence: float = 0.75  # KB_AUTO_ROUTE_MIN_CONFIDENCE (0 is legal)


class RoutingPolicy:
    """Implements the `RoutePolicy` port."""

    def __init__(self, settings: RoutingSettings, available_agent_types: Collection[str]) -> None:
        self._settings = settings
        self._available = frozenset(available_agent_types)

    def may_reroute(self, requested: RequestedRoute) -> bool:
        """Whether a guess can change where the turn goes (else the request decides it)."""
        if not self._settings.auto_route or requested.general or requested.pinned:
            return False
        return requested.kb is None or self._settings.allow_override

    def trusts(self, guess: IntentGuess) -> bool:
        return bool(guess.kb_prefix) and guess.confidence >= self._settings.min_confidence

    def decide_kb(self, requested: RequestedRoute, guess: IntentGuess) -> str:
        """The prefix of the KB that serves the turn, or `GENERAL_KB`."""
        asked = requested.kb.kb_prefix if requested.kb is not None else ""
        if not self.may_reroute(requested):
            return GENERAL_KB if requested.general or not asked else asked
        if self.trusts(guess):
            return guess.kb_prefix
        return asked or GENERAL_KB

    def select_workers(
        self, requested: RequestedRoute, kb: KnowledgeBase | None, question: str
    ) -> tuple[tuple[Worker, ...], str]:
        """The workers for the chosen KB (none for general chat): the requested agent types, else the agent for
        the question's shape (`agent_choice.py`), and why."""
        if kb is None:
            return (), ""
        if requested.agent_types or requested.agent_type:
            agent_types, why = requested.agent_types or (str(requested.agent_type),), "the request names it"
        else:
            choice = choose_agent(question, kb, self._available)
            agent_types, why = (choice.agent_type,), f"{choice.shape.value}: {choice.reason}"
        for agent_type in agent_types:
            require_available(agent_type, self._available)
        return tuple(Worker(kb, agent_type) for agent_type in agent_types), why
