"""The API description (/openapi.json) as a client generator or the /docs page reads it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from backend.domain.agent_types import AgentType
from backend.domain.conversation import Citation
from backend.domain.events import (
    INTERNAL_KINDS,
    CitationsEvent,
    ErrorEvent,
    ExecutionLogEvent,
    ReasoningEvent,
    UsageEvent,
)
from backend.domain.tokens import TokenUsage
from backend.server.agui.translator import AguiTranslator
from backend.server.api.openai_facade.chunks import CompletionChunks
from backend.server.api.openai_facade.responses import ResponseEnvelope, ResponseEvents
from backend.server.app import create_app
from backend.server.config import ServerConfig
from backend.server.models.knowledge import RetrieveRequest
from backend.server.models.requests import ChatRequest
from backend.server.models.stream_events import StreamEventNormalizer
from tests.security.routes import api_description, no_services
from tests.support.api_schema import SSE, example_data_lines, stream_data_schema, validator
from tests.unit.test_agui_translator import rag_events


def references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from references(value)
    elif isinstance(node, list):
        for value in node:
            yield from references(value)


def test_every_reference_in_the_description_resolves_to_one_of_its_schemas() -> None:
    description = api_description()
    schemas = description["components"]["schemas"]
    found = list(references(description))
    assert len(found) > 20
    unresolved = [ref for ref in found if ref.removeprefix("#/components/schemas/") not in schemas]
    assert unresolved == []


def described(**config: Any) -> dict[str, Any]:
    return create_app(no_services, ServerConfig(**config)).openapi()


def operations(description: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in description["paths"].items():
        for method, operation in item.items():
            yield method.upper(), path, operation


def error_schema(operation: dict[str, Any], status: int) -> Any:
    return operation["responses"][str(status)]["content"]["application/json"]["schema"]


def test_fastapis_validation_error_shape_is_nowhere_in_the_description() -> None:
    description = api_description()
    assert not {"HTTPValidationError", "ValidationError"} & set(description["components"]["schemas"])
    assert not [ref for ref in references(description) if "ValidationError" in ref]


def test_every_error_status_has_the_error_body_of_its_paths_api() -> None:
    checked = 0
    for method, path, operation in operations(api_description()):
        expected = "OpenAIErrorResponse" if path.startswith("/v1/") else "ErrorResponse"
        for status in (int(code) for code in operation["responses"] if int(code) >= 400):
            if (method, path, status) == ("GET", "/ready", 503):
                assert error_schema(operation, status) == {"$ref": "#/components/schemas/ReadyResponse"}
                continue
            assert error_schema(operation, status) == {"$ref": f"#/components/schemas/{expected}"}, (path, status)
            checked += 1
    assert checked > 100


def test_the_validation_status_is_the_one_each_api_answers() -> None:
    found = {(method, path): operation["responses"] for method, path, operation in operations(api_description())}
    assert "422" in found[("POST", "/api/v1/chat")] and "400" in found[("POST", "/api/v1/chat")]
    assert "422" in found[("GET", "/api/v1/jobs/{job_id}")]  # its query parameters
    assert "400" in found[("POST", "/v1/chat/completions")] and "422" not in found[("POST", "/v1/chat/completions")]
    assert "422" not in found[("GET", "/api/v1/kbs")]  # nothing to validate


def test_auth_and_rate_limit_statuses_follow_the_configuration() -> None:
    keyed = {(m, p): op["responses"] for m, p, op in operations(described(rate_limit_per_minute=30))}
    assert "401" in keyed[("GET", "/api/v1/kbs")] and "403" not in keyed[("GET", "/api/v1/kbs")]
    assert {"401", "403"} <= set(keyed[("POST", "/api/v1/kbs")])
    assert "429" in keyed[("POST", "/v1/chat/completions")] and "429" in keyed[("GET", "/api/v1/kbs")]
    assert "30 a minute" in keyed[("GET", "/api/v1/kbs")]["429"]["description"]
    assert not {"401", "429"} & set(keyed[("GET", "/health")]) and not {"401", "429"} & set(keyed[("GET", "/ready")])
    development = list(operations(described(auth_mode="none")))
    assert not [path for _, path, op in development if {"401", "403", "429"} & set(op["responses"])]


def test_documented_limits_are_the_configured_ones() -> None:
    description = described(max_message_chars=1234, max_body_bytes=5000, max_upload_bytes=90_000)
    message = description["components"]["schemas"]["ChatRequest"]["properties"]["message"]
    assert message["maxLength"] == 1234
    bodies = 0
    for method, path, operation in operations(description):
        if "requestBody" not in operation:
            continue
        bodies += 1
        limit = "90000" if path == "/api/v1/kbs/{kb_prefix}/documents" else "5000"
        assert f"At most {limit} bytes" in operation["requestBody"]["description"], (method, path)
        assert f"larger than {limit} bytes" in operation["responses"]["413"]["description"], (method, path)
        chat_turn = path.startswith(("/api/v1/chat", "/api/v1/agui", "/v1/chat", "/v1/responses"))
        assert ("at most 1234 characters" in operation["requestBody"]["description"]) == chat_turn, (method, path)
    assert bodies == 12


def test_agent_types_are_listed_and_an_unknown_one_is_still_left_to_the_use_case() -> None:
    description = api_description()
    schemas = description["components"]["schemas"]
    known = sorted(agent.value for agent in AgentType)
    documented = [
        schemas["ChatRequest"]["properties"]["agent_type"]["anyOf"][0],
        schemas["ChatRequest"]["properties"]["agent_types"]["anyOf"][0]["items"],
        schemas["RetrieveRequest"]["properties"]["agent_type"]["anyOf"][0],
        schemas["CreateKnowledgeBase"]["properties"]["default_agent"],
        *(p["schema"] for p in description["paths"]["/api/v1/agui/{kb_prefix}/{agent_type}"]["post"]["parameters"]),
    ]
    assert [sorted(schema["enum"]) for schema in documented if "enum" in schema] == [known] * 5
    # The models take any name, so the use case answers an unknown one as it always has (400 unknown_agent_type).
    assert ChatRequest(session_id="s1", message="hi", agent_type="cider_agent", agent_types=["x"]).agent_type
    assert RetrieveRequest(query="cider", agent_type="cider_agent").agent_type == "cider_agent"


USAGE = TokenUsage(812, 64)
STREAMS = {
    "/api/v1/chat/stream": "ChatStreamEvent",
    "/api/v1/agui": "AguiEvent",
    "/api/v1/agui/{kb_prefix}": "AguiEvent",
    "/api/v1/agui/{kb_prefix}/{agent_type}": "AguiEvent",
    "/v1/chat/completions": "ChatCompletionStreamData",
    "/v1/responses": "ResponseStreamData",
}


def test_every_stream_is_described_with_its_event_schema_and_a_true_example() -> None:
    description = api_description()
    streams = {
        path: op for _, path, op in operations(description) if SSE in op["responses"].get("200", {}).get("content", {})
    }
    assert set(streams) == set(STREAMS)
    for path, operation in streams.items():
        assert stream_data_schema(operation) == {"$ref": f"#/components/schemas/{STREAMS[path]}"}
        events = validator(description, stream_data_schema(operation))
        lines = [line for line in example_data_lines(operation) if line != "[DONE]"]
        assert lines and all(events.is_valid(orjson.loads(line)) for line in lines), path


def frames_data(frames: list[bytes]) -> list[Any]:
    lines = [frame.removeprefix(b"data: ") for frame in b"".join(frames).split(b"\n\n") if frame]
    return [orjson.loads(line) for line in lines if line != b"[DONE]"]


def named_frames_data(frames: list[bytes]) -> list[Any]:
    """The data of `event: {type}` + `data: {json}` frames, each checked to be named by its data's type."""
    data = []
    for frame in b"".join(frames).split(b"\n\n"):
        if frame:
            name, line = frame.split(b"\n")
            data.append(orjson.loads(line.removeprefix(b"data: ")))
            assert name == b"event: " + data[-1]["type"].encode()
    return data


def test_what_each_stream_sends_matches_its_documented_event_schema() -> None:
    description = api_description()
    schemas = {name: validator(description, {"$ref": f"#/components/schemas/{name}"}) for name in STREAMS.values()}
    cited = Citation("chunk:1", "Cider", "d1", "c1", "Pressed in October")
    *run, done = rag_events("naive_rag_agent", "graph_agent")
    events = [
        *run,
        ReasoningEvent("thinking"),
        ExecutionLogEvent("route", {"message": "q"}, {"kb": "orchard"}, 1.5),
        ErrorEvent("the language model failed", "model_error"),
        CitationsEvent((cited,), ()),
        done,
    ]
    normalizer = StreamEventNormalizer("6f0c9a2e41d7")
    rest = [normalizer.normalize(event) for event in events if event.kind not in INTERNAL_KINDS]
    translator = AguiTranslator("t1", "run-0001")
    agui = frames_data([frame for event in events for frame in translator.frames(event)])
    facade = []
    finished = [event for event in events if not isinstance(event, ErrorEvent)]
    for sent, include_usage in ((events, False), (finished, False), ([*finished[:-1], UsageEvent(USAGE), done], True)):
        chunks = CompletionChunks("chatcmpl-1", 1795650000, "orchard/hybrid_agent", "http://localhost/", include_usage)
        facade += frames_data([chunks.frame(event) for event in sent])
    assert facade[-1]["usage"]["total_tokens"] == USAGE.total_tokens and facade[-1]["choices"] == []
    responses = []
    for sent in (events, [*finished[:-1], UsageEvent(USAGE), done]):  # failed, finished
        encoder = ResponseEvents(ResponseEnvelope("r1", 1795650000, "orchard/hybrid_agent"), "http://localhost/")
        responses += named_frames_data([encoder.frame(event) for event in sent])
    assert [r["type"] for r in responses if r["type"].startswith("response.") and "response" in r] == [
        *("response.created", "response.in_progress", "response.failed"),
        *("response.created", "response.in_progress", "response.completed"),
    ]
    sent_by_stream = (
        ("ChatStreamEvent", rest),
        ("AguiEvent", agui),
        ("ChatCompletionStreamData", facade),
        ("ResponseStreamData", responses),
    )
    for name, sent in sent_by_stream:
        assert len(sent) > 5
        invalid = [event for event in sent if not schemas[name].is_valid(event)]
        assert invalid == [], name
    kinds = {event["status"] for event in rest}
    assert kinds == {"start", "progress", "token", "reasoning", "citations", "execution_log", "error", "done"}
    assert not schemas["ChatStreamEvent"].is_valid({**rest[0], "status": "finished"})


def test_ready_is_described_with_its_body_for_both_answers() -> None:
    responses = api_description()["paths"]["/ready"]["get"]["responses"]
    ready = {"$ref": "#/components/schemas/ReadyResponse"}
    assert responses["200"]["content"]["application/json"]["schema"] == ready
    assert responses["503"]["content"]["application/json"]["schema"] == ready


def body_examples(description: dict[str, Any], media: dict[str, Any]) -> list[Any]:
    schema = media["schema"]
    named = schema.get("$ref", "").removeprefix("#/components/schemas/")
    resolved = description["components"]["schemas"][named] if named else schema
    return [*resolved.get("examples", []), *(example["value"] for example in media.get("examples", {}).values())]


def test_every_json_request_body_has_examples_that_its_schema_accepts() -> None:
    description = api_description()
    checked = 0
    for method, path, operation in operations(description):
        if "requestBody" not in operation:
            continue
        media = operation["requestBody"]["content"]["application/json"]
        examples = body_examples(description, media)
        assert examples, (method, path)
        body = validator(description, media["schema"])
        assert all(body.is_valid(example) for example in examples), (method, path)
        checked += 1
    assert checked == 12
