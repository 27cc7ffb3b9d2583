"""Reading the API description in tests: the schema an answer must match, as a validator."""

from __future__ import annotations

from typing import Any

import jsonschema_rs  # schemathesis's JSON Schema validator (OpenAPI 3.1 schemas are JSON Schema 2020-12)

SSE = "text/event-stream"


def validator(description: dict[str, Any], schema: dict[str, Any]) -> jsonschema_rs.Draft202012Validator:
    """A validator for `schema`, whose `#/components/...` references resolve in `description`."""
    return jsonschema_rs.Draft202012Validator({**schema, "components": description["components"]})


def stream_data_schema(operation: dict[str, Any]) -> dict[str, Any]:
    """The schema of the JSON `data:` lines of an operation's event stream."""
    data = operation["responses"]["200"]["content"][SSE]["itemSchema"]["properties"]["data"]
    json_data = next(option for option in data.get("anyOf", [data]) if "contentSchema" in option)
    return dict(json_data["contentSchema"])


def example_data_lines(operation: dict[str, Any]) -> list[str]:
    example = operation["responses"]["200"]["content"][SSE]["example"]
    return [line.removeprefix("data: ") for line in example.split("\n") if line.startswith("data: ")]
