"""Ingestion jobs: follow one, or cancel it (admin)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from backend.server.api_responses import errors
from backend.server.deps import AdminDep, PrincipalDep, ServicesDep
from backend.server.models.jobs import JobOut

router = APIRouter(prefix="/api/v1/jobs", tags=["ingestion jobs"])


@router.get("/{job_id}", response_model=JobOut, responses=errors(404))
async def get_job(
    job_id: str,
    services: ServicesDep,
    principal: PrincipalDep,
    documents: Annotated[bool, Query(description="list the job's documents and how each ended")] = False,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> JobOut:
    del principal  # any authenticated caller may read a KB, and so its jobs
    job = await services.jobs.get(job_id)
    listed = await services.jobs.documents(job_id, offset, limit) if documents else None
    return JobOut.of(job, listed)


@router.delete("/{job_id}", response_model=JobOut, responses=errors(404))
async def cancel_job(job_id: str, services: ServicesDep, admin: AdminDep) -> JobOut:
    """Cancel a queued or running job: the batch being indexed finishes, no other starts. A finished job is
    returned as it is."""
    del admin
    return JobOut.of(await services.jobs.cancel(job_id))
