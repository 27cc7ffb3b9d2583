"""Dates in questions and documents: a question that names a day or a month is answered from documents of then.

A document is dated by the first full date (year, month and day) in its title or, when its first line is a
short header ("Date: 2024-05-03", "Time: 20260122_17:00"), in that line. Body text is never read for a date:
a biography's first sentence ("born 12 May 1950") does not date the page.

A question's scope is every day, month or year it names: "on 20260923", "on January 6th", "in the month of
May", "within August 2026", "2026年5月". A bare month name needs a preposition before it ("in May"), so the
modal verb ("May I ...") is not read as a month. A scope without a year matches that month (and day) of any
year.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from functools import lru_cache

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_MONTH = r"(?P<month_name>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:1[5-9]|20)\d\d)"

# Full dates, as documents and questions write them (one named group set per pattern).
_FULL_DATES = (
    re.compile(r"(?<!\d)" + _YEAR + r"(?P<month>[01]\d)(?P<day>[0-3]\d)(?!\d)"),  # 20260122, 20260122_1700
    re.compile(r"(?<!\d)" + _YEAR + r"[-/.](?P<month>[01]?\d)[-/.](?P<day>[0-3]?\d)(?!\d)"),  # 2026-01-22
    re.compile(_YEAR + r"\s*年\s*(?P<month>[01]?\d)\s*月\s*(?P<day>[0-3]?\d)\s*[日号]"),  # 2026年1月22日
    re.compile(r"\b" + _MONTH + r"\s+" + _DAY + r",?\s+" + _YEAR + r"\b", re.IGNORECASE),  # January 22, 2026
    re.compile(r"\b" + _DAY + r"\s+(?:of\s+)?" + _MONTH + r",?\s+" + _YEAR + r"\b", re.IGNORECASE),  # 22 January 2026
)
# Partial dates only a question uses: a day without a year, a month, a year.
_PARTIAL_DATES = (
    re.compile(r"\b" + _MONTH + r"\s+" + _DAY + r"\b(?!:)", re.IGNORECASE),  # January 6th
    re.compile(r"\b" + _DAY + r"\s+of\s+" + _MONTH + r"\b", re.IGNORECASE),  # the 6th of January
    # 5月, 2026年5月, 5月3日
    re.compile(r"(?:" + _YEAR + r"\s*年\s*)?(?<!\d)(?P<month>[01]?\d)\s*月(?:\s*(?P<day>[0-3]?\d)\s*[日号])?"),
    re.compile(
        r"\b(?:in|during|within|throughout|through|of|for|early|late|mid|since|until)\s+(?:the\s+month\s+of\s+)?"
        + _MONTH
        + r"(?:,?\s+"
        + _YEAR
        + r")?\b",
        re.IGNORECASE,
    ),  # in (the month of) May (2026)
    re.compile(r"\b" + _MONTH + r",?\s+" + _YEAR + r"\b", re.IGNORECASE),  # May 2026
    re.compile(r"\b(?:in|during|throughout)\s+" + _YEAR + r"\b", re.IGNORECASE),  # in 2025
)
# The longest first line that still reads as a header rather than the start of the text.
_HEADER_CHARS = 80


@dataclass(frozen=True, slots=True)
class DatePattern:
    """A day, month or year; a missing part matches any value."""

    year: int | None = None
    month: int | None = None
    day: int | None = None

    def matches(self, day: date) -> bool:
        return (
            (self.year is None or self.year == day.year)
            and (self.month is None or self.month == day.month)
            and (self.day is None or self.day == day.day)
        )


@dataclass(frozen=True, slots=True)
class DateScope:
    """The days a question is about: any of its patterns."""

    patterns: tuple[DatePattern, ...]

    def contains(self, day: date | None) -> bool:
        return day is not None and any(pattern.matches(day) for pattern in self.patterns)


def _pattern(match: re.Match[str]) -> DatePattern | None:
    groups = match.groupdict()
    name = groups.get("month_name")
    month = _MONTHS[name.lower().rstrip(".")] if name else _int(groups.get("month"))
    year, day = _int(groups.get("year")), _int(groups.get("day"))
    if month is not None and not 1 <= month <= 12:
        return None
    if day is not None and not 1 <= day <= 31:
        return None
    if year is not None and month is not None and day is not None and _valid(year, month, day) is None:
        return None
    return DatePattern(year, month, day)


def _int(value: str | None) -> int | None:
    return int(value) if value else None


def _valid(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def first_full_date(text: str) -> date | None:
    """The earliest full date written in `text`, in any of the formats above."""
    found: list[tuple[int, date]] = []
    for regex in _FULL_DATES:
        for match in regex.finditer(text):
            pattern = _pattern(match)
            if pattern is not None and pattern.year and pattern.month and pattern.day:
                found.append((match.start(), date(pattern.year, pattern.month, pattern.day)))
                break
    return min(found)[1] if found else None


@lru_cache(maxsize=65536)
def document_date(title: str, first_line: str = "") -> date | None:
    """A document's date: the first full date in its title, else in its first line when that is a header."""
    dated = first_full_date(title)
    if dated is None and len(first_line.strip()) <= _HEADER_CHARS:
        dated = first_full_date(first_line)
    return dated


def question_scope(question: str) -> DateScope | None:
    """The days, months or years `question` names; None when it names none."""
    patterns: list[DatePattern] = []
    taken: list[tuple[int, int]] = []  # spans already read, so "January 6, 2026" is not also "January 6"
    for regex in (*_FULL_DATES, *_PARTIAL_DATES):
        for match in regex.finditer(question):
            if any(start < match.end() and match.start() < end for start, end in taken):
                continue
            pattern = _pattern(match)
            if pattern is not None and pattern not in patterns:
                patterns.append(pattern)
                taken.append(match.span())
    return DateScope(tuple(patterns)) if patterns else None
