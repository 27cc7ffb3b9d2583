"""What the web page shows of a KB beside the chat: the graph behind an answer's sources, example questions."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from backend.application.knowledge.evidence import MAX_IDS
from backend.server.api_responses import errors
from backend.server.deps import PrincipalDep, ServicesDep
from backend.server.models.evidence import EvidenceGraphOut, ExamplesOut

router = APIRouter(prefix="/api/v1/kbs", tags=["knowledge bases"])


@router.get("/{kb_prefix}/evidence", response_model=EvidenceGraphOut, responses=errors(404))
async def evidence_graph(
    kb_prefix: str,
    services: ServicesDep,
    principal: PrincipalDep,
    source_ids: Annotated[
        list[str],
        Query(
            alias="id",
            max_length=MAX_IDS,
            description="a source's `id` (`chunk:…`, `entity:…`, `relation:…`, `community:…`)",
        ),
    ],
) -> EvidenceGraphOut:
    """The entities, relations, chunks and communities behind an answer's sources (its `citations` and `consulted`
    ids), with the entities those chunks mention and those communities contain, and the relations among
    everything drawn."""
    del principal  # any authenticated caller may read a KB
    return EvidenceGraphOut.of(kb_prefix, await services.views.evidence(kb_prefix, source_ids))


@router.get("/{kb_prefix}/examples", response_model=ExamplesOut, responses=errors(404))
async def example_questions(kb_prefix: str, services: ServicesDep, principal: PrincipalDep) -> ExamplesOut:
    """A few questions the KB can answer, made from its most mentioned entities and its documents' titles."""
    del principal
    return ExamplesOut(kb_prefix=kb_prefix, examples=await services.views.examples(kb_prefix))
