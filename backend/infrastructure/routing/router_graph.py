"""RouterGraph: intent_detect → apply_override_policy → worker_select (SPEC §4).

The LangGraph adapter of routing: it makes a follow-up stand alone (the `FollowUps` port: offline, or one model
call), detects intent offline (the KBs' keywords and descriptions, and what their indexes hold: the
`IntentDetector` port), asks the model when the policy does not trust that guess, and applies the application's
`RoutePolicy` in the other two nodes. A `StateGraph` compiled once per router and kept stateless: routing is a
pure function of the message, its recent turns and the request, so nothing is persisted between calls. One run
routes a list of messages (usually one; under load, every message that arrived while the previous run was in
flight) and reads the catalog once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph

from backend.application.ports.knowledge_bases import KnowledgeBaseCatalog
from backend.application.ports.router import FollowUps, IntentDetector, RoutePolicy
from backend.domain.conversation import Message
from backend.domain.errors import UnknownKnowledgeBase
from backend.domain.knowledge_base import GENERAL_KB, KnowledgeBase
from backend.domain.routing import IntentGuess, RequestedRoute, RouteDecision, RouteMethod, StandaloneQuery
from backend.domain.worker import Worker
from backend.infrastructure.routing.batches import SharedRuns
from backend.infrastructure.routing.heuristic import detect_intent
from backend.infrastructure.routing.llm_classifier import LlmIntentClassifier, UnusableReply

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RouteRequest:
    """One message to route, with what the caller asked for (validated)."""

    message: str
    session_id: str
    requested: RequestedRoute
    history: tuple[Message, ...] = ()


class RouteState(TypedDict, total=False):
    """The messages one run routes, and each node's output: one entry per message, in the same order."""

    requests: list[RouteRequest]
    knowledge_bases: dict[str, KnowledgeBase]  # intent_detect: the catalog's KBs by prefix
    queries: list[StandaloneQuery]  # intent_detect: what routing and retrieval search for
    guesses: list[IntentGuess]  # intent_detect
    kb_prefixes: list[str]  # apply_override_policy
    workers: list[tuple[tuple[Worker, ...], str]]  # worker_select: each message's plan, and why those agents


class RouterGraph:
    """Implements `RouterPort`.

    Messages that cannot wait on a model call share graph runs (`SharedRuns`): a run's fixed cost is paid
    once for every message that arrived while the previous run was in flight. A message the model may
    classify or rewrite runs alone, so no other message waits for its model call.
    """

    def __init__(
        self,
        catalog: KnowledgeBaseCatalog,
        policy: RoutePolicy,
        content: IntentDetector,
        followups: FollowUps,
        classifier: LlmIntentClassifier | None = None,
        llm_timeout_s: float = 5.0,
    ) -> None:
        self._catalog = catalog
        self._policy = policy
        self._content = content
        self._followups = followups
        self._classifier = classifier
        self._llm_timeout_s = llm_timeout_s
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
        self, *, message: str, session_id: str, requested: RequestedRoute, history: Sequence[Message] = ()
    ) -> RouteDecision:
        request = RouteRequest(message, session_id, requested, tuple(history))
        if self._model_can_change_outcome(requested) or self._rewrites_with_model(request):
            return (await self._run([request]))[0]
        return await self.shared_runs.submit(request)

    async def _run(self, requests: Sequence[RouteRequest]) -> list[RouteDecision]:
        final: RouteState = await self._graph.ainvoke({"requests": list(requests)})
        return [
            RouteDecision(
                requested_kb_prefix=_requested_prefix(request.requested),
                routed_kb_prefix=guess.kb_prefix,
                kb_prefix=kb_prefix,
                confidence=guess.confidence,
                method=guess.method.value,
                reason=guess.reason,
                worker=workers[0] if workers else None,
                query=query.text,
                query_method=query.method.value,
                query_note=query.note,
                also=workers[1:],
                agent_reason=agent_reason,
            )
            for request, query, guess, kb_prefix, (workers, agent_reason) in zip(
                requests, final["queries"], final["guesses"], final["kb_prefixes"], final["workers"], strict=True
            )
        ]

    # -- nodes -------------------------------------------------------------------------------

    async def _intent_detect(self, state: RouteState) -> RouteState:
        requests = state["requests"]
        knowledge_bases = await self._catalog.list()
        queries = list(await asyncio.gather(*(self._standalone(request) for request in requests)))
        guesses = list(
            await asyncio.gather(
                *(self._offline_guess(r, q.text, knowledge_bases) for r, q in zip(requests, queries, strict=True))
            )
        )
        unsure = [
            index
            for index, (request, guess) in enumerate(zip(requests, guesses, strict=True))
            if not self._policy.trusts(guess) and self._model_can_change_outcome(request.requested)
        ]
        if unsure:
            asked = await asyncio.gather(
                *(self._classify_with_model(requests[i], queries[i].text, knowledge_bases, guesses[i]) for i in unsure)
            )
            for index, guess in zip(unsure, asked, strict=True):
                guesses[index] = guess
        known = {kb.kb_prefix: kb for kb in knowledge_bases}
        return {"queries": queries, "guesses": guesses, "knowledge_bases": known}

    async def _standalone(self, request: RouteRequest) -> StandaloneQuery:
        if self._searches_nothing(request.requested):
            return StandaloneQuery(request.message)
        return await self._followups.standalone(request.message, request.history)

    def _searches_nothing(self, requested: RequestedRoute) -> bool:
        """Whether the request decides general chat: nothing is searched for, so a follow-up needs no standalone
        query (the answer's model reads the history)."""
        return requested.kb is None and not self._policy.may_reroute(requested)

    def _rewrites_with_model(self, request: RouteRequest) -> bool:
        if self._searches_nothing(request.requested):
            return False
        return self._followups.asks_model(request.message, request.history)

    async def _offline_guess(
        self, request: RouteRequest, query: str, knowledge_bases: Sequence[KnowledgeBase]
    ) -> IntentGuess:
        """Keywords first (a KB's owner named them); what the KBs hold when no keyword settles it."""
        if not self._policy.may_reroute(request.requested):
            return IntentGuess("", 1.0, RouteMethod.REQUESTED, _why_requested(request.requested))
        by_keywords = detect_intent(query, knowledge_bases)
        if self._policy.trusts(by_keywords):
            return by_keywords
        by_content = await self._content.guess(query, knowledge_bases)
        return max(by_content, by_keywords, key=lambda guess: guess.confidence)

    def _model_can_change_outcome(self, requested: RequestedRoute) -> bool:
        return self._classifier is not None and self._policy.may_reroute(requested)

    async def _classify_with_model(
        self, request: RouteRequest, query: str, knowledge_bases: Sequence[KnowledgeBase], heuristic: IntentGuess
    ) -> IntentGuess:
        """The model's guess for the standalone query, the request's recent turns beside it; the offline guess,
        with what went wrong as its reason, when the model fails, is slow or replies with nothing usable."""
        assert self._classifier is not None
        try:
            async with asyncio.timeout(self._llm_timeout_s):
                return await self._classifier.classify(query, request.history, knowledge_bases)
        except TimeoutError:
            reason = f"model routing timed out after {self._llm_timeout_s:g}s"
            return IntentGuess(heuristic.kb_prefix, 0.0, RouteMethod.TIMEOUT, reason)
        except UnusableReply as error:
            logger.info("model routing reply not used: %s", error)
            reason = f"model reply not used ({error}); {heuristic.reason}"
            return IntentGuess(heuristic.kb_prefix, heuristic.confidence, RouteMethod.FALLBACK, reason)
        except Exception as error:  # the router must answer even when the model misbehaves
            logger.warning("model routing failed, using the heuristic: %s", error)
            reason = f"model routing failed ({type(error).__name__}); {heuristic.reason}"
            return IntentGuess(heuristic.kb_prefix, heuristic.confidence, RouteMethod.FALLBACK, reason)

    async def _apply_override_policy(self, state: RouteState) -> RouteState:
        pairs = zip(state["requests"], state["guesses"], strict=True)
        return {"kb_prefixes": [self._policy.decide_kb(request.requested, guess) for request, guess in pairs]}

    async def _worker_select(self, state: RouteState) -> RouteState:
        known = state["knowledge_bases"]
        workers = []
        for request, query, kb_prefix in zip(state["requests"], state["queries"], state["kb_prefixes"], strict=True):
            kb = None
            if kb_prefix != GENERAL_KB:
                asked = request.requested.kb
                kb = asked if asked is not None and asked.kb_prefix == kb_prefix else known.get(kb_prefix)
                if kb is None:  # removed from the catalog since the turn was validated
                    raise UnknownKnowledgeBase(f"unknown knowledge base {kb_prefix!r}")
            workers.append(self._policy.select_workers(request.requested, kb, query.text))
        return {"workers": workers}


def _why_requested(requested: RequestedRoute) -> str:
    if requested.general:
        return "the request asks for general chat"
    if requested.pinned and requested.kb is not None and requested.agent_type:
        return f"the request names the worker {requested.kb.kb_prefix}:{requested.agent_type}"
    if requested.kb is not None:
        return f"the request names {requested.kb.kb_prefix}"
    return "automatic routing is off"


def _requested_prefix(requested: RequestedRoute) -> str:
    """The requested KB's canonical prefix, `general`, or "" when none was asked for."""
    if requested.kb is not None:
        return requested.kb.kb_prefix
    return GENERAL_KB if requested.general else ""
