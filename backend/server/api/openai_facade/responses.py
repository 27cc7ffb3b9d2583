"""A chat turn as a Responses API `response`, whole or as its stream of named SSE events.

The answer is one `message` output item (`msg_{request id}`) holding one `output_text` part; its sources are that
part's `url_citation` annotations (citations.py) and its `usage` is the turn's. A stream is, as OpenAI sends it:

    response.created, response.in_progress, response.output_item.added, response.content_part.added,
    response.output_text.delta (one per model delta, sent as it arrives),
    response.output_text.annotation.added (one per source, once the text is complete),
    response.output_text.done, response.content_part.done, response.output_item.done, response.completed

each as `event: {type}` and `data: {json}` lines with a `sequence_number` counting from 0. A failure after the
stream opened ends it with `response.failed`, whose response holds the answer so far and the `error`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from backend.domain.events import DoneEvent, StartEvent, StreamEvent, TokenEvent
from backend.domain.tokens import TokenUsage
from backend.server.api.openai_facade.models import Annotation
from backend.server.api.openai_facade.response_models import (
    AnnotationAddedEvent,
    ContentPartEvent,
    OutputItemEvent,
    OutputMessage,
    OutputText,
    OutputTextDoneEvent,
    ResponseAnnotation,
    ResponseError,
    ResponseLifecycleEvent,
    ResponseObject,
    ResponseStreamEvent,
    ResponseUsage,
)
from backend.server.api.openai_facade.streamed import StreamedAnswer


@dataclass(frozen=True, slots=True)
class ResponseEnvelope:
    """What every form of one request's response shares: its ids, time, model and the caller's metadata."""

    request_id: str
    created_at: int
    model: str
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"resp_{self.request_id}"

    @property
    def item_id(self) -> str:
        return f"msg_{self.request_id}"

    def message(
        self, status: Literal["in_progress", "completed", "incomplete"], text: str, annotations: Sequence[Annotation]
    ) -> OutputMessage:
        part = OutputText(text=text, annotations=[ResponseAnnotation.of(a) for a in annotations])
        return OutputMessage(id=self.item_id, status=status, content=[part])

    def response(
        self,
        status: Literal["in_progress", "completed", "failed"],
        output: Sequence[OutputMessage] = (),
        usage: TokenUsage | None = None,
        error: ResponseError | None = None,
    ) -> ResponseObject:
        return ResponseObject(
            id=self.id,
            created_at=self.created_at,
            status=status,
            model=self.model,
            output=list(output),
            error=error,
            incomplete_details=None,
            instructions=None,
            metadata=dict(self.metadata),
            usage=ResponseUsage.of(usage),
        )


class ResponseEvents:
    """Encodes the events of one request as the Responses API's stream; what its end needs is kept in a
    `StreamedAnswer`."""

    def __init__(self, envelope: ResponseEnvelope, base_url: str) -> None:
        self._envelope = envelope
        self._answer = StreamedAnswer(base_url)
        self._sequence = 0
        self._place = {"item_id": envelope.item_id, "output_index": 0, "content_index": 0}
        # A delta frame is `head + sequence number + middle + JSON string + tail`, built once: per token only the
        # text is dumped.
        kind = "response.output_text.delta"
        self._delta_head = b"event: " + kind.encode() + b'\ndata: {"type":"' + kind.encode() + b'","sequence_number":'
        self._delta_middle = b"," + orjson.dumps(self._place)[1:-1] + b',"delta":'

    def frame(self, event: StreamEvent) -> bytes:
        """The bytes to send for this event; empty when the event has no place in the protocol."""
        if type(event) is TokenEvent:  # most of a stream: the JSON of an `OutputTextDeltaEvent`
            self._answer.pieces.append(event.text)
            number = b"%d" % self._next()
            return self._delta_head + number + self._delta_middle + orjson.dumps(event.text) + b',"logprobs":[]}\n\n'
        self._answer.note(event)
        match event:
            case StartEvent():
                return self._opening()
            case DoneEvent() if self._answer.error is not None:
                return self._failed()
            case DoneEvent():
                return self._closing()
        return b""  # reasoning has no place here: it streams on /v1/chat/completions

    def _opening(self) -> bytes:
        response = self._envelope.response("in_progress")
        opened = OutputMessage(id=self._envelope.item_id, status="in_progress", content=[])
        empty = OutputText(text="", annotations=[])
        return b"".join(
            [
                self._event(ResponseLifecycleEvent, "response.created", response=response),
                self._event(ResponseLifecycleEvent, "response.in_progress", response=response),
                self._event(OutputItemEvent, "response.output_item.added", output_index=0, item=opened),
                self._event(ContentPartEvent, "response.content_part.added", **self._place, part=empty),
            ]
        )

    def _closing(self) -> bytes:
        annotations = self._answer.annotations()
        message = self._envelope.message("completed", self._answer.text, annotations)
        part = message.content[0]
        added = [
            self._event(
                AnnotationAddedEvent,
                "response.output_text.annotation.added",
                **self._place,
                annotation_index=index,
                annotation=annotation,
            )
            for index, annotation in enumerate(part.annotations)
        ]
        completed = self._envelope.response("completed", [message], self._answer.usage)
        return b"".join(
            [
                *added,
                self._event(
                    OutputTextDoneEvent, "response.output_text.done", **self._place, text=part.text, logprobs=[]
                ),
                self._event(ContentPartEvent, "response.content_part.done", **self._place, part=part),
                self._event(OutputItemEvent, "response.output_item.done", output_index=0, item=message),
                self._event(ResponseLifecycleEvent, "response.completed", response=completed),
            ]
        )

    def _failed(self) -> bytes:
        error = self._answer.error
        assert error is not None, "only a stream that reported an error fails"
        message = self._envelope.message("incomplete", self._answer.text, self._answer.annotations())
        failure = ResponseError(code=error.code, message=error.message)
        response = self._envelope.response("failed", [message], self._answer.usage, failure)
        return self._event(ResponseLifecycleEvent, "response.failed", response=response)

    def _event(self, model: type[ResponseStreamEvent], kind: str, **fields: Any) -> bytes:
        data = model.model_validate({"type": kind, "sequence_number": self._next(), **fields})
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data.model_dump(mode="json")) + b"\n\n"

    def _next(self) -> int:
        number = self._sequence
        self._sequence += 1
        return number
