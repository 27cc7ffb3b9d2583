"""Scripted model server fixtures.

- `scripted_llm_server` (session): one `ScriptedLLM` on a free 127.0.0.1 port for the whole run.
- `scripted_llm` (function): the same server, reset before each test (queue, recorded requests,
  responder, default reply), so tests never see each other's scripts or traffic.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.scripted_llm import ScriptedLLM


@pytest.fixture(scope="session")
def scripted_llm_server() -> Iterator[ScriptedLLM]:
    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def scripted_llm(scripted_llm_server: ScriptedLLM) -> Iterator[ScriptedLLM]:
    scripted_llm_server.reset()
    yield scripted_llm_server
    scripted_llm_server.reset()
