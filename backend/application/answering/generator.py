"""AnswerGenerator: the one place that turns evidence and history into an answer.

With a chat model it prompts the model; without one it asks the offline answerer (the extractive
answerer). Both stream as `ModelDelta`s so the stream executor treats them alike.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from backend.application.answering.prompts import general_messages, rag_messages
from backend.application.ports.chat_model import ChatModel, ModelDelta, OfflineAnswerer
from backend.application.ports.generation import GenerationRequest
from backend.domain.conversation import Message
from backend.domain.generation import GenerationMode
from backend.domain.retrieval import RetrievalResult


class AnswerGenerator:
    def __init__(self, model: ChatModel | None, offline: OfflineAnswerer, history_token_budget: int = 2000) -> None:
        self._model = model
        self._offline = offline
        self._history_budget = history_token_budget

    @property
    def mode(self) -> GenerationMode:
        return GenerationMode.LLM if self._model is not None else GenerationMode.EXTRACTIVE

    def _messages(self, request: GenerationRequest, evidence: Sequence[RetrievalResult]) -> list[Message]:
        if request.plan:
            return rag_messages(request.message, evidence, request.history, self._history_budget)
        return general_messages(request.message, request.history, self._history_budget)

    def _extractive_text(self, request: GenerationRequest, evidence: Sequence[RetrievalResult]) -> str:
        return self._offline.compose(request.search_query, evidence) if request.plan else self._offline.general_answer

    def stream(
        self, request: GenerationRequest, evidence: Sequence[RetrievalResult]
    ) -> AsyncGenerator[ModelDelta, None]:
        if self._model is None:
            return self._extractive_stream(request, evidence)
        # The model's own generator, not one wrapped around it: every layer costs CPU on each token.
        return self._model.stream(self._messages(request, evidence))

    async def _extractive_stream(
        self, request: GenerationRequest, evidence: Sequence[RetrievalResult]
    ) -> AsyncGenerator[ModelDelta, None]:
        for piece in self._offline.stream_pieces(self._extractive_text(request, evidence)):
            yield ModelDelta(content=piece)
