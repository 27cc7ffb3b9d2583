"""Chat-model adapters (OpenAI-compatible HTTP)."""

from backend.infrastructure.llm.openai_compatible import OpenAICompatibleChatModel
from backend.infrastructure.llm.types import ChatModel, ChatTurn, ModelDelta

__all__ = ["ChatModel", "ChatTurn", "ModelDelta", "OpenAICompatibleChatModel"]
