"""RouterGraph: intent_detect → apply_override_policy → worker_select (SPEC §4).

A LangGraph `StateGraph` compiled once per router and kept stateless: routing is a pure function
of the message and the request, so nothing is persisted between calls. One run routes a list of
messages (usually one; under load, every message that arrived while the previous run was in flight).
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
from backend.infrastructure.routing.batches import SharedRuns
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


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """One message to route, its requested KB already canonical."""

    message: str
    session_id: str
    agent_type: str  # "" when none was requested
    requested_kb_prefix: str  # "" when none was requested


class RouteState(TypedDict, total=False):
    """The messages one run routes, and each node's output: one entry per message, in the same order."""

    requests: list[RouteRequest]
    guesses: list[IntentGuess]  # intent_detect
    kb_prefixes: list[str]  # apply_override_policy
    worker_names: list[str]  # worker_select


class RouterGraph:
    """Implements `RouterPort`.

    Messages that cannot wait on a model call share graph runs (`SharedRuns`): a run's fixed cost is paid
    once for every message that arrived while the previous run was in flight. A message the model may
    classify runs alone, so no other message waits for its model call.
    """

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
        self.shared_runs: SharedRuns[RouteRequest, RouteDecision] = SharedRuns(self._run)

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
        request = RouteRequest(message, session_id, requested_agent, requested)
        if self._model_can_change_outcome(requested):
            return (await self._run([request]))[0]
        return await self.shared_runs.submit(request)

    async def _run(self, requests: Sequence[RouteRequest]) -> list[RouteDecision]:
        final: RouteState = await self._graph.ainvoke({"requests": list(requests)})
        return [
            RouteDecision(
                requested_kb_prefix=request.requested_kb_prefix,
                routed_kb_prefix=guess.kb_prefix,
                kb_prefix=kb_prefix,
                confidence=guess.confidence,
                method=guess.method.value,
                reason=guess.reason,
                worker_name=worker_name,
            )
            for request, guess, kb_prefix, worker_name in zip(
                requests, final["guesses"], final["kb_prefixes"], final["worker_names"], strict=True
            )
        ]

    async def _canonical_requested_kb(self, requested: str) -> str:
        if requested in ("", GENERAL_KB):
            return requested
        kb = await self._catalog.get(requested)
        if kb is None:
            raise UnknownKnowledgeBase(f"unknown knowledge base {requested!r}")
        return kb.kb_prefix

    # -- nodes -------------------------------------------------------------------------------

    async def _intent_detect(self, state: RouteState) -> RouteState:
        requests = state["requests"]
        knowledge_bases = await self._catalog.list()
        guesses = [detect_intent(request.message, knowledge_bases) for request in requests]
        unsure = [
            index
            for index, (request, guess) in enumerate(zip(requests, guesses, strict=True))
            if guess.confidence < CONFIDENT and self._model_can_change_outcome(request.requested_kb_prefix)
        ]
        if unsure:
            asked = await asyncio.gather(
                *(self._classify_with_model(requests[i].message, knowledge_bases, guesses[i]) for i in unsure)
            )
            for index, guess in zip(unsure, asked, strict=True):
                guesses[index] = guess
        return {"guesses": guesses}

    def _model_can_change_outcome(self, requested_kb_prefix: str) -> bool:
        if self._classifier is None or not self._policy.auto_route:
            return False
        if requested_kb_prefix == GENERAL_KB:
            return False
        return not requested_kb_prefix or self._policy.allow_override

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
        pairs = zip(state["requests"], state["guesses"], strict=True)
        return {"kb_prefixes": [self._decide_kb(request, guess) for request, guess in pairs]}

    def _decide_kb(self, request: RouteRequest, guess: IntentGuess) -> str:
        requested = request.requested_kb_prefix
        if requested == GENERAL_KB or not self._policy.auto_route:
            return requested or GENERAL_KB
        routed_ok = bool(guess.kb_prefix) and guess.confidence >= self._policy.min_confidence
        if requested:
            return guess.kb_prefix if (routed_ok and self._policy.allow_override) else requested
        return guess.kb_prefix if routed_ok else GENERAL_KB

    async def _worker_select(self, state: RouteState) -> RouteState:
        kb_prefixes = state["kb_prefixes"]
        # Each KB looked up once per run, however many of its messages the run routes.
        knowledge_bases = {
            kb_prefix: await self._catalog.get(kb_prefix)
            for kb_prefix in dict.fromkeys(kb_prefixes)
            if kb_prefix != GENERAL_KB
        }
        names = []
        for request, kb_prefix in zip(state["requests"], kb_prefixes, strict=True):
            if kb_prefix == GENERAL_KB:
                names.append("")
                continue
            kb = knowledge_bases[kb_prefix]
            agent_type = request.agent_type or (kb.default_agent if kb else "") or DEFAULT_AGENT_TYPE
            names.append(format_worker_name(kb_prefix, agent_type))
        return {"worker_names": names}
