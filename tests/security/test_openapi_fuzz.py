"""Schemathesis against the live server's own OpenAPI description: every operation, generated valid and
invalid inputs, and not one answer may be a 5xx (streams included: they are read to the end).

The server runs in development mode (everyone is admin, so ingestion and deletion are fuzzed too) over a copy
of the sample KB, with the extractive answerer; examples are bounded so the run stays well under 90 s.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error

from backend.bootstrap import GRAPH_DB
from tests.security.routes import api_description
from tests.support.live_server import LiveServer, live_server, make_settings

MAX_EXAMPLES = 25


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory: pytest.TempPathFactory, orchard_knowledge: Path) -> Iterator[LiveServer]:
    data_dir = tmp_path_factory.mktemp("fuzz")
    shutil.copy(orchard_knowledge, data_dir / GRAPH_DB)
    with live_server(make_settings(data_dir)) as running:
        yield running


# The description the served app publishes at /openapi.json, read at collection: no server is needed for it.
schema = schemathesis.openapi.from_dict(api_description())


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,  # nothing written to .hypothesis/ in the work tree
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_with_a_server_error(case: schemathesis.Case, fuzzed_server: LiveServer) -> None:
    response = case.call(base_url=fuzzed_server.base_url, timeout=60)
    case.validate_response(response, checks=[not_a_server_error])
