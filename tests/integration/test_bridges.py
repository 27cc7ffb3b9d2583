"""Bridges: the entity a question's relation points at, found through the named document's own words.

Made-up documents, indexed by the real offline pipeline into the embedded store: the film's page
names a producer, a director and a composer, each with a page of their own. Which page the bridge
ranking puts first must follow the question's relation word, not the order of the text.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.application.ports.ingestion import SourceDocument
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.agents.bridges import introducing_words, is_home
from backend.graphrag_agent.agents.graph_agent import GraphSearch
from backend.graphrag_agent.agents.tuning import GraphSearchSettings
from backend.infrastructure.graph_store.embedded import EmbeddedGraphStore
from tests.support.embedder import shared_minilm
from tests.support.indexing import make_indexer

KB = KnowledgeBase("films")
DOCUMENTS = [
    SourceDocument(
        "The Glass Orchard",
        "The Glass Orchard is a 1987 drama film produced by Mirela Okonkwo, directed by Tobias Feldkamp "
        "and with music composed by Ansel Varga. It was shot in Lisbon.",
    ),
    SourceDocument("Mirela Okonkwo", "Mirela Okonkwo (born 1950 in Lagos) is a film producer."),
    SourceDocument("Tobias Feldkamp (director)", "Tobias Feldkamp (born 1944 in Bremen) is a German film director."),
    SourceDocument("Ansel Varga", "Ansel Varga (born 1961 in Szeged) is a Hungarian composer."),
]


@pytest.fixture
async def search(tmp_path: Path) -> AsyncIterator[GraphSearch]:
    store = await EmbeddedGraphStore.open(tmp_path / "graph.db")
    await make_indexer(store, shared_minilm()).index(KB, DOCUMENTS)
    yield GraphSearch(KB.kb_prefix, store, shared_minilm(), 8, GraphSearchSettings(), "graph_agent")
    await store.close()


@pytest.mark.parametrize(
    ("question", "bridge"),
    [
        ("Where was the director of film The Glass Orchard born?", "Tobias Feldkamp (director)"),
        ("Where was the composer of film The Glass Orchard born?", "Ansel Varga"),
        ("Where was the producer of film The Glass Orchard born?", "Mirela Okonkwo"),
    ],
)
async def test_the_relation_word_picks_the_bridge(search: GraphSearch, question: str, bridge: str) -> None:
    probe = await search.probe(question)
    titles = [hit.title for hit in await search.bridges.ranking(question, probe.seeds)]
    assert titles[0] == "The Glass Orchard"  # the named document leads
    assert titles[1] == bridge
    assert set(titles) == {d.title for d in DOCUMENTS}  # every introduced page is still a candidate


async def test_the_graph_agent_ranks_both_hops_near_the_top(search: GraphSearch) -> None:
    """The plain searches also like the producer's page ("born", "film"); the bridge keeps the composer's
    page, which they miss, beside it."""
    question = "Where was the composer of film The Glass Orchard born?"
    ranked, _ = await search.local(question, await search.probe(question))
    titles = [c.hit.title for c in ranked]
    assert titles[0] == "The Glass Orchard"
    assert "Ansel Varga" in titles[1:3]
    assert ranked[titles.index("Ansel Varga")].metadata["bridge_rank"] == 2


async def test_a_question_naming_nothing_has_no_bridges(search: GraphSearch) -> None:
    question = "where were they born?"
    assert await search.bridges.ranking(question, (await search.probe(question)).seeds) == []


def test_own_document_titles_and_introducing_words() -> None:
    assert is_home("Tobias Feldkamp", "Tobias Feldkamp (director)")
    assert is_home("Heart of Doreon", "The Heart of Doreon")
    assert not is_home("Tobias", "Tobias Feldkamp")
    text = "A film produced by Mirela Okonkwo, directed by Tobias Feldkamp."
    assert introducing_words(text, "tobias feldkamp", 2) == (text.index("Tobias"), "directed by")
    assert introducing_words(text, "Nobody", 2) == (-1, "")
