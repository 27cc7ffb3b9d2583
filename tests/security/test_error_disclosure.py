"""What an error tells a client: a 4xx says what was wrong with the request; a 5xx says a fixed text of its class
and the request id, never the host, port, user, driver text or exception class its cause holds. The cause goes
to the log line of that request id. Over HTTP (both error shapes), in-stream (SSE, AG-UI, OpenAI chunks), in the
stored message, on /ready, and end to end with a conversation store that cannot be reached."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

# Imported for their error classes, so that the walk over the error tree meets them too.
import backend.domain.text
import backend.infrastructure.extraction.llm_extractor
import backend.server.api.openai_facade.errors  # noqa: F401
from backend.application.chat.inputs import ChatInput
from backend.application.ports.chat_model import ModelDelta
from backend.domain.context import RequestContext
from backend.domain.conversation import Message
from backend.domain.errors import (
    GraphRagError,
    KnowledgeStoreUnavailable,
    ModelError,
    RetrievalFailed,
    StoreUnavailable,
)
from backend.domain.events import INTERNAL_KINDS, ErrorEvent, ProgressEvent, StreamEvent
from backend.server.agui.translator import AguiTranslator
from backend.server.api.openai_facade.chunks import CompletionChunks
from backend.server.errors import install_error_handlers, status_for
from backend.server.models.stream_events import StreamEventNormalizer
from tests.support.fakes import FakeAgent, FakeChatModel, evidence
from tests.support.live_server import free_port, live_server, make_settings
from tests.support.wiring import wire

# Causes as the adapters word them: the store's target, the driver's words, the exception's class.
POSTGRES_CAUSE = (
    "Postgres conversation store at app@db-7.corp.example:5433/chat is unavailable: ConnectionRefusedError: "
    "[Errno 111] Connect call failed ('10.20.30.40', 5433)"
)
NEO4J_CAUSE = (
    "Neo4j at bolt://graph-3.corp.example:7687: vector search failed: the server cannot be reached "
    "(ServiceUnavailable: Couldn't connect to 10.20.30.41:7687)"
)
MODEL_CAUSE = "cannot reach the model server at http://llm-9.corp.example:8000/v1: ConnectError: [Errno 111] refused"
# None of these may reach a client.
LEAKS = ("corp.example", "5433", "7687", "8000", "app@", "10.20.30", "Errno", "Postgres", "Neo4j", "ConnectionRefused")
_CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception|Unavailable)\b")


_REQUEST_ID = re.compile(r"\b[0-9a-f]{32}\b")


def leaks_in(text: str) -> list[str]:
    """What of the cause shows in `text`; random request ids left out (one may hold "7687" by chance)."""
    text = _REQUEST_ID.sub("", text)
    return [leak for leak in LEAKS if leak in text] + _CLASS_NAME.findall(text)


# -- the error handler -----------------------------------------------------------------------------------------


def raising_app(errors: list[Exception]) -> FastAPI:
    """An app whose routes raise the last error in `errors`, under `/api/` and under `/v1/` (OpenAI's shape)."""
    app = FastAPI()
    install_error_handlers(app)

    async def fail() -> None:
        raise errors[-1]

    app.add_api_route("/api/v1/fail", fail)
    app.add_api_route("/v1/fail", fail)
    return app


def client_of(app: FastAPI) -> httpx.AsyncClient:
    # An unexpected error is re-raised by Starlette after its 500 is sent: the client still reads the 500.
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://testserver")


async def answer_to(error: Exception, path: str = "/api/v1/fail", **headers: str) -> httpx.Response:
    async with client_of(raising_app([error])) as http:
        return await http.get(path, headers=headers)


def log_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [(StoreUnavailable(POSTGRES_CAUSE), 503, "store_unavailable"), (ModelError(MODEL_CAUSE), 502, "model_error")],
)
async def test_a_5xx_body_has_the_class_text_and_the_request_id_and_the_log_has_the_cause(
    caplog: pytest.LogCaptureFixture, error: GraphRagError, status: int, code: str
) -> None:
    response = await answer_to(error)
    request_id = response.headers["x-request-id"]
    assert response.status_code == status
    assert response.json() == {"error": {"code": code, "message": error.public_text, "request_id": request_id}}
    assert leaks_in(response.text) == []
    assert any(request_id in line and error.message in line for line in log_lines(caplog)), log_lines(caplog)


async def test_a_5xx_in_openai_shape_has_the_class_text_and_the_request_id(caplog: pytest.LogCaptureFixture) -> None:
    response = await answer_to(ModelError(MODEL_CAUSE), "/v1/fail", **{"X-Request-ID": "client-chosen-0001"})
    assert (response.status_code, response.headers["x-request-id"]) == (502, "client-chosen-0001")
    assert response.json() == {
        "error": {
            "message": ModelError.public_text,
            "type": "server_error",
            "param": None,
            "code": "model_error",
            "request_id": "client-chosen-0001",
        }
    }
    assert any("client-chosen-0001" in line and MODEL_CAUSE in line for line in log_lines(caplog))


def error_tree() -> Iterator[type[GraphRagError]]:
    """Every class of the tree, the root included (the walk `status_for_code` does)."""
    pending: list[type[GraphRagError]] = [GraphRagError]
    while pending:
        error_type = pending.pop()
        yield error_type
        pending.extend(error_type.__subclasses__())


def with_message(error_type: type[GraphRagError], message: str) -> GraphRagError:
    """An instance whose message is `message`, whatever the class's own constructor takes."""
    error = error_type.__new__(error_type)
    GraphRagError.__init__(error, message)
    return error


SERVER_SIDE = [t for t in error_tree() if status_for(with_message(t, "x")) >= 500]
CLIENT_SIDE = [t for t in error_tree() if status_for(with_message(t, "x")) < 500]


def test_the_walk_meets_the_classes_of_every_layer() -> None:
    names = {t.__name__ for t in SERVER_SIDE}
    assert {"GraphRagError", "StoreUnavailable", "ConversationStoreUnavailable", "KnowledgeStoreUnavailable"} <= names
    assert {"ModelError", "ExtractionFailed", "RetrievalFailed", "BudgetExceeded", "AgentUnavailable"} <= names
    assert {"InvalidRequest", "UnstorableText", "ModelNotFound", "NotFound", "Unauthenticated"} <= {
        t.__name__ for t in CLIENT_SIDE
    }


@pytest.mark.parametrize("path", ["/api/v1/fail", "/v1/fail"])
@pytest.mark.parametrize("error_type", SERVER_SIDE, ids=lambda t: t.__name__)
async def test_nothing_of_a_5xx_message_reaches_the_client(path: str, error_type: type[GraphRagError]) -> None:
    response = await answer_to(with_message(error_type, POSTGRES_CAUSE), path)
    assert response.status_code >= 500
    assert leaks_in(response.text) == []
    error = response.json()["error"]
    assert error["message"] == error_type.public_text and error["request_id"] == response.headers["x-request-id"]


@pytest.mark.parametrize("error_type", CLIENT_SIDE, ids=lambda t: t.__name__)
async def test_a_4xx_keeps_its_message_about_the_request(error_type: type[GraphRagError]) -> None:
    response = await answer_to(with_message(error_type, "message must not be empty"))
    assert 400 <= response.status_code < 500
    assert response.json()["error"]["message"] == "message must not be empty"


async def test_an_unexpected_error_is_a_500_with_the_request_id_and_the_cause_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    response = await answer_to(RuntimeError(POSTGRES_CAUSE))
    request_id = response.headers["x-request-id"]
    assert response.status_code == 500 and leaks_in(response.text) == []
    assert response.json()["error"] == {
        "code": "internal_error",
        "message": "internal server error",
        "request_id": request_id,
    }
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert logged and logged[0].exc_info is not None and POSTGRES_CAUSE in str(logged[0].exc_info[1])


# -- in-stream -------------------------------------------------------------------------------------------------


class UnreachableModel(FakeChatModel):
    async def stream(self, messages: Sequence[Message]) -> AsyncIterator[ModelDelta]:
        raise ModelError(MODEL_CAUSE)
        yield  # an async generator, as the model port's stream is


def rendered(events: list[StreamEvent]) -> dict[str, str]:
    """The events as each protocol sends them."""
    sse, agui = StreamEventNormalizer("req-1"), AguiTranslator(thread_id="s1", run_id="req-1")
    chunks = CompletionChunks("chatcmpl-req-1", 1, "orchard", "http://testserver/")
    return {
        "sse": b"".join(sse.frame(e) for e in events if e.kind not in INTERNAL_KINDS).decode(),
        "agui": b"".join(frame for e in events for frame in agui.frames(e)).decode(),
        "openai": b"".join(chunks.frame(e) for e in events).decode(),
    }


@pytest.mark.parametrize(
    ("agent", "model", "error_type", "cause"),
    [
        (FakeAgent(fail=KnowledgeStoreUnavailable(NEO4J_CAUSE)), FakeChatModel(), RetrievalFailed, NEO4J_CAUSE),
        (FakeAgent(results=[evidence("c1", "Founded in 1952.")]), UnreachableModel(), ModelError, MODEL_CAUSE),
    ],
    ids=["knowledge store down", "model unreachable"],
)
async def test_the_error_event_of_a_failing_stream_carries_the_class_text_in_every_protocol(
    caplog: pytest.LogCaptureFixture,
    agent: FakeAgent,
    model: FakeChatModel,
    error_type: type[GraphRagError],
    cause: str,
) -> None:
    wired = wire(agent, model)
    chat_input = ChatInput(session_id="s1", message="When was the orchard founded?", kb_prefix="orchard")
    turn = await wired.stream.prepare(RequestContext("req-1", "alice", "s1"), chat_input)
    events = [event async for event in wired.stream.events(turn)]
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert [(e.message, e.code) for e in errors] == [(error_type.public_text, error_type.code)]
    for protocol, text in rendered(events).items():
        assert str(error_type.public_text) in text, protocol
        assert leaks_in(text) == [], protocol
    # A failed retrieval shows as a progress event (SSE) and a tool result (AG-UI): without its cause too.
    failed_runs = [e.error for e in events if isinstance(e, ProgressEvent) and e.error]
    assert all(leaks_in(error) == [] for error in failed_runs)
    # The stored answer, which its owner reads back, says what the client was told.
    conversation = await wired.store.find_conversation_id("alice", "s1")
    assert conversation is not None
    stored = await wired.store.list_messages(conversation)
    assert stored[-1].debug is not None and stored[-1].debug["error"] == error_type.public_text
    # The cause is logged; the request's own log line names the request.
    lines = log_lines(caplog)
    assert any(cause in line for line in lines), lines
    assert any("req-1" in line and error_type.code in line for line in lines), lines


# -- a turn that is not streamed -----------------------------------------------------------------------------------


class FailingModel(FakeChatModel):
    """Fails with the given error before its first delta."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def stream(self, messages: Sequence[Message]) -> AsyncIterator[ModelDelta]:
        raise self.error
        yield  # an async generator, as the model port's stream is


@pytest.mark.parametrize("path", ["/api/v1/fail", "/v1/fail"])
@pytest.mark.parametrize("error_type", [*SERVER_SIDE, *CLIENT_SIDE, None], ids=lambda t: getattr(t, "__name__", "bug"))
async def test_a_turn_that_is_not_streamed_answers_its_failure_as_the_error_itself_would(
    path: str, error_type: type[GraphRagError] | None
) -> None:
    """`/api/v1/chat` and the facade without `stream` collect the turn's stream and raise the error its `error` event
    stands for: the client gets the status and body it got when the handler raised the error itself."""
    failure = RuntimeError(POSTGRES_CAUSE) if error_type is None else with_message(error_type, "bad " + MODEL_CAUSE)
    wired = wire(FakeAgent(results=[evidence("c1", "Founded in 1952.")]), FailingModel(failure))
    chat_input = ChatInput(session_id="s1", message="When was the orchard founded?", kb_prefix="orchard")
    with pytest.raises(GraphRagError) as raised:
        await wired.chat.handle(RequestContext("req-1", "alice", "s1"), chat_input)
    given = {"X-Request-ID": "client-chosen-0003"}
    before, now = await answer_to(failure, path, **given), await answer_to(raised.value, path, **given)
    assert (now.status_code, now.json()) == (before.status_code, before.json())


# -- end to end: a conversation store that cannot be reached ----------------------------------------------------


async def test_an_unreachable_conversation_store_answers_503s_and_ready_without_its_address(
    data_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    port = free_port()  # nothing listens there
    dsn = f"postgresql://chatuser@127.0.0.1:{port}/chatdb"
    leaks = ("127.0.0.1", str(port), "chatuser", "chatdb", "ConnectionRefusedError", "Postgres", "Errno")
    body = {"session_id": "s1", "message": "hi", "kb_prefix": "general"}
    openai = {"model": "general", "messages": [{"role": "user", "content": "hi"}]}
    agui = {
        "threadId": "s1",
        "runId": "agui-run-000001",
        "messages": [{"id": "m1", "role": "user", "content": "hi"}],
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {"kb": "general"},
    }
    settings = make_settings(data_dir, CONVERSATION_STORE="postgres", POSTGRES_DSN=dsn)
    with live_server(settings) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
            ready = await http.get("/ready")
            given = {"X-Request-ID": "client-chosen-0002"}
            answers = {
                "chat": await http.post("/api/v1/chat", json=body, headers=given),
                "stream": await http.post("/api/v1/chat/stream", json=body),
                "history": await http.get("/api/v1/conversations/s1/messages"),
                "openai": await http.post("/v1/chat/completions", json=openai),
                "agui": await http.post("/api/v1/agui", json=agui),
            }

    assert ready.status_code == 503 and ready.json()["checks"]["conversation_store"] == "unavailable"
    assert [leak for leak in leaks if leak in ready.text] == []
    for route, answer in answers.items():
        assert answer.status_code == 503, (route, answer.text)
        error = answer.json()["error"]
        assert [leak for leak in leaks if leak in answer.text] == [], route
        assert "store" in error["message"] and "unavailable" in error["message"], route
        assert error["code"] == "store_unavailable" and error["request_id"] == answer.headers["x-request-id"], route
    assert answers["chat"].json()["error"]["request_id"] == "client-chosen-0002"
    assert answers["agui"].json()["error"]["request_id"] == "agui-run-000001"  # the run names the request
    # The operator's log has the cause, on the line of each refused request.
    lines = log_lines(caplog)
    for answer in answers.values():
        request_id = answer.json()["error"]["request_id"]
        assert any(request_id in line and f"127.0.0.1:{port}" in line for line in lines), (request_id, lines)
    assert any("conversation_store" in line and "ConnectionRefusedError" in line for line in lines), lines
