"""Text embedders: offline MiniLM (numpy) and any OpenAI-compatible embeddings endpoint."""

from backend.infrastructure.embeddings.minilm import MiniLMEmbedder, ModelFilesMissing
from backend.infrastructure.embeddings.openai_compatible import OpenAICompatibleEmbedder

__all__ = ["MiniLMEmbedder", "ModelFilesMissing", "OpenAICompatibleEmbedder"]
