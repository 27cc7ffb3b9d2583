"""Which knowledge base and agent serve a turn (SPEC §3).

A `Worker` is resolved and validated: its KB is the catalog's record and its agent type one the deployment runs.
Its wire form, `worker_name` = `{kb_prefix}:{agent_type}:{agent_mode}`, is parsed once where a caller sends
one (`parse_worker_name`) and rendered once (`Worker.name`) for responses, logs and the agent pool's key.
"""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.agent_types import RETRIEVE_ONLY
from backend.domain.knowledge_base import KnowledgeBase

# The legacy KB name that means "the unprefixed (default) knowledge base".
DEFAULT_KB_ALIAS = "default"


@dataclass(frozen=True, slots=True)
class Worker:
    kb: KnowledgeBase
    agent_type: str
    mode: str = RETRIEVE_ONLY

    @property
    def name(self) -> str:
        return f"{self.kb.kb_prefix or DEFAULT_KB_ALIAS}:{self.agent_type}:{self.mode}"


@dataclass(frozen=True, slots=True)
class ParsedWorkerName:
    """A caller's worker name, split but not yet resolved: "" parts mean "not given"."""

    kb_prefix: str
    agent_type: str
    agent_mode: str = RETRIEVE_ONLY


def parse_worker_name(worker_name: str | None) -> ParsedWorkerName:
    """Parse the empty, one-, two- and three-part forms; raise `ValueError` for anything else.

    `""` is the general (no retrieval) route. One part is a bare agent type and two parts are
    `kb:agent`; both are legacy forms still accepted from older callers.
    """
    raw = (worker_name or "").strip()
    if not raw:
        return ParsedWorkerName(kb_prefix="", agent_type="")
    parts = [part.strip() for part in raw.split(":")]
    if len(parts) == 1:
        return ParsedWorkerName(kb_prefix="", agent_type=parts[0])
    if len(parts) == 2:
        return ParsedWorkerName(kb_prefix=parts[0], agent_type=parts[1])
    if len(parts) == 3:
        mode = parts[2] or RETRIEVE_ONLY
        if mode != RETRIEVE_ONLY:
            raise ValueError(f"unsupported agent_mode {mode!r} in worker_name {raw!r}; only {RETRIEVE_ONLY!r}")
        return ParsedWorkerName(kb_prefix=parts[0], agent_type=parts[1], agent_mode=mode)
    raise ValueError(f"invalid worker_name {raw!r}: expected kb_prefix:agent_type:agent_mode")
