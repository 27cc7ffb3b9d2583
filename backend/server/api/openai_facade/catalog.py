"""The facade's models: `auto` (the router picks the KB and agent), `general` (chat without retrieval) and one
`{kb_prefix}/{agent_type}` per knowledge base and agent type of this deployment."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from backend.application.services import ServiceContainer
from backend.domain.knowledge_base import GENERAL_KB
from backend.server.api.openai_facade.errors import ModelNotFound
from backend.server.api.openai_facade.models import ModelCard

AUTO_MODEL = "auto"
OWNED_BY = "graphrag"
# No creation time is kept for a KB; a fixed value keeps the listing stable between calls.
CREATED = 0


@dataclass(frozen=True, slots=True)
class FacadeModel:
    id: str
    kb_prefix: str | None  # None: the router decides
    agent_type: str | None  # None: the KB's default agent

    def card(self) -> ModelCard:
        return ModelCard(id=self.id, created=CREATED, owned_by=OWNED_BY)


def models_for(kb_prefixes: Iterable[str], agent_types: Iterable[str]) -> list[FacadeModel]:
    agents = sorted(agent_types)
    return [
        FacadeModel(AUTO_MODEL, None, None),
        FacadeModel(GENERAL_KB, GENERAL_KB, None),
        *(FacadeModel(f"{kb}/{agent}", kb, agent) for kb in sorted(kb_prefixes) for agent in agents),
    ]


def find_model(models: Sequence[FacadeModel], model_id: str) -> FacadeModel:
    for model in models:
        if model.id == model_id:
            return model
    raise ModelNotFound(model_id)


async def available_models(services: ServiceContainer) -> list[FacadeModel]:
    # Read per request: KBs can be created while the server runs.
    kbs = await services.knowledge.list_kbs()
    return models_for((kb.kb_prefix for kb in kbs), services.agent_types)
