"""Community reports: the parser on 101 recorded GPT-4o reports and broken variants of them, the prompt's
bounds, and the LLM summarizer through the real OpenAI-compatible client against the scripted server
(recorded replies, HTTP 500, garbage, and reuse of unchanged communities).
"""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from backend.domain.graph import EntityGraph, EntityRecord, RelationRecord
from backend.graphrag_agent.communities import CommunityDraft, detect_communities
from backend.graphrag_agent.community_builder import CommunityBuilder
from backend.graphrag_agent.community_summaries import extractive_summary
from backend.infrastructure.extraction.community_reports import (
    REPORT_SYSTEM_PROMPT,
    CommunityReport,
    ExtractiveCommunitySummarizer,
    Finding,
    LlmCommunitySummarizer,
    ReportParseError,
    parse_community_report,
    report_messages,
)
from backend.infrastructure.llm import OpenAICompatibleChatModel
from tests.support.replay import recorded_reports
from tests.support.scripted_llm import Reply, ScriptedLLM

KB = "carol"


def report(index: int = 0) -> tuple[str, dict[str, Any]]:
    raw = recorded_reports()[index]
    return raw, json.loads(raw)


# -- the parser -----------------------------------------------------------------------------------


def test_all_101_recorded_reports_parse_faithfully() -> None:
    raws = recorded_reports()
    assert len(raws) == 101

    for raw in raws:
        expected = json.loads(raw)
        parsed = parse_community_report(raw)

        assert parsed.title == expected["title"].strip()
        assert parsed.summary == expected["summary"].strip()
        assert parsed.rating == pytest.approx(min(10.0, max(0.0, float(expected["rating"]))))
        assert parsed.rating_explanation == expected["rating_explanation"].strip()
        assert [f.summary for f in parsed.findings] == [f["summary"].strip() for f in expected["findings"]]
        assert [f.explanation for f in parsed.findings] == [f["explanation"].strip() for f in expected["findings"]]


def with_trailing_commas(value: dict[str, Any]) -> str:
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    return re.sub(r"(\S)(\n\s*[}\]])", r"\1,\2", pretty)


BROKEN_VARIANTS: dict[str, Callable[[str, dict[str, Any]], str]] = {
    "code fence": lambda raw, value: f"```json\n{raw}\n```",
    "bare fence": lambda raw, value: f"```\n{raw}\n```\n",
    "leading and trailing prose": lambda raw, value: (
        f"Here is the report you asked for {{as JSON}}:\n\n{raw}\n\nHope it helps!"
    ),
    "trailing commas": lambda raw, value: with_trailing_commas(value),
    "reasoning block first": lambda raw, value: f"<think>The user wants {{json}}. Let me think.</think>\n{raw}",
    "raw newlines inside strings": lambda raw, value: json.dumps(value, indent=1).replace("\\n", "\n"),
}


@pytest.mark.parametrize("variant", BROKEN_VARIANTS)
def test_every_recorded_report_survives_each_kind_of_damage(variant: str) -> None:
    damage = BROKEN_VARIANTS[variant]
    for raw in recorded_reports():
        value = json.loads(raw)
        parsed = parse_community_report(damage(raw, value))

        assert parsed.title == value["title"].strip()
        assert len(parsed.findings) == len(value["findings"])
        assert parsed.rating == pytest.approx(min(10.0, max(0.0, float(value["rating"]))))


@pytest.mark.parametrize(
    ("rating", "expected"),
    [
        ("7.5", 7.5),
        ("8/10", 8.0),
        ("Rating: 6", 6.0),
        ("6,5", 6.5),
        (9, 9.0),
        (12, 10.0),
        (-2, 0.0),
        ("high", None),
        (True, None),
        (None, None),
        ([7], None),
    ],
)
def test_ratings_are_read_leniently_and_clamped(rating: object, expected: float | None) -> None:
    _raw, value = report()
    value["rating"] = rating

    assert parse_community_report(json.dumps(value)).rating == expected


def test_missing_fields_are_tolerated() -> None:
    _raw, value = report()
    del value["title"], value["rating"], value["rating_explanation"]

    parsed = parse_community_report(json.dumps(value))

    assert (parsed.title, parsed.rating, parsed.rating_explanation) == ("", None, "")
    assert parsed.summary == value["summary"]


def test_findings_may_be_strings_or_half_filled() -> None:
    reply = json.dumps(
        {
            "summary": "S.",
            "findings": ["Plain finding", {"explanation": "Only an explanation."}, {}, 3, {"summary": ""}],
        }
    )

    assert parse_community_report(reply).findings == (Finding("Plain finding"), Finding("Only an explanation."))


def test_findings_alone_are_enough() -> None:
    parsed = parse_community_report('{"title": "T", "findings": [{"summary": "A", "explanation": "B"}]}')

    assert parsed == CommunityReport("T", "", None, "", (Finding("A", "B"),))
    assert parsed.text() == "- A: B"


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "I am sorry, I cannot produce a report for this community.",
        '{"title": "Unfinished", "summary": "The commun',
        '["a list", "of strings"]',
        '{"title": "No content at all", "rating": 5}',
        '{"answer": 42}',
        "{" * 5000,
    ],
)
def test_replies_without_a_report_are_rejected(reply: str) -> None:
    with pytest.raises(ReportParseError):
        parse_community_report(reply)


def test_a_truncated_report_is_rejected_not_mistaken_for_one_of_its_findings() -> None:
    for raw in recorded_reports():
        cut = raw.rindex('"explanation"')  # after at least one complete finding object

        with pytest.raises(ReportParseError):
            parse_community_report(raw[:cut])


def test_a_report_wrapped_in_a_list_is_found() -> None:
    raw, value = report(2)

    assert parse_community_report(f"[{raw}]").title == value["title"]


def test_report_text_puts_findings_after_the_summary_within_a_bound() -> None:
    raw, value = report(5)
    parsed = parse_community_report(raw)

    text = parsed.text()
    short = parsed.text(limit=300)

    assert text.startswith(value["summary"].strip() + "\n\n- " + value["findings"][0]["summary"].strip())
    assert len(text) <= 2000 and len(short) <= 300


# -- the prompt -----------------------------------------------------------------------------------


def big_community(size: int) -> tuple[CommunityDraft, dict[str, EntityRecord], list[RelationRecord]]:
    ids = [f"e{i:04d}" for i in range(size)]
    entities = {e: EntityRecord(e, f"Entity {e}", "concept", "A long description. " * 60) for e in ids}
    relations = [
        RelationRecord(a, b, "They interact. " * 40, float(i % 7 + 1))
        for i, (a, b) in enumerate(itertools.pairwise(ids))
    ]
    relations.append(RelationRecord(ids[0], ids[1], "hub", 100.0))
    draft = CommunityDraft("c", 0, tuple(ids), None, (), 1000.0, size)
    return draft, entities, relations


def test_the_prompt_stays_within_its_budget_and_leads_with_the_central_entities() -> None:
    draft, entities, relations = big_community(500)

    system, user = report_messages(draft, entities, relations, max_chars=6000)

    assert system.content == REPORT_SYSTEM_PROMPT
    assert len(user.content) <= 6000
    lines = user.content.splitlines()
    entity_lines = lines[lines.index("Entities (name | type | description):") + 1 :]
    assert entity_lines[0].startswith("Entity e0001 | concept |")  # highest weighted degree
    assert "more not shown)" in user.content
    assert "Relations (source | target | weight | description):" in user.content
    assert "Entity e0000 | Entity e0001 | 100 | hub" in user.content


def test_the_prompt_budget_has_a_floor() -> None:
    unused = OpenAICompatibleChatModel("http://127.0.0.1:9/v1", "k", "m")  # builds no client until called

    with pytest.raises(ValueError, match="max_prompt_chars"):
        LlmCommunitySummarizer(unused, max_prompt_chars=200)


def test_a_small_community_is_sent_whole() -> None:
    draft, entities, relations = story()

    _system, user = report_messages(draft, entities, relations)

    assert "not shown" not in user.content
    assert all(e.name in user.content for e in entities.values())
    assert user.content.startswith("Community of 4 entities (hierarchy level 0).")


# -- the summarizers through the real client ------------------------------------------------------


def story() -> tuple[CommunityDraft, dict[str, EntityRecord], list[RelationRecord]]:
    entities = {
        "scrooge": EntityRecord("scrooge", "Scrooge", "person", "A miser who learns generosity.", 9),
        "marley": EntityRecord("marley", "Marley's Ghost", "person", "Scrooge's dead partner, in chains.", 4),
        "bob": EntityRecord("bob", "Bob Cratchit", "person", "Scrooge's clerk.", 5),
        "tim": EntityRecord("tim", "Tiny Tim", "person", "Bob's ill son.", 3),
    }
    relations = [
        RelationRecord("marley", "scrooge", "Marley's Ghost warns Scrooge.", 9.0),
        RelationRecord("bob", "scrooge", "Bob works for Scrooge.", 6.0),
        RelationRecord("bob", "tim", "Bob carries Tiny Tim.", 8.0),
    ]
    draft = CommunityDraft("c-story", 0, tuple(sorted(entities)), None, (), 23.0, 3)
    return draft, entities, relations


@pytest.fixture
async def model(scripted_llm: ScriptedLLM) -> AsyncIterator[OpenAICompatibleChatModel]:
    # No retries: an HTTP 500 must reach the summarizer at once.
    client = OpenAICompatibleChatModel(scripted_llm.base_url, "sk-test", "scripted-model", max_retries=0)
    yield client
    await client.aclose()


async def test_a_recorded_report_becomes_the_summary(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    raw, value = report(0)
    scripted_llm.script(Reply(content=raw))
    summarizer = LlmCommunitySummarizer(model)
    draft, entities, relations = story()

    title, summary, rank = await summarizer.summarize(KB, draft, entities, relations)

    assert title == value["title"]
    assert summary.startswith(value["summary"])
    assert f"- {value['findings'][0]['summary']}" in summary
    assert rank == pytest.approx(float(value["rating"]))
    (request,) = scripted_llm.requests
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert "Marley's Ghost | Scrooge | 9 | Marley's Ghost warns Scrooge." in request["messages"][1]["content"]
    assert summarizer.fallbacks == 0


async def test_a_fenced_report_without_title_or_rating_is_completed_from_the_community(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    scripted_llm.script(Reply(content='Sure!\n```json\n{"summary": "Scrooge and his circle.", "findings": [],}\n```'))
    draft, entities, relations = story()
    offline = extractive_summary(draft, entities, relations)

    result = await LlmCommunitySummarizer(model).summarize(KB, draft, entities, relations)

    assert result == (offline.title, "Scrooge and his circle.", offline.rank)


@pytest.mark.parametrize(
    "reply",
    [Reply(status=500, error_message="upstream exploded"), Reply(content="¯\\_(ツ)_/¯ no JSON today")],
    ids=["http-500", "garbage"],
)
async def test_a_failed_report_falls_back_to_the_extractive_summary_with_a_warning(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM, caplog: pytest.LogCaptureFixture, reply: Reply
) -> None:
    scripted_llm.script(reply)
    summarizer = LlmCommunitySummarizer(model)
    draft, entities, relations = story()

    with caplog.at_level(logging.WARNING, logger="backend.infrastructure.extraction.community_reports"):
        result = await summarizer.summarize(KB, draft, entities, relations)

    assert result == extractive_summary(draft, entities, relations)
    assert summarizer.fallbacks == 1
    assert len(scripted_llm.requests) == 1
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "c-story" in warning.getMessage() and "extractive" in warning.getMessage()


async def test_the_extractive_summarizer_needs_no_model() -> None:
    draft, entities, relations = story()

    result = await ExtractiveCommunitySummarizer().summarize(KB, draft, entities, relations)

    assert result == extractive_summary(draft, entities, relations)


def cliques(count: int, size: int) -> tuple[EntityGraph, dict[str, EntityRecord], list[RelationRecord]]:
    entities: dict[str, EntityRecord] = {}
    relations: list[RelationRecord] = []
    for k in range(count):
        names = [f"k{k}_{i}" for i in range(size)]
        entities |= {n: EntityRecord(n, n.upper(), "thing", f"{n} is a thing.", 1) for n in names}
        relations += [RelationRecord(a, b, f"{a} touches {b}.", 3.0) for a, b in itertools.combinations(names, 2)]
    edges = tuple((r.source_id, r.target_id, r.weight) for r in relations)
    return EntityGraph(tuple(sorted(entities)), edges), entities, relations


def replay_forever() -> Iterator[str]:
    return itertools.cycle(recorded_reports())


async def test_a_second_build_of_unchanged_communities_makes_no_model_call(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    replies = replay_forever()
    scripted_llm.responder = lambda body: Reply(content=next(replies))
    graph, entities, relations = cliques(6, 4)
    summarizer = LlmCommunitySummarizer(model)

    first = await CommunityBuilder(summarizer, concurrency=3).build(KB, graph, entities, relations, {})
    calls_after_first = len(scripted_llm.requests)
    previous = {r.community_id: r for r in first.records}
    second = await CommunityBuilder(summarizer, concurrency=3).build(KB, graph, entities, relations, previous)

    assert (first.summarized, first.reused, calls_after_first) == (6, 0, 6)
    assert {r.title for r in first.records} <= {json.loads(raw)["title"] for raw in recorded_reports()}
    assert (second.summarized, second.reused) == (0, 6)
    assert len(scripted_llm.requests) == calls_after_first
    assert second.records == first.records
    assert summarizer.fallbacks == 0


async def test_only_a_changed_community_is_summarized_again(
    model: OpenAICompatibleChatModel, scripted_llm: ScriptedLLM
) -> None:
    replies = replay_forever()
    scripted_llm.responder = lambda body: Reply(content=next(replies))
    graph, entities, relations = cliques(4, 4)
    summarizer = LlmCommunitySummarizer(model)
    first = await CommunityBuilder(summarizer).build(KB, graph, entities, relations, {})
    grown_relation = RelationRecord("k0_0", "new", "A newcomer joins.", 3.0)
    entities["new"] = EntityRecord("new", "NEW", "thing", "Someone new.", 1)
    grown = EntityGraph((*graph.entity_ids, "new"), (*graph.edges, ("k0_0", "new", 3.0)))

    second = await CommunityBuilder(summarizer).build(
        KB, grown, entities, [*relations, grown_relation], {r.community_id: r for r in first.records}
    )

    assert (second.summarized, second.reused) == (1, 3)
    assert len(scripted_llm.requests) == 4 + 1
    assert "NEW" in scripted_llm.requests[-1]["messages"][1]["content"]
    changed = next(d for d in detect_communities(KB, grown) if "new" in d.entity_ids)
    assert changed.community_id not in {r.community_id for r in first.records}
