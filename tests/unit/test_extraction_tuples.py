"""The GraphRAG tuple-format parser: all 84 recorded GPT-4o extraction outputs, and one focused case per
deviation listed in the llm_replay README (plus malformed records, which are skipped and counted)."""

from __future__ import annotations

import pytest

from backend.graphrag_agent.extraction.tuples import TupleEntity, TupleRelationship, parse_tuples
from tests.support.replay import recorded_extractions

# -- the recorded outputs -------------------------------------------------------------------------


def test_all_84_recorded_outputs_parse_to_the_readme_totals() -> None:
    outputs = recorded_extractions()
    assert len(outputs) == 84
    parsed = [parse_tuples(output) for output in outputs]
    entities = [entity for result in parsed for entity in result.entities]
    relationships = [relation for result in parsed for relation in result.relationships]
    # The README counts 654 entity and 515 "relationship" records; 5 more records are labelled
    # "relation" (one output), which we read as relationships too: 520.
    assert len(entities) == 654
    assert len(relationships) == 515 + 5
    assert sum(result.skipped for result in parsed) == 0
    # The README's "10 relationship records without strength" are really 10 records whose last
    # delimiter is broken (`"...text."|>9)` 9 times, `</|>8)` once): the strength is recovered.
    assert all(relation.strength is not None for relation in relationships)
    assert sum(1 for result in parsed if not result.complete) == 10  # 11 lack "<|COMPLETE|>", 1 is lower-case


def test_recorded_fields_are_clean() -> None:
    for output in recorded_extractions():
        result = parse_tuples(output)
        for entity in result.entities:
            assert entity.name and entity.name == entity.name.strip()
            assert not set(entity.name) & set('"“”<>|')
            assert entity.type == entity.type.lower() and entity.type
            assert "<|" not in entity.description and "|>" not in entity.description
            assert not entity.description.endswith(('"', ")", "##"))
        for relation in result.relationships:
            assert relation.source and relation.target
            assert not set(relation.source + relation.target) & set('"“”<>|')
            assert "|>" not in relation.description and not relation.description.endswith(('"', "</"))
            assert relation.strength is not None and 1 <= relation.strength <= 10


def test_first_recorded_output_exactly() -> None:
    result = parse_tuples(recorded_extractions()[0])
    assert result.complete
    assert [entity.name for entity in result.entities] == ["Scrooge", "Marley's Ghost", "Ebenezer Scrooge"]
    assert result.entities[0].type == "person"
    assert result.entities[0].description.startswith("Scrooge is a character who finds himself perplexed")
    assert result.relationships[0] == TupleRelationship(
        "Scrooge",
        "Marley's Ghost",
        "Scrooge is haunted by Marley's Ghost, which causes him significant mental distress and confusion.",
        10.0,
    )


# -- one case per deviation ------------------------------------------------------------------------

ENTITY_A = '("entity"<|>"Agnes Wren"<|>"person"<|>"Founder of the orchard.")'
ENTITY_B = '("entity"<|>"Merrow Valley"<|>"geo"<|>"Valley where the orchard lies.")'
RELATION = '("relationship"<|>"Agnes Wren"<|>"Merrow Valley"<|>"Agnes Wren farmed in the Merrow Valley."<|>7)'


def assert_standard(text: str, *, complete: bool = True) -> None:
    result = parse_tuples(text)
    assert result.entities == (
        TupleEntity("Agnes Wren", "person", "Founder of the orchard."),
        TupleEntity("Merrow Valley", "geo", "Valley where the orchard lies."),
    )
    assert result.relationships == (
        TupleRelationship("Agnes Wren", "Merrow Valley", "Agnes Wren farmed in the Merrow Valley.", 7.0),
    )
    assert result.skipped == 0
    assert result.complete is complete


def test_the_standard_format() -> None:
    assert_standard(f"{ENTITY_A}##\n{ENTITY_B}##\n{RELATION}<|COMPLETE|>")


def test_missing_completion_marker() -> None:
    assert_standard(f"{ENTITY_A}##\n{ENTITY_B}##\n{RELATION}", complete=False)


def test_lower_case_completion_marker() -> None:
    assert_standard(f"{ENTITY_A}##\n{ENTITY_B}##\n{RELATION}\n<|complete|>")


def test_empty_records() -> None:
    assert_standard(f"## \n{ENTITY_A}##\n## \n{ENTITY_B}##\n##\n##{RELATION}##\n<|COMPLETE|>")


def test_markdown_headings_and_numbered_lists() -> None:
    text = f"**Entities:**\n\n1. {ENTITY_A}\n2. {ENTITY_B}\n\n**Relationships:**\n\n1. {RELATION}\n\n<|COMPLETE|>"
    assert_standard(text)


def test_code_fence() -> None:
    assert_standard(f"```\n{ENTITY_A}##\n{ENTITY_B}##\n{RELATION}<|COMPLETE|>\n```")
    assert_standard(f"```text\n{ENTITY_A}##\n{ENTITY_B}##\n{RELATION}\n```\n<|COMPLETE|>")


def test_relation_label() -> None:
    assert_standard(f"{ENTITY_A}##\n{ENTITY_B}##\n{RELATION.replace('relationship', 'relation')}<|COMPLETE|>")


def test_curly_quotes() -> None:
    curly = RELATION.replace('"', "“", 1).replace('"', "”", 1)  # “relationship”
    curly = curly.replace('"Agnes Wren"', "“Agnes Wren”")
    assert_standard(f"{ENTITY_A}##\n{ENTITY_B}##\n{curly}<|COMPLETE|>")


def test_missing_strength() -> None:
    text = f'{ENTITY_A}##\n("relationship"<|>"Agnes Wren"<|>"Merrow Valley"<|>"Agnes Wren farmed there.")<|COMPLETE|>'
    result = parse_tuples(text)
    assert result.relationships == (TupleRelationship("Agnes Wren", "Merrow Valley", "Agnes Wren farmed there.", None),)


def test_broken_strength_delimiter() -> None:
    for broken in ('"|>7)', '"</|>7)'):
        relation = RELATION.replace('"<|>7)', broken)
        assert_standard(f"{ENTITY_A}##\n{ENTITY_B}##\n{relation}<|COMPLETE|>")


def test_newline_separated_records() -> None:
    assert_standard(f"{ENTITY_A}\n{ENTITY_B}\n\n{RELATION}\n<|COMPLETE|>")


def test_unquoted_fields_and_parentheses_inside() -> None:
    text = (
        "(entity<|>Internal Revenue Service (IRS)<|>organization<|>US tax agency (federal).)##\n"
        '("entity"<|>"Foundation"<|>"organization"<|>"A charity (501(c)(3))")<|COMPLETE|>'
    )
    result = parse_tuples(text)
    assert result.entities == (
        TupleEntity("Internal Revenue Service (IRS)", "organization", "US tax agency (federal)."),
        TupleEntity("Foundation", "organization", "A charity (501(c)(3))"),
    )


def test_malformed_records_are_skipped_and_counted() -> None:
    text = (
        f"{ENTITY_A}##\n"
        '("entity"<|>"")##\n'  # no type, empty name
        '("relationship"<|>"Agnes Wren")##\n'  # no target
        '("content_keywords"<|>"orchards, cider")##\n'  # a label we do not know
        f"{ENTITY_B}##\n{RELATION}<|COMPLETE|>"
    )
    result = parse_tuples(text)
    assert [entity.name for entity in result.entities] == ["Agnes Wren", "Merrow Valley"]
    assert len(result.relationships) == 1
    assert result.skipped == 3


def test_truncated_answer_keeps_the_complete_records() -> None:
    text = f'{ENTITY_A}##\n{ENTITY_B}##\n("relationship"<|>"Agnes Wren"<|>"Merrow Valley"<|>"Agnes Wren far'
    result = parse_tuples(text)
    assert len(result.entities) == 2
    assert result.relationships[0].description == "Agnes Wren far"
    assert not result.complete


@pytest.mark.parametrize("garbage", ["", "   ", "I could not find any entities.", "<|>", "(((", "##"])
def test_garbage_never_raises(garbage: str) -> None:
    result = parse_tuples(garbage)
    assert result.entities == () and result.relationships == ()
