"""Request bodies. Shapes are checked here; meaning (known KB, message size) in the use cases."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from backend.application.chat.inputs import ChatInput
from backend.application.chat.turns import MAX_PLAN
from backend.domain.agent_types import AgentType
from backend.domain.debug import DebugLevel

# The agent types this service knows, as the description shows them. Only the description: a name outside them
# is still refused by the use case, as before (400 `unknown_agent_type`; 501 for a known one not deployed here).
AGENT_TYPE_SCHEMA = WithJsonSchema(
    {
        "type": "string",
        "enum": [agent.value for agent in AgentType],
        "description": "a retrieval agent; `GET /api/v1/kbs` lists the ones this deployment runs (`agent_types`)",
    }
)
AgentTypeName = Annotated[str, Field(max_length=64), AGENT_TYPE_SCHEMA]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class ChatRequest(_Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"session_id": "orchard-visit-1", "message": "When does Wrenfield Orchard press its cider?"},
                {
                    "session_id": "orchard-visit-1",
                    "message": "Which apple varieties go into the cider?",
                    "kb_prefix": "orchard",
                    "agent_type": "hybrid_agent",
                    "debug": "basic",
                },
            ]
        }
    )

    session_id: str = Field(min_length=1, max_length=128)
    message: str = Field(min_length=1, max_length=100_000)
    kb_prefix: str | None = Field(None, max_length=64)
    agent_type: AgentTypeName | None = None
    worker_name: str | None = Field(None, max_length=200, description="{kb}:{agent_type}:retrieve_only")
    agent_types: list[AgentTypeName] | None = Field(
        None,
        max_length=MAX_PLAN,
        description="several agents for one turn, run concurrently and fused (not with agent_type)",
    )
    debug: bool | DebugLevel = Field(
        False, description="true: the server's DEBUG_LEVEL; or a level: off, basic, standard, full"
    )
    user_id: str | None = Field(None, max_length=128, description="development mode only (AUTH_MODE=none)")

    def debug_level(self, default: DebugLevel) -> DebugLevel:
        return DebugLevel.requested(self.debug, default)

    def to_input(self) -> ChatInput:
        asked = self.model_dump(include={"session_id", "message", "kb_prefix", "agent_type", "worker_name"})
        return ChatInput(**asked, agent_types=tuple(self.agent_types) if self.agent_types is not None else None)


class ClearRequest(_Body):
    model_config = ConfigDict(json_schema_extra={"examples": [{"session_id": "orchard-visit-1"}]})

    session_id: str = Field(min_length=1, max_length=128)
    kb_prefix: str | None = Field(None, max_length=64)
    user_id: str | None = Field(None, max_length=128)


class FeedbackRequest(_Body):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "message_id": "5b7e0c1d9a2f4e6b",
                    "is_positive": True,
                    "session_id": "orchard-visit-1",
                    "query": "When does Wrenfield Orchard press its cider?",
                    "agent_type": "hybrid_agent",
                }
            ]
        }
    )

    message_id: str = Field(min_length=1, max_length=64)
    is_positive: bool
    session_id: str | None = Field(None, max_length=128)
    query: str = Field("", max_length=8000)
    agent_type: str = Field("", max_length=64)
    metadata: dict[str, Any] = Field(default_factory=dict)
    user_id: str | None = Field(None, max_length=128)
