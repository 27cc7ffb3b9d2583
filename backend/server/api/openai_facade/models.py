"""Request and response bodies of the OpenAI-compatible facade, in OpenAI's shapes.

Requests accept unknown fields: front ends send sampling options (temperature, max_tokens, top_p, tools, ...)
that this service does not use, and rejecting them would break those front ends.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.domain.tokens import TokenUsage

MessageRole = Literal["system", "developer", "user", "assistant", "tool", "function"]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")  # name, tool_calls, refusal, ...: accepted, not used

    role: MessageRole
    # A string or a list of content parts ({"type": "text", "text": ...}); only text is supported.
    content: str | list[dict[str, Any]] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool | None = Field(None, description="`true`: a last chunk before `[DONE]` carries the usage")


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "model": "orchard/hybrid_agent",
                    "messages": [{"role": "user", "content": "When does Wrenfield Orchard press its cider?"}],
                    "stream": False,
                },
                {
                    "model": "auto",
                    "messages": [
                        {"role": "user", "content": "Which apples grow at Wrenfield Orchard?"},
                        {"role": "assistant", "content": "Bramley and Cox's Orange Pippin [1]."},
                        {"role": "user", "content": "Which of them go into the cider?"},
                    ],
                    "stream": True,
                    "stream_options": {"include_usage": True},
                    "metadata": {"session_id": "orchard-visit-1"},
                },
            ]
        },
    )

    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    user: str | None = Field(None, max_length=256, description="the caller's end user; part of the derived session")
    metadata: dict[str, Any] | None = Field(None, description="`session_id` names the conversation to store under")


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class UrlCitation(BaseModel):
    url: str
    title: str
    start_index: int
    end_index: int
    # Beyond OpenAI's shape: what the evidence says, where it is stored, and whether the answer cites it (or was
    # only given it).
    snippet: str
    doc_id: str
    chunk_id: str
    cited: bool


class Annotation(BaseModel):
    type: Literal["url_citation"] = "url_citation"
    url_citation: UrlCitation


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None
    annotations: list[Annotation]


class CompletionChoice(BaseModel):
    index: int = 0
    message: AssistantMessage
    logprobs: None = None
    finish_reason: Literal["stop"] = "stop"


class CompletionUsage(BaseModel):
    """The tokens of the answer's model call as the model reported them, or this service's estimate when none
    did (docs/protocols/openai.md)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    @classmethod
    def of(cls, usage: TokenUsage | None) -> CompletionUsage | None:
        if usage is None:
            return None
        return cls(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
        )


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: CompletionUsage | None


class ChunkDelta(BaseModel):
    """What a chunk adds: the role (first chunk), a piece of the answer, of the reasoning, or the sources (last)."""

    role: Literal["assistant"] | None = None
    content: str | None = None
    reasoning_content: str | None = None
    annotations: list[Annotation] | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: ChunkDelta
    logprobs: None = None
    finish_reason: Literal["stop"] | None


class ChatCompletionChunk(BaseModel):
    """One `data:` line of a streamed completion (`stream: true`). With `stream_options.include_usage`, every chunk
    has `usage`: null but the last one before `[DONE]`, which has no choices and the usage."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice] = Field(max_length=1)
    usage: CompletionUsage | None = None
