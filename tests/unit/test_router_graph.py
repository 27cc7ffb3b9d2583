"""RouterGraph: heuristic routing, the override policy and the general path (SPEC §4)."""

import asyncio
from collections.abc import Sequence

import pytest

from backend.application.ports.chat_model import ModelDelta
from backend.application.routing.policy import RoutingPolicy, RoutingSettings
from backend.domain.agent_types import KNOWN_AGENT_TYPES
from backend.domain.conversation import Message, Role
from backend.domain.errors import AgentUnavailable
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.routing import RequestedRoute
from backend.infrastructure.knowledge_bases.catalog import static_catalog
from backend.infrastructure.routing.background import WordfreqRarity
from backend.infrastructure.routing.content import ContentRouter
from backend.infrastructure.routing.followups import OfflineFollowUps
from backend.infrastructure.routing.llm_classifier import LlmIntentClassifier, parse_routing_reply
from backend.infrastructure.routing.model_followups import ModelFollowUps
from backend.infrastructure.routing.profiles import CachedKbProfiles
from backend.infrastructure.routing.router_graph import RouterGraph
from tests.support.memory_graph import MemoryGraph

KBS = [
    KnowledgeBase(
        "edu",
        "University courses, enrolment and exams",
        ("course", "exam", "enrolment", "tuition"),
        default_agent="naive_rag_agent",
    ),
    KnowledgeBase("movie", "Films, actors and directors", ("film", "movie", "director", "actor")),
]


def router(
    settings: RoutingSettings | None = None,
    classifier: LlmIntentClassifier | None = None,
    llm_timeout_s: float = 5.0,
    available: frozenset[str] = KNOWN_AGENT_TYPES,
) -> RouterGraph:
    policy = RoutingPolicy(settings or RoutingSettings(), available)
    return RouterGraph(
        static_catalog(KBS),
        policy,
        ContentRouter(MemoryGraph(), WordfreqRarity()),
        OfflineFollowUps(WordfreqRarity()),
        classifier,
        llm_timeout_s,
    )


def classifier_of(model: "ScriptedModel") -> LlmIntentClassifier:
    return LlmIntentClassifier(model, CachedKbProfiles(MemoryGraph()))


def asked(kb_prefix: str | None, agent_type: str | None) -> RequestedRoute:
    """What the turn's validation hands the router: the requested KB resolved."""
    kb = next((kb for kb in KBS if kb.kb_prefix == kb_prefix), None)
    return RequestedRoute(kb_prefix, agent_type, kb)


class ScriptedModel:
    """A ChatModel double for routing only (the real client path is tested with the HTTP server)."""

    def __init__(self, reply: str = "", fail: Exception | None = None, delay_s: float = 0.0) -> None:
        self.reply, self.fail, self.delay_s, self.calls = reply, fail, delay_s, 0

    @property
    def model_name(self) -> str:
        return "scripted"

    async def complete(self, messages: Sequence[Message]) -> str:
        import asyncio

        self.calls += 1
        await asyncio.sleep(self.delay_s)
        if self.fail:
            raise self.fail
        return self.reply

    async def stream(self, messages: Sequence[Message]):  # type: ignore[no-untyped-def]
        yield ModelDelta(content=self.reply)

    async def aclose(self) -> None:
        return None


async def test_keyword_match_routes_to_the_kb_with_its_default_agent() -> None:
    decision = await router().route(
        message="When is the exam for this course?", session_id="s", requested=asked(None, None)
    )
    assert decision.kb_prefix == "edu"
    assert decision.routed_kb_prefix == "edu"
    assert decision.method == "heuristic"
    assert decision.confidence >= 0.75
    assert decision.worker_name == "edu:naive_rag_agent:retrieve_only"
    assert "exam" in decision.reason


async def test_requested_agent_type_is_used_else_the_question_chooses() -> None:
    chosen = await router().route(
        message="which director made it", session_id="s", requested=asked("movie", "graph_agent")
    )
    assert (chosen.worker_name, chosen.agent_reason) == ("movie:graph_agent:retrieve_only", "the request names it")
    by_shape = {
        "which director made it": "naive_rag_agent",  # a look-up
        "Where was the director of film Blood Street born?": "graph_agent",  # a relation of a named thing
        "an overview of the films, please": "hybrid_agent",  # no shape: the KB's default
    }
    for message, agent in by_shape.items():
        decision = await router().route(message=message, session_id="s", requested=asked("movie", None))
        assert decision.worker is not None and decision.worker.agent_type == agent, (message, decision)
        assert decision.agent_reason, decision


async def test_no_match_and_no_request_is_general_chat() -> None:
    decision = await router().route(message="hello there, how are you?", session_id="s", requested=asked(None, None))
    assert decision.kb_prefix == "general"
    assert decision.worker_name == ""
    assert decision.is_general


async def test_explicit_general_request_is_general() -> None:
    decision = await router().route(message="exam course tuition", session_id="s", requested=asked("general", None))
    assert decision.worker_name == ""


async def test_auto_route_off_keeps_the_requested_kb_or_general() -> None:
    off = RoutingSettings(auto_route=False)
    kept = await router(off).route(message="which film won", session_id="s", requested=asked("edu", None))
    assert kept.kb_prefix == "edu"
    # The request decided: no guess is made or reported as the reason.
    assert (kept.routed_kb_prefix, kept.method, kept.reason) == ("", "requested", "the request names edu")
    general = await router(off).route(message="which film won", session_id="s", requested=asked(None, None))
    assert general.kb_prefix == "general"
    assert general.worker_name == ""
    assert (general.method, general.reason) == ("requested", "automatic routing is off")


async def test_routed_kb_replaces_requested_only_with_override_and_enough_confidence() -> None:
    message = "which film director won the movie award"
    no_override = await router(RoutingSettings(allow_override=False)).route(
        message=message, session_id="s", requested=asked("edu", None)
    )
    assert no_override.kb_prefix == "edu"
    override = await router(RoutingSettings(allow_override=True, min_confidence=0.75)).route(
        message=message, session_id="s", requested=asked("edu", None)
    )
    assert override.kb_prefix == "movie"
    too_strict = await router(RoutingSettings(allow_override=True, min_confidence=0.99)).route(
        message=message, session_id="s", requested=asked("edu", None)
    )
    assert too_strict.kb_prefix == "edu"


async def test_min_confidence_zero_is_legal_and_accepts_weak_matches() -> None:
    # Only a description word matches: a weak heuristic guess.
    message = "tell me about universities and their actors"
    strict = await router(RoutingSettings(min_confidence=0.75)).route(
        message=message, session_id="s", requested=asked(None, None)
    )
    lenient = await router(RoutingSettings(min_confidence=0.0)).route(
        message=message, session_id="s", requested=asked(None, None)
    )
    assert strict.kb_prefix == "general"
    assert lenient.kb_prefix in {"edu", "movie"}
    assert lenient.confidence < 0.75


async def test_a_default_agent_the_deployment_does_not_run_is_refused() -> None:
    graph = router(available=frozenset({"hybrid_agent"}))
    with pytest.raises(AgentUnavailable, match="naive_rag_agent"):  # edu's default agent
        await graph.route(message="x", session_id="s", requested=asked("edu", None))
    movie = await graph.route(message="x", session_id="s", requested=asked("movie", None))
    assert movie.worker is not None and movie.worker.kb == KBS[1]
    assert movie.to_dict()["worker_name"] == "movie:hybrid_agent:retrieve_only"


async def test_model_is_asked_only_when_the_heuristic_is_unsure() -> None:
    model = ScriptedModel('{"kb_prefix": "movie", "confidence": 0.9, "reason": "asks about cinema"}')
    graph = router(classifier=classifier_of(model))
    confident = await graph.route(message="exam course dates", session_id="s", requested=asked(None, None))
    assert confident.method == "heuristic" and model.calls == 0
    unsure = await graph.route(
        message="who played the lead in Casablanca?", session_id="s", requested=asked(None, None)
    )
    assert model.calls == 1
    assert (unsure.method, unsure.kb_prefix, unsure.confidence) == ("llm", "movie", 0.9)
    assert unsure.worker_name == "movie:naive_rag_agent:retrieve_only"  # a look-up


async def test_model_timeout_gives_method_timeout_with_zero_confidence() -> None:
    model = ScriptedModel('{"kb_prefix": "movie", "confidence": 0.9}', delay_s=1.0)
    graph = router(classifier=classifier_of(model), llm_timeout_s=0.05)
    decision = await graph.route(
        message="who played the lead in Casablanca?", session_id="s", requested=asked(None, None)
    )
    assert decision.method == "timeout"
    assert decision.confidence == 0.0
    assert decision.worker_name == ""


async def test_model_error_falls_back_to_the_heuristic() -> None:
    model = ScriptedModel(fail=RuntimeError("boom"))
    graph = router(classifier=classifier_of(model))
    decision = await graph.route(
        message="who played the lead in Casablanca?", session_id="s", requested=asked(None, None)
    )
    assert decision.method == "fallback"
    assert "RuntimeError" in decision.reason


async def test_model_is_not_asked_when_it_cannot_change_the_outcome() -> None:
    model = ScriptedModel('{"kb_prefix": "movie", "confidence": 0.9}')
    graph = router(RoutingSettings(allow_override=False), classifier_of(model))
    await graph.route(message="who played the lead?", session_id="s", requested=asked("edu", None))
    assert model.calls == 0


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"kb_prefix": "edu", "confidence": 0.8, "reason": "r"}', ("edu", 0.8)),
        ('```json\n{"kb_prefix": "GENERAL", "confidence": 2}\n```', ("", 1.0)),
        ('Sure! {"kb_prefix": "movie", "confidence": -1, "reason": "x"} hope that helps', ("movie", 0.0)),
    ],
)
def test_routing_reply_parsing_is_tolerant(reply: str, expected: tuple[str, float]) -> None:
    guess = parse_routing_reply(reply, {"edu", "movie"})
    assert (guess.kb_prefix, guess.confidence) == expected


@pytest.mark.parametrize("reply", ["no json here", '{"kb_prefix": "sports", "confidence": 1}', "[1, 2]"])
def test_unusable_routing_replies_raise(reply: str) -> None:
    with pytest.raises(ValueError):
        parse_routing_reply(reply, {"edu", "movie"})


CONCURRENT = [
    ("When is the exam for this course?", None, None),
    ("Which director made this film?", None, "graph_agent"),
    ("tell me a joke", None, None),
    ("tuition for the course", "movie", None),
    ("anything at all", "general", None),
    ("Who is the actor in that movie?", "edu", "naive_rag_agent"),
]


async def test_concurrent_messages_share_graph_runs_and_get_the_decisions_they_get_alone() -> None:
    graph = router(RoutingSettings(allow_override=True))
    alone = [await graph.route(message=m, session_id="s", requested=asked(kb, agent)) for m, kb, agent in CONCURRENT]
    runs_before = graph.shared_runs.runs
    together = await asyncio.gather(
        *(graph.route(message=m, session_id="s", requested=asked(kb, agent)) for m, kb, agent in CONCURRENT * 5)
    )
    assert together == alone * 5
    assert {decision.kb_prefix for decision in alone} == {"edu", "movie", "general"}  # the mix is varied
    assert graph.shared_runs.runs - runs_before < len(together) // 2


async def test_a_message_the_model_may_classify_runs_alone_so_others_never_wait_for_it() -> None:
    model = ScriptedModel('{"kb_prefix": "movie", "confidence": 0.9}', delay_s=0.5)
    graph = router(classifier=classifier_of(model))
    slow = asyncio.create_task(
        graph.route(message="who played the lead in Casablanca?", session_id="s", requested=asked(None, None))
    )
    await asyncio.sleep(0.01)  # the slow one is waiting for the model now
    started = asyncio.get_running_loop().time()
    general = await graph.route(message="hello there", session_id="s", requested=asked("general", None))
    assert general.worker_name == "" and asyncio.get_running_loop().time() - started < 0.25
    assert not slow.done()
    assert (await slow).method == "llm" and model.calls == 1


async def test_a_follow_up_the_model_rewrites_runs_alone_so_others_never_wait_for_it() -> None:
    model = ScriptedModel("Which director made Casablanca?", delay_s=0.5)
    followups = ModelFollowUps(model, OfflineFollowUps(WordfreqRarity()), timeout_s=2.0)
    policy = RoutingPolicy(RoutingSettings(), KNOWN_AGENT_TYPES)
    graph = RouterGraph(static_catalog(KBS), policy, ContentRouter(MemoryGraph(), WordfreqRarity()), followups)
    history = (Message(Role.USER, "Tell me about the film Casablanca."), Message(Role.ASSISTANT, "A 1942 film."))
    # The request names the KB and no classifier is configured: only the rewrite calls the model.
    slow = asyncio.create_task(
        graph.route(message="Who directed it?", session_id="s", requested=asked("movie", None), history=history)
    )
    await asyncio.sleep(0.01)
    started = asyncio.get_running_loop().time()
    other = await graph.route(message="When is the exam?", session_id="s", requested=asked("edu", None))
    assert other.kb_prefix == "edu" and asyncio.get_running_loop().time() - started < 0.25
    assert not slow.done()
    decision = await slow
    assert (decision.query, decision.query_method, model.calls) == ("Which director made Casablanca?", "model", 1)
