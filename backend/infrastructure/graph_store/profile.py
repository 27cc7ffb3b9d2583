"""A document's contribution to its KB's routing profile (`TermProfiles`), as both stores keep it.

A KB's profile counts, per routing term (`graphrag_agent/routing_terms.py`), the chunks that hold it in their
title and text; the empty term counts every chunk (each holds the empty string), so one look-up gives the KB's
size with its terms. Each document keeps the counts it added, so that deleting or replacing it takes exactly
those back, in the transaction that removes its chunks: the profile never disagrees with the chunks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from backend.domain.graph import DocumentGraph
from backend.graphrag_agent.routing_terms import routing_terms

CHUNKS_TERM = ""  # the term every chunk holds: its count is the KB's number of chunks


def document_profile(graph: DocumentGraph) -> dict[str, int]:
    """routing term → how many of the document's chunks hold it (sorted by term: writers lock in one order)."""
    return chunk_profile(graph.document.title, (chunk.text for chunk in graph.chunks))


def chunk_profile(title: str, texts: Iterable[str]) -> dict[str, int]:
    """`document_profile` of a document titled `title` with chunks `texts` (a stored document, when a store
    computes the profiles of documents written before it kept them)."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts[CHUNKS_TERM] += 1
        counts.update(routing_terms(f"{title}\n{text}"))
    return dict(sorted(counts.items()))
