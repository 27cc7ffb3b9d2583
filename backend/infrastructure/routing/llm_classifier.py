"""Ask the chat model which KB a message belongs to, when the heuristic is unsure."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from backend.application.ports.chat_model import ChatModel
from backend.domain.conversation import Message, Role
from backend.domain.knowledge_base import GENERAL_KB, KnowledgeBase
from backend.domain.routing import IntentGuess, RouteMethod

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_MAX_REASON_CHARS = 160

_INSTRUCTIONS = (
    "You route a user's message to the knowledge base that can answer it.\n"
    "Knowledge bases:\n{catalog}\n"
    f"- {GENERAL_KB}: small talk, or anything none of the knowledge bases covers.\n"
    'Reply with one JSON object and nothing else: {{"kb_prefix": "<one of: {names}>", '
    '"confidence": <number from 0 to 1>, "reason": "<a few words>"}}'
)


def build_routing_prompt(message: str, knowledge_bases: Sequence[KnowledgeBase]) -> list[Message]:
    catalog = "\n".join(
        f"- {kb.kb_prefix}: {kb.description or 'no description'}"
        + (f" (keywords: {', '.join(kb.keywords[:12])})" if kb.keywords else "")
        for kb in knowledge_bases
    )
    names = ", ".join([*(kb.kb_prefix for kb in knowledge_bases), GENERAL_KB])
    return [
        Message(Role.SYSTEM, _INSTRUCTIONS.format(catalog=catalog, names=names)),
        Message(Role.USER, message),
    ]


def parse_routing_reply(text: str, known_prefixes: set[str]) -> IntentGuess:
    """Read the model's JSON; anything unusable raises ValueError (the caller falls back)."""
    match = _JSON_OBJECT.search(text)
    if match is None:
        raise ValueError("routing reply contains no JSON object")
    payload: Any = json.loads(match.group(0))
    if not isinstance(payload, dict):
        raise ValueError("routing reply is not a JSON object")
    kb = str(payload.get("kb_prefix", "")).strip().lower()
    if kb not in known_prefixes and kb != GENERAL_KB:
        raise ValueError(f"routing reply names an unknown knowledge base {kb[:40]!r}")
    confidence = min(1.0, max(0.0, float(payload.get("confidence", 0.0))))
    reason = " ".join(str(payload.get("reason", "")).split())[:_MAX_REASON_CHARS] or "model classification"
    return IntentGuess("" if kb == GENERAL_KB else kb, confidence, RouteMethod.LLM, reason)


class LlmIntentClassifier:
    def __init__(self, model: ChatModel) -> None:
        self._model = model

    async def classify(self, message: str, knowledge_bases: Sequence[KnowledgeBase]) -> IntentGuess:
        reply = await self._model.complete(build_routing_prompt(message, knowledge_bases))
        return parse_routing_reply(reply, {kb.kb_prefix for kb in knowledge_bases})
