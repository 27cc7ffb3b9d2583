"""The KB registry as the use cases see it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from backend.domain.knowledge_base import KnowledgeBase


class KnowledgeBaseCatalog(Protocol):
    def get(self, kb_prefix: str) -> KnowledgeBase | None:
        """Look a KB up by prefix; `""` and `"default"` mean the default KB."""
        ...

    def list(self) -> Sequence[KnowledgeBase]: ...
