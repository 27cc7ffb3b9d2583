"""The checks a model's rewrite of a follow-up must pass before routing and retrieval use it."""

from __future__ import annotations

import pytest

from backend.infrastructure.routing.model_followups import UnusableRewrite, parse_rewrite

MESSAGE = "Where did his father study?"


@pytest.mark.parametrize(
    "reply",
    [
        "Where did Coulson Wallop's father study?",
        "  Standalone question: Where did Coulson Wallop's father study?  ",
        "Rewritten query:\nWhere did Coulson Wallop's father study?",
        '"Where did Coulson Wallop\'s father study?"',
        "“Where did Coulson Wallop's father study?”",
        "```\nWhere did Coulson Wallop's father study?\n```",
    ],
)
def test_labels_quotes_and_fences_are_taken_off(reply: str) -> None:
    assert parse_rewrite(reply, MESSAGE, "Coulson Wallop") == "Where did Coulson Wallop's father study?"


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ("", "empty"),
        ('""', "empty"),
        ("Question:", "empty"),
        ("Where did Coulson Wallop's father study?\nHe studied at Oxford.", "more than one line"),
        ("Coulson Wallop's father studied law at Oxford.", "not a question"),
        ("Where did " + "the father of the man we spoke about " * 8 + "study?", "longer than"),
    ],
)
def test_a_reply_that_fails_a_check_is_refused(reply: str, why: str) -> None:
    with pytest.raises(UnusableRewrite, match=why):
        parse_rewrite(reply, MESSAGE, "Coulson Wallop")


def test_a_chinese_question_may_end_with_a_full_width_mark_and_a_request_needs_none() -> None:
    assert parse_rewrite("松鸦栖息在哪里？", "它栖息在哪里？") == "松鸦栖息在哪里？"
    assert parse_rewrite("Tell me more about Coulson Wallop", "Tell me more about him") == (
        "Tell me more about Coulson Wallop"
    )
