"""Follow-ups rewritten by the model, through the real client against the scripted OpenAI-compatible server."""

from __future__ import annotations

import pytest

from backend.application.chat.budgets import BudgetPolicy
from backend.application.chat.debug_middleware import DebugMiddleware
from backend.application.chat.inputs import ChatInput
from backend.application.chat.pipeline import EventPipeline
from backend.application.routing.policy import RoutingPolicy, RoutingSettings
from backend.domain.agent_types import KNOWN_AGENT_TYPES
from backend.domain.context import RequestContext
from backend.domain.conversation import Message, Role
from backend.domain.debug import DebugLevel
from backend.domain.events import ErrorEvent, ExecutionLogEvent, RoutedEvent, StreamEvent
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.routing import RequestedRoute, RouteDecision
from backend.infrastructure.knowledge_bases.catalog import static_catalog
from backend.infrastructure.llm.accounted_model import AccountedChatModel
from backend.infrastructure.llm.openai_compatible import OpenAICompatibleChatModel
from backend.infrastructure.routing.background import WordfreqRarity
from backend.infrastructure.routing.content import ContentRouter
from backend.infrastructure.routing.followups import OfflineFollowUps
from backend.infrastructure.routing.llm_classifier import LlmIntentClassifier
from backend.infrastructure.routing.model_followups import ModelFollowUps
from backend.infrastructure.routing.profiles import CachedKbProfiles
from backend.infrastructure.routing.router_graph import RouterGraph
from tests.support.fakes import FakeAgent, evidence
from tests.support.memory_graph import MemoryGraph
from tests.support.scripted_llm import Reply, ScriptedLLM
from tests.support.wiring import Wired, wire

KBS = [
    KnowledgeBase("orchard", "An apple orchard and cider mill", ("orchard", "cider")),
    KnowledgeBase("law", "Tenancy law for landlords and tenants", ("lease", "tenant", "deposit")),
]
HISTORY = (
    Message(Role.USER, "Tell me about Coulson Wallop."),
    Message(Role.ASSISTANT, "Coulson Wallop was an English politician. [1]"),
)
FOLLOW_UP = "Where did his father study?"
OFFLINE = "Where did Coulson Wallop's father study?"
REWRITTEN = "Where did the father of Coulson Wallop study?"


def router(model: OpenAICompatibleChatModel, timeout_s: float = 2.0) -> RouterGraph:
    rarity = WordfreqRarity()
    graph = MemoryGraph()
    policy = RoutingPolicy(RoutingSettings(), KNOWN_AGENT_TYPES)
    followups = ModelFollowUps(model, OfflineFollowUps(rarity), timeout_s)
    classifier = LlmIntentClassifier(model, CachedKbProfiles(graph))
    return RouterGraph(static_catalog(KBS), policy, ContentRouter(graph, rarity), followups, classifier, timeout_s)


def reply(text: str) -> Reply:
    return Reply(tokens=[text], content=text)


async def route(graph: RouterGraph, message: str) -> RouteDecision:
    return await graph.route(message=message, session_id="s", requested=RequestedRoute(None, None), history=HISTORY)


async def test_a_follow_up_that_refers_back_is_rewritten_by_one_model_call(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(reply(f"Standalone question: “{REWRITTEN}”"), reply('{"kb_prefix": "general"}'))
    decision = await route(router(model), FOLLOW_UP)
    assert (decision.query, decision.query_method, decision.query_note) == (REWRITTEN, "model", "")
    rewrite = scripted_llm.requests[0]["messages"]
    assert "user: Tell me about Coulson Wallop." in rewrite[1]["content"]
    assert "assistant: Coulson Wallop was an English politician." in rewrite[1]["content"]
    assert rewrite[1]["content"].endswith(f"The last message: {FOLLOW_UP}")
    rewrites = [r for r in scripted_llm.requests if "standalone question" in r["messages"][0]["content"]]
    assert len(rewrites) == 1  # then at most the routing call, on the rewritten question
    assert all(r["messages"][-1]["content"] == REWRITTEN for r in scripted_llm.requests[1:])


async def test_a_message_that_stands_alone_makes_no_rewrite_call(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    decision = await route(router(model), "Can my tenant break the lease early?")
    assert (decision.query_method, decision.method, decision.kb_prefix) == ("as_written", "heuristic", "law")
    assert scripted_llm.requests == []


async def test_general_chat_asked_for_makes_no_rewrite_call(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    general = RequestedRoute("general", None)
    decision = await router(model).route(message=FOLLOW_UP, session_id="s", requested=general, history=HISTORY)
    assert (decision.kb_prefix, decision.query, decision.query_method) == ("general", FOLLOW_UP, "as_written")
    assert scripted_llm.requests == []  # nothing is searched for, and the answer's model reads the history


@pytest.mark.parametrize(
    ("scripted", "note"),
    [
        (reply("He studied law at Oxford, like his son."), "not used: the reply is not a question"),
        (reply("Where did his father study?\nCoulson Wallop's father studied at Oxford."), "more than one line"),
        (reply("   "), "the reply is empty"),
        (reply("Where " + "did his father really " * 20 + "study?"), "the reply is longer than"),
        (Reply(status=500, error_message="overloaded"), "the model's rewrite failed (ModelError)"),
        (Reply(tokens=[REWRITTEN], stall_after=0, stall_s=5), "the model's rewrite timed out after 0.5s"),
    ],
)
async def test_a_rewrite_that_fails_leaves_the_offline_query_and_says_why(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM, scripted: Reply, note: str
) -> None:
    scripted_llm.script(scripted, reply('{"kb_prefix": "general"}'))
    decision = await route(router(model, timeout_s=0.5), FOLLOW_UP)
    assert (decision.query, decision.query_method) == (OFFLINE, "offline")
    assert note in decision.query_note


# -- through the turn: budget, debug log, stored message --------------------------------------------------------

FACTS = [evidence("chunk:1", "Hamish Dunmore kept bees before he ran the orchard.", 0.9, "People")]
FIRST = "Who is Hamish Dunmore at the orchard?"
SECOND = "What did he do before?"
SECOND_REWRITTEN = "What did Hamish Dunmore do before he worked at the orchard?"


def wired_with(model: OpenAICompatibleChatModel, max_model_calls: int) -> Wired:
    accounted = AccountedChatModel(model, secrets=["rewrite-key"])  # as the composition root wraps it
    return wire(
        FakeAgent(results=FACTS),
        accounted,
        pipeline=EventPipeline([DebugMiddleware()]),
        budgets=BudgetPolicy(max_model_calls=max_model_calls),
        router_model=accounted,
    )


async def turn(wired: Wired, request_id: str, message: str) -> list[StreamEvent]:
    context = RequestContext(request_id, "alice", "s1", DebugLevel.STANDARD)
    prepared = await wired.stream.prepare(context, ChatInput(session_id="s1", message=message))
    return [event async for event in wired.stream.events(prepared)]


async def stored_questions(wired: Wired) -> list[str]:
    conversation = await wired.store.find_conversation_id("alice", "s1")
    assert conversation is not None
    return [m.content for m in await wired.store.list_messages(conversation) if m.role is Role.USER]


async def test_the_rewrite_is_charged_to_the_budget_and_shown_in_debug_and_the_stored_message_is_as_written(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    wired = wired_with(model, max_model_calls=2)
    scripted_llm.script(reply("He keeps the orchard. [1]"), reply(SECOND_REWRITTEN), reply("He kept bees. [1]"))
    await turn(wired, "r1", FIRST)
    events = await turn(wired, "r2", SECOND)
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    routed = next(e for e in events if isinstance(e, RoutedEvent))
    assert (routed.decision.query, routed.decision.query_method) == (SECOND_REWRITTEN, "model")
    assert wired.agent.calls[-1][0] == SECOND_REWRITTEN  # retrieval searched for the rewrite
    logs = [e for e in events if isinstance(e, ExecutionLogEvent)]
    route_log = next(e for e in logs if e.node == "route")
    assert route_log.output["query_method"] == "model" and route_log.input["message"] == SECOND
    calls = [e for e in logs if e.node == "model_call"]
    assert len(calls) == 2 and calls[0].output["answer"] == SECOND_REWRITTEN  # the rewrite, then the answer
    assert next(e for e in logs if e.node == "timings").output["model_calls"] == 2
    assert await stored_questions(wired) == [FIRST, SECOND]


async def test_a_budget_the_rewrite_uses_up_leaves_no_call_for_the_answer(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    wired = wired_with(model, max_model_calls=1)
    scripted_llm.script(reply("He keeps the orchard. [1]"), reply(SECOND_REWRITTEN), reply("never sent"))
    assert not [e for e in await turn(wired, "r1", FIRST) if isinstance(e, ErrorEvent)]  # one call: the answer
    events = await turn(wired, "r2", SECOND)
    assert [e.code for e in events if isinstance(e, ErrorEvent)] == ["budget_exceeded"]
    assert len(scripted_llm.requests) == 2  # the first answer and the rewrite: the second answer was refused
    assert await stored_questions(wired) == [FIRST, SECOND]
