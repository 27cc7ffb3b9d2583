"""A fast, deterministic stand-in embedder for pipeline tests that do not measure retrieval quality."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from backend.graphrag_agent.text import index_terms


class HashEmbedder:
    """Bag-of-words hashed into `dimension` buckets, L2-normalised; counts calls and texts."""

    def __init__(self, dimension: int = 384) -> None:
        self._dimension = dimension
        self.calls = 0
        self.texts = 0

    @property
    def dimension(self) -> int:
        return self._dimension

    def covers(self, text: str) -> bool:
        return True  # hashed terms work for any language

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        self.texts += len(texts)
        matrix = np.zeros((len(texts), self._dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for term in index_terms(text) or ["<empty>"]:
                bucket = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=4).digest(), "big")
                matrix[row, bucket % self._dimension] += 1.0
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.asarray(matrix / np.maximum(norms, 1e-9), dtype=np.float32)
