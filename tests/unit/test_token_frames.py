"""Each protocol writes a token's frame in one place, directly (tokens are most of a stream), and that frame is
the protocol's general encoding of the same event: the SSE normaliser's `event_fields`, the typed ag_ui.core
event through `encode`, the OpenAI facade's `_chunk`. Equal to the key order, timestamps aside, for any text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from ag_ui.core import TextMessageContentEvent

from backend.domain.events import ProgressEvent, Stage, StartEvent, TokenEvent
from backend.server.agui.translator import AguiTranslator, encode
from backend.server.api.openai_facade.chunks import CompletionChunks
from backend.server.models.stream_events import StreamEventNormalizer, event_fields

TEXTS = {
    "plain": "plain",
    "empty": "",
    "space": " ",
    "quotes": 'say "hi"',
    "backslashes": "back\\slash \\n \\u0041",
    "newlines": "line one\nline two\r\n\ttabbed",
    "controls": "\x00\x1f\x7f control",
    "separators": "\u2028\u2029 separators",
    "non_ascii": "ünïcödé, 中文, العربية",
    "emoji": "emoji 🍎 👩‍👩‍👧 🇫🇷",
    "markup": "</script><b>&amp;</b>",
}

# A frame and the general encoding of its event, both as bytes, and the timestamp field the two may differ in.
Encoded = tuple[bytes, bytes, str | None]


def sse(text: str) -> Encoded:
    normalizer = StreamEventNormalizer("request-1")
    normalizer.frame(StartEvent())
    event = TokenEvent(text)
    frame = normalizer.frame(event)
    general = {"status": event.kind.value, **event_fields(event), "request_id": "request-1", "seq": 1, "ts": 0.0}
    return frame, b"data: " + orjson.dumps(general) + b"\n\n", "ts"


def agui(text: str) -> Encoded:
    translator = AguiTranslator("thread-1", "run-1")
    for event in (StartEvent(), ProgressEvent(Stage.GENERATION, 0, 1), TokenEvent("first")):
        translator.frames(event)  # the message is open from the first token on
    (frame,) = translator.frames(TokenEvent(text))
    return frame, encode(TextMessageContentEvent(message_id=translator.message_id, delta=text)), "timestamp"


def openai(text: str) -> Encoded:
    chunks = CompletionChunks("chatcmpl-1", 1_700_000_000, 'odd "model" ✓', "http://testserver/")
    chunks.frame(StartEvent())
    return chunks.frame(TokenEvent(text)), chunks._chunk({"content": text}), None


def items(frame: bytes, timestamp: str | None) -> list[tuple[str, Any]]:
    """The frame's fields in order, with the timestamp's value replaced by its type."""
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    assert frame.count(b"\n") == 2 and b"\r" not in frame, "one data line, LF only"
    fields = orjson.loads(frame.removeprefix(b"data: "))
    return [(key, type(value) if key == timestamp else value) for key, value in fields.items()]


@pytest.mark.parametrize("text", TEXTS.values(), ids=TEXTS.keys())
@pytest.mark.parametrize("encoder", [sse, agui, openai])
def test_the_token_frame_is_the_general_encoding_of_the_token(encoder: Callable[[str], Encoded], text: str) -> None:
    frame, general, timestamp = encoder(text)
    assert items(frame, timestamp) == items(general, timestamp)
    if timestamp is None:
        assert frame == general
