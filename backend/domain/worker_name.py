"""The worker_name protocol: `{kb_prefix}:{agent_type}:{agent_mode}` (SPEC §3)."""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.agent_types import RETRIEVE_ONLY

# The legacy KB name that means "the unprefixed (default) knowledge base".
DEFAULT_KB_ALIAS = "default"


@dataclass(frozen=True, slots=True)
class ParsedWorkerName:
    kb_prefix: str
    agent_type: str
    agent_mode: str = RETRIEVE_ONLY

    @property
    def pool_key(self) -> str:
        return f"{self.kb_prefix}:{self.agent_type}:{self.agent_mode}"


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


def format_worker_name(kb_prefix: str, agent_type: str) -> str:
    return f"{kb_prefix or DEFAULT_KB_ALIAS}:{agent_type}:{RETRIEVE_ONLY}"
