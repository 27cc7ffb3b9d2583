"""The use cases a delivery mechanism (HTTP, CLI) can call, as wired by the composition root."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from backend.application.chat.chat_handler import ChatHandler
from backend.application.chat.history import HistoryService
from backend.application.chat.stream_handler import StreamHandler
from backend.application.feedback import FeedbackService
from backend.application.ports.health import HealthProbe
from backend.application.ports.knowledge_bases import KnowledgeBaseCatalog


@dataclass(frozen=True, slots=True)
class ServiceContainer:
    chat: ChatHandler
    stream: StreamHandler
    history: HistoryService
    feedback: FeedbackService
    catalog: KnowledgeBaseCatalog
    agent_types: Collection[str]
    probes: Sequence[HealthProbe]
    generation_mode: str
