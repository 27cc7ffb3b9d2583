"""Adapts the infrastructure's chat model to the small `CompletionModel` the core declares."""

from __future__ import annotations

from collections.abc import Sequence

from backend.application.ports.chat_model import ChatModel, ChatTurn
from backend.graphrag_agent.model import PromptMessage


class CoreCompletionModel:
    """Implements `graphrag_agent.model.CompletionModel` over a `ChatModel`."""

    def __init__(self, model: ChatModel) -> None:
        self._model = model

    async def complete(self, messages: Sequence[PromptMessage]) -> str:
        return await self._model.complete([ChatTurn(message.role, message.content) for message in messages])
