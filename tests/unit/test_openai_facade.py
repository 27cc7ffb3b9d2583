"""The pure parts of the OpenAI facade: messages → turn, sessions, models, annotations, chunk frames, errors."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from backend.domain.conversation import Citation, Message, Role
from backend.domain.errors import InvalidWorkerName, ModelError, RetrievalFailed, ShuttingDown
from backend.domain.events import (
    CitationsEvent,
    DoneEvent,
    ErrorEvent,
    ProgressEvent,
    ReasoningEvent,
    RoutedEvent,
    SourcesEvent,
    Stage,
    StartEvent,
    TokenEvent,
    UsageEvent,
)
from backend.domain.knowledge_base import KnowledgeBase
from backend.domain.routing import RouteDecision
from backend.domain.tokens import TokenUsage
from backend.domain.worker import Worker
from backend.server.api.openai_facade.catalog import find_model, models_for
from backend.server.api.openai_facade.chunks import CompletionChunks
from backend.server.api.openai_facade.citations import annotations_for, document_url, marker_span
from backend.server.api.openai_facade.conversation import (
    Conversation,
    chat_messages,
    conversation_of,
    derived_session_id,
    explicit_session_id,
    input_messages,
)
from backend.server.api.openai_facade.errors import InvalidMessages, InvalidMetadata, ModelNotFound
from backend.server.api.openai_facade.models import ChatMessage
from backend.server.api.openai_facade.response_models import OutputTextDeltaEvent
from backend.server.api.openai_facade.responses import ResponseEnvelope, ResponseEvents
from backend.server.errors import openai_error_body, openai_error_type, status_for, status_for_code

BASE = "http://testserver/"


def messages(*pairs: tuple[str, Any]) -> list[ChatMessage]:
    return [ChatMessage(role=role, content=content) for role, content in pairs]  # type: ignore[arg-type]


def turn_of(chat: list[ChatMessage]) -> Conversation:
    return conversation_of(chat_messages(chat), "messages")


# -- messages → question and history ---------------------------------------------------------------


def test_the_last_user_message_is_the_question_and_earlier_turns_are_the_history() -> None:
    conversation = turn_of(
        messages(
            ("system", "Talk like a pirate."),
            ("user", "  When was the orchard founded?  "),
            ("assistant", "In 1921 [1]."),
            ("tool", "ignored tool output"),
            ("developer", "also ignored"),
            ("user", [{"type": "text", "text": "And by"}, {"type": "text", "text": "whom?"}]),
        )
    )
    assert conversation.question == "And by\nwhom?"
    assert conversation.history == (
        Message(Role.USER, "  When was the orchard founded?  "),
        Message(Role.ASSISTANT, "In 1921 [1]."),
    )
    assert conversation.opening == "When was the orchard founded?"


def test_assistant_turns_without_text_are_left_out_of_the_history() -> None:
    conversation = turn_of(
        messages(("user", "first"), ("assistant", None), ("assistant", [{"type": "refusal", "refusal": "No."}]))
        + messages(("user", "second"))
    )
    assert conversation.history == (Message(Role.USER, "first"), Message(Role.ASSISTANT, "No."))
    assert conversation.question == "second"


@pytest.mark.parametrize(
    ("sent", "param"),
    [
        ([("system", "only instructions")], "messages"),
        ([("user", "question"), ("assistant", "half an answer")], "messages[1]"),
        ([("user", "   ")], "messages[0].content"),
        ([("user", [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}])], "messages[0].content[0]"),
        ([("system", [{"type": "input_audio"}]), ("user", "hi")], "messages[0].content[0]"),
        ([("user", [{"type": "text", "text": 3}])], "messages[0].content[0]"),
        ([("user", [{"type": "refusal", "refusal": "x"}])], "messages[0].content[0]"),  # refusals are assistant-only
    ],
)
def test_unusable_messages_are_refused_naming_the_field(sent: list[tuple[str, Any]], param: str) -> None:
    with pytest.raises(InvalidMessages) as raised:
        turn_of(messages(*sent))
    assert raised.value.param == param
    assert status_for(raised.value) == 400


def test_responses_input_is_a_question_or_message_items_read_like_chat_messages() -> None:
    assert conversation_of(input_messages("  When was it founded? "), "input").question == "When was it founded?"
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": "Talk like a pirate."},
        {"role": "user", "content": [{"type": "input_text", "text": "When was the orchard founded?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "In 1921 [1].", "annotations": [{"type": "url_citation"}]}],
        },
        {"type": "function_call_output", "call_id": "c1", "output": "ignored"},
        {"role": "user", "content": "And by whom?"},
    ]
    conversation = conversation_of(input_messages(items), "input")
    assert conversation.question == "And by whom?"
    assert conversation.history == (
        Message(Role.USER, "When was the orchard founded?"),
        Message(Role.ASSISTANT, "In 1921 [1]."),
    )
    with pytest.raises(InvalidMessages) as raised:  # output_text is what an assistant wrote, not a user
        input_messages([{"role": "user", "content": [{"type": "output_text", "text": "x", "annotations": []}]}])
    assert raised.value.param == "input[0].content[0]"


def test_unknown_request_fields_are_accepted() -> None:
    message = ChatMessage.model_validate({"role": "assistant", "content": "x", "name": "bot", "tool_calls": []})
    assert message.content == "x"


# -- sessions ---------------------------------------------------------------------------------------


def test_the_derived_session_is_stable_for_one_conversation_and_differs_otherwise() -> None:
    first = derived_session_id("alice", "orchard/hybrid_agent", None, "When was it founded?")
    assert first == derived_session_id("alice", "orchard/hybrid_agent", None, "When was it founded?")
    assert first.startswith("oai-") and len(first) == 36
    others = {
        derived_session_id("bob", "orchard/hybrid_agent", None, "When was it founded?"),
        derived_session_id("alice", "auto", None, "When was it founded?"),
        derived_session_id("alice", "orchard/hybrid_agent", "end-user-7", "When was it founded?"),
        derived_session_id("alice", "orchard/hybrid_agent", None, "Who founded it?"),
    }
    assert first not in others and len(others) == 4


def test_the_derived_session_cannot_be_forged_by_moving_a_separator() -> None:
    assert derived_session_id("a", "b c", None, "d") != derived_session_id("a b", "c", None, "d")


def test_an_explicit_session_comes_from_the_header_then_metadata_then_open_webui() -> None:
    assert explicit_session_id({"x-session-id": " s-1 ", "x-openwebui-chat-id": "c"}, {"session_id": "m"}) == "s-1"
    assert explicit_session_id({"x-openwebui-chat-id": "c"}, {"session_id": "m-1"}) == "m-1"
    assert explicit_session_id({"x-openwebui-chat-id": "chat-9"}, {"other": 1}) == "chat-9"
    assert explicit_session_id({"x-session-id": "  "}, None) is None
    assert explicit_session_id({}, None) is None
    with pytest.raises(InvalidMetadata) as raised:
        explicit_session_id({}, {"session_id": 5})
    assert raised.value.param == "metadata.session_id"


# -- models -----------------------------------------------------------------------------------------


def test_one_model_per_kb_and_agent_type_plus_auto_and_general() -> None:
    models = models_for(["orchard", "cellar"], {"naive_rag_agent", "hybrid_agent"})
    assert [m.id for m in models] == [
        "auto",
        "general",
        "cellar/hybrid_agent",
        "cellar/naive_rag_agent",
        "orchard/hybrid_agent",
        "orchard/naive_rag_agent",
    ]
    assert (models[0].kb_prefix, models[0].agent_type) == (None, None)
    assert (models[1].kb_prefix, models[1].agent_type) == ("general", None)
    chosen = find_model(models, "orchard/hybrid_agent")
    assert (chosen.kb_prefix, chosen.agent_type) == ("orchard", "hybrid_agent")
    assert chosen.card().model_dump() == {
        "id": "orchard/hybrid_agent",
        "object": "model",
        "created": 0,
        "owned_by": "graphrag",
    }


@pytest.mark.parametrize("model_id", ["orchard", "orchard/graph_agent", "nope/hybrid_agent", "gpt-4o", ""])
def test_a_model_not_listed_is_not_found(model_id: str) -> None:
    models = models_for(["orchard"], {"hybrid_agent"})
    with pytest.raises(ModelNotFound) as raised:
        find_model(models, model_id)
    assert (status_for(raised.value), raised.value.code, raised.value.param) == (404, "model_not_found", "model")


# -- annotations ------------------------------------------------------------------------------------

HISTORY = Citation("chunk:1", "History of Wrenfield Orchard", "doc/1", "c1", "Founded in 1921.")
VISITING = Citation("chunk:2", "Visiting Wrenfield", "doc2", "c2", "Tours cost £12.")
SUMMARY = Citation("community:3", "", "", "", "A community summary.")


def test_document_urls_point_at_the_kb_document_and_escape_the_ids() -> None:
    assert document_url("http://h:1/", "orchard", "doc/1") == "http://h:1/api/v1/kbs/orchard/documents/doc%2F1"
    assert document_url("http://h:1", "orchard", "") == "http://h:1/api/v1/kbs/orchard/documents"


def test_marker_spans_find_the_exact_marker() -> None:
    content = "Founded in 1921 [11] by the Wrens [1]."
    assert marker_span(content, 1) == (34, 37)
    assert content[34:37] == "[1]"
    assert marker_span(content, 11) == (16, 20)
    assert marker_span(content, 2) == (0, len(content))  # never marked: the whole answer


def test_annotations_are_the_cited_sources_in_citation_order_then_the_consulted_ones() -> None:
    content = "Founded in 1921 [1]."
    annotations = [a.model_dump() for a in annotations_for(content, (HISTORY,), (SUMMARY,), "orchard", BASE)]
    assert annotations == [
        {
            "type": "url_citation",
            "url_citation": {
                "url": "http://testserver/api/v1/kbs/orchard/documents/doc%2F1",
                "title": "History of Wrenfield Orchard",
                "start_index": 16,
                "end_index": 19,
                "snippet": "Founded in 1921.",
                "doc_id": "doc/1",
                "chunk_id": "c1",
                "cited": True,
            },
        },
        {
            "type": "url_citation",
            "url_citation": {
                "url": "http://testserver/api/v1/kbs/orchard/documents",
                "title": "",
                "start_index": len(content),
                "end_index": len(content),
                "snippet": "A community summary.",
                "doc_id": "",
                "chunk_id": "",
                "cited": False,
            },
        },
    ]


# -- chunk frames -----------------------------------------------------------------------------------


def decode(frames: bytes) -> list[Any]:
    assert frames.endswith(b"\n\n") and b"\r" not in frames
    payloads = [frame.removeprefix(b"data: ") for frame in frames.split(b"\n\n") if frame]
    return ["[DONE]" if p == b"[DONE]" else orjson.loads(p) for p in payloads]


def routed(kb: str = "orchard") -> RoutedEvent:
    decision = RouteDecision(kb, kb, kb, 1.0, "requested", "", Worker(KnowledgeBase(kb), "naive_rag_agent"))
    return RoutedEvent("q", decision)


def test_a_stream_is_role_chunk_one_chunk_per_token_then_annotations_and_stop_then_done() -> None:
    chunks = CompletionChunks("chatcmpl-r1", 1700000000, "orchard/naive_rag_agent", BASE)
    events = [
        StartEvent(),
        ProgressEvent(Stage.ROUTING, 0, 1),
        routed(),
        SourcesEvent((HISTORY, VISITING)),
        ReasoningEvent("thinking"),
        TokenEvent("Founded"),
        TokenEvent(' in "1921"'),
        TokenEvent(" [1]."),
        ProgressEvent(Stage.GENERATION, 1, 1),
        CitationsEvent((VISITING,), (HISTORY,)),
        DoneEvent("m-1"),
    ]
    frames = [chunks.frame(event) for event in events]
    assert [bool(frame) for frame in frames] == [True, False, False, False, True, True, True, True, False, False, True]
    sent = decode(b"".join(frames))
    assert sent[-1] == "[DONE]"
    body = sent[:-1]
    envelope = {"id": "chatcmpl-r1", "object": "chat.completion.chunk", "created": 1700000000}
    assert all({k: c[k] for k in envelope} == envelope for c in body)
    assert all(c["model"] == "orchard/naive_rag_agent" and len(c["choices"]) == 1 for c in body)
    deltas = [c["choices"][0]["delta"] for c in body]
    assert deltas[:5] == [
        {"role": "assistant", "content": ""},
        {"reasoning_content": "thinking"},
        {"content": "Founded"},
        {"content": ' in "1921"'},
        {"content": " [1]."},
    ]
    assert [c["choices"][0]["finish_reason"] for c in body] == [None] * 5 + ["stop"]
    annotations = deltas[5]["annotations"]
    assert [a["url_citation"]["title"] for a in annotations] == ["Visiting Wrenfield", "History of Wrenfield Orchard"]
    assert [a["url_citation"]["cited"] for a in annotations] == [True, False]
    content = 'Founded in "1921" [1].'
    assert annotations[0]["url_citation"]["start_index"] == content.index("[1]")
    assert annotations[1]["url_citation"]["start_index"] == len(content)
    assert annotations[0]["url_citation"]["url"] == "http://testserver/api/v1/kbs/orchard/documents/doc2"


def test_with_include_usage_every_chunk_has_null_usage_and_a_last_one_before_done_has_it() -> None:
    usage = TokenUsage(120, 7)
    events = [StartEvent(), TokenEvent("Founded"), TokenEvent(" [1]."), UsageEvent(usage), DoneEvent("m-1")]
    plain = decode(b"".join(CompletionChunks("chatcmpl-r1", 1, "auto", BASE).frame(e) for e in events))
    assert all("usage" not in chunk for chunk in plain[:-1]) and len(plain) == 5  # role, 2 tokens, stop, [DONE]
    chunks = CompletionChunks("chatcmpl-r1", 1, "auto", BASE, include_usage=True)
    sent = decode(b"".join(chunks.frame(e) for e in events))
    assert sent[-1] == "[DONE]"
    *body, last = sent[:-1]
    assert [c["choices"][0]["delta"].get("content") for c in body] == ["", "Founded", " [1].", None]
    assert [c["usage"] for c in body] == [None] * 4  # the key is there, null, as OpenAI sends it
    assert last == {
        "id": "chatcmpl-r1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "auto",
        "choices": [],
        "usage": {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127},
    }
    failed = CompletionChunks("chatcmpl-r1", 1, "auto", BASE, include_usage=True)
    frames = b"".join(failed.frame(e) for e in (StartEvent(), ErrorEvent("boom", "model_error"), UsageEvent(usage)))
    assert decode(frames + failed.frame(DoneEvent(None)))[-2:] == [
        openai_error_body(502, "model_error", "boom"),
        "[DONE]",
    ]


def test_an_error_is_an_openai_error_frame_then_done_without_a_stop_chunk() -> None:
    chunks = CompletionChunks("chatcmpl-r1", 1, "auto", BASE)
    frames = b"".join(
        chunks.frame(e)
        for e in (StartEvent(), TokenEvent("Founded"), ErrorEvent("model connection dropped", "model_error"))
    )
    frames += chunks.frame(DoneEvent("m-1"))
    sent = decode(frames)
    assert sent[2] == {
        "error": {"message": "model connection dropped", "type": "server_error", "param": None, "code": "model_error"}
    }
    assert sent[3:] == ["[DONE]"]
    assert all(c == "[DONE]" or "error" in c or c["choices"][0]["finish_reason"] is None for c in sent)


def named(frames: bytes) -> list[tuple[str, Any]]:
    assert frames.endswith(b"\n\n") and b"\r" not in frames
    pairs = [frame.split(b"\n") for frame in frames.split(b"\n\n") if frame]
    return [
        (name.removeprefix(b"event: ").decode(), orjson.loads(data.removeprefix(b"data: "))) for name, data in pairs
    ]


def test_a_responses_stream_opens_the_message_sends_each_delta_then_the_sources_and_completes() -> None:
    encoder = ResponseEvents(ResponseEnvelope("r1", 1700000000, "orchard/naive_rag_agent"), BASE)
    events = [
        StartEvent(),
        routed(),
        ReasoningEvent("thinking"),  # no place in this stream
        TokenEvent("Founded"),
        TokenEvent(' in "1921" [1].'),
        UsageEvent(TokenUsage(200, 6)),
        CitationsEvent((VISITING,), (HISTORY,)),
        DoneEvent("m-1"),
    ]
    sent = named(b"".join(encoder.frame(event) for event in events))
    assert all(name == data["type"] for name, data in sent)
    assert [data["sequence_number"] for _, data in sent] == list(range(len(sent)))
    assert [name for name, _ in sent] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.annotation.added",
        "response.output_text.annotation.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    delta = OutputTextDeltaEvent(
        type="response.output_text.delta",
        sequence_number=5,
        item_id="msg_r1",
        output_index=0,
        content_index=0,
        delta=' in "1921" [1].',
        logprobs=[],
    )
    assert sent[5][1] == delta.model_dump()  # the hand-built frame is the model's JSON
    text = 'Founded in "1921" [1].'
    cited, consulted = (data["annotation"] for _, data in sent[6:8])
    assert (cited["title"], cited["cited"], text[cited["start_index"] : cited["end_index"]]) == (
        "Visiting Wrenfield",
        True,
        "[1]",
    )
    assert (consulted["cited"], consulted["start_index"]) == (False, len(text))
    response = sent[-1][1]["response"]
    assert (response["id"], response["status"], response["usage"]) == (
        "resp_r1",
        "completed",
        {"input_tokens": 200, "output_tokens": 6, "total_tokens": 206},
    )
    assert response["output"][0]["content"][0]["text"] == text == sent[8][1]["text"]
    assert response["output"][0]["content"][0]["annotations"] == [cited, consulted]


def test_a_responses_stream_that_fails_ends_with_response_failed_holding_the_text_so_far() -> None:
    encoder = ResponseEvents(ResponseEnvelope("r1", 1, "auto"), BASE)
    events = [StartEvent(), TokenEvent("Founded"), ErrorEvent("the language model failed", "model_error")]
    sent = named(b"".join(encoder.frame(event) for event in [*events, DoneEvent(None)]))
    assert [name for name, _ in sent][-2:] == ["response.output_text.delta", "response.failed"]
    response = sent[-1][1]["response"]
    assert (response["status"], response["error"]) == (
        "failed",
        {"code": "model_error", "message": "the language model failed"},
    )
    assert (response["output"][0]["status"], response["output"][0]["content"][0]["text"]) == ("incomplete", "Founded")


# -- the error mapping ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        ("model_error", 502),
        ("retrieval_failed", 502),
        ("budget_exceeded", 504),
        ("store_unavailable", 503),
        ("invalid_worker_name", 400),  # a subclass found by its own code
        ("unknown_kb", 404),
        ("model_not_found", 404),  # the facade's own errors too
        ("internal_error", 500),
        ("shutting_down", 503),  # the stream handler ends its streams with it at shutdown
        ("no_such_code", 500),
    ],
)
def test_a_code_maps_to_the_status_of_its_error_class(code: str, status: int) -> None:
    assert status_for_code(code) == status


def test_code_and_class_agree() -> None:
    for error in (ModelError("x"), RetrievalFailed("x"), InvalidWorkerName("x"), ShuttingDown("x")):
        assert status_for_code(error.code) == status_for(error)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (404, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (429, "rate_limit_error"),
        (502, "server_error"),
        (504, "server_error"),
    ],
)
def test_openai_error_types(status: int, kind: str) -> None:
    assert openai_error_type(status) == kind
    expected = {"error": {"message": "m", "type": kind, "param": "p", "code": "c"}}
    assert openai_error_body(status, "c", "m", "p") == expected
