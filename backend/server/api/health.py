"""GET /health (the process is up) and GET /ready (every store answers)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from backend.application.ports.health import HealthProbe
from backend.server.deps import ServicesDep

router = APIRouter(tags=["health"])
PROBE_TIMEOUT_S = 2.0


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
        return str(error) or type(error).__name__
    return "ok"


@router.get("/ready")
async def ready(services: ServicesDep) -> JSONResponse:
    results = await asyncio.gather(*(_check(probe) for probe in services.probes))
    checks = {probe.name: result for probe, result in zip(services.probes, results, strict=True)}
    is_ready = all(result == "ok" for result in checks.values())
    return JSONResponse({"ready": is_ready, "checks": checks}, status_code=200 if is_ready else 503)
