"""The API description (/openapi.json) as a client generator or the /docs page reads it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from backend.domain.agent_types import AgentType
from backend.server.app import create_app
from backend.server.config import ServerConfig
from backend.server.models.knowledge import RetrieveRequest
from backend.server.models.requests import ChatRequest
from tests.security.routes import api_description, no_services


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
        chat_turn = path.startswith(("/api/v1/chat", "/api/v1/agui", "/v1/chat"))
        assert ("at most 1234 characters" in operation["requestBody"]["description"]) == chat_turn, (method, path)
    assert bodies == 11


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
