"""Request and response bodies of `POST /v1/responses`, in the shapes of OpenAI's Responses API.

Only what a chat turn needs is read; like chat completions, the request accepts unknown fields (sampling options,
`tools`, `store`, ...) and ignores them. The answer is one `message` output item with one `output_text` part,
whose `annotations` are the sources, and the stream is the Responses API's named SSE events.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.domain.tokens import TokenUsage
from backend.server.api.openai_facade.models import Annotation, UrlCitation

QUESTION = "When does Wrenfield Orchard press its cider?"


class ResponseRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {"model": "orchard/hybrid_agent", "input": QUESTION},
                {
                    "model": "auto",
                    "input": [
                        {"role": "user", "content": "Which apples grow at Wrenfield Orchard?"},
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": "Bramley and Cox [1].", "annotations": []}],
                        },
                        {"role": "user", "content": [{"type": "input_text", "text": "Which go into the cider?"}]},
                    ],
                    "stream": True,
                    "metadata": {"session_id": "orchard-visit-1"},
                },
            ]
        },
    )

    model: str = Field(min_length=1, max_length=200)
    input: str | list[dict[str, Any]] = Field(
        description="the question, or the conversation as message items (the last user message is the question)"
    )
    instructions: str | list[dict[str, Any]] | None = Field(
        None, description="accepted and not used: the service's own instructions decide how it answers"
    )
    stream: bool | None = False
    previous_response_id: str | None = Field(
        None, description="not supported (no response is kept): send the conversation in `input`"
    )
    conversation: str | dict[str, Any] | None = Field(
        None, description="not supported (no conversation object is kept): send the conversation in `input`"
    )
    user: str | None = Field(None, max_length=256, description="the caller's end user; part of the derived session")
    metadata: dict[str, Any] | None = Field(None, description="`session_id` names the conversation to store under")


class ResponseAnnotation(UrlCitation):
    """A source of the answer: a `url_citation` with its fields beside `type`, as the Responses API has them."""

    type: Literal["url_citation"] = "url_citation"

    @classmethod
    def of(cls, annotation: Annotation) -> ResponseAnnotation:
        return cls.model_validate(annotation.url_citation.model_dump())


class OutputText(BaseModel):
    type: Literal["output_text"] = "output_text"
    text: str
    annotations: list[ResponseAnnotation]
    logprobs: list[Any] = Field(default_factory=list)


class OutputMessage(BaseModel):
    type: Literal["message"] = "message"
    id: str
    status: Literal["in_progress", "completed", "incomplete"]
    role: Literal["assistant"] = "assistant"
    content: list[OutputText]


class ResponseUsage(BaseModel):
    """As on chat completions (docs/protocols/openai.md, "Usage"): the model's figures, else the estimate."""

    input_tokens: int
    output_tokens: int
    total_tokens: int

    @classmethod
    def of(cls, usage: TokenUsage | None) -> ResponseUsage | None:
        if usage is None:
            return None
        prompt, completion = usage.prompt_tokens, usage.completion_tokens
        return cls(input_tokens=prompt, output_tokens=completion, total_tokens=usage.total_tokens)


class ResponseError(BaseModel):
    code: str = Field(description="the error's code, as on every route: `model_error`, `store_unavailable`, ...")
    message: str


class ResponseObject(BaseModel):
    """A `response`: the answer as one `message` output item, its sources and its usage."""

    id: str
    object: Literal["response"] = "response"
    created_at: int
    status: Literal["in_progress", "completed", "failed"]
    model: str
    output: list[OutputMessage]
    error: ResponseError | None
    incomplete_details: None
    instructions: None = Field(description="always null: instructions are accepted and not used")
    metadata: dict[str, Any] = Field(default_factory=dict)
    parallel_tool_calls: bool = False
    tool_choice: Literal["none"] = "none"
    tools: list[Any] = Field(default_factory=list)
    usage: ResponseUsage | None


# -- the stream: one model per event `type`; each is the `data:` of an SSE event named by its type ----------------


class _StreamEvent(BaseModel):
    type: str  # each event's own literal; first in its JSON, as OpenAI sends it
    sequence_number: int = Field(ge=0, description="0, 1, 2, ... in order")


class ResponseLifecycleEvent(_StreamEvent):
    """The response as it starts (`created`, `in_progress`: no output yet), ends (`completed`: the whole answer,
    its sources and usage) or fails (`failed`: the answer so far and the `error`)."""

    type: Literal["response.created", "response.in_progress", "response.completed", "response.failed"]
    response: ResponseObject


class OutputItemEvent(_StreamEvent):
    type: Literal["response.output_item.added", "response.output_item.done"]
    output_index: int
    item: OutputMessage


class ContentPartEvent(_StreamEvent):
    type: Literal["response.content_part.added", "response.content_part.done"]
    item_id: str
    output_index: int
    content_index: int
    part: OutputText


class OutputTextDeltaEvent(_StreamEvent):
    """One model delta, sent as it arrives."""

    type: Literal["response.output_text.delta"]
    item_id: str
    output_index: int
    content_index: int
    delta: str
    logprobs: list[Any]


class AnnotationAddedEvent(_StreamEvent):
    """One source, once the text is complete (the spans point into the whole text)."""

    type: Literal["response.output_text.annotation.added"]
    item_id: str
    output_index: int
    content_index: int
    annotation_index: int
    annotation: ResponseAnnotation


class OutputTextDoneEvent(_StreamEvent):
    type: Literal["response.output_text.done"]
    item_id: str
    output_index: int
    content_index: int
    text: str
    logprobs: list[Any]


ResponseStreamEvent = (
    ResponseLifecycleEvent
    | OutputItemEvent
    | ContentPartEvent
    | OutputTextDeltaEvent
    | AnnotationAddedEvent
    | OutputTextDoneEvent
)
