"""ChatHandler: one message in, one whole answer out (SPEC §5)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from backend.application.chat.answer_saver import AnswerSaver
from backend.application.chat.budgets import BudgetPolicy
from backend.application.chat.inputs import ChatInput
from backend.application.chat.turns import AssistantDraft, PreparedTurn, TurnService, generation_request
from backend.application.ports.generation import ChatCompletionPort, GeneratedAnswer, RAGExecutorPort
from backend.application.ports.router import RouterPort
from backend.domain.budget import budget_scope
from backend.domain.context import RequestContext
from backend.domain.conversation import Citation
from backend.domain.errors import GraphRagError
from backend.domain.generation import GenerationMode
from backend.domain.routing import RouteDecision

logger = logging.getLogger(__name__)

INTERNAL_ERROR_MESSAGE = "internal error while answering"
INTERRUPTED_MESSAGE = "the request ended before the answer was complete"


@dataclass(frozen=True, slots=True)
class ChatResult:
    answer: str
    citations: tuple[Citation, ...]
    route: RouteDecision
    generation_mode: GenerationMode
    conversation_id: str
    user_message_id: str
    message_id: str


class ChatHandler:
    def __init__(
        self,
        turns: TurnService,
        router: RouterPort,
        completion: ChatCompletionPort,
        rag_executor: RAGExecutorPort,
        budgets: BudgetPolicy | None = None,
        saver: AnswerSaver | None = None,
    ) -> None:
        self._turns = turns
        self._router = router
        self._completion = completion
        self._rag = rag_executor
        self._budgets = budgets or BudgetPolicy()
        self._saver = saver or AnswerSaver(turns)

    async def handle(self, context: RequestContext, chat_input: ChatInput) -> ChatResult:
        turn = await self._turns.prepare(context, chat_input)
        draft = AssistantDraft()
        try:
            with budget_scope(self._budgets.new()) as budget:
                try:
                    async with asyncio.timeout(budget.timeout_s):
                        draft.decision = await self._route(turn)
                        answer = await self._answer(turn, draft.decision)
                except TimeoutError:
                    raise budget.overtime() from None
        except (Exception, asyncio.CancelledError) as error:
            # Keep the turn consistent: the user message gets an assistant reply marked as not completed, also
            # when the request is cancelled (the server ending it at shutdown): the saver's write outlives that.
            if isinstance(error, GraphRagError):
                draft.error = error.public_message  # the server's error handler logs its message
            elif isinstance(error, asyncio.CancelledError):
                draft.error = INTERRUPTED_MESSAGE
            else:
                logger.exception("chat request %s failed", context.request_id)
                draft.error = INTERNAL_ERROR_MESSAGE
            await self._saver.save(turn, draft)
            raise
        draft.tokens.append(answer.text)
        draft.citations = answer.citations
        draft.mode = answer.mode
        draft.completed = True
        stored = await self._saver.save(turn, draft)
        if isinstance(stored, GraphRagError):
            raise stored
        return ChatResult(
            answer=answer.text,
            citations=answer.citations,
            route=draft.decision,
            generation_mode=answer.mode,
            conversation_id=turn.conversation_id,
            user_message_id=turn.user_message.id,
            message_id=stored,
        )

    async def _route(self, turn: PreparedTurn) -> RouteDecision:
        return await self._router.route(
            message=turn.message,
            session_id=turn.context.session_id,
            requested_kb=turn.requested.kb_prefix,
            agent_type=turn.requested.agent_type,
        )

    async def _answer(self, turn: PreparedTurn, decision: RouteDecision) -> GeneratedAnswer:
        request = generation_request(turn, decision)
        if not request.plan:
            return await self._completion.generate(request)
        return await self._rag.run(request)
