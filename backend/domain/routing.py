"""The router's output."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any


class RouteMethod(StrEnum):
    REQUESTED = "requested"
    HEURISTIC = "heuristic"
    LLM = "llm"
    TIMEOUT = "timeout"
    FALLBACK = "fallback"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class RouteDecision:
    requested_kb_prefix: str
    routed_kb_prefix: str
    kb_prefix: str
    confidence: float
    method: str
    reason: str
    worker_name: str

    @property
    def is_general(self) -> bool:
        return self.worker_name == ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
