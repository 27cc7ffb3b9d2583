"""The AG-UI events this server sends (backend/server/agui/translator.py), as the API description shows them."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from backend.server.agui.translator import SENT_EVENTS

SENT_TYPES = [str(event.model_fields["type"].default.value) for event in SENT_EVENTS]


class AguiEvent(BaseModel):
    """One AG-UI 1.0 event (https://docs.ag-ui.com/concepts/events) with its fields in camelCase, those without a
    value left out. A run starts with `RUN_STARTED` and ends with `RUN_FINISHED` (`result.message_id`: the stored
    answer) or `RUN_ERROR` (`message`, `code`); `CUSTOM` events are `route`, `citations`, `consulted` and, with
    debug, `execution_log` (docs/protocols/agui.md)."""

    model_config = ConfigDict(extra="allow")

    type: Annotated[str, WithJsonSchema({"type": "string", "enum": SENT_TYPES})]
    timestamp: int = Field(description="Unix milliseconds")
