"""AnswerGenerator: the one place that turns evidence and history into an answer.

With a chat model it prompts the model; without one it asks the offline answerer (the extractive
answerer). Both stream as `ModelDelta`s so the stream executor treats them alike. When no model reports the
tokens an answer took, `counted_usage` estimates them from what the answerer was given.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence

from backend.application.answering.prompts import general_messages, rag_messages
from backend.application.ports.chat_model import ChatModel, ModelDelta, OfflineAnswerer
from backend.application.ports.generation import GenerationRequest
from backend.domain.conversation import Message
from backend.domain.generation import GenerationMode
from backend.domain.retrieval import RetrievalResult
from backend.domain.tokens import TokenUsage


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

    def counted_usage(self, request: GenerationRequest, evidence: Sequence[RetrievalResult], answer: str) -> TokenUsage:
        """The estimated tokens of an answer: of the messages the model was sent (instructions, history, sources
        and question), or of the question and sources the extractive answerer read; and of the answer."""
        if self._model is not None:
            prompt = [message.content for message in self._messages(request, evidence)]
        else:
            prompt = [request.search_query, *(result.evidence for result in evidence)]
        return TokenUsage.estimated(prompt, answer)

    async def _extractive_stream(
        self, request: GenerationRequest, evidence: Sequence[RetrievalResult]
    ) -> AsyncGenerator[ModelDelta, None]:
        for piece in self._offline.stream_pieces(self._extractive_text(request, evidence)):
            yield ModelDelta(content=piece)
