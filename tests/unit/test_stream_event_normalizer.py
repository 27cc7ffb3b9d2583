import orjson

from backend.domain.conversation import Citation
from backend.domain.events import (
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    ExecutionLogEvent,
    ProgressEvent,
    ReasoningEvent,
    Stage,
    StartEvent,
    TokenEvent,
)
from backend.server.models.stream_events import StreamEventNormalizer


def test_every_event_kind_has_the_protocol_shape_with_request_id_seq_and_ts() -> None:
    normalizer = StreamEventNormalizer("req-1")
    events = [
        StartEvent(),
        ProgressEvent(Stage.RETRIEVAL, completed=1, total=2, agent_type="naive_rag_agent", retrieval_count=3),
        CitationsEvent(
            (Citation("chunk:1", "Title", "doc", "c1", "snip"),), (Citation("chunk:2", "T2", "d2", "c2", "s2"),)
        ),
        ReasoningEvent("thinking"),
        TokenEvent("Hello"),
        ErrorEvent("model failed", "model_error"),
        ExecutionLogEvent("route", {"message": "q"}, {"kb": "x"}, 1.5),
        DoneEvent("m-1"),
    ]
    wire = [normalizer.normalize(event) for event in events]
    assert [w["seq"] for w in wire] == list(range(len(events)))
    assert all(w["request_id"] == "req-1" and isinstance(w["ts"], float) for w in wire)
    strip = [{k: v for k, v in w.items() if k not in ("request_id", "seq", "ts")} for w in wire]
    assert strip == [
        {"status": "start"},
        {
            "status": "progress",
            "content": {
                "stage": "retrieval",
                "completed": 1,
                "total": 2,
                "error": None,
                "agent_type": "naive_rag_agent",
                "retrieval_count": 3,
            },
        },
        {
            "status": "citations",
            "content": [{"id": "chunk:1", "title": "Title", "doc_id": "doc", "chunk_id": "c1", "snippet": "snip"}],
            "consulted": [{"id": "chunk:2", "title": "T2", "doc_id": "d2", "chunk_id": "c2", "snippet": "s2"}],
        },
        {"status": "reasoning", "content": "thinking"},
        {"status": "token", "content": "Hello"},
        {"status": "error", "message": "model failed", "code": "model_error"},
        {
            "status": "execution_log",
            "content": {"node": "route", "input": {"message": "q"}, "output": {"kb": "x"}, "duration_ms": 1.5},
        },
        {"status": "done", "message_id": "m-1"},
    ]


def test_frames_are_single_data_lines_with_lf_separators() -> None:
    frame = StreamEventNormalizer("r").frame(TokenEvent("line one\nline two\r\n"))
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    assert frame.count(b"\n") == 2 and b"\r" not in frame
    assert orjson.loads(frame[len(b"data: ") :])["content"] == "line one\nline two\r\n"


def test_sequence_numbers_are_per_request() -> None:
    first, second = StreamEventNormalizer("a"), StreamEventNormalizer("b")
    first.normalize(StartEvent())
    assert second.normalize(StartEvent())["seq"] == 0
