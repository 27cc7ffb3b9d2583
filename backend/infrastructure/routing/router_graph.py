"""RouterGraph: intent_detect → apply_override_policy → worker_select (SPEC §4).

A LangGraph `StateGraph` compiled once per router and kept stateless: routing is a pure function
of the message and the request, so nothing is persisted between calls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from backend.application.ports.knowledge_bases import KnowledgeBaseCatalog
from backend.domain.agent_types import DEFAULT_AGENT_TYPE, is_known_agent_type
from backend.domain.errors import UnknownAgentType, UnknownKnowledgeBase
from backend.domain.knowledge_base import GENERAL_KB, KnowledgeBase
from backend.domain.routing import RouteDecision, RouteMethod
from backend.domain.worker_name import format_worker_name
from backend.infrastructure.routing.heuristic import CONFIDENT, detect_intent
from backend.infrastructure.routing.intent import IntentGuess
from backend.infrastructure.routing.llm_classifier import LlmIntentClassifier

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RoutingPolicy:
    auto_route: bool = True  # KB_AUTO_ROUTE
    allow_override: bool = False  # KB_AUTO_ROUTE_OVERRIDE
    min_confidence: float = 0.75  # KB_AUTO_ROUTE_MIN_CONFIDENCE (0 is legal)
    llm_timeout_s: float = 5.0


class RouteState(TypedDict, total=False):
    message: str
    session_id: str
    agent_type: str
    requested_kb_prefix: str
    routed_kb_prefix: str
    confidence: float
    method: str
    reason: str
    kb_prefix: str
    worker_name: str


class RouterGraph:
    """Implements `RouterPort`."""

    def __init__(
        self,
        catalog: KnowledgeBaseCatalog,
        policy: RoutingPolicy,
        classifier: LlmIntentClassifier | None = None,
    ) -> None:
        self._catalog = catalog
        self._policy = policy
        self._classifier = classifier
        self._graph = self._build()

    def _build(self) -> Any:
        graph = StateGraph(RouteState)
        graph.add_node("intent_detect", self._intent_detect)
        graph.add_node("apply_override_policy", self._apply_override_policy)
        graph.add_node("worker_select", self._worker_select)
        graph.add_edge(START, "intent_detect")
        graph.add_edge("intent_detect", "apply_override_policy")
        graph.add_edge("apply_override_policy", "worker_select")
        graph.add_edge("worker_select", END)
        return graph.compile()

    async def route(
        self, *, message: str, session_id: str, requested_kb: str | None, agent_type: str | None
    ) -> RouteDecision:
        requested = await self._canonical_requested_kb((requested_kb or "").strip())
        requested_agent = (agent_type or "").strip()
        if requested_agent and not is_known_agent_type(requested_agent):
            raise UnknownAgentType(f"unknown agent_type {requested_agent!r}")
        state: RouteState = {
            "message": message,
            "session_id": session_id,
            "agent_type": requested_agent,
            "requested_kb_prefix": requested,
        }
        final: RouteState = await self._graph.ainvoke(state)
        return RouteDecision(
            requested_kb_prefix=final.get("requested_kb_prefix", ""),
            routed_kb_prefix=final.get("routed_kb_prefix", ""),
            kb_prefix=final.get("kb_prefix", GENERAL_KB),
            confidence=float(final.get("confidence", 0.0)),
            method=final.get("method", RouteMethod.NONE.value),
            reason=final.get("reason", ""),
            worker_name=final.get("worker_name", ""),
        )

    async def _canonical_requested_kb(self, requested: str) -> str:
        if requested in ("", GENERAL_KB):
            return requested
        kb = await self._catalog.get(requested)
        if kb is None:
            raise UnknownKnowledgeBase(f"unknown knowledge base {requested!r}")
        return kb.kb_prefix

    # -- nodes -------------------------------------------------------------------------------

    async def _intent_detect(self, state: RouteState) -> RouteState:
        knowledge_bases = await self._catalog.list()
        guess = detect_intent(state["message"], knowledge_bases)
        if guess.confidence < CONFIDENT and self._model_can_change_outcome(state):
            guess = await self._classify_with_model(state["message"], knowledge_bases, guess)
        return {
            "routed_kb_prefix": guess.kb_prefix,
            "confidence": guess.confidence,
            "method": guess.method.value,
            "reason": guess.reason,
        }

    def _model_can_change_outcome(self, state: RouteState) -> bool:
        if self._classifier is None or not self._policy.auto_route:
            return False
        requested = state.get("requested_kb_prefix", "")
        if requested == GENERAL_KB:
            return False
        return not requested or self._policy.allow_override

    async def _classify_with_model(
        self, message: str, knowledge_bases: Sequence[KnowledgeBase], heuristic: IntentGuess
    ) -> IntentGuess:
        assert self._classifier is not None
        try:
            async with asyncio.timeout(self._policy.llm_timeout_s):
                return await self._classifier.classify(message, knowledge_bases)
        except TimeoutError:
            reason = f"model routing timed out after {self._policy.llm_timeout_s:g}s"
            return IntentGuess(heuristic.kb_prefix, 0.0, RouteMethod.TIMEOUT, reason)
        except Exception as error:  # the router must answer even when the model misbehaves
            logger.warning("model routing failed, using the heuristic: %s", error)
            reason = f"model routing failed ({type(error).__name__}); {heuristic.reason}"
            return IntentGuess(heuristic.kb_prefix, heuristic.confidence, RouteMethod.FALLBACK, reason)

    async def _apply_override_policy(self, state: RouteState) -> RouteState:
        return {"kb_prefix": self._decide_kb(state)}

    def _decide_kb(self, state: RouteState) -> str:
        requested = state.get("requested_kb_prefix", "")
        if requested == GENERAL_KB or not self._policy.auto_route:
            return requested or GENERAL_KB
        routed = state.get("routed_kb_prefix", "")
        routed_ok = bool(routed) and state.get("confidence", 0.0) >= self._policy.min_confidence
        if requested:
            return routed if (routed_ok and self._policy.allow_override) else requested
        return routed if routed_ok else GENERAL_KB

    async def _worker_select(self, state: RouteState) -> RouteState:
        kb_prefix = state.get("kb_prefix", GENERAL_KB)
        if kb_prefix == GENERAL_KB:
            return {"worker_name": ""}
        kb = await self._catalog.get(kb_prefix)
        agent_type = state.get("agent_type") or (kb.default_agent if kb else "") or DEFAULT_AGENT_TYPE
        return {"worker_name": format_worker_name(kb_prefix, agent_type)}
