"""Knowledge base registry entries."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from backend.domain.agent_types import DEFAULT_AGENT_TYPE

KB_PREFIX_PATTERN = re.compile(r"^[a-z0-9_]{1,32}$")
GENERAL_KB = "general"


def is_valid_kb_prefix(value: str) -> bool:
    return bool(KB_PREFIX_PATTERN.fullmatch(value)) and value != GENERAL_KB


@dataclass(frozen=True, slots=True)
class KnowledgeBase:
    kb_prefix: str
    description: str = ""
    keywords: tuple[str, ...] = ()
    language: str = "en"
    default_agent: str = DEFAULT_AGENT_TYPE
    is_default: bool = False
    sources: tuple[str, ...] = field(default=())
    handler: str = ""  # "package.module:factory" of a KB-specific handler; "" = the generic RAG path


@dataclass(frozen=True, slots=True)
class KbOverview:
    """What a KB holds, in brief, as the graph store reads it: what the model router's catalog shows (SPEC §4)."""

    documents: int = 0
    entities: tuple[str, ...] = ()  # the names of its most mentioned entities, most mentioned first
    titles: tuple[str, ...] = ()  # the titles of its longest documents (most chunks), longest first
