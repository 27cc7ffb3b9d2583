"""Per-request context: who is asking, in which conversation, under which request id."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RequestContext:
    request_id: str
    user_id: str
    session_id: str
    debug: bool = False

    @property
    def thread_id(self) -> str:
        # thread_id equals session_id by contract (SPEC §3); it is only used for tracing.
        return self.session_id
