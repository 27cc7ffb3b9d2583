"""An AG-UI `RunAgentInput` → the chat use case's input.

threadId is the conversation (session), the last user message is the question, and the KB and agent come from
the endpoint's path or `forwardedProps` (the router decides what neither names). Earlier messages in the input
are not replayed: the server keeps the thread's history (docs/protocols/agui.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ag_ui.core import RunAgentInput, TextInputContent, UserMessage
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from backend.application.chat.inputs import ChatInput
from backend.domain.debug import DebugLevel
from backend.domain.errors import InvalidRequest


class ForwardedProps(BaseModel):
    """The keys of `forwardedProps` this server reads; front ends send others of their own, which are ignored."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    kb_prefix: str | None = Field(None, max_length=64, alias="kb")
    agent_type: str | None = Field(None, max_length=64, alias="agent")
    worker_name: str | None = Field(None, max_length=200)
    debug: bool | DebugLevel = False
    user_id: str | None = Field(None, max_length=128)


@dataclass(frozen=True, slots=True)
class AguiRun:
    chat_input: ChatInput
    props: ForwardedProps


def run_from_input(body: RunAgentInput, kb_prefix: str | None = None, agent_type: str | None = None) -> AguiRun:
    props = _props(body.forwarded_props)
    kb_prefix = _agree("kb", kb_prefix, props.kb_prefix)
    agent_type = _agree("agent", agent_type, props.agent_type)
    return AguiRun(
        chat_input=ChatInput(
            session_id=body.thread_id,
            message=last_user_text(body),
            kb_prefix=kb_prefix,
            agent_type=agent_type,
            worker_name=props.worker_name,
        ),
        props=props,
    )


def last_user_text(body: RunAgentInput) -> str:
    for message in reversed(body.messages):
        if isinstance(message, UserMessage):
            return _text(message.content)
    raise InvalidRequest("messages holds no user message: the last user message is the question")


def _text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if not isinstance(part, TextInputContent):
            raise InvalidRequest(f"only text content is supported, got a {getattr(part, 'type', 'unknown')} part")
        parts.append(part.text)
    return "\n".join(parts)


def _props(raw: Any) -> ForwardedProps:
    if raw is None:
        return ForwardedProps()
    if not isinstance(raw, dict):
        raise InvalidRequest("forwardedProps must be an object")
    try:
        return ForwardedProps.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InvalidRequest(f"forwardedProps.{where}: {first['msg']}") from None


def _agree(name: str, from_path: str | None, from_props: str | None) -> str | None:
    if from_path is not None and from_props is not None and from_props != from_path:
        raise InvalidRequest(f"forwardedProps.{name} {from_props!r} contradicts the endpoint's {from_path!r}")
    return from_path if from_path is not None else from_props
