"""POST /api/v1/agui: the AG-UI protocol (placeholder, being built)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["ag-ui"])
