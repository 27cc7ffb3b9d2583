"""A question that joins two events in time ("Did A happen before B?") asks about two passages.

Searching with the whole question ranks the passages that match the union of its words, so the event with
the rarer words takes the first places and the other is pushed out. Each clause searched on its own finds
its passage; the agents put the clause rankings beside the whole question's (see `fusion.interleave`).
"""

from __future__ import annotations

import re

from backend.graphrag_agent.text import content_terms

# Words that join two events in time, between two clauses (never the question's first word).
_TEMPORAL_JOINT = re.compile(r",?\s+\b(?:before|after|while|when|until|since|and then)\b\s+", re.IGNORECASE)
# A clause must say something on its own: at least this many content terms.
MIN_CLAUSE_TERMS = 3


def question_clauses(query: str) -> list[str]:
    """The clauses of a question about two or more events in time; empty for any other question."""
    parts = [part.strip(" ?!.,") for part in _TEMPORAL_JOINT.split(query)]
    clauses = [part for part in parts if len(content_terms(part)) >= MIN_CLAUSE_TERMS]
    return clauses if len(clauses) > 1 else []
