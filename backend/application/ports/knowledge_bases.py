"""The KB registry as the use cases see it: KBs from the registry file and KBs created at run time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from backend.domain.knowledge_base import KnowledgeBase


class KnowledgeBaseCatalog(Protocol):
    async def get(self, kb_prefix: str) -> KnowledgeBase | None:
        """Look a KB up by prefix; `""` and `"default"` mean the default KB."""
        ...

    async def list(self) -> Sequence[KnowledgeBase]: ...

    async def create(self, kb: KnowledgeBase) -> KnowledgeBase:
        """Register a KB durably; `Conflict` if the prefix is taken."""
        ...
