"""The built-in web chat page (placeholder, being built)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["web"])
