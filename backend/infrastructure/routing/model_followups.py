"""Follow-ups rewritten by the chat model (SPEC §4): one call for a message that refers back.

With a model configured, a message that refers back to earlier turns and names no subject of its own (the
offline detection of `followups.py`) is rewritten into a standalone question by one model call, which sees the
last few turns. The call goes through the application's `ChatModel`, so it is charged to the request's
model-call budget and listed in its debug log. A message that stands alone makes no call.

The reply is checked before it is searched for: one line once a label ("Standalone question:") and quotes
are taken off, not empty, no longer than three times the message plus the subject it may take in, and a
question when the message is one (a reply that answers the question fails one of the last two). A reply that
fails a check, a model error or a call slower than `timeout_s` leaves the offline standalone query in use, and
its `note` says why. Only routing and retrieval use the rewrite: the stored message stays what the user wrote.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import replace

from backend.application.ports.chat_model import ChatModel
from backend.domain.conversation import Message, Role
from backend.domain.errors import GraphRagError
from backend.domain.routing import QueryMethod, StandaloneQuery
from backend.infrastructure.routing.followups import OfflineFollowUps
from backend.infrastructure.routing.transcript import recent_turns

logger = logging.getLogger(__name__)

RECENT_MESSAGES = 4  # the turns before the message that the model sees, oldest first
RECENT_CHARS = 300  # of each: an answer's opening names what it is about
_TIMES_LONGER = 3
_SUBJECT_CHARS = 60  # room for the subject the rewrite takes in, at least ("the film Aas Ka Panchhi")
_QUESTION_MARKS = ("?", "？")
_FENCE = re.compile(r"^```[\w-]*\s*|\s*```$")
_LABEL = re.compile(
    r"^(?:(?:the\s+)?(?:standalone|rewritten|rephrased|reformulated)\s+)?(?:question|query|message)\s*[:：]\s*",
    re.IGNORECASE,
)
_QUOTES = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»", "「": "」", "`": "`"}

_INSTRUCTIONS = (
    "Rewrite the user's last message as one standalone question that can be understood without the "
    "conversation. Put in place of every word that refers back to the conversation (he, she, it, they, that, "
    "the two, 它, 该, …) what it refers to, named as the conversation names it. Keep the message's language and "
    "everything else it asks. Do not answer it. Reply with the rewritten question alone, on one line."
)


class UnusableRewrite(ValueError):
    """The model's rewrite cannot be used: the offline standalone query is."""


def build_rewrite_prompt(message: str, history: Sequence[Message]) -> list[Message]:
    turns = recent_turns(history, RECENT_MESSAGES, RECENT_CHARS)
    asked = f"The conversation so far, oldest first:\n{turns}\n\nThe last message: {message}"
    return [Message(Role.SYSTEM, _INSTRUCTIONS), Message(Role.USER, asked)]


def parse_rewrite(reply: str, message: str, carried: str = "") -> str:
    """The rewritten question from the model's reply; `UnusableRewrite` when it fails a check."""
    text = _FENCE.sub("", reply.strip()).strip()
    text = _unquote(_LABEL.sub("", text, count=1).strip())
    if not text:
        raise UnusableRewrite("the reply is empty")
    if "\n" in text:
        raise UnusableRewrite("the reply is more than one line")
    limit = _TIMES_LONGER * len(message) + max(len(carried), _SUBJECT_CHARS)
    if len(text) > limit:
        raise UnusableRewrite(f"the reply is longer than {limit} characters")
    if message.rstrip().endswith(_QUESTION_MARKS) and not text.endswith(_QUESTION_MARKS):
        raise UnusableRewrite("the reply is not a question")
    return text


def _unquote(text: str) -> str:
    if len(text) >= 2 and _QUOTES.get(text[0]) == text[-1]:
        return text[1:-1].strip()
    return text


class ModelFollowUps:
    """Implements `FollowUps`: the offline detection decides when to ask the model, and the offline query is
    the fallback."""

    def __init__(self, model: ChatModel, offline: OfflineFollowUps, timeout_s: float) -> None:
        self._model = model
        self._offline = offline
        self._timeout_s = timeout_s

    def asks_model(self, message: str, history: Sequence[Message]) -> bool:
        return self._offline.needs_context(message, history)

    async def standalone(self, message: str, history: Sequence[Message]) -> StandaloneQuery:
        offline = await self._offline.standalone(message, history)
        if not self.asks_model(message, history):
            return offline
        try:
            async with asyncio.timeout(self._timeout_s):
                reply = await self._model.complete(build_rewrite_prompt(message, history))
            return StandaloneQuery(parse_rewrite(reply, message, offline.carried), method=QueryMethod.MODEL)
        except TimeoutError:
            note = f"the model's rewrite timed out after {self._timeout_s:g}s"
        except UnusableRewrite as error:
            note = f"the model's rewrite was not used: {error}"
        except GraphRagError as error:  # the model failed (ModelError) or the request's budget is spent
            note = f"the model's rewrite failed ({type(error).__name__})"
        logger.info("follow-up not rewritten by the model: %s", note)
        return replace(offline, note=note)
