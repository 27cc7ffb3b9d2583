"""The API description (/openapi.json) as a client generator or the /docs page reads it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tests.security.routes import api_description


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
