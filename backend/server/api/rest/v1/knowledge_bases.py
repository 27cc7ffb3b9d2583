"""GET /api/v1/kbs: the configured knowledge bases and the agent types this deployment serves."""

from __future__ import annotations

from fastapi import APIRouter

from backend.server.deps import PrincipalDep, ServicesDep
from backend.server.models.responses import KnowledgeBaseOut, KnowledgeBasesResponse

router = APIRouter(prefix="/api/v1", tags=["knowledge bases"])


@router.get("/kbs", response_model=KnowledgeBasesResponse)
async def list_knowledge_bases(services: ServicesDep, principal: PrincipalDep) -> KnowledgeBasesResponse:
    del principal  # authentication only
    return KnowledgeBasesResponse(
        knowledge_bases=[
            KnowledgeBaseOut(
                kb_prefix=kb.kb_prefix,
                description=kb.description,
                keywords=list(kb.keywords),
                language=kb.language,
                default_agent=kb.default_agent,
            )
            for kb in services.catalog.list()
        ],
        agent_types=sorted(services.agent_types),
        generation_mode=services.generation_mode,
    )
