"""The OpenAI-compatible facade: GET /v1/models, POST /v1/chat/completions (placeholder, being built)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["openai"])
