"""The errors the API description documents are the errors the server answers.

Against a live server with API keys, small limits and (for 429) a tiny rate limit, each route is made to fail
in every way that can be provoked from outside: no credentials (401), a non-admin (403), a body over the limit
(413), a malformed or invalid body or parameter (400, 422), an unknown KB, document, job, conversation or model
(404), a KB that exists (409), too many requests (429). Every answer's status must be documented for its route
in the server's own /openapi.json, and its body must validate against the documented schema; and every route
documenting one of these statuses must have been made to answer it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.security.routes import concrete
from tests.support.api_schema import validator
from tests.support.live_server import live_server, make_settings

KEYS = {"alice": "doc-errors-alice-0123456789", "ada": "doc-errors-ada-0123456789"}
MAX_BODY_BYTES, MAX_UPLOAD_BYTES, MAX_MESSAGE_CHARS = 4096, 8192, 300
UNKNOWN = {
    "kb_prefix": "no_such_kb",
    "doc_id": "no-such-doc",
    "job_id": "no-such-job",
    "session_id": "no-such-session",
    "model_id": "no/such-model",
    "agent_type": "graph_agent",
}
# Bodies the routes accept in shape, so what fails is what the request names.
QUESTION = "When does Wrenfield Orchard press its cider?"
RUN = {"threadId": "orchard-visit-1", "runId": "run-0001", "state": {}, "tools": [], "context": []}
VALID_BODIES: dict[str, Any] = {
    "/api/v1/chat": {"session_id": "orchard-visit-1", "message": QUESTION, "kb_prefix": "no_such_kb"},
    "/api/v1/chat/stream": {"session_id": "orchard-visit-1", "message": QUESTION, "kb_prefix": "no_such_kb"},
    "/api/v1/feedback": {"message_id": "no-such-message", "is_positive": True},
    "/api/v1/kbs/{kb_prefix}/documents": {"documents": [{"title": "Harvest", "text": "Bramleys in September."}]},
    "/api/v1/kbs/{kb_prefix}/retrieve": {"query": "cider"},
    "/api/v1/agui": {**RUN, "messages": [{"id": "m1", "role": "user", "content": QUESTION}], "forwardedProps": {}},
    "/v1/chat/completions": {"model": "no/such-model", "messages": [{"role": "user", "content": QUESTION}]},
    "/v1/responses": {"model": "no/such-model", "input": QUESTION},
}
VALID_BODIES["/api/v1/agui/{kb_prefix}"] = VALID_BODIES["/api/v1/agui/{kb_prefix}/{agent_type}"] = VALID_BODIES[
    "/api/v1/agui"
]
AGUI_UNKNOWN_KB = {**VALID_BODIES["/api/v1/agui"], "forwardedProps": {"kb": "no_such_kb"}}
Operation = tuple[str, str]  # method, path template
PUBLIC = {"/health", "/ready"}
ADMIN_ONLY = {
    ("POST", "/api/v1/kbs"),
    ("POST", "/api/v1/kbs/{kb_prefix}/documents"),
    ("DELETE", "/api/v1/kbs/{kb_prefix}/documents/{doc_id}"),
    ("DELETE", "/api/v1/jobs/{job_id}"),
}
WITH_QUERY = {
    ("GET", "/api/v1/conversations/{session_id}/messages"),
    ("GET", "/api/v1/kbs/{kb_prefix}/jobs"),
    ("GET", "/api/v1/kbs/{kb_prefix}/documents/{doc_id}"),
    ("GET", "/api/v1/jobs/{job_id}"),
    ("GET", "/api/v1/kbs/{kb_prefix}/evidence"),
}
BAD_QUERY = "?limit=0&offset=-1&chunks=maybe&documents=maybe&wait=maybe"  # each route reads some of these


def unknown(path: str) -> str:
    for name, value in UNKNOWN.items():
        path = path.replace(f"{{{name}}}", value).replace(f"{{{name}:path}}", value)
    return path


def as_user(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


class DocumentedErrors:
    """Sends requests and checks each answer against the description the server publishes."""

    def __init__(self, client: httpx.AsyncClient, description: dict[str, Any]) -> None:
        self.client = client
        self.description = description
        self.seen: set[tuple[str, str, int]] = set()

    def operations(self) -> list[Operation]:
        return [(m.upper(), path) for path, item in self.description["paths"].items() for m in item]

    def documented(self, operation: Operation) -> dict[str, Any]:
        method, path = operation
        return dict(self.description["paths"][path][method.lower()]["responses"])

    def documenting(self, status: int) -> set[Operation]:
        return {operation for operation in self.operations() if str(status) in self.documented(operation)}

    async def expect(self, status: int, operation: Operation, path: str, **request: Any) -> httpx.Response:
        method, template = operation
        response = await self.client.request(method, path, **request)
        assert response.status_code == status, (operation, response.status_code, response.text[:300])
        documented = self.documented(operation)
        assert str(status) in documented, f"{method} {template} answered {status}, which it does not document"
        schema = documented[str(status)]["content"]["application/json"]["schema"]
        problems = [error.message for error in validator(self.description, schema).iter_errors(response.json())]
        assert problems == [], (operation, status, response.json())
        self.seen.add((method, template, status))
        return response

    def provoked(self, status: int) -> set[Operation]:
        return {(method, path) for method, path, seen in self.seen if seen == status}


def settings(data_dir: Path, **overrides: Any) -> Any:
    values: dict[str, Any] = {
        "AUTH_MODE": "api_key",
        "API_KEYS": ",".join(f"{key}={user}" for user, key in KEYS.items()),
        "ADMIN_USERS": "ada",
        "RATE_LIMIT_PER_MINUTE": 0,
        "MAX_BODY_BYTES": MAX_BODY_BYTES,
        "MAX_UPLOAD_BYTES": MAX_UPLOAD_BYTES,
        "MAX_MESSAGE_CHARS": MAX_MESSAGE_CHARS,
    }
    return make_settings(data_dir, **(values | overrides))


@pytest.fixture
async def errors(data_dir: Path) -> AsyncIterator[DocumentedErrors]:
    with live_server(settings(data_dir)) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as client:
            description = (await client.get("/openapi.json")).json()
            yield DocumentedErrors(client, description)


def validation_status(path: str) -> int:
    return 400 if path.startswith("/v1/") else 422


async def test_credentials_admin_and_body_size_errors_are_the_documented_ones(errors: DocumentedErrors) -> None:
    # Every request is sent whatever the description says; `expect` checks the answer is documented.
    for operation in sorted(op for op in errors.operations() if op[1] not in PUBLIC):
        method, path = operation
        body = {"json": {}} if method == "POST" else {}
        await errors.expect(401, operation, concrete(path), **body)
    for operation in sorted(ADMIN_ONLY):
        method, path = operation
        body = {"json": {}} if method == "POST" else {}
        await errors.expect(403, operation, concrete(path), headers=as_user("alice"), **body)
    for operation in sorted(op for op in errors.operations() if op[0] == "POST"):
        path = operation[1]
        limit = MAX_UPLOAD_BYTES if path.endswith("/documents") else MAX_BODY_BYTES
        oversized = {"content": b" " * (limit + 1), "headers": {**as_user("ada"), "Content-Type": "application/json"}}
        await errors.expect(413, operation, concrete(path), **oversized)
        assert f"larger than {limit} bytes" in errors.documented(operation)["413"]["description"]
    # ... and nothing is documented that was not answered.
    assert errors.documenting(401) == errors.provoked(401) and len(errors.provoked(401)) > 20
    assert errors.documenting(403) == errors.provoked(403) == ADMIN_ONLY
    assert errors.documenting(413) == errors.provoked(413)
    assert errors.documenting(429) == set()  # no rate limit configured, none documented


async def test_malformed_and_invalid_requests_answer_the_documented_validation_errors(
    errors: DocumentedErrors,
) -> None:
    admin = as_user("ada")
    for operation in sorted(errors.operations()):
        method, path = operation
        if method == "POST":
            malformed = {"content": b'{"session_id": ', "headers": {**admin, "Content-Type": "application/json"}}
            response = await errors.expect(400, operation, concrete(path), **malformed)
            assert response.json()["error"]["code"] == "malformed_json"
            await errors.expect(validation_status(path), operation, concrete(path), json={}, headers=admin)
        elif operation in WITH_QUERY:
            await errors.expect(validation_status(path), operation, concrete(path) + BAD_QUERY, headers=admin)
    history = ("GET", "/api/v1/conversations/{session_id}/messages")
    await errors.expect(400, history, "/api/v1/conversations/not%20a%20session/messages", headers=admin)
    assert errors.documenting(400) == errors.provoked(400) and errors.documenting(422) == errors.provoked(422)
    assert "422" not in errors.documented(("POST", "/v1/chat/completions"))
    assert "422" not in errors.documented(("POST", "/v1/responses"))


async def test_unknown_resources_answer_the_documented_404(errors: DocumentedErrors) -> None:
    admin = as_user("ada")
    naming = {op for op in errors.operations() if "{" in op[1] or (op[0] == "POST" and op[1] in VALID_BODIES)}
    for operation in sorted(naming):
        path = operation[1]
        target = unknown(path)
        if path == "/api/v1/kbs/{kb_prefix}/documents/{doc_id}":
            target = concrete(path).replace("d1", UNKNOWN["doc_id"])  # a document the orchard KB does not hold
        if path.endswith("/evidence"):
            target += "?id=chunk:1"  # its one required parameter
        body = AGUI_UNKNOWN_KB if path == "/api/v1/agui" else VALID_BODIES.get(path)
        response = await errors.expect(404, operation, target, headers=admin, json=body)
        assert response.json()["error"]["code"] in ("not_found", "unknown_kb", "model_not_found")
    assert errors.documenting(404) == errors.provoked(404) and len(naming) >= 15


async def test_use_case_refusals_answer_documented_statuses_and_limits(errors: DocumentedErrors) -> None:
    admin, chat = as_user("ada"), ("POST", "/api/v1/chat")
    exists = await errors.expect(
        409, ("POST", "/api/v1/kbs"), "/api/v1/kbs", headers=admin, json={"kb_prefix": "orchard"}
    )
    assert exists.json()["error"]["code"] == "conflict"
    turn = {"session_id": "orchard-visit-1", "message": QUESTION, "kb_prefix": "orchard"}
    unknown_agent = await errors.expect(400, chat, "/api/v1/chat", headers=admin, json={**turn, "agent_type": "cider"})
    assert unknown_agent.json()["error"]["code"] == "unknown_agent_type"  # not a 422: the enum only describes
    retried = {**admin, "X-Request-ID": "orchard-retry-0001"}
    assert (await errors.client.post("/api/v1/chat", headers=retried, json=turn)).status_code == 200
    reused = await errors.expect(409, chat, "/api/v1/chat", headers=retried, json={**turn, "message": "Apples?"})
    assert reused.json()["error"]["code"] == "request_id_reused"
    documented = errors.description["components"]["schemas"]["ChatRequest"]["properties"]["message"]["maxLength"]
    assert documented == MAX_MESSAGE_CHARS
    await errors.expect(400, chat, "/api/v1/chat", headers=admin, json={**turn, "message": "a" * (documented + 1)})
    answered = await errors.client.post("/api/v1/chat", headers=admin, json={**turn, "message": "a" * documented})
    assert answered.status_code == 200


async def test_rate_limited_routes_answer_the_documented_429(data_dir: Path) -> None:
    with live_server(settings(data_dir, RATE_LIMIT_PER_MINUTE=1, RATE_LIMIT_BURST=1)) as running:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as client:
            errors = DocumentedErrors(client, (await client.get("/openapi.json")).json())
            limited = {operation for operation in errors.operations() if operation[1] not in PUBLIC}
            assert (await client.get("/api/v1/kbs", headers=as_user("alice"))).status_code == 200  # the one token
            for operation in sorted(limited):
                method, path = operation
                body = {"json": VALID_BODIES.get(path, {})} if method == "POST" else {}
                response = await errors.expect(429, operation, concrete(path), headers=as_user("alice"), **body)
                assert int(response.headers["retry-after"]) >= 1
            assert errors.documenting(429) == errors.provoked(429) and len(limited) > 20
