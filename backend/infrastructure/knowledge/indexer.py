"""Minimal ingestion into the embedded store: chunk, embed, write (no entity extraction yet)."""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from backend.application.ports.ingestion import IndexReport, ProgressCallback, SourceDocument
from backend.domain.knowledge_base import KnowledgeBase
from backend.graphrag_agent.chunking import TextChunk, chunk_text
from backend.graphrag_agent.ports import TextEmbedder
from backend.infrastructure.knowledge.embedded_store import EmbeddedKnowledgeStore

logger = logging.getLogger(__name__)

_TRAILING_SPACE = re.compile(r"[ \t]+$", re.MULTILINE)


def normalise_text(text: str) -> str:
    """The form a document is hashed and chunked in: NFC, LF line ends, no trailing blanks."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    return _TRAILING_SPACE.sub("", text).strip()


def document_id(title: str, text: str) -> str:
    """Content hash: the same title and (normalised) text always give the same id."""
    payload = f"{unicodedata.normalize('NFC', title.strip())}\n\x00\n{normalise_text(text)}"
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class EmbeddedKnowledgeIndexer:
    """KnowledgeIndexer for the embedded store. Unchanged documents (same content hash) cost nothing."""

    def __init__(
        self,
        store: EmbeddedKnowledgeStore,
        embedder: TextEmbedder,
        chunk_tokens: int = 300,
        overlap_tokens: int = 50,
        embed_batch_size: int = 32,
    ) -> None:
        if embed_batch_size < 1:
            raise ValueError("embed_batch_size must be at least 1")
        chunk_text("probe", chunk_tokens, overlap_tokens)  # fail at start-up on impossible sizes
        self._store = store
        self._embedder = embedder
        self._chunk_tokens = chunk_tokens
        self._overlap_tokens = overlap_tokens
        self._batch_size = embed_batch_size

    async def index(
        self, kb: KnowledgeBase, documents: Sequence[SourceDocument], progress: ProgressCallback | None = None
    ) -> IndexReport:
        added = unchanged = chunks_written = 0
        doc_ids: dict[str, None] = {}  # stored documents, in input order
        for done, document in enumerate(documents, start=1):
            doc_id = document_id(document.title, document.text)
            if doc_id in doc_ids or await self._store.has_document(kb.kb_prefix, doc_id):
                unchanged += 1
                doc_ids[doc_id] = None
            else:
                written = await self._add(kb.kb_prefix, doc_id, document)
                if written:
                    added += 1
                    chunks_written += written
                    doc_ids[doc_id] = None
            if progress is not None:
                progress(done, len(documents), document.title)
        report = IndexReport(added, unchanged, chunks_written, tuple(doc_ids))
        logger.info(
            "indexed kb=%s: %d added, %d unchanged, %d chunks",
            kb.kb_prefix,
            report.documents_added,
            report.documents_unchanged,
            report.chunks_written,
        )
        return report

    async def _add(self, kb: str, doc_id: str, document: SourceDocument) -> int:
        chunks = chunk_text(normalise_text(document.text), self._chunk_tokens, self._overlap_tokens)
        if not chunks:
            logger.info("skipped %r in kb=%s: no text", document.title, kb)
            return 0
        embeddings = await self._embed(document.title, chunks)
        return await self._store.upsert_document(
            kb, doc_id, document.title, dict(document.metadata), list(zip(chunks, embeddings, strict=True))
        )

    async def _embed(self, title: str, chunks: Sequence[TextChunk]) -> npt.NDArray[np.float32]:
        # The title travels with each chunk: a chunk deep in a document rarely names its subject.
        texts = [f"{title}\n\n{chunk.text}" for chunk in chunks]
        batches = [
            await self._embedder.embed(texts[start : start + self._batch_size])
            for start in range(0, len(texts), self._batch_size)
        ]
        return np.concatenate(batches, axis=0)
