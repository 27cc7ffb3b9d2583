"""The LLM extractor through the real OpenAI-compatible client against the scripted server, which replays
the 84 recorded GPT-4o extraction outputs: one call per chunk, concurrency bounded, answers cached by
content hash (a second run makes no request), deviant outputs still usable, failures retried once and
then raised as ModelError naming the chunk."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from functools import cache as memoise
from pathlib import Path
from typing import Any

import pytest

from backend.application.ports.chat_model import ModelDelta
from backend.domain import ids
from backend.domain.conversation import Message
from backend.domain.errors import ModelError
from backend.domain.graph import ChunkRecord, DocumentRecord, Extraction
from backend.graphrag_agent.chunking import chunk_text
from backend.graphrag_agent.extraction import parse_tuples
from backend.infrastructure.extraction import ExtractionCache, ExtractionFailed, LlmExtractor
from backend.infrastructure.llm import OpenAICompatibleChatModel
from tests.support.replay import recorded_extractions, replay_file
from tests.support.scripted_llm import Reply, ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
KB = "carol"


@memoise
def carol_chunks() -> tuple[str, ...]:
    """Chunks of A Christmas Carol, the text the recorded outputs were extracted from."""
    text = replay_file("mock_data.txt").read_text(encoding="utf-8-sig")
    return tuple(chunk.text for chunk in chunk_text(text, max_tokens=300))


def document(title: str, texts: Sequence[str]) -> tuple[DocumentRecord, list[ChunkRecord]]:
    doc = DocumentRecord(doc_id=ids.document_id(title, "\n\n".join(texts)), title=title)
    chunks = [
        ChunkRecord(chunk_id=ids.chunk_id(KB, doc.doc_id, ordinal), doc_id=doc.doc_id, ordinal=ordinal, text=text)
        for ordinal, text in enumerate(texts)
    ]
    return doc, chunks


def in_sequence(outputs: Sequence[str]) -> Callable[[dict[str, Any]], Reply]:
    """A responder serving the recorded outputs one per request, in order."""
    replies = iter(outputs)
    return lambda _body: Reply(content=next(replies))


def user_message(body: dict[str, Any]) -> str:
    return str(next(m["content"] for m in body["messages"] if m["role"] == "user"))


def expected_counts(output: str) -> tuple[int, int]:
    """Distinct entities (listed ones and relationship ends) and distinct related pairs in one output."""
    parsed = parse_tuples(output)
    names = [e.name for e in parsed.entities] + [n for r in parsed.relationships for n in (r.source, r.target)]
    entities = {ids.entity_id(KB, name) for name in names if ids.normalise_entity_name(name)}
    pairs = {
        frozenset((ids.entity_id(KB, r.source), ids.entity_id(KB, r.target)))
        for r in parsed.relationships
        if ids.entity_id(KB, r.source) != ids.entity_id(KB, r.target)
    }
    return len(entities), len(pairs)


@pytest.fixture
async def cache(tmp_path: Path) -> AsyncIterator[ExtractionCache]:
    opened = await ExtractionCache.open(tmp_path / "data" / "llm_cache.db")
    yield opened
    await opened.close()


@pytest.fixture
async def model(scripted_llm: ScriptedLLM) -> AsyncIterator[OpenAICompatibleChatModel]:
    # No SDK retries: the extractor's own single retry is what these tests count.
    client = OpenAICompatibleChatModel(scripted_llm.base_url, "test-key", "scripted-model", max_retries=0)
    yield client
    await client.aclose()


# -- one call per chunk, and the cache -------------------------------------------------------------


async def test_replays_all_84_outputs_one_call_per_chunk(
    scripted_llm: ScriptedLLM, model: OpenAICompatibleChatModel, cache: ExtractionCache
) -> None:
    outputs = recorded_extractions()
    texts = carol_chunks()[: len(outputs)]
    assert len(texts) == 84
    scripted_llm.responder = in_sequence(outputs)
    extractor = LlmExtractor(model, cache, max_concurrency=4)
    documents = [
        document(f"A Christmas Carol, part {part + 1}", texts[part * 21 : part * 21 + 21]) for part in range(4)
    ]

    results = [await extractor.extract(KB, doc, chunks) for doc, chunks in documents]

    assert len(scripted_llm.requests) == 84
    assert [r.model_calls for r in results] == [21] * 4 and [r.cache_hits for r in results] == [0] * 4
    # Each output went to exactly one chunk, so the totals do not depend on which went where.
    expected = [expected_counts(output) for output in outputs]
    assert sum(len(r.entity_mentions) for r in results) == sum(e for e, _ in expected)
    assert sum(len(r.relation_mentions) for r in results) == sum(p for _, p in expected)
    assert sum(len(r.entity_mentions) for r in results) > 600
    for (_, chunks), result in zip(documents, results, strict=True):
        assert {m.chunk_id for m in result.entity_mentions} == {c.chunk_id for c in chunks}
        assert_invariants(result)
    # The prompt of every call holds its chunk's text and its document's title.
    sent = [user_message(body) for body in scripted_llm.requests]
    for doc, chunks in documents:
        for chunk in chunks:
            assert sum(1 for message in sent if chunk.text.strip() in message) == 1
            assert any(f"Document title: {doc.title}" in m and chunk.text.strip() in m for m in sent)
    system = scripted_llm.requests[0]["messages"][0]
    assert system["role"] == "system" and '("entity"<|>' in system["content"]


async def test_second_run_is_served_from_the_cache(
    scripted_llm: ScriptedLLM, model: OpenAICompatibleChatModel, cache: ExtractionCache, tmp_path: Path
) -> None:
    scripted_llm.responder = in_sequence(recorded_extractions())
    doc, chunks = document("A Christmas Carol", carol_chunks()[:6])
    first = await LlmExtractor(model, cache).extract(KB, doc, chunks)
    assert len(scripted_llm.requests) == 6

    again = await LlmExtractor(model, cache).extract(KB, doc, chunks)
    assert len(scripted_llm.requests) == 6  # no new request reached the server
    assert (again.model_calls, again.cache_hits) == (0, 6)
    assert again.entity_mentions == first.entity_mentions
    assert again.relation_mentions == first.relation_mentions

    # The cache is a file: a new connection (a restarted process) still has the answers.
    reopened = await ExtractionCache.open(tmp_path / "data" / "llm_cache.db")
    try:
        third = await LlmExtractor(model, reopened).extract(KB, doc, chunks)
    finally:
        await reopened.close()
    assert len(scripted_llm.requests) == 6 and third.model_calls == 0

    # Another model name is another key: the cache never serves one model's answer for another.
    await LlmExtractor(model, cache, model_name="another-model").extract(KB, doc, chunks[:1])
    assert len(scripted_llm.requests) == 7


async def test_identical_chunks_cost_one_call(
    scripted_llm: ScriptedLLM, model: OpenAICompatibleChatModel, cache: ExtractionCache
) -> None:
    scripted_llm.responder = in_sequence(recorded_extractions())
    text = carol_chunks()[10]
    doc, chunks = document("Repeated", [text, text, text])
    result = await LlmExtractor(model, cache).extract(KB, doc, chunks)
    assert len(scripted_llm.requests) == 1
    assert (result.model_calls, result.cache_hits) == (1, 2)
    assert len({m.chunk_id for m in result.entity_mentions}) == 3


async def test_calls_run_concurrently_up_to_the_limit(scripted_llm: ScriptedLLM, cache: ExtractionCache) -> None:
    outputs = iter(itertools.cycle(recorded_extractions()[:5]))
    scripted_llm.responder = lambda _body: Reply(content=next(outputs), tokens=["x"], delay_s=0.05)
    client = OpenAICompatibleChatModel(scripted_llm.base_url, "test-key", "scripted-model", max_retries=0)
    counting = InFlight(client)
    try:
        doc, chunks = document("Concurrent", carol_chunks()[20:30])
        await LlmExtractor(counting, cache, max_concurrency=3).extract(KB, doc, chunks)
    finally:
        await client.aclose()
    assert len(scripted_llm.requests) == 10
    assert counting.peak == 3


class InFlight:
    """A ChatModel wrapper that records how many `complete` calls overlap."""

    def __init__(self, inner: OpenAICompatibleChatModel) -> None:
        self.inner = inner
        self.current = 0
        self.peak = 0

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    async def complete(self, messages: Sequence[Message]) -> str:
        self.current += 1
        self.peak = max(self.peak, self.current)
        try:
            return await self.inner.complete(messages)
        finally:
            self.current -= 1

    def stream(self, messages: Sequence[Message]) -> AsyncGenerator[ModelDelta, None]:
        return self.inner.stream(messages)

    async def aclose(self) -> None:
        await self.inner.aclose()


# -- real-world deviations ---------------------------------------------------------------------------


DEVIATIONS: dict[str, Callable[[str], bool]] = {
    "markdown headings": lambda o: "**Entities:**" in o,
    "code fence": lambda o: o.lstrip().startswith("```"),
    '"relation" label': lambda o: '("relation"<|>' in o,
    "curly quotes": lambda o: "“relationship”" in o,
    "lower-case marker": lambda o: "<|complete|>" in o,
    "no marker": lambda o: "<|complete|>" not in o.lower(),
    "empty records": lambda o: o.startswith("## \n"),
    "broken strength delimiter": lambda o: '"|>' in o,
}


@pytest.mark.parametrize("deviation", list(DEVIATIONS))
async def test_deviant_outputs_still_produce_entities_and_relations(
    deviation: str, scripted_llm: ScriptedLLM, model: OpenAICompatibleChatModel, cache: ExtractionCache
) -> None:
    check = DEVIATIONS[deviation]
    output = next(o for o in recorded_extractions() if check(o) and parse_tuples(o).relationships)
    scripted_llm.script(Reply(content=output))
    doc, chunks = document(f"Deviation: {deviation}", [carol_chunks()[40]])
    result = await LlmExtractor(model, cache).extract(KB, doc, chunks)
    entities, pairs = expected_counts(output)
    assert len(result.entity_mentions) == entities > 0
    assert len(result.relation_mentions) == pairs > 0
    assert_invariants(result)


async def test_unlisted_relationship_ends_become_other_entities(
    scripted_llm: ScriptedLLM, model: OpenAICompatibleChatModel, cache: ExtractionCache
) -> None:
    scripted_llm.script(
        Reply(
            content='("entity"<|>"**Scrooge**"<|>"Person"<|>"A miser.")##\n'
            '("relationship"<|>"Scrooge"<|>"Fezziwig"<|>"Scrooge was apprenticed to Fezziwig."<|>8)##\n'
            '("relationship"<|>"scrooge"<|>"SCROOGE"<|>"The same man.")<|COMPLETE|>'
        )
    )
    doc, chunks = document("Stave Two", ["Scrooge remembered old Fezziwig."])
    result = await LlmExtractor(model, cache).extract(KB, doc, chunks)
    by_name = {m.name: m for m in result.entity_mentions}
    assert set(by_name) == {"Scrooge", "Fezziwig"}  # emphasis stripped; "scrooge" is the same entity
    assert by_name["Scrooge"].type == "person" and by_name["Fezziwig"].type == "other"
    assert by_name["Scrooge"].entity_id == ids.entity_id(KB, "Scrooge")
    (relation,) = result.relation_mentions  # the self-relation is dropped
    assert relation.weight == 8.0 and relation.description == "Scrooge was apprenticed to Fezziwig."


async def test_an_answer_that_does_not_parse_is_extracted_offline_and_counted(
    scripted_llm: ScriptedLLM, model: OpenAICompatibleChatModel, cache: ExtractionCache, caplog: Any
) -> None:
    readable = next(o for o in recorded_extractions() if parse_tuples(o).relationships)
    scripted_llm.script(Reply(content=readable), Reply(content="Sure! Scrooge is the main character."))
    doc, chunks = document("Stave One", [carol_chunks()[40], "Ebenezer Scrooge kept his counting-house in London."])
    with caplog.at_level("WARNING"):
        result = await LlmExtractor(model, cache, max_concurrency=1).extract(KB, doc, chunks)
    assert result.fallbacks == 1
    offline = {m.name for m in result.entity_mentions if m.chunk_id == chunks[1].chunk_id}
    assert "Ebenezer Scrooge" in offline and "London" in offline  # the offline extractor's, for that chunk
    assert any(m.chunk_id == chunks[0].chunk_id for m in result.relation_mentions)  # the model's stay
    assert "1 of 2 chunks" in caplog.text and "extracted offline" in caplog.text
    assert_invariants(result)


async def test_an_answer_that_finds_nothing_is_not_a_fallback(
    scripted_llm: ScriptedLLM, model: OpenAICompatibleChatModel, cache: ExtractionCache
) -> None:
    scripted_llm.script(Reply(content="<|COMPLETE|>"))
    doc, chunks = document("Blank", ["It was a cold, bleak, biting day."])
    result = await LlmExtractor(model, cache).extract(KB, doc, chunks)
    assert result.fallbacks == 0 and result.entity_mentions == ()


# -- failures -------------------------------------------------------------------------------------------


async def test_http_500_is_retried_once_then_raises_model_error(
    scripted_llm: ScriptedLLM, model: OpenAICompatibleChatModel, cache: ExtractionCache
) -> None:
    good = recorded_extractions()[0]
    texts = ["Marley was dead: to begin with.", "BROKEN CHUNK: the model fails here.", "Scrooge knew he was dead."]
    failure = Reply(status=500, error_message="upstream exploded")
    scripted_llm.responder = lambda body: failure if "BROKEN CHUNK" in user_message(body) else Reply(content=good)
    doc, chunks = document("Stave One", texts)

    with pytest.raises(ModelError) as raised:
        await LlmExtractor(model, cache).extract(KB, doc, chunks)

    assert isinstance(raised.value, ExtractionFailed) and raised.value.chunk_ordinal == 1
    assert "chunk 1" in raised.value.message and "HTTP 500" in raised.value.message
    broken = [body for body in scripted_llm.requests if "BROKEN CHUNK" in user_message(body)]
    assert len(broken) == 2  # the call and exactly one retry

    # Nothing failed is cached: once the model recovers, only the failed chunk is asked again.
    await asyncio.sleep(0)
    before = len(scripted_llm.requests)
    scripted_llm.responder = lambda _body: Reply(content=good)
    result = await LlmExtractor(model, cache).extract(KB, doc, chunks)
    new_calls = len(scripted_llm.requests) - before
    assert result.model_calls == new_calls and new_calls <= 3
    assert all("BROKEN CHUNK" in user_message(body) or new_calls > 1 for body in scripted_llm.requests[before:])
    assert len({m.chunk_id for m in result.entity_mentions}) == 3


async def test_one_failure_then_success_counts_both_calls(
    scripted_llm: ScriptedLLM, model: OpenAICompatibleChatModel, cache: ExtractionCache
) -> None:
    scripted_llm.script(Reply(status=503, error_message="busy"), Reply(content=recorded_extractions()[1]))
    doc, chunks = document("Stave Three", ["The Ghost of Christmas Present."])
    result = await LlmExtractor(model, cache).extract(KB, doc, chunks)
    assert result.model_calls == 2 and len(scripted_llm.requests) == 2
    assert result.entity_mentions


async def test_chinese_text_and_title_reach_the_model_verbatim(
    scripted_llm: ScriptedLLM, model: OpenAICompatibleChatModel, cache: ExtractionCache
) -> None:
    scripted_llm.script(
        Reply(
            content='("entity"<|>"赵鹏"<|>"person"<|>"中国足球运动员")##\n("entity"<|>"广州恒大"<|>"organization"<|>"球队")'
        )
    )
    text = "赵鹏（），中国足球运动员，司职后卫。2013年加盟广州恒大。"
    doc, chunks = document("赵鹏", [text])
    result = await LlmExtractor(model, cache).extract(KB, doc, chunks)
    message = user_message(scripted_llm.requests[0])
    assert "Document title: 赵鹏" in message and text in message
    assert "same language" in scripted_llm.requests[0]["messages"][0]["content"]
    assert {m.name for m in result.entity_mentions} == {"赵鹏", "广州恒大"}


def assert_invariants(result: Extraction) -> None:
    mentioned = {(m.chunk_id, m.entity_id) for m in result.entity_mentions}
    assert len(mentioned) == len(result.entity_mentions)
    for mention in result.entity_mentions:
        assert mention.name == mention.name.strip() and mention.name
        assert mention.entity_id == ids.entity_id(KB, mention.name)
        assert mention.type == mention.type.lower()
    for relation in result.relation_mentions:
        assert relation.source_id != relation.target_id
        assert (relation.chunk_id, relation.source_id) in mentioned
        assert (relation.chunk_id, relation.target_id) in mentioned
