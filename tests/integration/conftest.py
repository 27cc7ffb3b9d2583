"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from backend.infrastructure.llm.openai_compatible import OpenAICompatibleChatModel
from tests.support.scripted_llm import ScriptedLLM


@pytest.fixture
async def model(scripted_llm: ScriptedLLM) -> AsyncIterator[OpenAICompatibleChatModel]:
    """The real model client, talking to the scripted OpenAI-compatible server; it does not retry."""
    client = OpenAICompatibleChatModel(
        base_url=scripted_llm.base_url, api_key="test-key", model="scripted-model", max_retries=0, timeout_s=5
    )
    yield client
    await client.aclose()
