"""Per-request context: who is asking, in which conversation, under which request id."""

from __future__ import annotations

from dataclasses import dataclass

from backend.domain.debug import DebugLevel


@dataclass(frozen=True, slots=True)
class RequestContext:
    request_id: str
    user_id: str
    session_id: str
    debug_level: DebugLevel = DebugLevel.OFF

    @property
    def debug(self) -> bool:
        return self.debug_level is not DebugLevel.OFF

    @property
    def thread_id(self) -> str:
        # thread_id equals session_id by contract (SPEC §3); it is only used for tracing.
        return self.session_id
