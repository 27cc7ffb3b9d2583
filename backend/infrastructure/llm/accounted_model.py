"""Every model call counted against the request's budget, recorded for its debug log and logged, secrets masked.

A decorator around any `ChatModel`, wired once by the composition root, so the router, the agents and the
answer generator are all accounted for without knowing it. A streamed call is charged and recorded when it
starts and its generator is returned as it is: the token loop gets no extra layer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Iterable, Sequence

from backend.application.ports.chat_model import ChatModel, ModelDelta
from backend.domain.budget import ModelCall, current_budget
from backend.domain.conversation import Message
from backend.infrastructure.logging import mask_secrets

# Model interactions get their own logger, so they can be turned up (DEBUG: the prompts) or off on their own.
model_log = logging.getLogger("backend.model_calls")

_LOGGED_CHARS = 300


class AccountedChatModel:
    """Implements `ChatModel` by delegating to `inner`."""

    def __init__(self, inner: ChatModel, secrets: Iterable[str] = ()) -> None:
        self._inner = inner
        self._secrets = tuple(s for s in secrets if s)

    @property
    def model_name(self) -> str:
        return self._inner.model_name

    async def complete(self, messages: Sequence[Message]) -> str:
        masked = self._start(messages, streamed=False)
        started = time.perf_counter()
        answer = await self._inner.complete(messages)
        duration_ms = round((time.perf_counter() - started) * 1000, 3)
        safe_answer = mask_secrets(answer, self._secrets)
        self._finish(ModelCall(self.model_name, masked, False, safe_answer, duration_ms))
        return answer

    def stream(self, messages: Sequence[Message]) -> AsyncGenerator[ModelDelta, None]:
        masked = self._start(messages, streamed=True)
        self._finish(ModelCall(self.model_name, masked, True, None, None))
        return self._inner.stream(messages)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def _start(self, messages: Sequence[Message], streamed: bool) -> tuple[tuple[str, str], ...]:
        budget = current_budget()
        if budget is not None:
            budget.charge_model_call()  # raises BudgetExceeded before anything is sent
        masked = tuple((m.role.value, mask_secrets(m.content, self._secrets)) for m in messages)
        model_log.info(
            "model call: model=%s streamed=%s messages=%d chars=%d",
            self.model_name,
            streamed,
            len(masked),
            sum(len(content) for _, content in masked),
        )
        if model_log.isEnabledFor(logging.DEBUG):
            for role, content in masked:
                model_log.debug("model call %s message: %s", role, content[:_LOGGED_CHARS])
        return masked

    def _finish(self, call: ModelCall) -> None:
        budget = current_budget()
        if budget is not None:
            budget.record(call)
        if call.answer is not None and model_log.isEnabledFor(logging.DEBUG):
            model_log.debug("model answer (%s ms): %s", call.duration_ms, call.answer[:_LOGGED_CHARS])
