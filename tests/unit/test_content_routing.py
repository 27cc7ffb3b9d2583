"""Routing by what each KB holds (`ContentRouter`): KBs without keywords, small talk, Chinese, the router path."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from backend.application.routing.policy import RoutingPolicy, RoutingSettings
from backend.domain.agent_types import KNOWN_AGENT_TYPES
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.routing import RequestedRoute, RouteMethod
from backend.graphrag_agent.ports import ChunkHit, TermCounts
from backend.infrastructure.knowledge_bases.catalog import static_catalog
from backend.infrastructure.routing.background import WordfreqRarity
from backend.infrastructure.routing.content import ContentRouter, asks_to_produce, is_small_talk, salience_credit
from backend.infrastructure.routing.followups import OfflineFollowUps
from backend.infrastructure.routing.router_graph import RouterGraph
from tests.support.memory_graph import MemoryGraph, Passage, TermEmbedder, memory_graph

# Three KBs created with a plain description and no keywords.
KBS = [
    KnowledgeBase("orchard", "A cider farm"),
    KnowledgeBase("chats", "A year of group chat messages"),
    KnowledgeBase("baike", "Chinese encyclopedia passages", language="zh"),
]
ORCHARD = [
    Passage("People", "Hamish Dunmore, a retired vet, is the volunteer beekeeper and keeps about 30 hives."),
    Passage("Cider", "Old Tobias is a 7.2% ABV cider made only from Kingston Black apples and aged in oak."),
    Passage("Visiting", "Dogs on a short lead are welcome in the orchard but not in the café or the mill."),
]
CHATS = [
    Passage("2026-01-20 dinner", "Wolfgang: shall we try the new hot pot place on Friday? LiHua: sure, 7pm works."),
    Passage("2026-02-03 gym", "Yuriko: the band rehearsal moved to Thursday. LiHua: I'll skip the gym then."),
]
BAIKE = [
    Passage("广三铁路", "广三铁路是连接广州与三水的铁路，于1903年建成通车，全长49公里。"),
    Passage("松鸦", "松鸦是鸦科松鸦属的鸟类，又名山和尚，栖息于针叶林和混交林中。"),
]


@pytest.fixture
async def graph() -> MemoryGraph:
    embedder = TermEmbedder()
    graph = await memory_graph("orchard", ORCHARD, embedder)
    graph = await memory_graph("chats", CHATS, embedder, graph=graph)
    return await memory_graph("baike", BAIKE, embedder, graph=graph)


def content_router(graph: MemoryGraph) -> ContentRouter:
    return ContentRouter(graph, WordfreqRarity())


@pytest.mark.parametrize(
    ("message", "kb"),
    [
        ("How many hives does the beekeeping vet keep?", "orchard"),  # "beekeeping" counts as "beekeeper"
        ("How strong is Old Tobias?", "orchard"),
        ("Are dogs welcome in the cafe?", "orchard"),  # "cafe" counts as "café"
        ("When is the hot pot dinner with Wolfgang?", "chats"),
        ("What did Yuriko say about the rehearsal?", "chats"),
        ("广三铁路在哪年建成？", "baike"),
        ("松鸦又可以叫什么？", "baike"),
    ],
)
async def test_a_question_reaches_the_kb_that_holds_its_words(graph: MemoryGraph, message: str, kb: str) -> None:
    guess = await content_router(graph).guess(message, KBS)
    assert (guess.kb_prefix, guess.method) == (kb, RouteMethod.HEURISTIC)
    assert guess.confidence >= 0.75, guess
    assert kb in guess.reason


@pytest.mark.parametrize(
    "message",
    ["hi", "thanks!", "what is 17×23", "你好", "谢谢", "how are you?", "write a haiku about autumn", "给我讲个笑话"],
)
async def test_small_talk_and_requests_no_kb_covers_are_not_trusted(graph: MemoryGraph, message: str) -> None:
    guess = await content_router(graph).guess(message, KBS)
    assert guess.confidence < 0.75, guess


async def test_a_request_to_write_needs_a_name_the_kb_holds(graph: MemoryGraph) -> None:
    router = content_router(graph)
    plain = await router.guess("write a poem about dogs in a cafe", KBS)
    named = await router.guess("write a short note about Hamish Dunmore the beekeeper and his hives", KBS)
    assert plain.confidence < 0.75 <= named.confidence, (plain, named)
    assert named.kb_prefix == "orchard" and "request to write" in named.reason


def test_requests_to_produce_text_are_told_from_questions() -> None:
    assert asks_to_produce("Please write an email to my boss")
    assert asks_to_produce("can you translate this into French")
    assert asks_to_produce("帮我写一首关于春天的诗")
    assert not asks_to_produce("Who wrote the cider-making guide?")
    assert not asks_to_produce("What is the tour price?")


def test_greetings_thanks_and_farewells_are_small_talk() -> None:
    for message in ("hello there", "Thanks so much!", "good night", "你好", "谢谢！", "ok", "bye :)"):
        assert is_small_talk(message), message
    for message in ("hello, who is the beekeeper?", "thanks, and when is Blossom Sunday?", "你好，松鸦又叫什么？"):
        assert not is_small_talk(message), message


async def test_a_compound_is_found_by_its_parts(graph: MemoryGraph) -> None:
    """ "beehives" where the text says "beekeeper ... hives"."""
    guess = await content_router(graph).guess("Who looks after the beehives at the orchard?", KBS[:1])
    assert guess.kb_prefix == "orchard" and "beehives" in guess.reason, guess


async def test_a_word_nobody_knows_is_a_typo_not_missing_evidence(graph: MemoryGraph) -> None:
    """A misspelt word no KB and no general text knows must not dilute what the other words found."""
    clean = await content_router(graph).guess("What did Yuriko say about the rehearsal?", KBS)
    typo = await content_router(graph).guess("What did Yuriko say about the rehersalll?", KBS)
    assert typo.kb_prefix == "chats" and typo.confidence >= 0.75, typo
    assert clean.confidence >= 0.75


async def test_the_router_routes_by_content_when_no_keyword_matches(graph: MemoryGraph) -> None:
    policy = RoutingPolicy(RoutingSettings(), KNOWN_AGENT_TYPES)
    router = RouterGraph(static_catalog(KBS), policy, content_router(graph), OfflineFollowUps(WordfreqRarity()))
    decision = await router.route(message="How strong is Old Tobias?", session_id="s", requested=_none())
    assert decision.worker is not None and decision.worker.kb.kb_prefix == "orchard"
    assert decision.method == "heuristic" and "Tobias".lower() in decision.reason.lower()
    small_talk = await router.route(message="hello there", session_id="s", requested=_none())
    assert small_talk.is_general


async def test_raising_the_minimum_confidence_asks_for_more_evidence(graph: MemoryGraph) -> None:
    """KB_AUTO_ROUTE_MIN_CONFIDENCE governs the offline router: a weak match passes 0.75 but not 0.9."""
    message = "Is the mill open to dogs?"
    guess = await content_router(graph).guess(message, KBS)
    assert 0.75 <= guess.confidence < 0.9, guess
    for bar, general in ((0.75, False), (0.9, True)):
        policy = RoutingPolicy(RoutingSettings(min_confidence=bar), KNOWN_AGENT_TYPES)
        router = RouterGraph(static_catalog(KBS), policy, content_router(graph), OfflineFollowUps(WordfreqRarity()))
        decision = await router.route(message=message, session_id="s", requested=_none())
        assert decision.is_general is general, (bar, decision)


async def test_the_default_kb_takes_a_question_that_names_one_thing_it_holds(graph: MemoryGraph) -> None:
    """One specific word is too little among several KBs, enough for the KB marked default or the only one."""
    message = "Who is the vet here?"
    default = [KnowledgeBase("orchard", "A cider farm", is_default=True), *KBS[1:]]
    among_several = await content_router(graph).guess(message, KBS)
    as_default = await content_router(graph).guess(message, default)
    alone = await content_router(graph).guess(message, KBS[:1])
    assert among_several.confidence < 0.75, among_several
    for guess in (as_default, alone):
        assert guess.kb_prefix == "orchard" and guess.confidence >= 0.75, guess
    for small_talk in ("hi", "how are you?", "thanks!"):
        assert (await content_router(graph).guess(small_talk, KBS[:1])).confidence < 0.75


async def test_reads_every_catalog_kbs_profile_at_once_and_probes_at_most_two(graph: MemoryGraph) -> None:
    graph.calls.clear()
    await content_router(graph).guess("Who keeps the hives?", KBS)
    read = sorted(kb for method, kb in graph.calls if method == "term_frequencies")
    assert read == sorted(kb.kb_prefix for kb in KBS)
    probed = [kb for method, kb in graph.calls if method == "search_chunks_fulltext"]
    assert len(probed) <= 2 and set(probed) <= {kb.kb_prefix for kb in KBS}


def test_salience_credits_a_term_by_how_much_more_often_a_kb_holds_it_than_general_text() -> None:
    frequency = 1e-4  # an uncommon word: a chunk of general text seldom holds it
    as_general_text = -math.expm1(-150 * frequency)
    assert salience_credit(0, 100, frequency) == 0.0
    assert salience_credit(5, 0, frequency) == 0.0
    assert salience_credit(round(1000 * as_general_text), 1000, frequency) == pytest.approx(0.0, abs=0.02)
    assert salience_credit(1, 1000, frequency) == 0.0  # less often than general text
    credits = [salience_credit(held, 1000, frequency) for held in (30, 60, 120)]
    assert 0 < credits[0] < credits[1] < credits[2] < 1
    assert salience_credit(200, 1000, frequency) == 1.0
    assert salience_credit(1, 10_000, 1e-9) == 1.0  # a name general text never uses: holding it says enough


async def test_a_big_kb_holding_everyday_words_somewhere_does_not_take_small_talk() -> None:
    """A year of chat logs mentions eggs and being sad somewhere; a kitchen's handbook is about eggs."""
    embedder = TermEmbedder()
    filler = [
        Passage(f"day {n}", f"We met at the station on day {n} and talked about the weather.") for n in range(200)
    ]
    logs = [*filler, Passage("breakfast", "I boiled an egg and felt sad."), Passage("lunch", "Another egg.")]
    graph = await memory_graph("logs", logs, embedder)
    kitchen = [Passage("Eggs", "Boil the egg for six minutes."), Passage("Eggs again", "An egg boiled hard.")]
    graph = await memory_graph("kitchen", kitchen, embedder, graph=graph)
    kbs = [KnowledgeBase("logs", "chat logs"), KnowledgeBase("kitchen", "a kitchen handbook")]
    router = content_router(graph)
    assert (await router.guess("I feel a bit sad today", kbs)).confidence < 0.75
    egg = await router.guess("How long do I boil an egg?", kbs)
    assert egg.kb_prefix == "kitchen", egg


def _none() -> RequestedRoute:
    return RequestedRoute(None, None)


class _DownFor(MemoryGraph):
    """A MemoryGraph whose reads fail, as a store that went down: its profiles, or one KB's fulltext index."""

    def __init__(self, graph: MemoryGraph, down: str) -> None:
        self.__dict__.update(graph.__dict__)
        self._down = down

    async def term_frequencies(self, kbs: Sequence[str], terms: Sequence[str]) -> dict[str, TermCounts]:
        if self._down == "profiles":
            raise ConnectionError("store unavailable")
        return await super().term_frequencies(kbs, terms)

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        if kb == self._down:
            raise ConnectionError("store unavailable")
        return await super().search_chunks_fulltext(kb, query, limit)


async def test_a_store_that_cannot_be_read_holds_nothing_and_routing_goes_on(graph: MemoryGraph) -> None:
    """A store that is down must not fail general chat: no KB finds evidence."""
    router = ContentRouter(_DownFor(graph, "profiles"), WordfreqRarity())
    for message in ("How are you doing today, my friend?", "How strong is Old Tobias?"):
        guess = await router.guess(message, KBS)
        assert (guess.kb_prefix, guess.confidence) == ("", 0.0), guess


async def test_a_kb_whose_index_fails_keeps_what_its_profile_says(graph: MemoryGraph) -> None:
    router = ContentRouter(_DownFor(graph, "orchard"), WordfreqRarity())
    assert (await router.guess("How are you doing today, my friend?", KBS)).confidence < 0.75
    assert (await router.guess("How strong is Old Tobias?", KBS)).kb_prefix == "orchard"
    chats = await router.guess("When is the hot pot dinner with Wolfgang?", KBS)
    assert chats.kb_prefix == "chats" and chats.confidence >= 0.75
