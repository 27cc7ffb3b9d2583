"""A question that joins two events in time ("Did A happen before B?", "How long between A and B?") asks
about two passages.

Searching with the whole question ranks the passages that match the union of its words, so the event with
the rarer words takes the first places and the other is pushed out. Each clause searched on its own finds
its passage; the agents put the clause rankings beside the whole question's (see `fusion.interleave`).
"""

from __future__ import annotations

import re

from backend.graphrag_agent.text import content_terms

# Words that join two events in time, between two clauses (never the question's first word).
_TEMPORAL_JOINT = re.compile(r",?\s+\b(?:before|after|while|when|until|since|and then)\b\s+", re.IGNORECASE)
# Two events as the ends of a span: "between A and B", "from A to B" (the first "and" / "to" after it).
_SPAN = re.compile(r"\b(?:between\s+(?P<a>.+?)\s+and\s+(?P<b>.+)|from\s+(?P<c>.+?)\s+to\s+(?P<d>.+))", re.IGNORECASE)
# A clause must say something on its own: at least this many content terms.
MIN_CLAUSE_TERMS = 3


def question_clauses(query: str) -> list[str]:
    """The clauses of a question about two or more events in time; empty for any other question."""
    parts = [part.strip(" ?!.,") for part in _TEMPORAL_JOINT.split(query)]
    clauses = _substantial(parts)
    if len(clauses) < 2 and (span := _SPAN.search(query)) is not None:
        clauses = _substantial([part.strip(" ?!.,") for part in span.groups() if part])
    return clauses if len(clauses) > 1 else []


def _substantial(parts: list[str]) -> list[str]:
    return [part for part in parts if len(content_terms(part)) >= MIN_CLAUSE_TERMS]
