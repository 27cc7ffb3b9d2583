"""What a request asks of the router: a worker_name is authoritative, and a plan of several agents fans out."""

from __future__ import annotations

import pytest

from backend.application.chat.inputs import ChatInput
from backend.application.chat.turns import TurnLimits, TurnService, plan_for
from backend.application.routing.policy import RoutingPolicy, RoutingSettings
from backend.domain.agent_types import KNOWN_AGENT_TYPES
from backend.domain.errors import InvalidRequest, UnknownAgentType
from backend.domain.knowledge_base import KnowledgeBase
from backend.infrastructure.knowledge_bases.catalog import static_catalog
from backend.infrastructure.persistence.memory.conversation_store import InMemoryConversationStore
from backend.infrastructure.routing.background import WordfreqRarity
from backend.infrastructure.routing.content import ContentRouter
from backend.infrastructure.routing.followups import OfflineFollowUps
from backend.infrastructure.routing.router_graph import RouterGraph
from backend.server.models.requests import ChatRequest
from tests.support.memory_graph import MemoryGraph

KBS = [
    KnowledgeBase("edu", "University courses and exams", ("course", "exam")),
    KnowledgeBase("movie", "Films, actors and directors", ("film", "movie", "director", "actor")),
]
ASKED_ELSEWHERE = "which film director won the movie award"  # the keywords point at movie


def turns() -> TurnService:
    return TurnService(InMemoryConversationStore(), static_catalog(KBS), KNOWN_AGENT_TYPES, TurnLimits())


def router(allow_override: bool = True) -> RouterGraph:
    policy = RoutingPolicy(RoutingSettings(allow_override=allow_override), KNOWN_AGENT_TYPES)
    rarity = WordfreqRarity()
    return RouterGraph(static_catalog(KBS), policy, ContentRouter(MemoryGraph(), rarity), OfflineFollowUps(rarity))


async def test_a_worker_name_is_authoritative_even_when_the_policy_may_override() -> None:
    by_prefix = await turns().validate(ChatInput("s", ASKED_ELSEWHERE, kb_prefix="edu"))
    by_worker = await turns().validate(ChatInput("s", ASKED_ELSEWHERE, worker_name="edu:naive_rag_agent:retrieve_only"))
    overridden = await router().route(message=ASKED_ELSEWHERE, session_id="s", requested=by_prefix)
    pinned = await router().route(message=ASKED_ELSEWHERE, session_id="s", requested=by_worker)
    assert overridden.kb_prefix == "movie"  # KB_AUTO_ROUTE_OVERRIDE lets a confident route replace a kb_prefix
    assert pinned.worker_name == "edu:naive_rag_agent:retrieve_only"
    assert (pinned.method, pinned.reason) == ("requested", "the request names the worker edu:naive_rag_agent")


async def test_a_plan_of_several_agents_becomes_one_retrieval_each() -> None:
    asked = await turns().validate(
        ChatInput("s", "when is the exam?", kb_prefix="edu", agent_types=("graph_agent", "naive_rag_agent"))
    )
    decision = await router(allow_override=False).route(message="when is the exam?", session_id="s", requested=asked)
    assert [w.name for w in decision.workers] == ["edu:graph_agent:retrieve_only", "edu:naive_rag_agent:retrieve_only"]
    assert decision.worker_name == "edu:graph_agent:retrieve_only"
    assert decision.to_dict()["worker_names"] == [w.name for w in decision.workers]
    assert [spec.worker.agent_type for spec in plan_for(decision)] == ["graph_agent", "naive_rag_agent"]


@pytest.mark.parametrize(
    ("chat_input", "error"),
    [
        (ChatInput("s", "q", agent_type="graph_agent", agent_types=("naive_rag_agent",)), InvalidRequest),
        (ChatInput("s", "q", agent_types=("graph_agent", "no_such_agent")), UnknownAgentType),
        (ChatInput("s", "q", agent_types=tuple(f"a{n}" for n in range(6))), InvalidRequest),
    ],
)
async def test_a_plan_is_validated_before_anything_runs(chat_input: ChatInput, error: type[Exception]) -> None:
    with pytest.raises(error):
        await turns().validate(chat_input)


def test_the_api_body_carries_the_plan() -> None:
    body = ChatRequest(session_id="s", message="q", kb_prefix="edu", agent_types=["graph_agent", "naive_rag_agent"])
    assert body.to_input().agent_types == ("graph_agent", "naive_rag_agent")
    assert ChatRequest(session_id="s", message="q").to_input().agent_types is None
