"""The `Chunker` of indexing: token windows with overlap, cut at sentence ends where it can."""

from __future__ import annotations

from backend.domain import ids
from backend.domain.graph import ChunkRecord
from backend.graphrag_agent.chunking import chunk_text


class TokenChunker:
    def __init__(self, chunk_tokens: int = 200, overlap_tokens: int = 40) -> None:
        self.chunk_tokens = chunk_tokens
        self.overlap_tokens = overlap_tokens

    def chunks(self, kb: str, doc_id: str, text: str) -> list[ChunkRecord]:
        return [
            ChunkRecord(
                ids.chunk_id(kb, doc_id, piece.ordinal), doc_id, piece.ordinal, piece.text, piece.start, piece.end
            )
            for piece in chunk_text(text, self.chunk_tokens, self.overlap_tokens)
        ]
