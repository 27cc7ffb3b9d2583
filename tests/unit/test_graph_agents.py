"""The four graph agents (SPEC §9) on small hand-built graphs in memory."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from backend.domain import ids
from backend.domain.conversation import Message, Role
from backend.domain.errors import ModelError, StoreUnavailable
from backend.domain.graph import EntityRecord
from backend.domain.retrieval import EvidenceSource, Granularity, RetrievalResult
from backend.graphrag_agent.agents import (
    DeepResearchAgent,
    FusionAgent,
    GraphAgent,
    GraphSearchSettings,
    HybridAgent,
    NaiveRagAgent,
    ResearchSettings,
)
from backend.graphrag_agent.agents.chunk_search import ChunkCandidate, ChunkRankings, ChunkSearch
from backend.graphrag_agent.agents.graph_agent import is_broad_question
from backend.graphrag_agent.agents.local_search import Expansion, WeightedEntity, seed_confidence
from backend.graphrag_agent.agents.tuning import ChunkSearchSettings
from backend.graphrag_agent.keywords import (
    Keywords,
    LlmKeywordExtractor,
    OfflineKeywordExtractor,
    extract_keywords,
    parse_keywords,
)
from backend.graphrag_agent.model import parse_json_object
from backend.graphrag_agent.pagerank import personalised_pagerank
from backend.graphrag_agent.ports import AgentTrace, ChunkHit, RetrievalAgent, Vector
from backend.graphrag_agent.text import mostly_cjk
from tests.support.memory_graph import CommunitySpec, MemoryGraph, Passage, TermEmbedder, memory_graph

KB = "royals"
PASSAGES = [
    Passage(
        "Lothair II",
        "Lothair II was the king of Lotharingia from 855 until his death. He was the second son of Emperor "
        "Lothair I and Ermengarde of Tours. He was married to Teutberga, daughter of Boso the Elder.",
        ("Lotharingia", "Lothair I", "Ermengarde of Tours", "Teutberga", "Boso the Elder"),
    ),
    Passage(
        "Ermengarde of Tours",
        "Ermengarde of Tours (died 20 March 851) was the daughter of Hugh of Tours. In October 821 in "
        "Thionville she married the Carolingian Emperor Lothair I of the Franks.",
        ("Hugh of Tours", "Thionville", "Lothair I"),
    ),
    Passage(
        "Hugh of Tours",
        "Hugh of Tours was a Frankish nobleman of the Etichonen family. His wife was Ava of Morvois, "
        "with whom he had several daughters.",
        ("Etichonen", "Ava of Morvois"),
    ),
    Passage(
        "Ava of Morvois",
        "Ava of Morvois was a noblewoman born in Morvois. She died in the year 839 at Tours.",
        ("Morvois", "Tours"),
    ),
    Passage(
        "Teutberga",
        "Teutberga was a queen of Lotharingia. She died in 875 at Sainte-Glossinde in Metz.",
        ("Lotharingia", "Sainte-Glossinde", "Metz"),
    ),
    Passage(
        "Wrenfield Orchard",
        "Wrenfield Orchard was founded by Agnes Wren in 1911. Agnes Wren pressed cider from Russet apples "
        "every October, and the orchard still sells cider at the mill shop.",
        ("Agnes Wren", "Russet"),
    ),
    Passage(
        "Cider Mill",
        "The cider mill at Wrenfield runs tours for visitors. An adult ticket for the mill tour costs six pounds.",
        ("Wrenfield",),
    ),
]
COMMUNITIES = [
    CommunitySpec(
        "Carolingian royal family",
        "Kings, queens and nobles of the Carolingian dynasty: Lothair I, Lothair II, Ermengarde of Tours and "
        "Teutberga, their marriages and lands in Lotharingia.",
        ("Lothair I", "Lothair II", "Ermengarde of Tours", "Teutberga", "Lotharingia"),
    ),
    CommunitySpec(
        "Cider making at Wrenfield",
        "The orchard founded by Agnes Wren, its Russet apples, the cider mill and its tours.",
        ("Wrenfield Orchard", "Agnes Wren", "Russet", "Wrenfield"),
    ),
]
TWO_HOP = "When did the mother of Lothair II die?"
THREE_HOP = "Where did the mother of the mother of Lothair II die?"
AGENT_TYPES = ["graph_agent", "hybrid_agent", "deep_research_agent", "fusion_agent"]


async def royal_graph(delay_s: float = 0.0) -> MemoryGraph:
    return await memory_graph(KB, PASSAGES, TermEmbedder(), COMMUNITIES, MemoryGraph(delay_s))


def make_agent(agent_type: str, graph: MemoryGraph, top_k: int = 4, kb: str = KB) -> RetrievalAgent:
    embedder = TermEmbedder()
    if agent_type == "graph_agent":
        return GraphAgent(kb, graph, embedder, top_k=top_k)
    if agent_type == "hybrid_agent":
        return HybridAgent(kb, graph, embedder, top_k=top_k)
    if agent_type == "deep_research_agent":
        return DeepResearchAgent(kb, graph, embedder, top_k=top_k)
    return FusionAgent(
        [NaiveRagAgent(kb, graph, embedder, top_k=top_k), GraphAgent(kb, graph, embedder, top_k=top_k)], top_k=top_k
    )


def chunk_titles(trace: AgentTrace) -> list[str]:
    return [r["source"]["title"] for r in trace["retrieval_results"] if r["granularity"] == "Chunk"]


def result_ids(trace: AgentTrace) -> list[str]:
    return [r["result_id"] for r in trace["retrieval_results"]]


# --- answering ------------------------------------------------------------------------------------


@pytest.mark.parametrize("agent_type", AGENT_TYPES)
async def test_each_agent_finds_the_passage_of_a_direct_question(agent_type: str) -> None:
    agent = make_agent(agent_type, await royal_graph())
    trace = await agent.retrieve_with_trace("Which apples did Agnes Wren press into cider?", "t")
    assert chunk_titles(trace)[0] == "Wrenfield Orchard"
    assert agent.agent_type == agent_type


async def test_plain_chunk_retrieval_reaches_the_second_hop_only_by_feedback() -> None:
    graph = await royal_graph()
    trace = await NaiveRagAgent(KB, graph, TermEmbedder(), top_k=4).retrieve_with_trace(TWO_HOP, "t")
    by_title = {r["source"]["title"]: r["metadata"] for r in trace["retrieval_results"]}
    assert by_title["Lothair II"]["fulltext_rank"] == 1
    # The mother's passage shares no word with the question: only the search from the son's passage finds it.
    second_hop = by_title["Ermengarde of Tours"]
    assert second_hop["fulltext_rank"] is None and second_hop["vector_rank"] is None
    assert second_hop["feedback_rank"] is not None


@pytest.mark.parametrize("agent_type", AGENT_TYPES)
async def test_graph_agents_find_both_hops(agent_type: str) -> None:
    agent = make_agent(agent_type, await royal_graph())
    titles = chunk_titles(await agent.retrieve_with_trace(TWO_HOP, "t"))
    assert {"Lothair II", "Ermengarde of Tours"} <= set(titles[:4]), titles


async def test_deep_research_follows_a_bridge_the_neighbourhood_does_not_reach() -> None:
    graph = await royal_graph()
    local = chunk_titles(await make_agent("graph_agent", graph).retrieve_with_trace(THREE_HOP, "t"))
    deep = await make_agent("deep_research_agent", graph).retrieve_with_trace(THREE_HOP, "t")
    assert "Hugh of Tours" not in local
    assert {"Lothair II", "Ermengarde of Tours", "Hugh of Tours"} <= set(chunk_titles(deep))
    hugh = next(r for r in deep["retrieval_results"] if r["source"]["title"] == "Hugh of Tours")
    assert hugh["metadata"]["step"] >= 2
    assert hugh["metadata"]["home"] is True
    bridges = [r["metadata"]["name"] for r in deep["retrieval_results"] if r["metadata"].get("bridge")]
    assert "Hugh of Tours" in bridges


async def test_deep_research_with_one_step_is_local_search() -> None:
    graph = await royal_graph()
    one_step = DeepResearchAgent(
        KB, graph, TermEmbedder(), top_k=4, settings=GraphSearchSettings(research=ResearchSettings(max_steps=1))
    )
    deep = await one_step.retrieve_with_trace(THREE_HOP, "t")
    local = await make_agent("graph_agent", graph).retrieve_with_trace(THREE_HOP, "t")
    assert chunk_titles(deep) == chunk_titles(local)


# --- the trace contract ---------------------------------------------------------------------------


@pytest.mark.parametrize("agent_type", AGENT_TYPES)
async def test_trace_follows_the_agent_contract(agent_type: str) -> None:
    agent = make_agent(agent_type, await royal_graph())
    trace = await agent.retrieve_with_trace(TWO_HOP, "thread-7")
    results = trace["retrieval_results"]
    assert len({r["result_id"] for r in results}) == len(results)
    granularities = [r["granularity"] for r in results]
    assert granularities == sorted(granularities, key=["Chunk", "Entity", "Relationship", "Community"].index)
    assert {"Chunk", "Entity", "Relationship"} <= set(granularities)
    for result in results:
        assert 0.0 <= result["score"] <= 1.0
        assert result["source"]["title"]
        assert f"{result['source']['title']}\n{result['evidence']}" in trace["context"]
        check_ids(result)
    check_reference(trace["reference"], results, merged=agent_type == "fusion_agent")


def check_reference(reference: dict[str, Any], results: list[dict[str, Any]], merged: bool) -> None:
    """The reference lists what the results cite; fusion's is the union of its agents' references."""
    assert set(reference) == {"documents", "chunks", "entities", "relationships", "communities"}
    for document in reference["documents"]:
        assert set(document) == {"doc_id", "title"} and document["title"]
    cited = {
        "documents": [r["source"]["doc_id"] for r in results if r["source"]["doc_id"]],
        **{
            key: [r["result_id"].split(":", 1)[1] for r in results if r["granularity"] == granularity]
            for key, granularity in [
                ("chunks", "Chunk"),
                ("entities", "Entity"),
                ("relationships", "Relationship"),
                ("communities", "Community"),
            ]
        },
    }
    listed = {key: [d["doc_id"] for d in values] if key == "documents" else values for key, values in reference.items()}
    for key, ids_ in cited.items():
        if merged:
            assert set(ids_) <= set(listed[key]), key
        else:
            assert listed[key] == list(dict.fromkeys(ids_)), key


def check_ids(result: dict[str, Any]) -> None:
    """Ids derived from the graph's own ids, and the source a result cites."""
    source, metadata = result["source"], result["metadata"]
    kind, key = result["result_id"].split(":", 1)
    if kind == "chunk":
        assert key == source["chunk_id"] == ids.chunk_id(KB, source["doc_id"], metadata["ordinal"])
    elif kind == "entity":
        assert key == metadata["entity_id"] == ids.entity_id(KB, metadata["name"])
        assert source["chunk_id"] and source["doc_id"]
    elif kind == "relation":
        assert key == "|".join(sorted((metadata["source_id"], metadata["target_id"])))
        assert source["chunk_id"] and source["doc_id"]
    else:
        assert kind == "community" and len(key) == 40


@pytest.mark.parametrize("agent_type", AGENT_TYPES)
async def test_results_are_identical_across_runs_and_rebuilds(agent_type: str) -> None:
    first = await make_agent(agent_type, await royal_graph()).retrieve_with_trace(TWO_HOP, "a")
    again = await make_agent(agent_type, await royal_graph()).retrieve_with_trace(TWO_HOP, "b")
    assert result_ids(first)
    assert first == again


@pytest.mark.parametrize("agent_type", AGENT_TYPES)
async def test_every_store_call_stays_in_the_agents_kb(agent_type: str) -> None:
    graph = await royal_graph()
    await memory_graph("elsewhere", PASSAGES[:2], TermEmbedder(), graph=graph)
    await make_agent(agent_type, graph, kb="elsewhere").retrieve_with_trace(TWO_HOP, "t")
    assert {kb for _, kb in graph.calls} == {"elsewhere"}
    empty = await make_agent(agent_type, graph, kb="empty").retrieve_with_trace(TWO_HOP, "t")
    assert empty["retrieval_results"] == [] and empty["context"] == ""


@pytest.mark.parametrize("agent_type", AGENT_TYPES)
async def test_blank_question_searches_nothing(agent_type: str) -> None:
    graph = await royal_graph()
    trace = await make_agent(agent_type, graph).retrieve_with_trace("  ", "t")
    assert trace["retrieval_results"] == [] and graph.calls == []


# --- global search --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "broad"),
    [
        ("What are the main themes of these documents?", True),
        ("Give me an overview of the collection", True),
        ("Summarise what the knowledge base says about royals", True),
        ("这些文档的主要内容是什么？", True),
        ("When did the mother of Lothair II die?", False),
        ("Which theme park opened in 1955?", False),
    ],
)
def test_broad_questions_are_recognised_by_their_wording(question: str, broad: bool) -> None:
    assert is_broad_question(question) is broad


@pytest.mark.parametrize("agent_type", ["graph_agent", "hybrid_agent", "deep_research_agent"])
async def test_a_broad_question_gets_community_summaries(agent_type: str) -> None:
    agent = make_agent(agent_type, await royal_graph())
    trace = await agent.retrieve_with_trace("What are the main themes of this collection?", "t")
    communities = [r for r in trace["retrieval_results"] if r["granularity"] == "Community"]
    assert {r["source"]["title"] for r in communities} == {"Carolingian royal family", "Cider making at Wrenfield"}
    assert trace["reference"]["communities"] == [r["result_id"][10:] for r in communities]


async def test_global_search_leads_with_communities_and_keeps_chunks_to_cite() -> None:
    agent = make_agent("graph_agent", await royal_graph())
    trace = await agent.retrieve_with_trace("Summarise the main themes about the cider mill tours", "t")
    granularities = [r["granularity"] for r in trace["retrieval_results"]]
    assert granularities[0] == "Community" and "Chunk" in granularities
    assert trace["retrieval_results"][0]["source"]["title"] == "Cider making at Wrenfield"


async def test_a_specific_question_gets_local_results_with_the_seeds_community() -> None:
    trace = await make_agent("graph_agent", await royal_graph()).retrieve_with_trace(TWO_HOP, "t")
    assert trace["retrieval_results"][0]["granularity"] == "Chunk"
    communities = [r["source"]["title"] for r in trace["retrieval_results"] if r["granularity"] == "Community"]
    assert communities == ["Carolingian royal family"]


@pytest.mark.parametrize("agent_type", ["graph_agent", "hybrid_agent", "deep_research_agent"])
async def test_a_question_naming_nothing_falls_back_to_similar_summaries(agent_type: str) -> None:
    agent = make_agent(agent_type, await royal_graph())
    trace = await agent.retrieve_with_trace("Which dynasty's marriages and lands are described?", "t")
    assert [(r["granularity"], r["source"]["title"]) for r in trace["retrieval_results"]] == [
        ("Community", "Carolingian royal family")
    ]


async def test_an_unrelated_question_gets_nothing() -> None:
    for agent_type in AGENT_TYPES:
        agent = make_agent(agent_type, await royal_graph())
        trace = await agent.retrieve_with_trace("How do I reset my router password?", "t")
        assert trace["retrieval_results"] == [], agent_type


# --- hybrid keywords ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "low", "high"),
    [
        ("When did Lothair Ii's mother die?", ("Lothair Ii",), ("mother", "die")),
        ("Who was born first out of Aivar Kuusmaa and Andy Summers?", ("Aivar Kuusmaa", "Andy Summers"), ("born",)),
        ('What did "Regret in Your Tears" chart at in 2017?', ("Regret in Your Tears", "2017"), ("chart",)),
        ("Summarise the main themes.", (), ("summarise", "main", "themes")),
        ("Where was Ermengarde of Tours buried?", ("Ermengarde of Tours",), ("buried",)),
        ("Who directed Wrong Turn 5: Bloodlines?", ("Wrong Turn", "Bloodlines", "5"), ("directed",)),
        ("李华的妈妈是谁", ("李华", "妈妈"), ("李华", "妈妈")),
    ],
)
def test_offline_keywords(question: str, low: tuple[str, ...], high: tuple[str, ...]) -> None:
    keywords = extract_keywords(question)
    assert keywords.low_level == low
    assert set(high) <= set(keywords.high_level)


class ScriptedModel:
    """Answers with scripted texts in order (or raises them); records the prompts."""

    def __init__(self, *answers: str | Exception, delay_s: float = 0.0) -> None:
        self._answers = list(answers)
        self._delay_s = delay_s
        self.prompts: list[list[Message]] = []

    async def complete(self, messages: Sequence[Message]) -> str:
        self.prompts.append(list(messages))
        await asyncio.sleep(self._delay_s)
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_llm_keywords_are_parsed_from_a_fenced_answer() -> None:
    model = ScriptedModel(
        'Sure:\n```json\n{"high_level_keywords": ["death"], "low_level_keywords": ["Ermengarde"]}\n```'
    )
    keywords = await LlmKeywordExtractor(model).extract("When did Ermengarde die?")
    assert keywords == Keywords(("Ermengarde",), ("death",))
    assert model.prompts[0][-1] == Message(Role.USER, "When did Ermengarde die?")


@pytest.mark.parametrize("answer", [ModelError("HTTP 500"), "no json here", '{"low_level_keywords": []}'])
async def test_llm_keywords_fall_back_to_offline(answer: str | Exception) -> None:
    keywords = await LlmKeywordExtractor(ScriptedModel(answer)).extract("When did Lothair II die?")
    assert keywords == extract_keywords("When did Lothair II die?")


async def test_llm_keywords_fall_back_when_the_model_stalls() -> None:
    extractor = LlmKeywordExtractor(ScriptedModel("{}", delay_s=5), timeout_s=0.05)
    assert await extractor.extract("Who was Teutberga?") == extract_keywords("Who was Teutberga?")


def test_keyword_answers_tolerate_strings_and_junk() -> None:
    assert parse_keywords('{"low_level_keywords": "A, B", "high_level_keywords": [1, "x"]}') == Keywords(
        ("A", "B"), ("x",)
    )
    assert parse_keywords("[1, 2]") is None
    assert parse_json_object('text {"a": 1} more {"b": 2}') == {"a": 1}


async def test_hybrid_agent_seeds_entities_from_the_models_low_level_keywords() -> None:
    model = ScriptedModel('{"low_level_keywords": ["Teutberga"], "high_level_keywords": ["queen", "death"]}')
    agent = HybridAgent(KB, await royal_graph(), TermEmbedder(), top_k=3, model=model)
    trace = await agent.retrieve_with_trace("Whose death is recorded here?", "t")
    assert [prompt[-1] for prompt in model.prompts] == [Message(Role.USER, "Whose death is recorded here?")]
    assert chunk_titles(trace)[0] == "Teutberga"
    seeds = [r["metadata"]["name"] for r in trace["retrieval_results"] if r["metadata"].get("seed")]
    assert seeds == ["Teutberga"]


async def test_offline_extractor_is_the_hybrid_default() -> None:
    assert await OfflineKeywordExtractor().extract(TWO_HOP) == extract_keywords(TWO_HOP)


# --- deep research with a model -------------------------------------------------------------------


async def test_deep_research_follows_the_models_plan() -> None:
    model = ScriptedModel(
        '{"sub_questions": ["Who was the mother of Lothair II?"]}',
        '{"decision": "continue", "next_question": "Where did Ava of Morvois die?"}',
    )
    graph = await royal_graph()
    agent = DeepResearchAgent(KB, graph, TermEmbedder(), top_k=4, model=model)
    trace = await agent.retrieve_with_trace(THREE_HOP, "t")
    assert "Where did Ava of Morvois die?" in graph.fulltext_queries  # the model's next question was searched
    assert "Ava of Morvois" in chunk_titles(trace)
    assert len(model.prompts) == 2  # the plan, then one decision; the step limit ends the research


async def test_deep_research_revises_its_plan_when_the_model_says_so() -> None:
    model = ScriptedModel(
        '{"sub_questions": ["Who founded Wrenfield Orchard?", "What does the mill tour cost?"]}',
        '{"decision": "revise", "sub_questions": ["Who was the mother of Ermengarde of Tours?"]}',
    )
    agent = DeepResearchAgent(KB, await royal_graph(), TermEmbedder(), top_k=6, model=model)
    trace = await agent.retrieve_with_trace(THREE_HOP, "t")
    asked = [r["metadata"].get("sub_question") for r in trace["retrieval_results"]]
    assert "Who was the mother of Ermengarde of Tours?" in asked
    assert "What does the mill tour cost?" not in asked
    assert "Who founded Wrenfield Orchard?" in model.prompts[1][-1].content


async def test_deep_research_stops_when_the_model_finishes() -> None:
    model = ScriptedModel('{"sub_questions": ["Who was Teutberga?", "Where is Metz?"]}', '{"decision": "finish"}')
    agent = DeepResearchAgent(KB, await royal_graph(), TermEmbedder(), top_k=4, model=model)
    trace = await agent.retrieve_with_trace("Who was Teutberga?", "t")
    assert len(model.prompts) == 2
    assert chunk_titles(trace)[0] == "Teutberga"
    assert "Where is Metz?" not in {r["metadata"].get("sub_question") for r in trace["retrieval_results"]}


@pytest.mark.parametrize(
    "answers",
    [
        (ModelError("HTTP 502"),),
        ("I cannot help with that.",),
        ('{"sub_questions": ["Who was the mother of Lothair II?"]}', '{"decision": "maybe"}'),
    ],
)
async def test_deep_research_falls_back_offline_when_the_model_fails(answers: tuple[str | Exception, ...]) -> None:
    graph = await royal_graph()
    offline = await DeepResearchAgent(KB, graph, TermEmbedder(), top_k=4).retrieve_with_trace(THREE_HOP, "t")
    guided = DeepResearchAgent(KB, graph, TermEmbedder(), top_k=4, model=ScriptedModel(*answers))
    assert await guided.retrieve_with_trace(THREE_HOP, "t") == offline


# --- fusion ---------------------------------------------------------------------------------------


async def test_fusion_deduplicates_and_remembers_who_found_what() -> None:
    graph = await royal_graph()
    embedder = TermEmbedder()
    agents: list[RetrievalAgent] = [
        GraphAgent(KB, graph, embedder),
        HybridAgent(KB, graph, embedder),
        NaiveRagAgent(KB, graph, embedder),
    ]
    fused = await FusionAgent(agents, top_k=4).retrieve_with_trace(TWO_HOP, "t")
    ids_ = result_ids(fused)
    assert len(ids_) == len(set(ids_))
    top = fused["retrieval_results"][0]
    assert top["source"]["title"] == "Lothair II"
    assert set(top["metadata"]["found_by"]) == {"graph_agent", "hybrid_agent", "naive_rag_agent"}
    assert top["metadata"]["agent_type"] == "fusion_agent"
    assert all(0 <= r["score"] <= 1 for r in fused["retrieval_results"])
    alone = [await agent.retrieve_with_trace(TWO_HOP, "t") for agent in agents]
    assert set(fused["reference"]["chunks"]) == {c for trace in alone for c in trace["reference"]["chunks"]}


async def test_fusion_of_one_agent_twice_keeps_its_order() -> None:
    graph = await royal_graph()
    naive = NaiveRagAgent(KB, graph, TermEmbedder())
    alone = await naive.retrieve_with_trace("Who founded Wrenfield Orchard?", "t")
    fused = await FusionAgent([naive, naive]).retrieve_with_trace("Who founded Wrenfield Orchard?", "t")
    assert result_ids(fused) == result_ids(alone)
    assert fused["retrieval_results"][0]["score"] == pytest.approx(1.0)


class BrokenAgent:
    agent_type = "graph_agent"

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace:
        raise StoreUnavailable("graph store is down")


async def test_fusion_survives_a_failing_agent_but_not_all_failing() -> None:
    graph = await royal_graph()
    naive = NaiveRagAgent(KB, graph, TermEmbedder())
    fused = await FusionAgent([BrokenAgent(), naive]).retrieve_with_trace("Who founded Wrenfield Orchard?", "t")
    assert chunk_titles(fused)[0] == "Wrenfield Orchard"
    with pytest.raises(StoreUnavailable, match="down"):
        await FusionAgent([BrokenAgent(), BrokenAgent()]).retrieve_with_trace("Who?", "t")


class RankedAgent:
    """A member that ranks fixed chunks, one document each."""

    def __init__(self, agent_type: str, chunk_ids: list[str]) -> None:
        self.agent_type = agent_type
        self._chunk_ids = chunk_ids

    async def retrieve_with_trace(self, query: str, thread_id: str) -> AgentTrace:
        results = [
            RetrievalResult(
                f"chunk:{chunk}", Granularity.CHUNK, chunk, EvidenceSource(f"doc-{chunk}", chunk, chunk), 1 - n / 10
            ).to_dict()
            for n, chunk in enumerate(self._chunk_ids)
        ]
        return {"context": "", "retrieval_results": results, "reference": {"chunks": self._chunk_ids}}


def ranked_members() -> list[RetrievalAgent]:
    """naive ranks a..f; the three others agree on x first and rank a low: agreement wins a plain fusion."""
    return [
        RankedAgent("naive_rag_agent", ["a", "b", "c", "d", "e", "f"]),
        RankedAgent("graph_agent", ["x", "y", "a"]),
        RankedAgent("hybrid_agent", ["x", "y", "z"]),
        RankedAgent("deep_research_agent", ["x", "z", "y"]),
    ]


async def test_plain_fusion_ranks_what_several_members_agree_on_first() -> None:
    fused = await FusionAgent(ranked_members(), top_k=6).retrieve_with_trace("q", "t")
    assert chunk_titles(fused)[:2] == ["x", "y"]


async def test_the_lead_keeps_two_thirds_of_the_places_and_fusion_fills_the_rest() -> None:
    led = FusionAgent(ranked_members(), top_k=6, lead=lambda question: "naive_rag_agent")
    fused = await led.retrieve_with_trace("q", "t")
    titles = chunk_titles(fused)
    assert titles[:4] == ["a", "b", "c", "d"]  # the lead's first four of six places, in its order
    assert titles[4:6] == ["x", "y"]  # then what the others agree on, ahead of the lead's e and f
    scores = [r["score"] for r in fused["retrieval_results"]]
    assert scores == sorted(scores, reverse=True)


async def test_without_its_lead_among_the_traces_fusion_ranks_every_place() -> None:
    led = FusionAgent(ranked_members()[1:], top_k=6, lead=lambda question: "naive_rag_agent")
    plain = FusionAgent(ranked_members()[1:], top_k=6)
    assert chunk_titles(await led.retrieve_with_trace("q", "t")) == chunk_titles(
        await plain.retrieve_with_trace("q", "t")
    )


# --- concurrency ----------------------------------------------------------------------------------


@pytest.mark.parametrize("agent_type", AGENT_TYPES)
async def test_cancelling_a_query_leaves_no_task_running(agent_type: str) -> None:
    agent = make_agent(agent_type, await royal_graph(delay_s=0.02))
    task = asyncio.create_task(agent.retrieve_with_trace(THREE_HOP, "t"))
    await asyncio.sleep(0.03)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert asyncio.all_tasks() == {asyncio.current_task()}


@pytest.mark.parametrize("agent_type", AGENT_TYPES)
async def test_concurrent_queries_share_no_state(agent_type: str) -> None:
    agent = make_agent(agent_type, await royal_graph(delay_s=0.001))
    questions = [TWO_HOP, "Which apples did Agnes Wren press into cider?", THREE_HOP]
    alone = [await agent.retrieve_with_trace(q, "t") for q in questions]
    together = await asyncio.gather(*(agent.retrieve_with_trace(q, "t") for q in questions))
    assert list(together) == alone


async def test_searches_run_concurrently() -> None:
    graph = await royal_graph(delay_s=0.05)
    started = asyncio.get_running_loop().time()
    await make_agent("graph_agent", graph).retrieve_with_trace(TWO_HOP, "t")
    elapsed = asyncio.get_running_loop().time() - started
    assert elapsed < 0.05 * (len(graph.calls) - 2), (elapsed, graph.calls)


# --- personalised PageRank -----------------------------------------------------------------------


def test_pagerank_of_a_path_decays_from_the_restart_node() -> None:
    scores = personalised_pagerank(4, {(0, 1): 1.0, (1, 2): 1.0, (2, 3): 1.0}, {0: 1.0})
    assert scores.sum() == pytest.approx(1.0)
    assert scores[0] > scores[1] > scores[2] > scores[3] > 0


def test_pagerank_follows_heavier_edges_and_ignores_unreachable_nodes() -> None:
    scores = personalised_pagerank(5, {(0, 1): 3.0, (0, 2): 1.0, (3, 4): 1.0}, {0: 1.0})
    assert scores[1] == pytest.approx(3 * scores[2])
    assert scores[3] == scores[4] == 0.0


def test_pagerank_redistributes_dangling_mass_by_the_restart() -> None:
    scores = personalised_pagerank(3, {(0, 1): 1.0}, {0: 1.0, 2: 1.0})
    assert scores.sum() == pytest.approx(1.0)
    # Isolated: its restart share, plus its share of the mass it hands back: x = 0.5 * 0.5 + 0.5 * 0.5 * x.
    assert scores[2] == pytest.approx(1 / 3)
    assert np.all(personalised_pagerank(3, {}, {}) == 0)
    with pytest.raises(ValueError, match="damping"):
        personalised_pagerank(2, {}, {0: 1.0}, damping=1.0)


# --- questions about two events in time ----------------------------------------------------------

CHAT_SESSIONS = [
    Passage("Session 1", "Jennifer: I post the yoga class timetable today.", ("Jennifer",)),
    Passage("Session 2", "Li Hua: What are the swimming pool opening hours this weekend?", ("Li Hua",)),
    Passage("Session 3", "Jennifer: I post the pool hours. Li Hua asked about the class.", ()),
    Passage("Session 4", "Li Hua asked Jennifer to post the swimming timetable.", ()),
    Passage("Session 5", "Jennifer asked Li Hua about the yoga pool opening.", ()),
    Passage("Session 6", "Li Hua: Jennifer, post the opening hours of the class.", ()),
]
TWO_EVENTS = "Did Jennifer post the yoga class timetable before Li Hua asked about the swimming pool opening hours?"


@pytest.mark.parametrize("agent_type", ["naive_rag_agent", "graph_agent", "hybrid_agent"])
async def test_a_question_about_two_events_finds_both_sessions(
    agent_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = await memory_graph(KB, CHAT_SESSIONS, TermEmbedder())

    async def top_three() -> set[str]:
        agent = (
            NaiveRagAgent(KB, graph, TermEmbedder(), top_k=4)
            if agent_type == "naive_rag_agent"
            else make_agent(agent_type, graph)
        )
        return set(chunk_titles(await agent.retrieve_with_trace(TWO_EVENTS, "t"))[:3])

    assert {"Session 1", "Session 2"} <= await top_three()
    if agent_type == "naive_rag_agent":
        # The whole question alone ranks first the sessions that touch both events: the clauses find both.
        # (The graph agents also reach Session 1 through the entity Jennifer.)
        monkeypatch.setattr("backend.graphrag_agent.focus.question_clauses", lambda _query: [])
        assert not {"Session 1", "Session 2"} <= await top_three()


# --- languages the embedding model does not cover ----------------------------------------------------


class EnglishOnlyEmbedder(TermEmbedder):
    def covers(self, text: str) -> bool:
        return not mostly_cjk(text)


@pytest.mark.parametrize("agent_type", ["naive_rag_agent", "graph_agent", "hybrid_agent"])
async def test_a_chinese_question_skips_the_vector_searches_of_an_english_only_model(agent_type: str) -> None:
    passages = [
        Passage("北京大学", "北京大学成立于1898年，是中国第一所国立综合性大学。", ()),
        Passage("清华大学", "清华大学位于北京西北郊，前身是清华学堂。", ()),
    ]
    embedder = EnglishOnlyEmbedder()
    graph = await memory_graph(KB, passages, TermEmbedder())
    agent: RetrievalAgent = (
        NaiveRagAgent(KB, graph, embedder, top_k=4)
        if agent_type == "naive_rag_agent"
        else GraphAgent(KB, graph, embedder, top_k=4)
        if agent_type == "graph_agent"
        else HybridAgent(KB, graph, embedder, top_k=4)
    )
    trace = await agent.retrieve_with_trace("北京大学是哪一年成立的？", "t")
    assert chunk_titles(trace)[0] == "北京大学"
    searched = {method for method, _ in graph.calls}
    assert "search_chunks_fulltext" in searched
    assert not searched & {"search_chunks_vector", "search_entities_vector"}
    graph.calls.clear()
    await agent.retrieve_with_trace("When was Peking University founded?", "t")
    assert "search_chunks_vector" in {method for method, _ in graph.calls}  # English: vectors as usual


# --- how much each ranking may say -----------------------------------------------------------------


def _expansion_with_seed_mentions(*counts: int) -> Expansion:
    seeds = [
        WeightedEntity(f"e{n}", 1.0, True, EntityRecord(f"e{n}", f"Entity {n}", "person", "", count))
        for n, count in enumerate(counts)
    ]
    return Expansion(entities=tuple(seeds))


def test_seed_confidence_drops_only_when_even_the_most_specific_seed_is_a_hub() -> None:
    specific = GraphSearchSettings().specific_mentions
    assert seed_confidence(Expansion(), specific) == 1.0
    assert seed_confidence(_expansion_with_seed_mentions(1, 900), specific) == 1.0
    assert seed_confidence(_expansion_with_seed_mentions(specific), specific) == 1.0
    hub, bigger_hub = (
        seed_confidence(_expansion_with_seed_mentions(40), specific),
        seed_confidence(_expansion_with_seed_mentions(900), specific),
    )
    assert 0 < bigger_hub < hub < 1.0


CHUNKS = ChunkSearchSettings()


def _candidate(chunk_id: str, overlap: float) -> ChunkCandidate:
    return ChunkCandidate(ChunkHit(chunk_id, "d", "t", "text", 0, 1.0), None, 1.0, overlap)


def test_fulltext_weighs_more_the_more_of_the_question_its_best_hits_hold() -> None:
    vector = (_candidate("v", 0.0),)
    full_cover = ChunkRankings((_candidate("a", 1.0),), vector).weights(CHUNKS)
    half_cover = ChunkRankings((_candidate("b", 0.2), _candidate("a", 0.5)), vector).weights(CHUNKS)
    assert full_cover == (1.0, 0.0)
    assert half_cover[0] > half_cover[1] > 0 and sum(half_cover) == pytest.approx(1.0)
    assert ChunkRankings((), vector).weights(CHUNKS) == (0.0, 1.0)
    assert ChunkRankings((_candidate("a", 0.4),), ()).weights(CHUNKS) == (1.0, 0.0)


# --- questions that name a date --------------------------------------------------------------------

DATED_SESSIONS = [
    Passage("20260412_0900", "Hailey: the bakery offers rye bread and sourdough loaves this week.", ("Hailey",)),
    Passage("20260414_1000", "Hailey: rye bread on offer at the bakery.", ()),
    Passage(
        "20260520_0800",
        "Hailey: come early, warm croissants, fresh coffee and cinnamon buns are on offer at the bakery all morning"
        " long.",
        (),
    ),
    Passage("Undated notes", "Wolfgang: a hiking trip up the hill.", ("Wolfgang",)),
]


@pytest.mark.parametrize("agent_type", ["naive_rag_agent", "graph_agent", "hybrid_agent"])
async def test_a_question_that_names_a_month_is_answered_from_that_month_first(
    agent_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = await memory_graph(KB, DATED_SESSIONS, TermEmbedder())
    agent = (
        NaiveRagAgent(KB, graph, TermEmbedder()) if agent_type == "naive_rag_agent" else make_agent(agent_type, graph)
    )

    async def titles(question: str) -> list[str]:
        return chunk_titles(await agent.retrieve_with_trace(question, "t"))

    in_may = await titles("What did the bakery offer in May?")
    assert in_may[0] == "20260520_0800"
    assert "20260414_1000" in in_may  # the unrestricted ranking still follows
    assert (await titles("What did the bakery offer?"))[0] != "20260520_0800"  # the best match without the month
    in_december = await titles("What did the bakery offer in December?")  # no document of December
    monkeypatch.setattr("backend.graphrag_agent.focus.question_scope", lambda _question: None)
    assert in_december == await titles("What did the bakery offer in December?")
    assert in_may != await titles("What did the bakery offer in May?")


# --- relevance feedback ------------------------------------------------------------------------------


class FeedbackIndex:
    """Fulltext finds chunk a; the plain vector search finds nothing; the feedback search finds chunk b."""

    def __init__(self, stored: dict[str, Vector]) -> None:
        self.stored = stored
        self.vector_queries: list[Vector] = []

    async def search_chunks_fulltext(self, kb: str, query: str, limit: int) -> list[ChunkHit]:
        return [ChunkHit("a", "doc-a", "Air conditioning", "The air-conditioner will be installed soon.", 0, 3.0)]

    async def search_chunks_vector(self, kb: str, embedding: Vector, limit: int) -> list[ChunkHit]:
        self.vector_queries.append(embedding)
        if len(self.vector_queries) == 1:
            return []
        return [ChunkHit("b", "doc-b", "Reminder", "The AC gets fitted at 6 PM today.", 0, 0.8)]

    async def chunk_embeddings(self, kb: str, chunk_ids: Sequence[str]) -> dict[str, Vector]:
        return {chunk_id: self.stored[chunk_id] for chunk_id in chunk_ids if chunk_id in self.stored}


async def test_feedback_searches_again_from_the_question_moved_towards_its_best_fulltext_hits() -> None:
    embedder = TermEmbedder(dimension=8)
    question = "When will the air-conditioner be installed?"
    stored = np.asarray([0, 0, 0, 0, 0, 0, 0, 3], dtype=np.float32)
    index = FeedbackIndex({"a": stored})
    rankings = await ChunkSearch(KB, index, 10, CHUNKS).rankings(question, embedder)

    assert [c.hit.chunk_id for c in rankings.fulltext] == ["a"] and rankings.vector == ()
    assert [c.hit.chunk_id for c in rankings.feedback] == ["b"]
    asked = embedder.vector(question)
    expected = asked / np.linalg.norm(asked) + stored / 3
    assert np.allclose(index.vector_queries[1], expected, atol=1e-6)
    assert [name for name, _, _ in rankings.weighted_lists(CHUNKS)] == ["fulltext", "feedback"]

    without_vectors = FeedbackIndex({})
    plain = await ChunkSearch(KB, without_vectors, 10, CHUNKS).rankings(question, embedder)
    assert plain.feedback == () and len(without_vectors.vector_queries) == 1


async def test_naive_results_record_the_feedback_rank() -> None:
    agent = NaiveRagAgent(KB, FeedbackIndex({"a": np.ones(8, dtype=np.float32)}), TermEmbedder(dimension=8))
    results = (await agent.retrieve_with_trace("When will the air-conditioner be installed?", "t"))["retrieval_results"]
    by_chunk = {r["result_id"]: r["metadata"] for r in results}
    assert by_chunk["chunk:b"]["feedback_rank"] == 1 and by_chunk["chunk:b"]["fulltext_rank"] is None
    assert by_chunk["chunk:a"]["fulltext_rank"] == 1 and by_chunk["chunk:a"]["feedback_rank"] is None


def test_the_feedback_ranking_takes_the_weight_a_graph_ranking_loses_to_hubs() -> None:
    found = ChunkRankings((_candidate("a", 0.5),), (_candidate("b", 0.0),), (_candidate("c", 0.0),))
    assert [name for name, _, _ in found.weighted_lists(CHUNKS)] == ["fulltext", "vector", "feedback"]
    assert found.weighted_lists(CHUNKS)[2][2] == pytest.approx(1.0)
    assert found.weighted_lists(CHUNKS, feedback_share=0.25)[2][2] == pytest.approx(0.25)
    assert found.weighted_lists(CHUNKS)[0][2] == pytest.approx(found.weights(CHUNKS)[0])
    assert [name for name, _, _ in ChunkRankings((_candidate("a", 0.5),)).weighted_lists(CHUNKS)] == ["fulltext"]


# --- documents that continue one another in time ------------------------------------------------------

THREAD_SESSIONS = [
    Passage(
        "20260121_1300",
        "Ana: watch the play Hamlet tomorrow? Dinner first at the noodle bar near the theatre, at seven.",
        (),
    ),
    Passage("20260122_1700", "Ana: reminder, dinner first at the noodle bar near the theatre, at seven tomorrow.", ()),
    Passage("20260322_1700", "Ana: dinner first at the noodle bar near the theatre, then the play.", ()),
    Passage("20260123_0900", "Omar: your dentist visit moves to Friday morning.", ()),
]


async def test_naive_lifts_the_next_days_follow_up_of_its_best_hit(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = await memory_graph(KB, THREAD_SESSIONS, TermEmbedder())
    agent = NaiveRagAgent(KB, graph, TermEmbedder(), top_k=2)
    question = "When does Sam watch the play Hamlet?"

    # Only the feedback search reaches beyond the plan, and it prefers the look-alike two months on.
    results = (await agent.retrieve_with_trace(question, "t"))["retrieval_results"]
    assert [r["source"]["title"] for r in results] == ["20260121_1300", "20260122_1700"]
    assert results[1]["metadata"]["continues"] == results[0]["source"]["chunk_id"]
    assert results[0]["metadata"]["continues"] is None
    assert results[1]["metadata"]["feedback_rank"] == 3  # its own ranks stay in the trace
    assert results[1]["score"] < results[0]["score"]

    async def no_continuations(*_args: object, **_kwargs: object) -> list[object]:
        return []

    monkeypatch.setattr("backend.graphrag_agent.agents.naive_rag_agent.continuations", no_continuations)
    assert chunk_titles(await agent.retrieve_with_trace(question, "t")) == ["20260121_1300", "20260322_1700"]
