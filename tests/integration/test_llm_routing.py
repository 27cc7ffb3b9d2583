"""LLM routing through the real model client against the scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from backend.application.routing.policy import RoutingPolicy, RoutingSettings
from backend.domain.agent_types import KNOWN_AGENT_TYPES
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.routing import RequestedRoute
from backend.infrastructure.knowledge_bases.catalog import static_catalog
from backend.infrastructure.llm.openai_compatible import OpenAICompatibleChatModel
from backend.infrastructure.routing.background import WordfreqRarity
from backend.infrastructure.routing.content import ContentRouter
from backend.infrastructure.routing.followups import OfflineFollowUps
from backend.infrastructure.routing.llm_classifier import LlmIntentClassifier
from backend.infrastructure.routing.router_graph import RouterGraph
from tests.support.memory_graph import MemoryGraph
from tests.support.scripted_llm import Reply, ScriptedLLM

KBS = [
    KnowledgeBase("orchard", "An apple orchard and cider mill", ("orchard", "cider")),
    KnowledgeBase("law", "Tenancy law for landlords and tenants", ("lease", "tenant", "deposit")),
]
UNCLEAR = "My landlord kept the money I paid when I moved in. Is that allowed?"


@pytest.fixture
async def model(scripted_llm: ScriptedLLM) -> AsyncIterator[OpenAICompatibleChatModel]:
    client = OpenAICompatibleChatModel(
        base_url=scripted_llm.base_url, api_key="routing-key", model="scripted-model", max_retries=0, timeout_s=5
    )
    yield client
    await client.aclose()


def router(model: OpenAICompatibleChatModel, timeout_s: float = 2.0) -> RouterGraph:
    policy = RoutingPolicy(RoutingSettings(), KNOWN_AGENT_TYPES)
    content = ContentRouter(MemoryGraph(), WordfreqRarity())
    followups = OfflineFollowUps(WordfreqRarity())
    return RouterGraph(static_catalog(KBS), policy, content, followups, LlmIntentClassifier(model), timeout_s)


def json_reply(payload: str) -> Reply:
    return Reply(tokens=[payload], content=payload)


async def test_the_model_routes_a_message_the_heuristic_cannot_place(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(json_reply('{"kb_prefix": "law", "confidence": 0.86, "reason": "deposit dispute"}'))
    decision = await router(model).route(message=UNCLEAR, session_id="s", requested=RequestedRoute(None, None))
    assert (decision.method, decision.kb_prefix, decision.confidence) == ("llm", "law", 0.86)
    assert decision.reason == "deposit dispute"
    assert decision.worker_name == "law:hybrid_agent:retrieve_only"
    (request,) = scripted_llm.requests
    system_prompt = request["messages"][0]["content"]
    assert "- law: Tenancy law" in system_prompt and "orchard" in system_prompt
    assert request["messages"][1] == {"role": "user", "content": UNCLEAR}
    assert request.get("stream") in (None, False)


async def test_a_confident_heuristic_never_calls_the_model(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    decision = await router(model).route(
        message="Can my tenant break the lease?", session_id="s", requested=RequestedRoute(None, None)
    )
    assert (decision.method, decision.kb_prefix) == ("heuristic", "law")
    assert scripted_llm.requests == []


async def test_model_http_error_falls_back_to_the_heuristic(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(status=500, error_message="overloaded"))
    decision = await router(model).route(message=UNCLEAR, session_id="s", requested=RequestedRoute(None, None))
    assert decision.method == "fallback"
    assert "ModelError" in decision.reason
    assert decision.worker_name == ""  # nothing matched, so general chat


async def test_a_stalled_model_times_out_and_routing_never_blocks_the_loop(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(tokens=['{"kb_prefix": "law", "confidence": 0.9}'], stall_after=0, stall_s=5))
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    background = asyncio.create_task(ticker())
    started = asyncio.get_running_loop().time()
    decision = await router(model, timeout_s=0.5).route(
        message=UNCLEAR, session_id="s", requested=RequestedRoute(None, None)
    )
    elapsed = asyncio.get_running_loop().time() - started
    background.cancel()
    assert (decision.method, decision.confidence) == ("timeout", 0.0)
    assert 0.45 < elapsed < 2.0
    assert ticks >= 20  # the loop kept running other work while the router waited


@pytest.mark.parametrize(
    ("reply", "method"),
    [("I think it is about law.", "fallback"), ('{"kb_prefix": "weather", "confidence": 1}', "fallback")],
)
async def test_unusable_model_replies_fall_back(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM, reply: str, method: str
) -> None:
    scripted_llm.script(json_reply(reply))
    decision: Any = await router(model).route(message=UNCLEAR, session_id="s", requested=RequestedRoute(None, None))
    assert decision.method == method
