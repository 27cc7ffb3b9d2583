"""One MiniLM embedder per test process: the weights are read once and shared (it holds no state)."""

from __future__ import annotations

from functools import cache

from backend.infrastructure.embeddings.minilm import MiniLMEmbedder


@cache
def shared_minilm(engine: str = "auto", precision: str = "float32") -> MiniLMEmbedder:
    return MiniLMEmbedder.load(engine=engine, precision=precision)
