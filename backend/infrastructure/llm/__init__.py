"""Chat-model adapters (OpenAI-compatible HTTP) and the extractive answerer; the types they implement are
the ports in `backend/application/ports/chat_model.py`."""

from backend.infrastructure.llm.openai_compatible import OpenAICompatibleChatModel

__all__ = ["OpenAICompatibleChatModel"]
