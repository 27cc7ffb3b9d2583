"""Citations as OpenAI `url_citation` annotations.

The url is the source's document in this API (`GET /api/v1/kbs/{kb}/documents/{doc_id}`). A cited source
(`cited: true`) spans the answer's first `[n]` marker for it (markers count from 1, in citation order). The
sources the answer was given and does not cite follow (`cited: false`) with an empty span at the end of the
answer: they support no part of its text.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from backend.application.chat.chat_handler import ChatResult
from backend.domain.conversation import Citation
from backend.server.api.openai_facade.models import Annotation, UrlCitation


def document_url(base_url: str, kb_prefix: str, doc_id: str) -> str:
    documents = f"{base_url.rstrip('/')}/api/v1/kbs/{quote(kb_prefix, safe='')}/documents"
    return f"{documents}/{quote(doc_id, safe='')}" if doc_id else documents  # e.g. a community summary


def marker_span(content: str, number: int) -> tuple[int, int]:
    """Where the answer first cites source `number`; a partial answer may have lost that marker: the whole."""
    marker = f"[{number}]"
    start = content.find(marker)
    return (start, start + len(marker)) if start >= 0 else (0, len(content))


def annotations_for(
    content: str, citations: Sequence[Citation], consulted: Sequence[Citation], kb_prefix: str, base_url: str
) -> list[Annotation]:
    cited = [_annotation(c, marker_span(content, n), True, kb_prefix, base_url) for n, c in enumerate(citations, 1)]
    end = (len(content), len(content))
    return cited + [_annotation(source, end, False, kb_prefix, base_url) for source in consulted]


def result_annotations(result: ChatResult, base_url: str) -> list[Annotation]:
    """The annotations of a whole answer."""
    return annotations_for(result.answer, result.citations, result.consulted, result.route.kb_prefix, base_url)


def _annotation(source: Citation, span: tuple[int, int], cited: bool, kb_prefix: str, base_url: str) -> Annotation:
    return Annotation(
        url_citation=UrlCitation(
            url=document_url(base_url, kb_prefix, source.doc_id),
            title=source.title or source.doc_id,
            start_index=span[0],
            end_index=span[1],
            snippet=source.snippet,
            doc_id=source.doc_id,
            chunk_id=source.chunk_id,
            cited=cited,
        )
    )
