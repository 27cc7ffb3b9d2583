"""Dates in questions and documents (backend.graphrag_agent.dates)."""

from __future__ import annotations

from datetime import date

import pytest

from backend.graphrag_agent.dates import DatePattern, DateScope, document_date, first_full_date, question_scope


@pytest.mark.parametrize(
    ("question", "patterns"),
    [
        ("Who delivered the bread on 20260403?", [DatePattern(2026, 4, 3)]),
        ("What happened on 2026-04-03 and on 2026/05/01?", [DatePattern(2026, 4, 3), DatePattern(2026, 5, 1)]),
        ("What did Li Hua eat on January 20, 2026?", [DatePattern(2026, 1, 20)]),
        ("What was said on 3 March 2025?", [DatePattern(2025, 3, 3)]),
        ("What does Li Hua report to Adam on January 6th?", [DatePattern(None, 1, 6)]),
        ("What was planned for the 6th of May?", [DatePattern(None, 5, 6)]),
        ("What did the bakery offer in the month of May?", [DatePattern(None, 5, None)]),
        ("Which talks happened during December 2025?", [DatePattern(2025, 12, None)]),
        ("Were there two matches (restrict your search within August)?", [DatePattern(None, 8, None)]),
        ("What did the team ship in 2024?", [DatePattern(2024, None, None)]),
        ("2026年5月3日开了什么会？", [DatePattern(2026, 5, 3)]),
        ("5月份有哪些活动？", [DatePattern(None, 5, None)]),
    ],
)
def test_a_question_names_its_days_months_and_years(question: str, patterns: list[DatePattern]) -> None:
    assert question_scope(question) == DateScope(tuple(patterns))


@pytest.mark.parametrize(
    "question",
    [
        "May I ask who wrote the report?",  # the modal verb, not the month
        "Who directed the film?",
        "What time is the meeting, 10:30?",
        "Which invoice is number 20261399?",  # not a calendar date
    ],
)
def test_a_question_without_a_date_has_no_scope(question: str) -> None:
    assert question_scope(question) is None


def test_a_scope_matches_the_days_its_patterns_allow() -> None:
    may = DateScope((DatePattern(None, 5, None),))
    assert may.contains(date(2026, 5, 31)) and may.contains(date(1999, 5, 1))
    assert not may.contains(date(2026, 6, 1)) and not may.contains(None)
    one_day = DateScope((DatePattern(2026, 1, 6), DatePattern(None, 2, 1)))
    assert one_day.contains(date(2026, 1, 6)) and one_day.contains(date(2020, 2, 1))
    assert not one_day.contains(date(2025, 1, 6))


def test_a_document_is_dated_by_its_title_or_a_header_line_never_its_body() -> None:
    assert document_date("20260527_1600") == date(2026, 5, 27)
    assert document_date("Minutes 2024-03-05", "Date: 2023-01-01") == date(2024, 3, 5)
    assert document_date("Team chat", "Time: 20260122_17:00") == date(2026, 1, 22)
    assert document_date("Weekly notes", "Date: May 3, 2025") == date(2025, 5, 3)
    biography = "Ada Lovelace (born 10 December 1815) was an English mathematician and writer, chiefly known for"
    assert document_date("Ada Lovelace", biography) is None
    assert document_date("1990 FIFA World Cup", "") is None  # a year alone does not date a document
    assert document_date("Invoice 20261399") is None


def test_the_earliest_full_date_in_a_text_wins() -> None:
    assert first_full_date("Moved from 2024-06-01 to 3 March 2024") == date(2024, 6, 1)
    assert first_full_date("no date here") is None
