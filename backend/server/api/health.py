"""GET /health (the process is up) and GET /ready (every store answers)."""

from __future__ import annotations

import asyncio
import logging

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from backend.application.ports.health import HealthProbe
from backend.domain.errors import GraphRagError
from backend.server.deps import ServicesDep
from backend.server.models.responses import ReadyResponse

logger = logging.getLogger(__name__)

router = APIRouter(tags=["health"])
PROBE_TIMEOUT_S = 2.0
UNAVAILABLE = "unavailable"


@router.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


async def _check(probe: HealthProbe) -> str:
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            await probe.ping()
    except TimeoutError:
        return f"timed out after {PROBE_TIMEOUT_S:g}s"
    except Exception as error:  # readiness reports any failure; it must never raise
        # Anyone may ask: the cause (host, port, driver error) is for the operator's log only.
        cause = error.message if isinstance(error, GraphRagError) else f"{type(error).__name__}: {error}"
        logger.warning("readiness: %s is unavailable: %s", probe.name, cause)
        return UNAVAILABLE
    return "ok"


@router.get(
    "/ready",
    response_model=ReadyResponse,
    responses={503: {"model": ReadyResponse, "description": "a store does not answer: `checks` says which"}},
)
async def ready(services: ServicesDep) -> JSONResponse:
    results = await asyncio.gather(*(_check(probe) for probe in services.probes))
    checks = {probe.name: result for probe, result in zip(services.probes, results, strict=True)}
    is_ready = all(result == "ok" for result in checks.values())
    return JSONResponse({"ready": is_ready, "checks": checks}, status_code=200 if is_ready else 503)
