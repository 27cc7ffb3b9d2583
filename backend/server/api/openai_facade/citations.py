"""Citations as OpenAI `url_citation` annotations.

The url is the cited document in this API (`GET /api/v1/kbs/{kb}/documents/{doc_id}`). The span is the answer's
first `[n]` marker for citation n (markers count from 1, in citation order); a source the answer never marks
spans the whole answer, since it was given to the model as evidence for all of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from backend.domain.conversation import Citation
from backend.server.api.openai_facade.models import Annotation, UrlCitation


def document_url(base_url: str, kb_prefix: str, doc_id: str) -> str:
    documents = f"{base_url.rstrip('/')}/api/v1/kbs/{quote(kb_prefix, safe='')}/documents"
    return f"{documents}/{quote(doc_id, safe='')}" if doc_id else documents  # e.g. a community summary


def marker_span(content: str, number: int) -> tuple[int, int]:
    marker = f"[{number}]"
    start = content.find(marker)
    return (start, start + len(marker)) if start >= 0 else (0, len(content))


def annotations_for(content: str, citations: Sequence[Citation], kb_prefix: str, base_url: str) -> list[Annotation]:
    annotations = []
    for number, citation in enumerate(citations, start=1):
        start, end = marker_span(content, number)
        annotations.append(
            Annotation(
                url_citation=UrlCitation(
                    url=document_url(base_url, kb_prefix, citation.doc_id),
                    title=citation.title or citation.doc_id,
                    start_index=start,
                    end_index=end,
                    snippet=citation.snippet,
                    doc_id=citation.doc_id,
                    chunk_id=citation.chunk_id,
                )
            )
        )
    return annotations
