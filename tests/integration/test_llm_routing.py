"""LLM routing through the real model client against the scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from backend.application.routing.policy import RoutingPolicy, RoutingSettings
from backend.domain.agent_types import KNOWN_AGENT_TYPES
from backend.domain.conversation import Message, Role
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.routing import RequestedRoute
from backend.infrastructure.knowledge_bases.catalog import static_catalog
from backend.infrastructure.llm.openai_compatible import OpenAICompatibleChatModel
from backend.infrastructure.routing.background import WordfreqRarity
from backend.infrastructure.routing.content import ContentRouter
from backend.infrastructure.routing.followups import OfflineFollowUps
from backend.infrastructure.routing.llm_classifier import LlmIntentClassifier
from backend.infrastructure.routing.profiles import CachedKbProfiles
from backend.infrastructure.routing.router_graph import RouterGraph
from tests.support.memory_graph import MemoryGraph, Passage, TermEmbedder, memory_graph
from tests.support.scripted_llm import Reply, ScriptedLLM

KBS = [
    KnowledgeBase("orchard", "An apple orchard and cider mill", ("orchard", "cider")),
    KnowledgeBase("law", "Tenancy law for landlords and tenants", ("lease", "tenant", "deposit")),
]
UNCLEAR = "My landlord kept the money I paid when I moved in. Is that allowed?"


def router(
    model: OpenAICompatibleChatModel,
    timeout_s: float = 2.0,
    graph: MemoryGraph | None = None,
    kbs: Sequence[KnowledgeBase] = KBS,
) -> RouterGraph:
    graph = graph or MemoryGraph()
    policy = RoutingPolicy(RoutingSettings(), KNOWN_AGENT_TYPES)
    content = ContentRouter(graph, WordfreqRarity())
    followups = OfflineFollowUps(WordfreqRarity())
    classifier = LlmIntentClassifier(model, CachedKbProfiles(graph))
    return RouterGraph(static_catalog(kbs), policy, content, followups, classifier, timeout_s)


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
    ("reply", "why"),
    [
        ("I think it is about law.", "no JSON object"),
        ('{"kb_prefix": "weather", "confidence": 1}', "names 'weather', not one of the knowledge bases offered"),
        # A KB this deployment has, but not in the catalog the request was routed over.
        ('{"kb_prefix": "tax", "confidence": 0.9}', "names 'tax', not one of the knowledge bases offered"),
        ('{"kb_prefix": "law", "confidence": "very"}', "confidence is not a number"),
    ],
)
async def test_unusable_model_replies_fall_back_to_the_offline_guess_and_say_why(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM, reply: str, why: str
) -> None:
    scripted_llm.script(json_reply(reply))
    decision: Any = await router(model).route(message=UNCLEAR, session_id="s", requested=RequestedRoute(None, None))
    assert (decision.method, decision.kb_prefix, decision.worker_name) == ("fallback", "general", "")
    assert decision.reason.startswith("model reply not used (") and why in decision.reason


LAW_PASSAGES = [
    Passage(
        "Tenancy Deposit Protection",
        "Under the Housing Act 2004 a landlord must protect a deposit with the Deposit Protection Service.",
        ("Housing Act 2004", "Deposit Protection Service"),
    ),
    Passage("Section 21 notices", "A Section 21 notice ends an assured shorthold tenancy.", ("Section 21",)),
]


async def test_the_model_sees_what_each_kb_holds_beside_all_its_keywords(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    graph = await memory_graph("law", LAW_PASSAGES, TermEmbedder())
    many = tuple(f"topic{n}" for n in range(30))
    kbs = [KBS[0], KnowledgeBase("law", "Tenancy law for landlords and tenants", ("lease", *many))]
    scripted_llm.script(json_reply('{"kb_prefix": "law", "confidence": 0.8, "reason": "deposit"}'))
    decision = await router(model, graph=graph, kbs=kbs).route(
        message=UNCLEAR, session_id="s", requested=RequestedRoute(None, None)
    )
    assert decision.method == "llm"
    system_prompt = scripted_llm.requests[0]["messages"][0]["content"]
    assert "- law: Tenancy law for landlords and tenants (2 documents)" in system_prompt
    assert "Housing Act 2004" in system_prompt and "Deposit Protection Service" in system_prompt
    assert "Tenancy Deposit Protection" in system_prompt and "Section 21 notices" in system_prompt
    assert "topic20" in system_prompt  # past the first twelve keywords: the character budget decides
    assert "- orchard: An apple orchard and cider mill\n" in system_prompt  # a KB that holds nothing yet


async def test_the_model_sees_the_recent_turns_to_place_a_follow_up(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    history = (
        Message(Role.USER, "Can my landlord keep the deposit?"),
        Message(Role.ASSISTANT, "Only for damage or unpaid rent, " + "and he must say why. " * 30),
    )
    scripted_llm.script(json_reply('{"kb_prefix": "law", "confidence": 0.9, "reason": "same dispute"}'))
    decision = await router(model).route(
        message="And what about the money I paid when I moved in?",
        session_id="s",
        requested=RequestedRoute(None, None),
        history=history,
    )
    assert (decision.method, decision.kb_prefix) == ("llm", "law")
    system_prompt = scripted_llm.requests[0]["messages"][0]["content"]
    assert "user: Can my landlord keep the deposit?" in system_prompt
    answer = next(line for line in system_prompt.splitlines() if line.startswith("assistant: "))
    assert answer.startswith("assistant: Only for damage or unpaid rent") and len(answer) <= 220  # cut short
