"""Embeddings from any OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, vLLM, Ollama, TEI, ...)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import openai
from openai import AsyncOpenAI

from backend.domain.errors import ModelError
from backend.graphrag_agent.text import mostly_cjk


class OpenAICompatibleEmbedder:
    """TextEmbedder over the openai SDK; rows are L2-normalised so cosine is a dot product."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        dimension: int,
        batch_size: int = 32,
        timeout_s: float = 30.0,
        max_retries: int = 2,
        multilingual: bool = True,
    ) -> None:
        if dimension <= 0 or batch_size <= 0:
            raise ValueError("dimension and batch_size must be positive")
        self._base_url = base_url
        self._model = model
        self._dimension = dimension
        self._batch_size = batch_size
        self._multilingual = multilingual
        # Servers without auth still need a non-empty key for the SDK; it is never logged.
        self._client = AsyncOpenAI(
            base_url=base_url, api_key=api_key or "unused", timeout=timeout_s, max_retries=max_retries
        )

    @property
    def dimension(self) -> int:
        return self._dimension

    def covers(self, text: str) -> bool:
        # Hosted embedding models are multilingual; EMBEDDING_MULTILINGUAL=false marks one that is not.
        return self._multilingual or not mostly_cjk(text)

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        items = list(texts)
        out = np.zeros((len(items), self._dimension), dtype=np.float32)
        for start in range(0, len(items), self._batch_size):
            batch = items[start : start + self._batch_size]
            out[start : start + len(batch)] = await self._embed_batch(batch)
        return out

    async def aclose(self) -> None:
        await self._client.close()

    async def _embed_batch(self, batch: list[str]) -> npt.NDArray[np.float32]:
        # Some servers reject empty strings; a single space embeds as "nothing" everywhere.
        inputs = [text if text.strip() else " " for text in batch]
        try:
            response = await self._client.embeddings.create(model=self._model, input=inputs, encoding_format="float")
        except openai.APIStatusError as exc:
            raise ModelError(
                f"embedding request to {self._base_url} (model {self._model!r}) failed with HTTP "
                f"{exc.status_code}: {_short(exc.message)}"
            ) from exc
        except openai.OpenAIError as exc:
            raise ModelError(
                f"embedding request to {self._base_url} (model {self._model!r}) failed: "
                f"{type(exc).__name__}: {_short(str(exc))}"
            ) from exc
        rows = sorted(response.data, key=lambda item: item.index)
        return self._to_matrix([row.embedding for row in rows], expected=len(batch))

    def _to_matrix(self, rows: list[list[float]], expected: int) -> npt.NDArray[np.float32]:
        if len(rows) != expected:
            raise ModelError(f"embedding endpoint {self._base_url} returned {len(rows)} vectors for {expected} inputs")
        matrix = np.asarray(rows, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[1] != self._dimension:
            got = matrix.shape[1] if matrix.ndim == 2 else "ragged"
            raise ModelError(
                f"embedding model {self._model!r} returned {got}-dimensional vectors; "
                f"EMBEDDING_DIMENSION is {self._dimension}"
            )
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return np.asarray(matrix / np.maximum(norms, np.float32(1e-12)), dtype=np.float32)


def _short(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[:limit] + "…"
