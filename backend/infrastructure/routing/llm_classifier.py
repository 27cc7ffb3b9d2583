"""Ask the chat model which KB a message belongs to, when the offline router is unsure (SPEC §4).

The model sees a catalog of the KBs, each by its profile (`profiles.py`): description, keywords, and what it
holds (its most mentioned names, its longest documents' titles), within a character budget shared by the
KBs; and the conversation's last few turns, so that "and what about his brother?" can be placed. Its reply
must name one of the KBs it was offered, or general: anything else is an `UnusableReply`, and the router keeps
the offline guess.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from backend.application.ports.chat_model import ChatModel
from backend.application.ports.router import KbProfiles
from backend.domain.conversation import Message, Role
from backend.domain.knowledge_base import GENERAL_KB, KnowledgeBase
from backend.domain.routing import IntentGuess, KbProfile, RouteMethod
from backend.infrastructure.routing.transcript import one_line, recent_turns

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_MAX_REASON_CHARS = 160
# The catalog's size: shared by the KBs, each within bounds, so that ten KBs still make a short prompt.
CATALOG_CHARS = 2400
_KB_CHARS = (120, 600)  # the least and the most one KB is given
_ITEM_CHARS = 60  # one keyword, name or title
RECENT_MESSAGES = 4  # the turns before the message that the model sees, oldest first
RECENT_CHARS = 200  # of each

_INSTRUCTIONS = (
    "You route a user's message to the knowledge base that can answer it.\n"
    "Knowledge bases:\n{catalog}\n"
    f"- {GENERAL_KB}: small talk, or anything none of the knowledge bases covers.\n"
    "{recent}"
    'Reply with one JSON object and nothing else: {{"kb_prefix": "<one of: {names}>", '
    '"confidence": <number from 0 to 1>, "reason": "<a few words>"}}'
)
_RECENT = "The conversation so far, oldest first (the message may refer to it):\n{turns}\n"


class UnusableReply(ValueError):
    """The model's routing reply cannot be used: the router keeps the offline guess."""


def build_routing_prompt(message: str, history: Sequence[Message], profiles: Sequence[KbProfile]) -> list[Message]:
    names = ", ".join([*(profile.kb.kb_prefix for profile in profiles), GENERAL_KB])
    turns = recent_turns(history, RECENT_MESSAGES, RECENT_CHARS)
    recent = _RECENT.format(turns=turns) if turns else ""
    system = _INSTRUCTIONS.format(catalog=render_catalog(profiles), recent=recent, names=names)
    return [Message(Role.SYSTEM, system), Message(Role.USER, message)]


def render_catalog(profiles: Sequence[KbProfile]) -> str:
    """One entry per KB, each within its share of `CATALOG_CHARS`."""
    least, most = _KB_CHARS
    share = max(least, min(most, CATALOG_CHARS // max(1, len(profiles))))
    return "\n".join(_describe(profile, share) for profile in profiles)


def _describe(profile: KbProfile, chars: int) -> str:
    """The KB's line (its description takes at most a quarter), then its lists. Each list is given an even share
    of what is left, the shortest first, so that what a short list leaves over goes to the longer ones."""
    kb, overview = profile.kb, profile.overview
    held = f" ({overview.documents} documents)" if overview.documents else ""
    head = f"- {kb.kb_prefix}: {one_line(kb.description or 'no description', chars // 4)}{held}"
    lists = [
        (label, items, separator)
        for label, items, separator in (
            ("keywords", kb.keywords, ", "),
            ("most mentioned", overview.entities, ", "),
            ("titles", overview.titles, "; "),
        )
        if items
    ]
    lines: dict[int, str] = {}
    left = chars - len(head)
    by_length = sorted(range(len(lists)), key=lambda i: sum(len(item) + 2 for item in lists[i][1]))
    for served, index in enumerate(by_length):
        lines[index] = _listed(*lists[index], left // (len(lists) - served))
        left -= len(lines[index]) + 1
    return "\n".join([head, *(lines[index] for index in sorted(lines) if lines[index])])


def _listed(label: str, items: Sequence[str], separator: str, chars: int) -> str:
    """ "  label: a, b, c" with as many items, in order, as fit in `chars` ("" when none does)."""
    line = f"  {label}: "
    shown = 0
    for item in items:
        text = one_line(item, _ITEM_CHARS)
        added = (separator if shown else "") + text
        if not text or len(line) + len(added) > chars:
            break
        line, shown = line + added, shown + 1
    return line if shown else ""


def parse_routing_reply(text: str, offered: set[str]) -> IntentGuess:
    """Read the model's JSON; anything unusable raises `UnusableReply` (the caller falls back)."""
    match = _JSON_OBJECT.search(text)
    if match is None:
        raise UnusableReply("the reply holds no JSON object")
    try:
        payload: Any = json.loads(match.group(0))
    except ValueError as error:
        raise UnusableReply("the reply's JSON does not parse") from error
    if not isinstance(payload, dict):
        raise UnusableReply("the reply is not a JSON object")
    kb = str(payload.get("kb_prefix", "")).strip().lower()
    if kb not in offered and kb != GENERAL_KB:
        raise UnusableReply(f"the reply names {one_line(kb, 40)!r}, not one of the knowledge bases offered")
    try:
        confidence = min(1.0, max(0.0, float(payload.get("confidence", 0.0))))
    except (TypeError, ValueError) as error:
        raise UnusableReply("the reply's confidence is not a number") from error
    reason = one_line(str(payload.get("reason", "")), _MAX_REASON_CHARS) or "model classification"
    return IntentGuess("" if kb == GENERAL_KB else kb, confidence, RouteMethod.LLM, reason)


class LlmIntentClassifier:
    def __init__(self, model: ChatModel, profiles: KbProfiles) -> None:
        self._model = model
        self._profiles = profiles

    async def classify(
        self, message: str, history: Sequence[Message], knowledge_bases: Sequence[KnowledgeBase]
    ) -> IntentGuess:
        profiles = await self._profiles.profiles(knowledge_bases)
        reply = await self._model.complete(build_routing_prompt(message, history, profiles))
        return parse_routing_reply(reply, {kb.kb_prefix for kb in knowledge_bases})
