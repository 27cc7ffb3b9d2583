"""AnswerSaver: stores assistant answers where the request that produced them cannot cancel the write.

A request can be cancelled at any await: its client went away, or the server is shutting down. The answer
(complete or not) must still reach the history, or the user message is left without its reply. So the save
runs in a task of its own that the request only waits for, shielded; `drain` waits for the saves still
running when the service closes (before the stores do).
"""

from __future__ import annotations

import asyncio
import logging

from backend.application.chat.turns import AssistantDraft, PreparedTurn, TurnService
from backend.domain.errors import AnswerNotSaved, GraphRagError, QuestionCleared

logger = logging.getLogger(__name__)


class AnswerSaver:
    def __init__(self, turns: TurnService) -> None:
        self._turns = turns
        self._pending: set[asyncio.Task[str | GraphRagError]] = set()

    @property
    def pending(self) -> int:
        """Answers still being stored."""
        return len(self._pending)

    async def save(self, turn: PreparedTurn, draft: AssistantDraft) -> str | GraphRagError:
        """Store the answer: its message id, or what the client is told instead — `QuestionCleared` when the
        conversation was cleared meanwhile, `AnswerNotSaved` when the store refused it (logged). A cancellation of
        the caller does not reach the write."""
        task = asyncio.create_task(self._save_or_report(turn, draft))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return await asyncio.shield(task)

    async def _save_or_report(self, turn: PreparedTurn, draft: AssistantDraft) -> str | GraphRagError:
        try:
            return (await self._turns.save_answer(turn, draft)).id
        except QuestionCleared as cleared:
            logger.info("the answer of request %s was not kept: its question was cleared", turn.context.request_id)
            return cleared
        except GraphRagError as error:
            logger.error("could not store the answer of request %s: %s", turn.context.request_id, error.message)
            return AnswerNotSaved(error.message)

    async def drain(self) -> None:
        """Wait for the saves still running (called at shutdown)."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
