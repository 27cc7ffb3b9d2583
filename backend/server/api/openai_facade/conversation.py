"""A request's messages as a chat turn: the question, the history before it, and the session it belongs to.

Both endpoints read their messages into `WireMessage`s (Chat Completions' `messages`, the Responses API's
`input`), and from there a turn is read the same way:

- The question is the last `user` message; the `user` and `assistant` messages before it are the history the
  model sees (the OpenAI API is stateless: the caller sends the conversation every time).
- `system` and `developer` messages are accepted and not used: the service's own instructions (answer from the
  sources, cite them) decide how it answers, and a client prompt could undo them. `tool` and `function`
  messages are skipped: the facade never calls tools.
- Content is a string or a list of text parts; any other part (images, audio, files) is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from backend.domain.conversation import Message, Role
from backend.server.api.openai_facade.errors import InvalidMessages, InvalidMetadata
from backend.server.api.openai_facade.models import ChatMessage

_CONVERSATION_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT}
# Headers that name the conversation, most specific first. Open WebUI sends the second one when it forwards
# user information (ENABLE_FORWARD_USER_INFO_HEADERS).
SESSION_HEADERS = ("x-session-id", "x-openwebui-chat-id")
DERIVED_SESSION_PREFIX = "oai-"
_TEXT_PARTS = {"text": "text"}
_ASSISTANT_PARTS = {"text": "text", "refusal": "refusal"}
# The Responses API's input: a message's own parts, and an assistant message's (as the API returned it, or as the
# caller wrote it); items other than messages that carry no text for this service are skipped, as tool messages
# are on chat completions.
_INPUT_ROLES = frozenset({"user", "assistant", "system", "developer"})
_INPUT_PARTS = {"input_text": "text"}
_INPUT_ASSISTANT_PARTS = {"input_text": "text", "output_text": "text", "refusal": "refusal"}
_SKIPPED_ITEMS = frozenset({"reasoning", "function_call", "function_call_output"})


@dataclass(frozen=True, slots=True)
class WireMessage:
    """One message of a request: its role, its text, and where it is in the request (`messages[2]`)."""

    role: str
    text: str
    param: str


@dataclass(frozen=True, slots=True)
class Conversation:
    question: str
    history: tuple[Message, ...]
    opening: str  # the first user message: it stays the same for every request of one conversation


def content_text(content: str | Sequence[Mapping[str, Any]] | None, param: str, kinds: Mapping[str, str]) -> str:
    """A message's text: its content string, or its parts joined with newlines. A part's `type` must be one of
    `kinds`, which names the part's key that holds its text; any other part is refused, naming it."""
    if content is None:
        return ""  # an assistant message that only called tools
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for index, part in enumerate(content):
        kind = part.get("type")
        text = part.get(kinds[kind]) if isinstance(kind, str) and kind in kinds else None
        if not isinstance(text, str):
            raise InvalidMessages(
                f"only text content is supported; {param}.content[{index}] is {kind!r}",
                param=f"{param}.content[{index}]",
            )
        texts.append(text)
    return "\n".join(texts)


def chat_messages(messages: Sequence[ChatMessage]) -> list[WireMessage]:
    """Chat Completions' messages: `text` parts, and an assistant's `refusal` parts."""
    wire = []
    for index, message in enumerate(messages):
        param = f"messages[{index}]"
        kinds = _ASSISTANT_PARTS if message.role == "assistant" else _TEXT_PARTS
        wire.append(WireMessage(message.role, content_text(message.content, param, kinds), param))
    return wire


def input_messages(given: str | Sequence[Mapping[str, Any]]) -> list[WireMessage]:
    """The Responses API's `input`: a string is the question; a list holds message items (`type: "message"`, which
    may be left out) and maybe reasoning or tool-call items, which are skipped. Anything else is refused, naming it:
    this service keeps no items, so an `item_reference` has nothing to refer to."""
    if isinstance(given, str):
        if not given.strip():
            raise InvalidMessages("input has no text", param="input")
        return [WireMessage("user", given, "input")]
    wire = []
    for index, item in enumerate(given):
        param, kind = f"input[{index}]", item.get("type", "message")
        if kind in _SKIPPED_ITEMS:
            continue
        if kind != "message":
            raise InvalidMessages(f"only message items are supported; {param} is {kind!r}", param=f"{param}.type")
        role = item.get("role")
        if role not in _INPUT_ROLES:
            raise InvalidMessages(f"{param}.role must be one of {sorted(_INPUT_ROLES)}", param=f"{param}.role")
        kinds = _INPUT_ASSISTANT_PARTS if role == "assistant" else _INPUT_PARTS
        wire.append(WireMessage(role, content_text(_content(item, param), param, kinds), param))
    return wire


def _content(item: Mapping[str, Any], param: str) -> str | Sequence[Mapping[str, Any]]:
    content = item.get("content")
    if isinstance(content, str) or (isinstance(content, list) and all(isinstance(p, dict) for p in content)):
        return content
    raise InvalidMessages(f"{param}.content must be a string or a list of content parts", param=f"{param}.content")


def conversation_of(messages: Sequence[WireMessage], field: str) -> Conversation:
    """The turn of a request's messages (`field` names them in the request, for errors)."""
    turns: list[tuple[WireMessage, Role]] = []
    for message in messages:
        role = _CONVERSATION_ROLES.get(message.role)
        if role is not None:
            turns.append((message, role))
    users = [message for message, role in turns if role is Role.USER]
    if not users:
        raise InvalidMessages(f"{field} must contain a user message", param=field)
    last, role = turns[-1]
    if role is not Role.USER:
        raise InvalidMessages(
            "the last user or assistant message must be the user's question; "
            "continuing an assistant message is not supported",
            param=last.param,
        )
    if not last.text.strip():
        raise InvalidMessages("the last user message has no text", param=f"{last.param}.content")
    history = tuple(Message(role, message.text) for message, role in turns[:-1] if message.text.strip())
    return Conversation(question=last.text.strip(), history=history, opening=users[0].text.strip())


def explicit_session_id(headers: Mapping[str, str], metadata: Mapping[str, Any] | None) -> str | None:
    """The session the caller named: the X-Session-ID header, then `metadata.session_id`, then Open WebUI's chat id."""
    if supplied := headers.get(SESSION_HEADERS[0], "").strip():
        return supplied
    if metadata and "session_id" in metadata:
        value = metadata["session_id"]
        if not isinstance(value, str):
            raise InvalidMetadata("metadata.session_id must be a string", param="metadata.session_id")
        return value.strip()  # an empty or malformed id is refused with the other session checks
    for header in SESSION_HEADERS[1:]:
        if supplied := headers.get(header, "").strip():
            return supplied
    return None


def derived_session_id(user_id: str, model: str, end_user: str | None, opening: str) -> str:
    """A stable session for a caller that names none: every request of one conversation repeats its opening
    message, so the same user, model and opening map to the same stored conversation."""
    key = orjson.dumps([user_id, model, end_user or "", opening])  # JSON: no separator a value could forge
    return DERIVED_SESSION_PREFIX + hashlib.sha256(key).hexdigest()[:32]
