"""The KB registry file (TOML): one `[[kb]]` table per knowledge base."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from backend.domain.agent_types import DEFAULT_AGENT_TYPE, is_known_agent_type
from backend.domain.errors import InvalidRequest
from backend.domain.knowledge_base import KnowledgeBase, is_valid_kb_prefix
from backend.domain.worker import DEFAULT_KB_ALIAS


class KnowledgeBaseRegistry:
    """An immutable catalog of configured KBs (implements `KnowledgeBaseCatalog`)."""

    def __init__(self, knowledge_bases: Sequence[KnowledgeBase]) -> None:
        self._by_prefix: dict[str, KnowledgeBase] = {}
        for kb in knowledge_bases:
            if kb.kb_prefix in self._by_prefix:
                raise InvalidRequest(f"knowledge base {kb.kb_prefix!r} is defined twice")
            self._by_prefix[kb.kb_prefix] = kb
        flagged = [kb for kb in knowledge_bases if kb.is_default]
        if len(flagged) > 1:
            raise InvalidRequest("more than one knowledge base is marked default = true")
        # The default KB answers for "" and the legacy "default" name (SPEC §3).
        self._default = flagged[0] if flagged else (knowledge_bases[0] if len(knowledge_bases) == 1 else None)

    @classmethod
    def from_file(cls, path: Path) -> KnowledgeBaseRegistry:
        if not path.exists():
            return cls([])
        with path.open("rb") as handle:
            raw = tomllib.load(handle)
        base_dir = path.parent
        return cls([_parse_entry(entry, base_dir) for entry in raw.get("kb", [])])

    def get(self, kb_prefix: str) -> KnowledgeBase | None:
        if kb_prefix in ("", DEFAULT_KB_ALIAS) and kb_prefix not in self._by_prefix:
            return self._default
        return self._by_prefix.get(kb_prefix)

    def list(self) -> Sequence[KnowledgeBase]:
        return tuple(self._by_prefix.values())


def _parse_entry(entry: Mapping[str, Any], base_dir: Path) -> KnowledgeBase:
    prefix = str(entry.get("kb_prefix", ""))
    if not is_valid_kb_prefix(prefix):
        raise InvalidRequest(f"invalid kb_prefix {prefix!r} in the KB registry: use ^[a-z0-9_]{{1,32}}$")
    default_agent = str(entry.get("default_agent", DEFAULT_AGENT_TYPE))
    if not is_known_agent_type(default_agent):
        raise InvalidRequest(f"unknown default_agent {default_agent!r} for knowledge base {prefix!r}")
    sources = tuple(str((base_dir / str(source)).resolve()) for source in entry.get("sources", []))
    return KnowledgeBase(
        kb_prefix=prefix,
        description=str(entry.get("description", "")),
        keywords=tuple(str(keyword) for keyword in entry.get("keywords", [])),
        language=str(entry.get("language", "en")),
        default_agent=default_agent,
        is_default=bool(entry.get("default", False)),
        sources=sources,
        handler=str(entry.get("handler", "")),
    )
