"""The use cases a delivery mechanism (HTTP, CLI) can call, as wired by the composition root."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from backend.application.chat.chat_handler import ChatHandler
from backend.application.chat.history import HistoryService
from backend.application.chat.stream_handler import StreamHandler
from backend.application.feedback import FeedbackService
from backend.application.knowledge.evidence import KnowledgeViews
from backend.application.knowledge.jobs import IngestionJobs
from backend.application.knowledge.knowledge_service import KnowledgeService
from backend.application.knowledge.retrieval_service import RetrievalService
from backend.application.ports.health import HealthProbe


@dataclass(frozen=True, slots=True)
class ServiceContainer:
    chat: ChatHandler
    stream: StreamHandler
    history: HistoryService
    feedback: FeedbackService
    knowledge: KnowledgeService
    jobs: IngestionJobs
    retrieval: RetrievalService
    views: KnowledgeViews
    agent_types: Collection[str]
    probes: Sequence[HealthProbe]
    generation_mode: str
