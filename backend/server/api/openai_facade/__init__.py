"""The OpenAI-compatible facade: GET /v1/models, POST /v1/chat/completions and POST /v1/responses
(docs/protocols/openai.md)."""

from __future__ import annotations

from backend.server.api.openai_facade.routes import router

__all__ = ["router"]
